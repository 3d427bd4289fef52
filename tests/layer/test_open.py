"""``layer.open``: one call to a handle bound to a scope, its ``block`` and its tool name."""

from __future__ import annotations

import json
import re

import pytest
from pydantic import BaseModel, ConfigDict

from noetic_scratchpad import (
    EventBus,
    ScratchpadConfigError,
    ScratchpadHandle,
    ScratchpadUpdateError,
    ScratchpadValidationError,
    UpdateApplied,
    UpdateRejected,
    ViewTruncated,
    scratchpad,
)
from noetic_scratchpad.keys import state_key
from noetic_scratchpad.layer import refusal_text
from noetic_scratchpad.storage import MemoryStorage
from noetic_scratchpad.testing import capture_events

#: Every async test runs twice: on asyncio and under trio (``anyio_backend`` in conftest).
pytestmark = pytest.mark.anyio


class Notes(BaseModel):
    model_config = ConfigDict(extra="forbid")

    goal: str = ""
    steps: list[str] = []


async def test_open_loads_the_stored_state_of_the_thread() -> None:
    backend = MemoryStorage()
    await backend.set(state_key("scratchpad", "thread", "t1"), {"goal": "ship"})
    handle = await scratchpad().open(backend, thread_id="t1")
    assert isinstance(handle, ScratchpadHandle)
    assert handle.snapshot == {"goal": "ship"}
    assert handle.ctx.context["scratchpad"] is handle


async def test_open_writes_go_to_the_scope_and_a_second_handle_sees_them() -> None:
    backend = MemoryStorage()
    layer = scratchpad(scope="resource")
    first = await layer.open(backend, thread_id="t1", resource_id="alice")
    await first.update({"goal": "ship"})
    assert await backend.get(state_key("scratchpad", "resource", "alice")) == {"goal": "ship"}
    assert await backend.get(state_key("scratchpad", "thread", "t1")) is None
    second = await layer.open(backend, thread_id="t2", resource_id="alice")
    assert second.snapshot == {"goal": "ship"}
    await second.update({"steps": ["a"]})
    assert await first.refresh() == {"goal": "ship", "steps": ["a"]}


async def test_open_reports_on_the_bus_it_is_given() -> None:
    bus = EventBus()
    with capture_events(bus) as events:
        handle = await scratchpad().open(MemoryStorage(), thread_id="t1", events=bus)
        await handle.update({"goal": "ship"})
    assert handle.ctx.events is bus
    assert [type(event) for event in events] == [UpdateApplied]


async def test_block_is_the_text_recall_gives() -> None:
    layer = scratchpad()
    handle = await layer.open(MemoryStorage(), thread_id="t1")
    assert handle.block() == ""  # nothing to show yet
    await handle.update({"goal": "ship"})
    recall = await layer.recall(state=handle.state, budget=layer.budget, ctx=handle.ctx)
    assert recall is not None
    assert handle.block() == recall.items[0].content
    assert handle.block().startswith("<scratchpad>")
    assert json.loads(handle.block().removeprefix("<scratchpad>").removesuffix("</scratchpad>"))


async def test_block_shows_what_another_writer_stored_after_refresh() -> None:
    backend = MemoryStorage()
    layer = scratchpad()
    reader = await layer.open(backend, thread_id="t1")
    writer = await layer.open(backend, thread_id="t1")
    await writer.update({"goal": "from another request"})
    assert "from another request" not in reader.block()
    await reader.refresh()
    assert "from another request" in reader.block()


async def test_block_within_a_budget_is_cut_and_reported() -> None:
    handle = await scratchpad().open(MemoryStorage(), thread_id="t1")
    await handle.update({"notes": ["x" * 80 for _ in range(50)]})
    with capture_events(handle.ctx.events) as events:
        text = handle.block(budget=60)
    assert handle.ctx.count_tokens(text) <= 60
    assert any(isinstance(event, ViewTruncated) for event in events)


@pytest.mark.parametrize(
    ("args", "error"),
    [
        ("not json", ScratchpadUpdateError),
        ('{"steps": "one"}', ScratchpadValidationError),
    ],
)
async def test_refusals_name_the_tool_as_the_model_sees_it(
    args: str, error: type[ScratchpadUpdateError]
) -> None:
    """The layer names no tool; the model's text names it as the host presents it."""
    handle = await scratchpad(schema=Notes).open(MemoryStorage(), thread_id="t1")
    with capture_events(handle.ctx.events) as events, pytest.raises(error) as raised:
        await handle.call("update", args)
    text = refusal_text(raised.value, "update_notes")
    assert "update_notes" in text
    assert "scratchpad/update" not in text
    rejected = [event for event in events if isinstance(event, UpdateRejected)]
    assert rejected[0].message == raised.value.message
    assert "scratchpad/update" not in rejected[0].message


async def test_too_large_and_read_only_refusals_name_the_renamed_tool_or_none() -> None:
    handle = await scratchpad(max_state_bytes=64).open(MemoryStorage(), thread_id="t1")
    with pytest.raises(ScratchpadUpdateError) as raised:
        await handle.update({"goal": "x" * 100})
    assert "scratchpad/update" not in refusal_text(raised.value, "notes_tool")
    assert raised.value.reason == "too_large"


async def test_the_model_text_of_a_refusal_names_the_tool_it_is_given() -> None:
    handle = await scratchpad().open(MemoryStorage(), thread_id="t1")
    with pytest.raises(ScratchpadUpdateError) as raised:
        await handle.call("update", "[1]")
    assert "scratchpad/update" in refusal_text(raised.value, "scratchpad/update")


async def test_events_name_the_kind_of_scope() -> None:
    """A thread and a resource may share an id: the events say which one they are about."""
    bus = EventBus()
    backend = MemoryStorage()
    with capture_events(bus) as events:
        thread = await scratchpad().open(backend, thread_id="u1", events=bus)
        resource = await scratchpad(scope="resource").open(
            backend, thread_id="t9", resource_id="u1", events=bus
        )
        await thread.update({"a": 1})
        await resource.update({"b": 1})
    assert [(event.scope, event.scope_key) for event in events] == [
        ("thread", "u1"),
        ("resource", "u1"),
    ]


async def test_a_resource_scoped_scratchpad_opens_with_the_resource_id_alone() -> None:
    """``open(backend, resource_id="alice")``: no thread id to make up; the handle is the
    resource's, and a handle opened with a thread as well sees the same notes."""
    backend = MemoryStorage()
    layer = scratchpad(scope="resource")
    handle = await layer.open(backend, resource_id="alice")
    assert (handle.scope, handle.scope_key) == ("resource", "alice")
    await handle.update({"goal": "ship"})
    assert await backend.get(state_key("scratchpad", "resource", "alice")) == {"goal": "ship"}
    with_thread = await layer.open(backend, thread_id="t1", resource_id="alice")
    assert with_thread.snapshot == {"goal": "ship"}


@pytest.mark.parametrize(
    ("scope", "given", "message"),
    [
        ("thread", {}, "open() of a thread-scoped scratchpad needs thread_id"),
        (
            "thread",
            {"resource_id": "alice"},
            "open() of a thread-scoped scratchpad needs thread_id",
        ),
        ("resource", {}, "open() of a resource-scoped scratchpad needs resource_id or thread_id"),
    ],
)
async def test_open_without_the_id_its_scope_needs_says_which(
    scope: str, given: dict[str, str], message: str
) -> None:
    with pytest.raises(ScratchpadConfigError, match=re.escape(message)):
        await scratchpad(scope=scope).open(MemoryStorage(), **given)  # type: ignore[arg-type]
