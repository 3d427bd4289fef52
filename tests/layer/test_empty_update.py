"""An empty update writes nothing (issue 25, item 5): no revision, no journal entry, no
event of a write, and the tool's answer says nothing was written, on every path."""

from __future__ import annotations

import pytest

from noetic_scratchpad import Agent, AgentHarness, ScriptedModel, UpdateApplied, scratchpad
from noetic_scratchpad.items import FunctionCall, FunctionCallOutput, Message
from noetic_scratchpad.storage import MemoryStorage
from noetic_scratchpad.testing import capture_events

#: Every async test runs twice: on asyncio and under trio (``anyio_backend`` in conftest).
pytestmark = pytest.mark.anyio

#: Updates that hold no key once cleaned (the forbidden keys are stripped).
EMPTY = ["{}", '{"__proto__": {"x": 1}}', '{"constructor": 1}']


@pytest.mark.parametrize("arguments", EMPTY)
async def test_an_empty_tool_call_makes_no_revision_and_says_so(arguments: str) -> None:
    handle = await scratchpad().open(MemoryStorage(), thread_id="t1")
    await handle.update({"goal": "ship"})
    with capture_events(handle.ctx.events) as events:
        output = await handle.call("update", arguments, call_id="c1")

    assert "nothing was written" in output.lower()
    assert handle.revision == 1
    assert handle.snapshot == {"goal": "ship"}
    assert len(await handle.history()) == 1
    assert not [event for event in events if isinstance(event, UpdateApplied)]


async def test_an_empty_update_from_code_makes_no_revision_even_over_text_notes() -> None:
    """Over text notes, ``{}`` would have filed the text under ``_previous``: a write the
    caller never asked for."""
    handle = await scratchpad(template="draft").open(MemoryStorage(), thread_id="t1")
    await handle.update({})

    assert handle.revision == 0
    assert handle.snapshot == "draft"
    assert await handle.history() == []


async def test_an_empty_call_through_the_harness_makes_no_revision() -> None:
    model = ScriptedModel(
        [
            [FunctionCall(call_id="c1", name="scratchpad/update", arguments='{"goal": "a"}')],
            [FunctionCall(call_id="c2", name="scratchpad/update", arguments="{}")],
            [Message(role="assistant", content="done")],
        ]
    )
    harness = AgentHarness(
        name="t", agent=Agent(model=model), params={}, context_layers=[scratchpad()]
    )
    async with harness:
        await harness.run("go", thread_id="t1")
        history = await harness.history("scratchpad", thread_id="t1")

    outputs = [
        item.output
        for request in model.requests
        for item in request.items
        if isinstance(item, FunctionCallOutput) and item.call_id == "c2"
    ]
    assert outputs
    assert "nothing was written" in outputs[-1].lower()
    assert [entry.revision for entry in history] == [1]
