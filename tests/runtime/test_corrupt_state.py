"""A scope whose stored row cannot be read back, seen from a run: init reports and replaces
it as it does a state that fails the schema, and an update to it is refused as a fault no
retry fixes (never "storage failed, try again later")."""

from __future__ import annotations

import pytest

from noetic_scratchpad import (
    Agent,
    AgentHarness,
    ScriptedModel,
    StateDiscarded,
    UpdateRejected,
    scratchpad,
)
from noetic_scratchpad.errors import (
    ScratchpadUpdateError,
    StorageCorruptError,
)
from noetic_scratchpad.items import FunctionCallOutput, Message
from noetic_scratchpad.keys import state_key
from noetic_scratchpad.storage import StorageBackend
from noetic_scratchpad.testing import capture_events
from tests.storage.corrupt import CORRUPT_ROWS, corrupt_row

from .helpers import blocks, update_call

pytestmark = pytest.mark.asyncio

KEY = state_key("scratchpad", "thread", "t1")


def harness_on(storage: StorageBackend, model: ScriptedModel) -> AgentHarness:
    return AgentHarness(
        name="assistant",
        agent=Agent(model=model),
        params={},
        context_layers=[scratchpad()],
        storage=storage,
    )


@pytest.mark.parametrize(("backend_kind", "how"), CORRUPT_ROWS)
async def test_a_run_on_a_corrupt_scope_goes_on_and_the_model_is_told_not_to_retry(
    storage: StorageBackend, how: str
) -> None:
    await corrupt_row(storage, KEY, how)
    model = ScriptedModel(
        [[update_call("c1", goal="ship")], [Message(role="assistant", content="ok")]]
    )
    harness = harness_on(storage, model)

    with capture_events(harness.events) as events:
        result = await harness.run("hello", thread_id="t1")

    assert result.output == "ok"
    discarded = events.of(StateDiscarded)  # at init, and at each later read of the scope
    assert discarded
    assert all("cannot be read" in event.reason for event in discarded)
    assert blocks(model.requests[0]) == []  # the run starts from the initial state
    (rejected,) = events.of(UpdateRejected)
    assert rejected.reason == "corrupt"
    output = model.requests[1].items[-1]
    assert isinstance(output, FunctionCallOutput)
    assert output.is_error
    assert "cannot be read" in output.output
    assert "Do not call scratchpad/update again" in output.output
    assert "later" not in output.output


@pytest.mark.parametrize(("backend_kind", "how"), CORRUPT_ROWS)
async def test_an_update_from_code_is_a_refusal_and_a_storage_corrupt_error(
    storage: StorageBackend, how: str
) -> None:
    """Caught as a refused update or as a storage error alike; a reset clears it."""
    await corrupt_row(storage, KEY, how)
    harness = harness_on(storage, ScriptedModel([]))

    with pytest.raises(ScratchpadUpdateError) as caught:
        await harness.update_state("scratchpad", {"goal": "x"}, thread_id="t1")

    assert isinstance(caught.value, StorageCorruptError)
    assert caught.value.reason == "corrupt"
    assert await harness.read_state("scratchpad", thread_id="t1") == ""  # replaced, as init does
    await storage.delete(KEY)
    await harness.update_state("scratchpad", {"goal": "x"}, thread_id="t1")
    assert await harness.read_state("scratchpad", thread_id="t1") == {"goal": "x"}
