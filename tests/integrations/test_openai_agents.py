"""The OpenAI Agents SDK integration, driven by the SDK's own ``Runner`` and a scripted
``Model`` (no network, tracing off): the block, the tool, refusals, storage, streaming."""

from __future__ import annotations

import copy
import dataclasses
import itertools
import json
import logging
from pathlib import Path

import pytest
from agents import Agent, RunConfig, RunContextWrapper, Runner, set_tracing_disabled
from agents.strict_schema import ensure_strict_json_schema

from noetic_scratchpad import ScratchpadConfigError, UpdateApplied, UpdateRejected, UpdateRetried
from noetic_scratchpad.integrations.openai_agents import Scratchpad
from noetic_scratchpad.storage import MemoryStorage
from noetic_scratchpad.testing import FaultyStorage, capture_events
from tests.integrations.agents_sdk_fakes import (
    BASE,
    ScriptedAgentsModel,
    TaskNotes,
    agent_for,
    block_of,
    raw_tool_call,
    reply,
    tool_call,
)


@pytest.fixture(autouse=True)
def _no_tracing() -> None:
    set_tracing_disabled(True)  # no trace export: nothing leaves the process


@pytest.mark.asyncio
async def test_the_block_is_in_the_instructions_on_every_model_call() -> None:
    notes = Scratchpad(storage=MemoryStorage(), schema=TaskNotes)
    run_context = RunContextWrapper(context={"thread_id": "t1"})
    await (await notes.handle(run_context)).update({"currentGoal": "Fix the login bug"})
    model = ScriptedAgentsModel(
        [
            [tool_call("c1", completedSteps=["reproduced it"])],
            [tool_call("c2", blockers=["no staging logs"])],
            [reply("Blocked on staging logs.")],
        ]
    )
    result = await Runner.run(agent_for(notes, model), "Carry on.", context={"thread_id": "t1"})
    assert result.final_output == "Blocked on staging logs."
    seen = [call.system_instructions for call in model.calls]
    assert all(text is not None and text.startswith(BASE + "\n\n<scratchpad>\n") for text in seen)
    assert [block_of(text) for text in seen] == [
        {"currentGoal": "Fix the login bug"},
        {"currentGoal": "Fix the login bug", "completedSteps": ["reproduced it"]},
        {
            "currentGoal": "Fix the login bug",
            "completedSteps": ["reproduced it"],
            "blockers": ["no staging logs"],
        },
    ]
    assert seen[-1] == f"{BASE}\n\n{await notes.block(run_context)}"


EXPECTED_VIEWS = [
    {"currentGoal": "Fix the login bug"},
    {"currentGoal": "Fix the login bug", "completedSteps": ["reproduced it"]},
    {
        "currentGoal": "Fix the login bug",
        "completedSteps": ["reproduced it"],
        "blockers": ["no staging logs"],
    },
]


async def run_two_updates(notes: Scratchpad, *, filtered: bool) -> tuple[ScriptedAgentsModel, str]:
    """A run that updates twice, then answers; ``(model, last block)``."""
    run_context = RunContextWrapper(context={"thread_id": "t1"})
    await (await notes.handle(run_context)).update({"currentGoal": "Fix the login bug"})
    model = ScriptedAgentsModel(
        [
            [tool_call("c1", completedSteps=["reproduced it"])],
            [tool_call("c2", blockers=["no staging logs"])],
            [reply("Blocked on staging logs.")],
        ]
    )
    config = RunConfig(call_model_input_filter=notes.input_filter) if filtered else None
    result = await Runner.run(
        agent_for(notes, model), "Carry on.", context={"thread_id": "t1"}, run_config=config
    )
    assert result.final_output == "Blocked on staging logs."
    assert "<scratchpad>" not in json.dumps(result.to_input_list())  # the run's items: none
    return model, await notes.block(run_context)


@pytest.mark.asyncio
async def test_by_default_the_input_filter_moves_the_block_after_the_conversation() -> None:
    """``placement="end"`` with the filter: each model call's instructions are the agent's
    alone and its input ends with the block as stored then (after this run's updates), a
    developer message; what came before it repeats the previous call's input."""
    notes = Scratchpad(storage=MemoryStorage(), schema=TaskNotes)
    model, last_block = await run_two_updates(notes, filtered=True)

    assert [call.system_instructions for call in model.calls] == [BASE, BASE, BASE]
    ends = [call.input[-1] for call in model.calls]
    assert all(end["role"] == "developer" for end in ends)
    assert [block_of(end["content"]) for end in ends] == EXPECTED_VIEWS
    assert ends[-1]["content"] == last_block
    for before, after in itertools.pairwise(model.calls):
        assert after.input[: len(before.input) - 1] == before.input[:-1]
        assert "<scratchpad>" not in json.dumps(after.input[:-1])


@pytest.mark.asyncio
async def test_placement_start_keeps_the_block_in_the_instructions_with_the_filter() -> None:
    notes = Scratchpad(storage=MemoryStorage(), schema=TaskNotes, placement="start")
    model, last_block = await run_two_updates(notes, filtered=True)

    seen = [call.system_instructions for call in model.calls]
    assert [block_of(text) for text in seen] == EXPECTED_VIEWS
    assert seen[-1] == f"{BASE}\n\n{last_block}"
    assert all("<scratchpad>" not in json.dumps(call.input) for call in model.calls)


@pytest.mark.asyncio
async def test_without_the_filter_the_block_stays_in_the_instructions_and_a_warning_says_so(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The model still reads the current notes on every call; the log says how to move them."""
    notes = Scratchpad(storage=MemoryStorage(), schema=TaskNotes)
    with caplog.at_level(logging.WARNING, "noetic_scratchpad.integrations.openai_agents"):
        model, _ = await run_two_updates(notes, filtered=False)

    assert [block_of(call.system_instructions) for call in model.calls] == EXPECTED_VIEWS
    [warning] = [r for r in caplog.records if "input_filter" in r.getMessage()]
    assert "call_model_input_filter=notes.input_filter" in warning.getMessage()


def test_an_unknown_placement_is_refused() -> None:
    with pytest.raises(ScratchpadConfigError, match="placement must be one of 'end', 'start'"):
        Scratchpad(placement="last")  # type: ignore[arg-type]


@pytest.mark.asyncio
async def test_the_block_shows_what_another_writer_stored_since() -> None:
    backend = MemoryStorage()
    notes, elsewhere = Scratchpad(storage=backend), Scratchpad(storage=backend)
    run_context = RunContextWrapper(context={"thread_id": "t1"})
    await (await notes.handle(run_context)).update({"mine": 1})  # notes now knows t1
    await (await elsewhere.handle(run_context)).update({"theirs": 2})  # another process
    model = ScriptedAgentsModel([[reply("ok")]])
    await Runner.run(agent_for(notes, model), "Go.", context={"thread_id": "t1"})
    assert block_of(model.calls[0].system_instructions) == {"mine": 1, "theirs": 2}


@pytest.mark.asyncio
async def test_an_empty_scratchpad_adds_nothing_to_the_instructions() -> None:
    notes = Scratchpad(storage=MemoryStorage())
    model = ScriptedAgentsModel([[reply("Hello.")]])
    await Runner.run(agent_for(notes, model), "Hi.", context={"thread_id": "t1"})
    assert model.calls[0].system_instructions == BASE


@pytest.mark.asyncio
async def test_a_refused_update_goes_back_to_the_model_and_its_correction_lands() -> None:
    notes = Scratchpad(storage=MemoryStorage(), schema=TaskNotes)
    model = ScriptedAgentsModel(
        [
            [tool_call("c1", currentGoal="Fix it", completedSteps="bisected")],  # wrong type
            [tool_call("c2", currentGoal="Fix it", completedSteps=["bisected"])],
            [reply("Done.")],
        ]
    )
    with capture_events(notes.events) as events:
        result = await Runner.run(agent_for(notes, model), "Go.", context={"thread_id": "t1"})
    assert result.final_output == "Done."
    refusal = model.calls[1].outputs()["c1"]
    assert refusal.startswith("Error: The update does not fit the scratchpad's schema")
    assert "completedSteps" in refusal
    assert "call scratchpad_update again" in refusal  # the name the model sees
    assert "scratchpad/update" not in refusal
    assert "<scratchpad>" not in (model.calls[1].system_instructions or "")  # nothing stored
    assert model.calls[2].outputs()["c2"] == "Scratchpad updated (currentGoal, completedSteps)."
    assert block_of(model.calls[2].system_instructions) == {
        "currentGoal": "Fix it",
        "completedSteps": ["bisected"],
    }
    writes = [e for e in events if isinstance(e, UpdateApplied | UpdateRejected)]
    assert [(type(e), e.call_id) for e in writes] == [(UpdateRejected, "c1"), (UpdateApplied, "c2")]


@pytest.mark.asyncio
async def test_refusals_name_the_tool_as_the_model_sees_it() -> None:
    notes = Scratchpad(storage=MemoryStorage(), tool_name="notes_write")
    model = ScriptedAgentsModel(
        [
            [raw_tool_call("c1", '["not", "an", "object"]', name="notes_write")],
            [reply("Sorry.")],
            [raw_tool_call("c2", "{oops", name="memo")],
            [reply("Sorry again.")],
        ]
    )
    await Runner.run(agent_for(notes, model), "Go.", context={"thread_id": "t1"})
    assert [tool.name for tool in model.calls[0].tools] == ["notes_write"]
    refusal = model.calls[1].outputs()["c1"]
    assert refusal.startswith("Error: The arguments are a JSON array, not an object.")
    assert "Call notes_write with a JSON object" in refusal
    # A copy renamed after the fact (as an app or a wrapper may do) names its own name.
    memo = dataclasses.replace(notes.tool, name="memo")
    agent = Agent(name="A", instructions=notes.instructions(BASE), tools=[memo], model=model)
    await Runner.run(agent, "Again.", context={"thread_id": "t1"})
    assert "Call memo with a JSON object" in model.calls[3].outputs()["c2"]


@pytest.mark.asyncio
async def test_a_storage_failure_tells_the_model_to_retry_later() -> None:
    storage = FaultyStorage(MemoryStorage(), fail_on={"update", "commit"})  # every write
    notes = Scratchpad(storage=storage)
    model = ScriptedAgentsModel(
        [[tool_call("c1", goal="ship")], [tool_call("c2", goal="ship")], [reply("Saved.")]]
    )

    def heal_after_first(event: object) -> None:
        if isinstance(event, UpdateRejected):
            storage.heal()  # the outage ends before the model tries again

    notes.events.subscribe(heal_after_first)
    result = await Runner.run(agent_for(notes, model), "Go.", context={"thread_id": "t1"})
    assert result.final_output == "Saved."
    failure = model.calls[1].outputs()["c1"]
    assert failure.startswith("Error: This call was not saved: the scratchpad's storage failed")
    assert "call scratchpad_update again later" in failure
    assert model.calls[2].outputs()["c2"] == "Scratchpad updated (goal)."
    assert block_of(model.calls[2].system_instructions) == {"goal": "ship"}


@pytest.mark.asyncio
async def test_a_tool_call_writes_without_reading_and_each_model_call_reads_once() -> None:
    """Through the core: a tool call binds to its scope without a read (one round trip,
    the write), and the instructions read the block once per model call. A handle kept
    per scope between calls would save no read, so none is kept: a run on a scope seen
    before costs what the first did."""
    storage = FaultyStorage(MemoryStorage())  # counts the calls; injects nothing
    notes = Scratchpad(storage=storage)
    for run in range(2):
        storage.calls.clear()
        model = ScriptedAgentsModel(
            [
                [tool_call(f"a{run}", a=run), tool_call(f"b{run}", b=run)],  # concurrent
                [tool_call(f"c{run}", c=run)],
                [reply("ok")],
            ]
        )
        await Runner.run(agent_for(notes, model), "Go.", context={"thread_id": "t1"})
        assert storage.calls == {"get_revision": 3, "commit": 3}  # 3 model calls, 3 writes
    assert block_of(model.calls[2].system_instructions) == {"a": 1, "b": 1, "c": 1}


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
@pytest.mark.asyncio
async def test_three_update_calls_in_one_response_all_land(kind: str, tmp_path: Path) -> None:
    url = "memory://" if kind == "memory" else f"sqlite:///{tmp_path / 'notes.db'}"
    async with Scratchpad(storage=url) as notes:
        # Each call writes into the same nested object: a lost update would drop a file.
        model = ScriptedAgentsModel(
            [
                [
                    tool_call("c1", files={"a.py": "read"}),
                    tool_call("c2", files={"b.py": "fixed"}),
                    tool_call("c3", files={"c.py": "tested"}, goal="ship"),
                ],
                [reply("All noted.")],
            ]
        )
        with capture_events(notes.events) as events:
            await Runner.run(agent_for(notes, model), "Go.", context={"thread_id": "t1"})
        assert sorted(model.calls[1].outputs().values()) == [
            "Scratchpad updated (files).",
            "Scratchpad updated (files).",
            "Scratchpad updated (files, goal).",
        ]
        expected = {"files": {"a.py": "read", "b.py": "fixed", "c.py": "tested"}, "goal": "ship"}
        assert block_of(model.calls[1].system_instructions) == expected
        assert sum(isinstance(event, UpdateApplied) for event in events) == 3
        # No store hook runs here: the handled-call record must not grow with every call.
        handle = await notes.handle(RunContextWrapper(context={"thread_id": "t1"}))
        assert handle.ctx.handled_call_ids == set()


@pytest.mark.asyncio
async def test_state_persists_across_two_runs_on_sqlite(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'scratchpad.db'}"
    async with Scratchpad(storage=url, schema=TaskNotes) as notes:
        first = ScriptedAgentsModel([[tool_call("c1", currentGoal="Ship v2")], [reply("Noted.")]])
        await Runner.run(agent_for(notes, first), "Plan.", context={"thread_id": "t1"})
    # A new Scratchpad on the same file, as after a restart.
    async with Scratchpad(storage=url, schema=TaskNotes) as notes:
        second = ScriptedAgentsModel([[reply("Still shipping v2.")], [reply("Hello.")]])
        await Runner.run(agent_for(notes, second), "Status?", context={"thread_id": "t1"})
        await Runner.run(agent_for(notes, second), "Status?", context={"thread_id": "t2"})
    assert block_of(second.calls[0].system_instructions) == {"currentGoal": "Ship v2"}
    assert second.calls[1].system_instructions == BASE  # another thread: its own scratchpad


@pytest.mark.asyncio
async def test_the_tool_schema_is_not_strict_and_keeps_optional_fields() -> None:
    notes = Scratchpad(storage=MemoryStorage(), schema=TaskNotes)
    tool = notes.tool
    assert tool.strict_json_schema is False
    assert tool.params_json_schema == notes.layer.provides["update"].parameters  # type: ignore[union-attr]
    assert "required" not in tool.params_json_schema  # every field optional: partial updates
    assert tool.params_json_schema["properties"]["completedSteps"]["default"] == []
    # What strict mode would have sent: every field required, defaults gone.
    strict = ensure_strict_json_schema(copy.deepcopy(tool.params_json_schema))
    assert strict["required"] == ["currentGoal", "completedSteps", "blockers"]
    # Without a schema the tool takes any object; strict mode would refuse to build it.
    free = Scratchpad(storage=MemoryStorage()).tool
    assert free.params_json_schema == {"type": "object", "additionalProperties": True}


@pytest.mark.asyncio
async def test_a_partial_update_through_the_tool_keeps_the_other_fields() -> None:
    notes = Scratchpad(storage=MemoryStorage(), schema=TaskNotes)
    model = ScriptedAgentsModel(
        [
            [tool_call("c1", currentGoal="Fix it", completedSteps=["a"])],
            [tool_call("c2", blockers=["b"])],
            [reply("ok")],
        ]
    )
    await Runner.run(agent_for(notes, model), "Go.", context={"thread_id": "t1"})
    handle = await notes.handle(RunContextWrapper(context={"thread_id": "t1"}))
    assert handle.snapshot == {"currentGoal": "Fix it", "completedSteps": ["a"], "blockers": ["b"]}


@pytest.mark.asyncio
async def test_streamed_runs_update_and_show_the_scratchpad() -> None:
    notes = Scratchpad(storage=MemoryStorage(), schema=TaskNotes)
    model = ScriptedAgentsModel([[tool_call("c1", currentGoal="Stream it")], [reply("Streaming.")]])
    result = Runner.run_streamed(agent_for(notes, model), "Go.", context={"thread_id": "t1"})
    outputs = [
        event.item.output
        async for event in result.stream_events()
        if event.type == "run_item_stream_event" and event.item.type == "tool_call_output_item"
    ]
    assert outputs == ["Scratchpad updated (currentGoal)."]
    assert result.final_output == "Streaming."
    assert [call.streamed for call in model.calls] == [True, True]
    assert block_of(model.calls[1].system_instructions) == {"currentGoal": "Stream it"}


@pytest.mark.asyncio
async def test_a_call_id_reused_in_a_later_run_is_a_new_call_or_a_retry() -> None:
    """Issue 23, item 4: some runtimes number their calls ``call_0`` in every turn. The SDK
    refuses a reused id within one run itself, so the ids meet again across runs on one
    thread: the second run's ``call_0`` with other arguments is applied (its event notes
    the reused id); the third's, repeating the second's arguments, is a retry: nothing
    written, the first result returned."""
    notes = Scratchpad(storage=MemoryStorage())
    runs = [
        {"goal": "fix login"},
        {"blockers": ["no staging"]},
        {"blockers": ["no staging"]},
    ]
    models = [
        ScriptedAgentsModel([[tool_call("call_0", **run)], [reply("Noted.")]]) for run in runs
    ]
    with capture_events(notes.events) as events:
        for model in models:
            await Runner.run(agent_for(notes, model), "Go.", context={"thread_id": "t1"})

    assert block_of(models[2].calls[1].system_instructions) == {
        "goal": "fix login",
        "blockers": ["no staging"],
    }
    assert [model.calls[1].outputs()["call_0"] for model in models] == [
        "Scratchpad updated (goal).",
        "Scratchpad updated (blockers).",
        "Scratchpad updated (blockers).",
    ]
    applied = [event for event in events if isinstance(event, UpdateApplied)]
    assert [(e.keys, e.reused_call_id, e.revision) for e in applied] == [
        (("goal",), False, 1),
        (("blockers",), True, 2),
    ]
    retried = [event for event in events if isinstance(event, UpdateRetried)]
    assert [(e.call_id, e.revision) for e in retried] == [("call_0", 2)]
