"""The pure parts and the layer hooks over memory storage also run under trio (SPEC.md §3)."""

from __future__ import annotations

import json

import anyio
import pytest
import trio
from pydantic import BaseModel

from noetic_scratchpad import (
    EventBus,
    ExecutionContext,
    ScratchpadEvent,
    ScratchpadValidationError,
    UpdateApplied,
    UpdateRejected,
    ViewTruncated,
    scratchpad,
)
from noetic_scratchpad.items import FunctionCall, Message
from noetic_scratchpad.merge import merge_state
from noetic_scratchpad.render import render_view
from noetic_scratchpad.schema import SchemaGate
from noetic_scratchpad.testing import capture_events

from .conftest import Bind

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "trio"


class TaskNotes(BaseModel):
    currentGoal: str
    completedSteps: list[str]
    blockers: list[str]


async def test_runs_on_trio() -> None:
    """These tests really run on trio, not on asyncio."""
    assert trio.lowlevel.current_root_task() is not None
    assert anyio.get_current_task().name


async def test_merge_gate_and_render_under_trio() -> None:
    """Merge, gate and render give the same results inside a trio task."""
    merged = merge_state("notes", {"a": {"b": 1}, "__proto__": 1})
    gate = SchemaGate(TaskNotes)
    view = render_view(merged, 1000)

    assert merged == {"a": {"b": 1}, "_previous": "notes"}
    assert gate.errors({"currentGoal": "g"}) == []
    assert [e["type"] for e in gate.errors({"currentGoal": 1})] == ["string_type"]
    assert view.text == "<scratchpad>\n" + json.dumps(merged, indent=2) + "\n</scratchpad>"


async def test_hooks_over_memory_storage_under_trio(bind: Bind) -> None:
    """init, update, store, recall and on_spawn work under trio with events on the bus."""
    layer = scratchpad(schema=TaskNotes, scope="resource")
    scope = await bind(layer, thread_id="t1", resource_id="u1")

    with capture_events(scope.ctx.events) as events:
        await scope.handle.update({"currentGoal": "g", "completedSteps": []})
        stored = await layer.hooks.store(
            new_items=[
                FunctionCall(call_id="c1", name="scratchpad/update", arguments='{"blockers": []}'),
                FunctionCall(call_id="c2", name="scratchpad/update", arguments='{"blockers": 1}'),
            ],
            state=scope.handle.state,
            ctx=scope.ctx,
        )
        with pytest.raises(ScratchpadValidationError):
            await scope.handle.update({"completedSteps": "x"})
        recall = await layer.hooks.recall(state=scope.handle.state, budget=1500, ctx=scope.ctx)
        spawn = await layer.hooks.on_spawn(parent_state=scope.handle.state, child_ctx=scope.ctx)

    expected = {"currentGoal": "g", "completedSteps": [], "blockers": []}
    assert stored is not None
    assert stored.state == expected
    assert await scope.stored() == expected
    assert spawn is not None
    assert spawn.child_state == expected
    assert recall is not None
    assert recall.items == [
        Message(
            role="developer",
            content="<scratchpad>\n" + json.dumps(expected, indent=2) + "\n</scratchpad>",
        )
    ]
    assert [type(e) for e in events] == [
        UpdateApplied,
        UpdateApplied,
        UpdateRejected,
        UpdateRejected,
    ]
    assert [getattr(e, "reason", None) for e in events.of(UpdateRejected)] == ["schema", "schema"]


async def test_concurrent_updates_under_trio_lose_nothing(bind: Bind) -> None:
    """Many trio tasks updating one scope keep every key."""
    scope = await bind(scratchpad())

    async with anyio.create_task_group() as group:
        for index in range(50):
            group.start_soon(scope.handle.update, {f"k{index}": index})

    assert await scope.stored() == {f"k{index}": index for index in range(50)}


async def test_async_event_handler_under_trio() -> None:
    """An async subscriber runs under trio, a failing one is contained, drain waits for both,
    and a hanging one is cut by the timeout."""
    bus = EventBus(handler_timeout=0.05)
    seen: list[str] = []

    async def record(event: ScratchpadEvent) -> None:
        await trio.lowlevel.checkpoint()
        seen.append(event.kind)

    async def broken(event: ScratchpadEvent) -> None:
        raise RuntimeError("boom")

    async def hang(event: ScratchpadEvent) -> None:
        await trio.sleep_forever()

    for handler in (record, broken, hang):
        bus.subscribe(handler)
    ctx = ExecutionContext(thread_id="t1", events=bus)
    await scratchpad().hooks.store(
        new_items=[FunctionCall(call_id="c", name="scratchpad/update", arguments='{"a": 1}')],
        state="",
        ctx=ctx,
    )

    with anyio.fail_after(5):
        await bus.drain()
    assert seen == ["update_applied"]


async def test_event_stream_under_trio() -> None:
    """``bus.stream()`` iterates events in order under trio."""
    bus = EventBus()
    ctx = ExecutionContext(thread_id="t1", events=bus)
    layer = scratchpad()
    received: list[tuple[str, ...]] = []

    async with bus.stream() as stream:
        for index in range(3):
            await layer.hooks.store(
                new_items=[
                    FunctionCall(
                        call_id=f"c{index}",
                        name="scratchpad/update",
                        arguments=json.dumps({f"k{index}": index}),
                    )
                ],
                state="",
                ctx=ctx,
            )
        async for event in stream:
            assert isinstance(event, UpdateApplied)
            received.append(event.keys)
            if len(received) == 3:
                break

    assert received == [("k0",), ("k1",), ("k2",)]


async def test_recall_cut_under_trio() -> None:
    """A recall over budget is cut within budget and reported under trio as well."""
    ctx = ExecutionContext(thread_id="t1")
    state = {"log": [f"entry {index}" for index in range(200)]}

    with capture_events(ctx.events) as events:
        result = await scratchpad().hooks.recall(state=state, budget=100, ctx=ctx)

    assert result is not None
    assert result.token_count <= 100
    [truncated] = events.of(ViewTruncated)
    assert truncated.omitted_tokens > 0
