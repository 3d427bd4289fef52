"""The pydantic objects the per-turn path builds without validation (``_models.unvalidated``)
are the very objects validation makes of the same values."""

from __future__ import annotations

import pydantic
import pytest

from noetic_scratchpad import open_storage, scratchpad
from noetic_scratchpad.events import EventBus, UpdateApplied
from noetic_scratchpad.events.models import APPLIED_GIVEN
from noetic_scratchpad.items import LLMResponse, Message, developer_message


def same_object(built: pydantic.BaseModel, validated: pydantic.BaseModel) -> None:
    """Equal, the same fields in the same order and set, serialized and shown alike, copied
    and revalidated alike, and as frozen."""
    assert type(built) is type(validated)
    assert built == validated
    assert list(built.__dict__) == list(validated.__dict__) == list(type(built).model_fields)
    assert built.model_dump() == validated.model_dump()
    assert built.model_dump_json() == validated.model_dump_json()
    assert repr(built) == repr(validated)
    assert type(built).model_validate(built.model_dump()) == built
    assert built.__pydantic_extra__ is validated.__pydantic_extra__ is None
    assert built.__pydantic_private__ is validated.__pydantic_private__ is None
    with pytest.raises(pydantic.ValidationError):
        built.anything = 1  # type: ignore[attr-defined]
    with pytest.raises(pydantic.ValidationError):
        setattr(built, next(iter(type(built).model_fields)), "changed")


@pytest.mark.asyncio
async def test_a_writes_update_applied_is_the_validated_event() -> None:
    events = EventBus()
    received: list[UpdateApplied] = []
    events.subscribe(received.append)  # type: ignore[arg-type]
    handle = await scratchpad(name="notes").open(
        await open_storage("memory://"), thread_id="t1", events=events
    )
    await handle.update({"goal": "ship", "turn": 1})
    await handle.apply('{"turn": 2}', source="tool", call_id="call_1")

    assert [event.revision for event in received] == [1, 2]
    for built in received:
        given = {name: getattr(built, name) for name in APPLIED_GIVEN}
        validated = UpdateApplied(**given, at=built.at)
        same_object(built, validated)
        assert built.model_fields_set == APPLIED_GIVEN == validated.model_fields_set - {"at"}
        assert built.model_copy(update={"revision": 8}).revision == 8
    assert (received[1].source, received[1].keys, received[1].call_id) == (
        "tool",
        ("turn",),
        "call_1",
    )


def test_a_recalls_message_is_the_validated_message() -> None:
    built = developer_message("<scratchpad>\n{}\n</scratchpad>")
    validated = Message(role="developer", content="<scratchpad>\n{}\n</scratchpad>")

    same_object(built, validated)
    assert built.model_fields_set == validated.model_fields_set == {"role", "content"}
    # It travels in a response as any message does (the discriminated union of items).
    assert LLMResponse(items=[built]).items == [validated]
