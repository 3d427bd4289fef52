"""Child executions: ``harness.spawn`` applies each layer's ``on_spawn``."""

from __future__ import annotations

from typing import Any

import pytest

from noetic_scratchpad import MaxStepsExceededError, UpdateApplied, scratchpad
from noetic_scratchpad.context import ExecutionContext
from noetic_scratchpad.items import FunctionCall
from noetic_scratchpad.runtime import Agent, AgentHarness, ScriptedModel, Tool
from noetic_scratchpad.testing import capture_events
from tests.runtime.helpers import blocks, update_call

BLOCK = '<scratchpad>\n{\n  "plan": "A"\n}\n</scratchpad>'


def harness_for(model: ScriptedModel, scope: str) -> AgentHarness:
    return AgentHarness(
        "parent", Agent(model=model), {}, [scratchpad(scope=scope)], storage="memory://"
    )


@pytest.mark.asyncio
async def test_resource_scoped_child_starts_from_a_copy_of_the_parent_state() -> None:
    """A child of a resource-scoped run sees the parent's scratchpad, on a thread of its own
    that names its parent; its state object is a copy, not the parent's."""
    model = ScriptedModel([[update_call("p", plan="A")], "parent done", "child done"])
    async with harness_for(model, "resource") as harness:
        parent = await harness.run("plan", thread_id="t1", resource_id="user-1")
        child = await harness.spawn(parent, "do step 1")

    assert child.output == "child done"
    assert blocks(model.requests[2]) == [BLOCK]
    assert child.thread_id.startswith("t1:spawn-")
    assert child.resource_id == "user-1"
    assert child.context.parent is parent.context
    assert child.execution_id != parent.execution_id
    parent_state = parent.context.context["scratchpad"].state
    child_state = child.context.context["scratchpad"].state
    assert child_state == parent_state == {"plan": "A"}
    assert child_state is not parent_state


@pytest.mark.asyncio
async def test_thread_scoped_child_inherits_nothing() -> None:
    """A child of a thread-scoped run starts on its own thread with an empty scratchpad,
    and its writes do not reach the parent's thread."""
    model = ScriptedModel(
        [[update_call("p", plan="A")], "parent done", [update_call("c", plan="B")], "child"]
    )
    async with harness_for(model, "thread") as harness:
        parent = await harness.run("plan", thread_id="t1", resource_id="user-1")
        child = await harness.spawn(parent, "do step 1", thread_id="t1-child")
        parent_after = await harness.read_state("scratchpad", thread_id="t1")
        child_after = await harness.read_state("scratchpad", thread_id="t1-child")

    assert blocks(model.requests[2]) == []
    assert child.thread_id == "t1-child"
    assert parent_after == {"plan": "A"}
    assert child_after == {"plan": "B"}


@pytest.mark.asyncio
async def test_a_tool_spawns_a_child_with_another_agent() -> None:
    """A tool can delegate to a sub-agent with ``harness.spawn(ctx, ...)``; the sub-agent's
    update to a resource scratchpad is stored where the parent reads it next."""
    child_model = ScriptedModel([[update_call("c1", research="done")], "found it"])
    sub_agent = Agent(model=child_model, instructions="You research.")
    harness_ref: list[AgentHarness] = []

    async def delegate(args: dict[str, Any], ctx: ExecutionContext) -> str:
        result = await harness_ref[0].spawn(ctx, args["task"], agent=sub_agent)
        return result.output

    tool = Tool(
        name="delegate",
        description="Hand a task to a sub-agent.",
        parameters={"type": "object", "properties": {"task": {"type": "string"}}},
        execute=delegate,
    )
    parent_model = ScriptedModel(
        [
            [update_call("p1", plan="research")],
            [FunctionCall(call_id="d1", name="delegate", arguments='{"task": "look it up"}')],
            "all done",
        ]
    )
    harness = AgentHarness(
        "parent",
        Agent(model=parent_model, tools=[tool]),
        {},
        [scratchpad(scope="resource")],
        storage="memory://",
    )
    harness_ref.append(harness)
    async with harness:
        with capture_events(harness.events) as events:
            result = await harness.run("go", thread_id="t", resource_id="u")

    assert [spec.name for spec in child_model.requests[0].tools] == [
        "scratchpad/update",
        "scratchpad/read",
    ]
    assert blocks(child_model.requests[0]) == [
        '<scratchpad>\n{\n  "plan": "research"\n}\n</scratchpad>'
    ]
    assert child_model.requests[0].items[0].content == "You research."  # type: ignore[union-attr]
    assert result.items[-2].output == "found it"  # type: ignore[union-attr]
    assert blocks(parent_model.requests[2]) == [
        '<scratchpad>\n{\n  "plan": "research",\n  "research": "done"\n}\n</scratchpad>'
    ]
    executions = {e.execution_id for e in events.of(UpdateApplied)}
    assert len(executions) == 2


@pytest.mark.asyncio
async def test_spawn_from_a_bare_context_uses_the_stored_parent_state() -> None:
    """A parent context that never ran the layers (built by hand) hands the child the
    parent scope's stored state; ``max_steps`` applies to the child too."""
    model = ScriptedModel(["child answers", [update_call("x", a=1)]])
    async with harness_for(model, "resource") as harness:
        await harness.update_state("scratchpad", {"plan": "A"}, thread_id="t0", resource_id="u")
        parent = ExecutionContext(thread_id="t0", resource_id="u")
        child = await harness.spawn(parent, "go", thread_id="kid")
        with pytest.raises(MaxStepsExceededError, match="limit of 1 step"):
            await harness.spawn(parent, "loop", max_steps=1)

    assert child.output == "child answers"
    assert child.thread_id == "kid"
    assert child.context.parent is parent
    assert blocks(model.requests[0]) == [BLOCK]
