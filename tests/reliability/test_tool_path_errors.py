"""What the model reads when its ``scratchpad/update`` call fails, through the whole harness.

Every refused call comes back as ``FunctionCallOutput(is_error=True)`` whose text says what
was wrong and how to call again; the stored state is unchanged; the run goes on, and the
model's corrected call is applied. Storage faults (a write that breaks, a backend that
stalls, subscribers that fail) end the same way: an error output, an event, the run
finishes.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from pydantic import BaseModel, ConfigDict

from noetic_scratchpad import (
    EventBus,
    ScratchpadLayer,
    UpdateApplied,
    UpdateRejected,
    _json,
    open_storage,
    scratchpad,
)
from noetic_scratchpad.items import FunctionCall, FunctionCallOutput
from noetic_scratchpad.runtime import Agent, AgentHarness, ModelRequest, ScriptedModel
from noetic_scratchpad.storage import MemoryStorage
from noetic_scratchpad.testing import FaultyStorage, InjectedFault, capture_events

from .helpers import write_lock_held

PRIOR = {"currentGoal": "ship", "completedSteps": ["plan"]}


class TaskNotes(BaseModel):
    model_config = ConfigDict(extra="forbid")

    currentGoal: str
    completedSteps: list[str]
    blockers: list[str]


def call(call_id: str, arguments: str) -> FunctionCall:
    return FunctionCall(call_id=call_id, name="scratchpad/update", arguments=arguments)


class Recorder:
    """A scripted turn that records the tool output it was shown, then makes ``then``."""

    def __init__(self, then: list[Any] | str) -> None:
        self.then = then
        self.seen: FunctionCallOutput | None = None

    def __call__(self, request: ModelRequest) -> list[Any] | str:
        self.seen = request.last_output
        return self.then


async def run_bad_call(
    layer: ScratchpadLayer, bad_arguments: str, fixed_arguments: str
) -> tuple[FunctionCallOutput, AgentHarness, list[Any], Any]:
    """Seed ``PRIOR``, let the model send ``bad_arguments``, then ``fixed_arguments``.

    Returns the error output the model saw, the harness (closed), the events, and the
    stored state as JSON bytes right after the bad call.
    """
    backend = MemoryStorage()
    after_bad: dict[str, bytes] = {}

    async def snapshot_then_fix(request: ModelRequest) -> list[Any]:
        after_bad["state"] = _json.dumps(await backend.get("scopes/scratchpad/thread/t1/state"))
        return [call("fixed", fixed_arguments)]

    recorder = Recorder([])  # it only looks; snapshot_then_fix answers
    turns: list[Any] = [[call("bad", bad_arguments)], _chain(recorder, snapshot_then_fix), "Done."]
    model = ScriptedModel(turns)
    harness = AgentHarness("a", Agent(model=model), context_layers=[layer], storage=backend)
    async with harness:
        await harness.update_state("scratchpad", PRIOR, thread_id="t1")
        before = _json.dumps(await backend.get("scopes/scratchpad/thread/t1/state"))
        with capture_events(harness.events) as events:
            result = await harness.run("go", thread_id="t1")
    assert result.output == "Done."
    assert after_bad["state"] == before  # the refused call changed nothing, byte for byte
    assert recorder.seen is not None
    return (
        recorder.seen,
        harness,
        list(events),
        await backend.get("scopes/scratchpad/thread/t1/state"),
    )


def _chain(recorder: Recorder, then: Any) -> Any:
    async def turn(request: ModelRequest) -> Any:
        recorder(request)
        return await then(request)

    return turn


def rejection(events: list[Any]) -> UpdateRejected:
    [rejected] = [e for e in events if isinstance(e, UpdateRejected)]
    assert (rejected.hook, rejected.call_id) == ("tool", "bad")
    return rejected


@pytest.mark.asyncio
async def test_arguments_that_are_not_json() -> None:
    """Arguments that do not parse come back as an error saying they are not valid JSON
    and showing the shape to send (a JSON object of the fields to change, with an example);
    the corrected call is applied."""
    output, _, events, stored = await run_bad_call(
        scratchpad(), '{"currentGoal": "ship v2"', '{"currentGoal": "ship v2"}'
    )

    assert output.is_error
    assert output.call_id == "bad"
    assert output.output.startswith("The arguments are not valid JSON (")
    assert "Call scratchpad/update with a JSON object of the fields to change" in output.output
    assert '{"currentGoal": "..."}' in output.output
    assert rejection(events).reason == "malformed"
    assert stored == {**PRIOR, "currentGoal": "ship v2"}


@pytest.mark.asyncio
async def test_arguments_that_are_not_an_object() -> None:
    """A JSON array as arguments is refused with an error naming what was sent (an array)
    and asking for an object of the fields to change."""
    output, _, events, stored = await run_bad_call(
        scratchpad(), '["ship v2", "plan"]', '{"completedSteps": ["plan", "code"]}'
    )

    assert output.is_error
    assert output.output.startswith("The arguments are a JSON array, not an object.")
    assert "Call scratchpad/update with a JSON object of the fields to change" in output.output
    assert rejection(events).reason == "malformed"
    assert stored == {**PRIOR, "completedSteps": ["plan", "code"]}


@pytest.mark.asyncio
async def test_arguments_with_nan_are_not_json() -> None:
    """``NaN`` (which Python's json would accept) is refused as not valid JSON, with the
    same fix hint."""
    output, _, events, stored = await run_bad_call(scratchpad(), '{"score": NaN}', '{"score": 0}')

    assert output.is_error
    assert "NaN is not a JSON number" in output.output
    assert "Call scratchpad/update with a JSON object" in output.output
    assert rejection(events).reason == "malformed"
    assert stored == {**PRIOR, "score": 0}


@pytest.mark.asyncio
async def test_schema_violation_names_the_field_and_the_fix() -> None:
    """An update that breaks the schema is refused with an error that names the field, says
    what is wrong with it, and asks to call again with only the fields to change; the
    model's corrected call is applied."""
    output, _, events, stored = await run_bad_call(
        scratchpad(schema=TaskNotes),
        '{"completedSteps": "plan, code"}',
        '{"completedSteps": ["plan", "code"]}',
    )

    assert output.is_error
    assert output.output.startswith("The update does not fit the scratchpad's schema: ")
    assert "completedSteps: Input should be a valid list" in output.output
    assert output.output.endswith(
        "Fix these fields and call scratchpad/update again with only the fields to change."
    )
    rejected = rejection(events)
    assert rejected.reason == "schema"
    assert [list(error["loc"]) for error in rejected.errors] == [["completedSteps"]]
    assert stored == {**PRIOR, "completedSteps": ["plan", "code"]}


@pytest.mark.asyncio
async def test_forbidden_extra_key_is_named() -> None:
    """With a schema that forbids extra keys, the error names the unknown key."""
    output, _, events, stored = await run_bad_call(
        scratchpad(schema=TaskNotes), '{"mood": "great"}', '{"blockers": []}'
    )

    assert output.is_error
    assert "mood: Extra inputs are not permitted" in output.output
    assert rejection(events).reason == "schema"
    assert stored == {**PRIOR, "blockers": []}


@pytest.mark.asyncio
async def test_too_large_asks_the_model_to_condense() -> None:
    """An update that would push the state past ``max_state_bytes`` is refused with the
    size, the limit, and a request to condense (writing a key replaces its value); a
    condensed update is then applied and nothing stored before was lost."""
    layer = scratchpad(max_state_bytes=300)
    big = json.dumps({"log": ["step " * 20] * 5})
    output, _, events, stored = await run_bad_call(layer, big, '{"log": ["five steps done"]}')

    assert output.is_error
    assert "over its limit of 300" in output.output
    assert output.output.startswith("The scratchpad would grow to ")
    assert "Condense the scratchpad" in output.output
    assert "writing a key replaces its value" in output.output
    assert rejection(events).reason == "too_large"
    assert stored == {**PRIOR, "log": ["five steps done"]}


@pytest.mark.asyncio
async def test_read_only_scratchpad_is_not_offered_and_a_call_is_refused() -> None:
    """A read-only scratchpad is shown to the model but its update tool is not offered; a
    model that calls it anyway gets an error listing the tools it has, and the state does
    not change."""
    backend = MemoryStorage()
    await backend.set("scopes/scratchpad/thread/t1/state", PRIOR)
    recorder = Recorder("Done.")
    model = ScriptedModel([[call("bad", '{"currentGoal": "x"}')], recorder])
    harness = AgentHarness(
        "a", Agent(model=model), context_layers=[scratchpad(read_only=True)], storage=backend
    )
    async with harness:
        result = await harness.run("go", thread_id="t1")

    assert [spec.name for spec in model.requests[0].tools] == []
    assert any("<scratchpad>" in str(item) for item in model.requests[0].items)
    assert result.output == "Done."
    assert recorder.seen is not None
    assert recorder.seen.is_error
    assert recorder.seen.output == (
        "There is no tool named 'scratchpad/update'. Available tools: none."
    )
    assert await backend.get("scopes/scratchpad/thread/t1/state") == PRIOR


# -- storage faults on the tool path ------------------------------------------------------------


async def run_with_backend(
    backend: FaultyStorage, layer: ScratchpadLayer, bus: EventBus | None = None
) -> tuple[FunctionCallOutput, Any, list[Any], float]:
    """The model writes PRIOR through the tool, then a second update that meets the fault."""
    recorder = Recorder("Done.")

    def arm(request: ModelRequest) -> list[Any]:
        backend.fail_on, backend.stall_on = armed
        return [call("bad", '{"currentGoal": "changed"}')]

    armed = (backend.fail_on, backend.stall_on)
    backend.heal()
    model = ScriptedModel([[call("seed", json.dumps(PRIOR))], arm, recorder])
    harness = AgentHarness(
        "a", Agent(model=model), context_layers=[layer], storage=backend, events=bus
    )
    started = time.perf_counter()
    async with harness:
        with capture_events(harness.events) as events, anyio.fail_after(10):
            result = await harness.run("go", thread_id="t1")
    elapsed = time.perf_counter() - started
    assert result.output == "Done."
    assert recorder.seen is not None
    return recorder.seen, result, list(events), elapsed


@pytest.mark.asyncio
async def test_broken_write_gives_the_model_an_error_and_the_run_goes_on() -> None:
    """A write that breaks mid-transaction reaches the model as an error output saying the
    scratchpad could not be saved and is unchanged; the run finishes and the stored state is
    the one before the failed call."""
    backend = FaultyStorage(MemoryStorage(), fail_on={"commit"})
    output, result, events, _ = await run_with_backend(backend, scratchpad())

    assert output.is_error
    assert "This call was not saved" in output.output
    assert "call scratchpad/update again later" in output.output
    assert "InjectedFault" not in output.output  # details are for the operator, not the model
    assert rejection(events).reason == "storage"
    assert "The scratchpad could not be saved (InjectedFault: " in rejection(events).message
    assert await backend.inner.get("scopes/scratchpad/thread/t1/state") == PRIOR
    assert result.states["scratchpad"] == PRIOR


@pytest.mark.asyncio
async def test_stalled_write_gives_the_model_a_timeout_error_and_the_run_goes_on() -> None:
    """A backend that hangs is cut off by ``write_timeout``: the model reads that its call
    may or may not have been saved and to repeat it only if the change is missing, and the
    run finishes soon after the timeout instead of hanging."""
    backend = FaultyStorage(MemoryStorage(), stall_on={"commit"})
    output, _, events, elapsed = await run_with_backend(backend, scratchpad(write_timeout=0.2))
    backend.release()

    assert output.is_error
    assert "may or may not have been saved" in output.output
    assert "call scratchpad/update again only if the change is missing" in output.output
    assert rejection(events).reason == "timeout"
    assert "The scratchpad did not answer within 0.2 s" in rejection(events).message
    assert elapsed < 5
    assert await backend.inner.get("scopes/scratchpad/thread/t1/state") == PRIOR


@pytest.mark.asyncio
async def test_failing_and_hanging_subscribers_do_not_stop_a_run() -> None:
    """Subscribers on the harness's bus that raise (sync and async) or hang do not break
    or stall the run: the tool calls are applied and answered as usual."""
    bus = EventBus(handler_timeout=0.2)

    def raising(event: Any) -> None:
        raise RuntimeError("subscriber broke")

    async def raising_async(event: Any) -> None:
        raise RuntimeError("async subscriber broke")

    async def hanging(event: Any) -> None:
        await anyio.sleep_forever()

    for handler in (raising, raising_async, hanging):
        bus.subscribe(handler)
    backend = FaultyStorage(MemoryStorage())
    output, result, events, elapsed = await run_with_backend(backend, scratchpad(), bus)

    assert elapsed < 5  # closing waits for the hung handler only until handler_timeout
    assert not output.is_error
    assert output.output == "Scratchpad updated (currentGoal)."
    assert [e.call_id for e in events if isinstance(e, UpdateApplied)] == ["seed", "bad"]
    assert await backend.inner.get("scopes/scratchpad/thread/t1/state") == {
        **PRIOR,
        "currentGoal": "changed",
    }
    assert result.states["scratchpad"]["currentGoal"] == "changed"


@pytest.mark.slow
@pytest.mark.asyncio
async def test_locked_sqlite_gives_the_model_an_error_and_the_run_goes_on(tmp_path: Path) -> None:
    """When another process holds the SQLite file's write lock past the busy timeout, the
    model's update comes back as an error output saying the database stayed locked and
    nothing was written; the run finishes, and after the lock is gone the same harness
    writes again."""
    path = tmp_path / "locked.db"
    backend = await open_storage(f"sqlite:///{path}?busy_timeout=200&busy_retries=0")
    recorder = Recorder("Done.")
    model = ScriptedModel([[call("bad", '{"currentGoal": "locked out"}')], recorder])
    harness = AgentHarness("a", Agent(model=model), context_layers=[scratchpad()], storage=backend)
    try:
        async with harness:
            await harness.update_state("scratchpad", PRIOR, thread_id="t1")
            async with write_lock_held(path, "scopes/scratchpad/thread/t1/state"):
                with capture_events(harness.events) as events:
                    result = await harness.run("go", thread_id="t1")
            await harness.update_state("scratchpad", {"blockers": []}, thread_id="t1")
            after = await harness.read_state("scratchpad", thread_id="t1")
    finally:
        await backend.aclose()

    assert result.output == "Done."
    assert recorder.seen is not None
    assert recorder.seen.is_error
    assert "This call was not saved" in recorder.seen.output
    assert "stayed locked by another connection" not in recorder.seen.output
    assert rejection(events).reason == "storage"
    assert "stayed locked by another connection" in rejection(events).message
    assert "nothing was written" in rejection(events).message
    assert after == {**PRIOR, "blockers": []}


@pytest.mark.asyncio
async def test_state_that_cannot_be_loaded_fails_the_run_before_the_model_is_called() -> None:
    """When the backend fails to read the state at the start of a run, the run fails with
    that error before the model is called (it would otherwise work without its notes), and
    nothing stored changes. The next run, with the backend healthy, sees the state."""
    backend = FaultyStorage(MemoryStorage())
    await backend.inner.set("scopes/scratchpad/thread/t1/state", PRIOR)
    model = ScriptedModel(["Done."])
    harness = AgentHarness("a", Agent(model=model), context_layers=[scratchpad()], storage=backend)
    async with harness:
        backend.fail_on = {"get_revision"}
        with pytest.raises(InjectedFault) as info:
            await harness.run("go", thread_id="t1")
        assert info.value is backend.error
        assert model.requests == []
        backend.heal()
        result = await harness.run("go", thread_id="t1")

    assert result.output == "Done."
    block = "<scratchpad>\n" + json.dumps(PRIOR, indent=2) + "\n</scratchpad>"
    assert block in model.requests[0].messages("developer")
    assert await backend.inner.get("scopes/scratchpad/thread/t1/state") == PRIOR
