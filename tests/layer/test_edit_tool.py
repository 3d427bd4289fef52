"""The opt-in ``scratchpad/edit`` tool through the layer: the tool, the store hook, code,
the schema gate, events and the journal."""

from __future__ import annotations

import json

import pytest
from pydantic import BaseModel, ConfigDict

from noetic_scratchpad import (
    ScratchpadUpdateError,
    ScratchpadValidationError,
    UpdateApplied,
    UpdateRejected,
    scratchpad,
)
from noetic_scratchpad.items import FunctionCall, LLMResponse
from noetic_scratchpad.keys import state_key
from noetic_scratchpad.layer import refusal_text
from noetic_scratchpad.storage import MemoryStorage
from noetic_scratchpad.testing import capture_events

#: Every async test runs twice: on asyncio and under trio (``anyio_backend`` in conftest).
pytestmark = pytest.mark.anyio

KEY = state_key("scratchpad", "thread", "t1")


class Notes(BaseModel):
    model_config = ConfigDict(extra="forbid")

    goal: str
    steps: list[str] = []
    notes: str | None = None


def op(kind: str, path: list[str], **fields: object) -> dict[str, object]:
    """One operation in the tool's form: every field present, unused ones null."""
    return {
        "op": kind,
        "path": path,
        "value_json": json.dumps(fields["value"]) if "value" in fields else None,
        "values_json": [json.dumps(v) for v in fields["values"]]  # type: ignore[attr-defined]
        if "values" in fields
        else None,
        "index": fields.get("index"),
    }


def call(*operations: dict[str, object]) -> str:
    return json.dumps({"operations": list(operations)})


async def test_the_edit_tool_is_offered_only_when_asked() -> None:
    assert "edit" not in scratchpad().provides
    offered = scratchpad(edit_tool=True).provides["edit"]
    assert offered.strict
    assert offered.exposed
    assert "scratchpad/update" in offered.description


async def test_an_edit_call_appends_and_deletes_in_one_write() -> None:
    backend = MemoryStorage()
    handle = await scratchpad(edit_tool=True).open(backend, thread_id="t1")
    await handle.update({"goal": "ship", "steps": ["tests"], "notes": "old"})
    with capture_events(handle.ctx.events) as events:
        output = await handle.call(
            "edit",
            call(op("append", ["steps"], values=["docs"]), op("delete", ["notes"])),
            call_id="e1",
        )
    assert output == "Scratchpad edited (steps, notes)."
    assert await backend.get(KEY) == {"goal": "ship", "steps": ["tests", "docs"]}
    (applied,) = events
    assert isinstance(applied, UpdateApplied)
    assert (applied.source, applied.keys, applied.call_id) == ("tool", ("steps", "notes"), "e1")
    (newest, _) = await handle.history()
    assert newest.changes == {
        "steps": (["tests"], ["tests", "docs"]),
        "notes": ("old", newest.changes["notes"][1]),
    }  # type: ignore[index]


async def test_code_edits_with_plain_values() -> None:
    handle = await scratchpad(edit_tool=True).open(MemoryStorage(), thread_id="t1")
    await handle.update({"steps": ["a", "b", "c"]})
    await handle.edit([{"op": "remove", "path": ["steps"], "index": 0}])
    await handle.edit([{"op": "set", "path": ["plan", "next"], "value": {"at": 1}}])
    assert handle.snapshot == {"steps": ["b", "c"], "plan": {"next": {"at": 1}}}


async def test_a_failing_operation_applies_none_and_names_itself() -> None:
    backend = MemoryStorage()
    handle = await scratchpad(edit_tool=True).open(backend, thread_id="t1")
    await handle.update({"steps": ["a"]})
    before = await backend.get(KEY)
    with capture_events(handle.ctx.events) as events, pytest.raises(ScratchpadUpdateError) as e:
        await handle.call(
            "edit", call(op("append", ["steps"], values=["b"]), op("remove", ["steps"], value="z"))
        )
    assert "Operation 2 of 2" in e.value.message
    assert '["steps"]' in e.value.message
    assert "scratchpad/edit" not in e.value.message  # the host's to say, by its name
    assert "call notes_edit again" in refusal_text(e.value, "notes_edit")
    assert [event.reason for event in events.of(UpdateRejected)] == [e.value.reason]
    assert await backend.get(KEY) == before
    assert handle.revision == 1


@pytest.mark.parametrize(
    ("operation", "reason"),
    [
        (op("append", ["missing"], values=[1]), "edit_path"),
        (op("append", ["goal"], values=[1]), "edit_type"),
        (op("delete", ["nope"]), "edit_path"),
        (op("remove", ["steps"], index=5), "edit_item"),
    ],
)
async def test_bad_edits_are_refused_with_their_reason(
    operation: dict[str, object], reason: str
) -> None:
    handle = await scratchpad(edit_tool=True).open(MemoryStorage(), thread_id="t1")
    await handle.update({"goal": "x", "steps": []})
    with pytest.raises(ScratchpadUpdateError) as raised:
        await handle.call("edit", call(operation))
    assert raised.value.reason == reason


async def test_deleting_a_required_field_is_refused_by_the_schema() -> None:
    backend = MemoryStorage()
    handle = await scratchpad(schema=Notes, edit_tool=True).open(backend, thread_id="t1")
    await handle.update({"goal": "ship", "notes": "n", "steps": []})
    with pytest.raises(ScratchpadValidationError, match="goal") as raised:
        await handle.call("edit", call(op("delete", ["goal"])))
    assert raised.value.refused == "edit"
    assert "call scratchpad/edit again" in refusal_text(raised.value, "scratchpad/edit")
    await handle.call("edit", call(op("delete", ["notes"])))  # optional: fine
    assert await backend.get(KEY) == {"goal": "ship", "steps": []}
    with pytest.raises(ScratchpadValidationError):
        await handle.call("edit", call(op("append", ["steps"], values=[1])))


async def test_the_store_hook_applies_edit_calls_once() -> None:
    layer = scratchpad(edit_tool=True)
    handle = await layer.open(MemoryStorage(), thread_id="t1")
    await handle.update({"steps": []})
    calls = [
        FunctionCall(
            call_id="e1",
            name="scratchpad/edit",
            arguments=call(op("append", ["steps"], values=["a"])),
        ),
        FunctionCall(call_id="u1", name="scratchpad/update", arguments='{"goal": "g"}'),
    ]
    for _ in range(2):  # the second time, both ids are already handled
        await layer.store(
            new_items=calls, state=handle.state, ctx=handle.ctx, response=LLMResponse(items=calls)
        )
    assert handle.snapshot == {"steps": ["a"], "goal": "g"}
    assert handle.revision == 3


async def test_without_the_option_an_edit_call_is_not_applied() -> None:
    layer = scratchpad()
    handle = await layer.open(MemoryStorage(), thread_id="t1")
    with pytest.raises(KeyError, match="'update'"):
        await handle.call("edit", call(op("delete", ["x"])))
    edit = FunctionCall(call_id="e1", name="scratchpad/edit", arguments=call(op("delete", ["x"])))
    assert await layer.store(new_items=[edit], state=handle.state, ctx=handle.ctx) is None


async def test_a_read_only_scratchpad_refuses_edits() -> None:
    handle = await scratchpad(edit_tool=True, read_only=True).open(MemoryStorage(), thread_id="t1")
    with pytest.raises(ScratchpadUpdateError) as raised:
        await handle.call("edit", call(op("delete", ["x"])))
    assert raised.value.reason == "read_only"


async def test_an_edit_call_is_never_merged_as_an_update_when_edits_are_off() -> None:
    handle = await scratchpad().open(MemoryStorage(), thread_id="t1")
    with pytest.raises(KeyError, match="scratchpad/edit"):
        await handle.apply_call("scratchpad/edit", call(op("delete", ["x"])), "store", "e1")
    assert handle.revision == 0
