"""Repeated call ids on the harness's tool path (issue 23, item 4): the same id with the same
arguments is a retry (its first result, nothing run or written again), with other
arguments a new call (run; a scratchpad write's event notes the reused id)."""

from __future__ import annotations

from typing import Any

import pytest

from noetic_scratchpad import UpdateApplied, UpdateRetried, scratchpad
from noetic_scratchpad.context import ExecutionContext
from noetic_scratchpad.items import FunctionCall, FunctionCallOutput
from noetic_scratchpad.runtime import Agent, AgentHarness, ScriptedModel, Tool
from noetic_scratchpad.testing import capture_events
from tests.runtime.helpers import update_call


def make_harness(model: Any, tools: tuple[Tool, ...] = ()) -> AgentHarness:
    return AgentHarness(
        name="test",
        agent=Agent(model=model, instructions="Take notes.", tools=tools),
        params={},
        context_layers=[scratchpad()],
        storage="memory://",
    )


def outputs_of(items: list[Any]) -> list[tuple[str, str, bool]]:
    return [
        (item.call_id, item.output, item.is_error)
        for item in items
        if isinstance(item, FunctionCallOutput)
    ]


@pytest.mark.asyncio
async def test_call_0_of_every_turn_is_applied() -> None:
    """A runtime that numbers its calls ``call_0`` in every turn: each turn's call is a
    new call, applied on the tool path; the second one's event notes the reused id."""
    model = ScriptedModel(
        [
            [update_call("call_0", goal="fix login"), update_call("call_1", a=1)],
            [update_call("call_0", blockers=["no staging"]), update_call("call_1", b=2)],
            "Done.",
        ]
    )
    async with make_harness(model) as harness:
        with capture_events(harness.events) as events:
            result = await harness.run("go", thread_id="t1")

    assert result.states["scratchpad"] == {
        "goal": "fix login",
        "a": 1,
        "blockers": ["no staging"],
        "b": 2,
    }
    applied = events.of(UpdateApplied)
    assert [(e.call_id, e.source, e.reused_call_id) for e in applied] == [
        ("call_0", "tool", False),
        ("call_1", "tool", False),
        ("call_0", "tool", True),
        ("call_1", "tool", True),
    ]
    assert all(not is_error for _, _, is_error in outputs_of(result.items))


@pytest.mark.asyncio
async def test_one_id_twice_in_a_response_with_other_arguments_applies_both() -> None:
    model = ScriptedModel([[update_call("d", goal="g"), update_call("d", n=1)], "Done."])
    async with make_harness(model) as harness:
        with capture_events(harness.events) as events:
            result = await harness.run("go", thread_id="t1")

    assert result.states["scratchpad"] == {"goal": "g", "n": 1}
    assert outputs_of(result.items) == [
        ("d", "Scratchpad updated (goal).", False),
        ("d", "Scratchpad updated (n).", False),
    ]
    assert [e.reused_call_id for e in events.of(UpdateApplied)] == [False, True]


@pytest.mark.asyncio
async def test_a_repeated_call_in_a_response_is_applied_once() -> None:
    """The same update call twice in one response: one write, both outputs the first
    result, and an ``UpdateRetried`` says the second was a retry."""
    model = ScriptedModel([[update_call("d", goal="g"), update_call("d", goal="g")], "Done."])
    async with make_harness(model) as harness:
        with capture_events(harness.events) as events:
            result = await harness.run("go", thread_id="t1")
        history = await (await scratchpad().open(harness.storage, thread_id="t1")).history()

    assert outputs_of(result.items) == [("d", "Scratchpad updated (goal).", False)] * 2
    assert [e.revision for e in events.of(UpdateApplied)] == [1]
    assert [(e.source, e.call_id, e.revision) for e in events.of(UpdateRetried)] == [
        ("tool", "d", 1)
    ]
    assert len(history) == 1


@pytest.mark.asyncio
async def test_an_agent_tool_call_repeated_in_a_response_runs_once() -> None:
    """An agent's own tool under one id twice: with the same arguments it runs once and
    both outputs are its first; with other arguments it is a new call and runs."""
    runs: list[dict[str, Any]] = []

    async def record(args: dict[str, Any], ctx: ExecutionContext) -> str:
        runs.append(args)
        return f"recorded {len(runs)}"

    tool = Tool("record", "Record a value.", {"type": "object"}, record)
    model = ScriptedModel(
        [
            [
                FunctionCall(call_id="r", name="record", arguments='{"v": 1}'),
                FunctionCall(call_id="r", name="record", arguments='{ "v" : 1 }'),
                FunctionCall(call_id="r", name="record", arguments='{"v": 2}'),
            ],
            "Done.",
        ]
    )
    async with make_harness(model, tools=(tool,)) as harness:
        result = await harness.run("go", thread_id="t1")

    assert runs == [{"v": 1}, {"v": 2}]
    assert outputs_of(result.items) == [
        ("r", "recorded 1", False),
        ("r", "recorded 1", False),
        ("r", "recorded 2", False),
    ]
