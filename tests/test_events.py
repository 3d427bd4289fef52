"""The events of SPEC.md section 3 and the EventBus that delivers them."""

from __future__ import annotations

import time

import anyio
import pydantic
import pytest
from structlog.testing import capture_logs

from noetic_scratchpad.events import (
    EventBus,
    ScratchpadEvent,
    StateDiscarded,
    UpdateApplied,
    UpdateRejected,
    ViewTruncated,
)


def sample_events() -> list[ScratchpadEvent]:
    return [
        UpdateApplied(layer_id="scratchpad", scope_key="t1", source="tool", keys=("goal",)),
        UpdateRejected(
            layer_id="scratchpad",
            scope_key="t1",
            hook="store",
            reason="schema",
            message="bad",
            errors=({"type": "string_type", "loc": ["goal"]},),
        ),
        StateDiscarded(layer_id="scratchpad", scope_key="u7", reason="not an object"),
        ViewTruncated(
            layer_id="scratchpad", scope_key="t1", budget=10, total_tokens=30, omitted_tokens=25
        ),
    ]


def test_every_event_has_layer_id_scope_key_and_kind() -> None:
    """Each kind carries layer_id, scope_key, a kind name and a timestamp."""
    before = time.time()
    events = sample_events()

    assert [(e.kind, e.layer_id, e.scope_key) for e in events] == [
        ("update_applied", "scratchpad", "t1"),
        ("update_rejected", "scratchpad", "t1"),
        ("state_discarded", "scratchpad", "u7"),
        ("view_truncated", "scratchpad", "t1"),
    ]
    assert all(before <= e.at <= time.time() for e in events)


def test_event_fields() -> None:
    """The fields SPEC.md names exist with the values given."""
    applied, rejected, discarded, truncated = sample_events()

    assert isinstance(applied, UpdateApplied)
    assert (applied.source, applied.keys) == ("tool", ("goal",))
    assert isinstance(rejected, UpdateRejected)
    assert (rejected.hook, rejected.reason, rejected.message) == ("store", "schema", "bad")
    assert rejected.errors == ({"type": "string_type", "loc": ["goal"]},)
    assert isinstance(discarded, StateDiscarded)
    assert discarded.reason == "not an object"
    assert isinstance(truncated, ViewTruncated)
    assert (truncated.budget, truncated.total_tokens, truncated.omitted_tokens) == (10, 30, 25)


def test_sources_are_checked() -> None:
    """``source``/``hook`` accept only tool, store and api; unknown fields are refused."""
    with pytest.raises(pydantic.ValidationError):
        UpdateApplied(layer_id="s", scope_key="t", source="cron", keys=())  # type: ignore[arg-type]
    with pytest.raises(pydantic.ValidationError):
        UpdateApplied(layer_id="s", scope_key="t", source="api", keys=(), extra=1)  # type: ignore[call-arg]


def test_events_are_immutable() -> None:
    """Assigning to an event's field raises; the event keeps its value."""
    event = sample_events()[0]
    with pytest.raises(pydantic.ValidationError):
        event.scope_key = "other"  # type: ignore[misc]
    assert event.scope_key == "t1"


@pytest.mark.asyncio
async def test_subscribe_returns_an_unsubscriber() -> None:
    """A handler sees events until its unsubscriber is called; calling it twice is harmless."""
    bus = EventBus()
    seen: list[ScratchpadEvent] = []
    unsubscribe = bus.subscribe(seen.append)
    first, second, *_ = sample_events()

    bus.emit(first)
    unsubscribe()
    bus.emit(second)
    unsubscribe()

    assert seen == [first]


@pytest.mark.asyncio
async def test_sync_and_async_handlers_are_both_called() -> None:
    """A sync handler runs inline; an async one runs in the background and ``drain`` waits."""
    bus = EventBus()
    sync_seen: list[str] = []
    async_seen: list[str] = []

    async def slow(event: ScratchpadEvent) -> None:
        await anyio.sleep(0.01)
        async_seen.append(event.kind)

    bus.subscribe(lambda event: sync_seen.append(event.kind))
    bus.subscribe(slow)
    for event in sample_events():
        bus.emit(event)

    assert sync_seen == ["update_applied", "update_rejected", "state_discarded", "view_truncated"]
    assert async_seen == []
    await bus.drain()
    assert sorted(async_seen) == sorted(sync_seen)


@pytest.mark.asyncio
async def test_failing_handlers_are_logged_and_do_not_break_anything() -> None:
    """A raising sync or async handler is logged; emit returns and other handlers still run."""
    bus = EventBus()
    seen: list[str] = []

    def broken_sync(event: ScratchpadEvent) -> None:
        raise RuntimeError("sync boom")

    async def broken_async(event: ScratchpadEvent) -> None:
        raise RuntimeError("async boom")

    bus.subscribe(broken_sync)
    bus.subscribe(broken_async)
    bus.subscribe(lambda event: seen.append(event.kind))
    event = sample_events()[0]

    with capture_logs() as logs:
        bus.emit(event)
        await bus.drain()

    assert seen == ["update_applied"]
    failures = [log for log in logs if log["event"] == "event handler failed"]
    assert [log["log_level"] for log in failures] == ["error", "error"]
    assert {repr(broken_sync), repr(broken_async)} == {log["handler"] for log in failures}
    assert all(log["exc_info"] is True for log in failures)


@pytest.mark.asyncio
async def test_hanging_async_handler_does_not_block_emit_and_is_cut_by_timeout() -> None:
    """A handler that never returns holds nothing up and is cancelled at ``handler_timeout``."""
    bus = EventBus(handler_timeout=0.05)
    cancelled = anyio.Event()

    async def hang(event: ScratchpadEvent) -> None:
        try:
            await anyio.sleep_forever()
        finally:
            cancelled.set()

    bus.subscribe(hang)
    with capture_logs() as logs:
        started = time.perf_counter()
        bus.emit(sample_events()[0])
        emit_seconds = time.perf_counter() - started
        with anyio.fail_after(5):
            await bus.drain()

    assert emit_seconds < 0.05
    assert cancelled.is_set()
    timeouts = [log for log in logs if log["event"] == "event handler timed out"]
    assert [(log["log_level"], log["timeout"]) for log in timeouts] == [("error", 0.05)]


@pytest.mark.asyncio
async def test_stream_yields_events_in_order() -> None:
    """``async with bus.stream()`` iterates over the events emitted after it opened, in order."""
    bus = EventBus()
    events = sample_events() * 3
    received: list[ScratchpadEvent] = []

    async with bus.stream() as stream:
        for event in events:
            bus.emit(event)
        async for event in stream:
            received.append(event)
            if len(received) == len(events):
                break

    assert received == events
    bus.emit(events[0])  # the stream's subscription is gone: nothing to fail


@pytest.mark.asyncio
async def test_stream_drops_newest_events_past_its_buffer_with_a_log() -> None:
    """A consumer that falls behind loses the newest events; emit never waits for it."""
    bus = EventBus()
    first, second, third, _ = sample_events()

    with capture_logs() as logs:
        async with bus.stream(max_buffer=2) as stream:
            for event in (first, second, third):
                bus.emit(event)
            received = [await stream.receive(), await stream.receive()]

    assert received == [first, second]
    assert [log["kind"] for log in logs if log["event"] == "event stream full; event dropped"] == [
        "state_discarded"
    ]


def test_diagnostics_are_logged_through_structlog_and_routine_ones_are_not() -> None:
    """Rejections, discards and truncations are warnings in the log; applied updates are not."""
    bus = EventBus()
    with capture_logs() as logs:
        for event in sample_events():
            bus.emit(event)

    logged = [(log["event"], log["log_level"], log["layer_id"], log["scope_key"]) for log in logs]
    assert logged == [
        ("update_rejected", "warning", "scratchpad", "t1"),
        ("state_discarded", "warning", "scratchpad", "u7"),
        ("view_truncated", "warning", "scratchpad", "t1"),
    ]
    assert logs[0]["reason"] == "schema"
    assert logs[2]["omitted_tokens"] == 25


@pytest.mark.asyncio
async def test_drain_returns_at_once_when_nothing_is_pending() -> None:
    """``drain`` with no async handler in flight does not wait."""
    with anyio.fail_after(1):
        await EventBus().drain()


def bus_with_async_and_sync_handlers() -> tuple[EventBus, list[str]]:
    """A bus with one async and one sync subscriber, each noting in ``seen`` that it ran."""
    bus = EventBus()
    seen: list[str] = []

    async def async_handler(event: ScratchpadEvent) -> None:
        seen.append("async")

    bus.subscribe(async_handler)
    bus.subscribe(lambda event: seen.append("sync"))
    return bus, seen


def test_emit_without_a_running_loop_never_raises() -> None:
    """Emitting from sync code (no event loop) skips async handlers with a log line, closes
    their coroutines (no "never awaited" warning) and still calls sync handlers."""
    bus, seen = bus_with_async_and_sync_handlers()

    with capture_logs() as logs:
        bus.emit(sample_events()[0])

    assert seen == ["sync"]
    assert [(log["event"], log["log_level"]) for log in logs] == [
        ("async event handler skipped: no event loop runs in this thread", "error")
    ]
    assert bus._pending == 0


@pytest.mark.asyncio
async def test_emit_from_another_thread_never_raises() -> None:
    """A worker thread (no loop of its own) may emit; drain does not wait for skipped work."""
    bus, seen = bus_with_async_and_sync_handlers()

    await anyio.to_thread.run_sync(bus.emit, sample_events()[0])
    with anyio.fail_after(1):
        await bus.drain()

    assert seen == ["sync"]
