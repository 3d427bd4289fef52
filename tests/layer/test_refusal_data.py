"""A refusal carries data (reason, field errors, limits, what was refused) and a message
that speaks to no one in particular; :func:`refusal_text` renders the model's text from
it, naming the tool as the host presents it."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from noetic_scratchpad import UpdateRejected, scratchpad
from noetic_scratchpad.errors import (
    ScratchpadReadOnlyError,
    ScratchpadUpdateError,
    ScratchpadValidationError,
)
from noetic_scratchpad.layer import refusal_text
from noetic_scratchpad.storage import MemoryStorage
from noetic_scratchpad.testing import capture_events

pytestmark = pytest.mark.anyio


class Notes(BaseModel):
    steps: list[str] = []


async def _refused(layer: object, function: str, args: object) -> ScratchpadUpdateError:
    handle = await scratchpad(**layer).open(MemoryStorage(), thread_id="t1")  # type: ignore[arg-type]
    with (
        capture_events(handle.ctx.events) as events,
        pytest.raises(ScratchpadUpdateError) as raised,
    ):
        await handle.call(function, args)  # type: ignore[arg-type]
    (rejected,) = events.of(UpdateRejected)
    assert rejected.message == raised.value.message
    assert rejected.reason == raised.value.reason
    return raised.value


async def test_a_schema_refusal_carries_its_field_errors_and_what_was_refused() -> None:
    exc = await _refused({"schema": Notes}, "update", '{"steps": "one"}')
    assert isinstance(exc, ScratchpadValidationError)
    assert (exc.reason, exc.refused) == ("schema", "update")
    assert [list(error["loc"]) for error in exc.errors] == [["steps"]]
    assert "steps" in exc.message
    assert "scratchpad/update" not in exc.message
    text = refusal_text(exc, tool="update_notes")
    assert text.startswith(exc.message)
    assert "call update_notes again" in text
    assert "scratchpad/update" not in text


async def test_a_too_large_refusal_carries_the_limit_and_the_size() -> None:
    exc = await _refused({"max_state_bytes": 64}, "update", {"goal": "x" * 100})
    assert exc.reason == "too_large"
    assert exc.limit == 64
    assert exc.size is not None
    assert exc.size > 64
    assert "again" not in exc.message
    assert "Condense the scratchpad" in refusal_text(exc, tool="notes")


async def test_a_malformed_call_names_the_hosts_tool_only_in_the_models_text() -> None:
    exc = await _refused({}, "update", "[1]")
    assert exc.reason == "malformed"
    assert "scratchpad/update" not in exc.message
    assert "Call notes_write with a JSON object" in refusal_text(exc, tool="notes_write")


async def test_a_read_only_refusal_says_what_happened_and_the_model_is_told_to_stop() -> None:
    exc = await _refused({"read_only": True}, "update", {"goal": "x"})
    assert isinstance(exc, ScratchpadReadOnlyError)
    assert "read-only" in exc.message
    assert "do not try to update it" in refusal_text(exc, tool="notes")


async def test_an_edit_refusal_is_marked_as_an_edit_and_rendered_with_the_edit_hints() -> None:
    args = '{"operations": [{"op": "delete", "path": ["nope"]}]}'
    exc = await _refused({"edit_tool": True}, "edit", args)
    assert (exc.reason, exc.refused) == ("edit_path", "edit")
    assert "scratchpad/edit" not in exc.message
    assert "again" not in exc.message
    text = refusal_text(exc, tool="notes_edit")
    assert "call notes_edit again" in text
    assert text.startswith(exc.message)
