"""The events of SPEC.md section 3 and the EventBus that delivers them."""

from __future__ import annotations

import contextlib
import logging
import time
from typing import Any

import anyio
import pydantic
import pytest

from noetic_scratchpad import (
    Agent,
    AgentHarness,
    ScriptedModel,
    open_storage,
    scratchpad,
)
from noetic_scratchpad._models import unvalidated
from noetic_scratchpad.events import (
    CLOSE_GRACE,
    EventBus,
    EventHandler,
    ScratchpadEvent,
    StateDiscarded,
    UpdateApplied,
    UpdateRejected,
    UpdateRetried,
    ViewTruncated,
)


def bus_records(caplog: pytest.LogCaptureFixture, start: str = "") -> list[logging.LogRecord]:
    """The records of ``noetic_scratchpad.events`` whose message starts with ``start``."""
    return [
        record
        for record in caplog.records
        if record.name == "noetic_scratchpad.events" and record.getMessage().startswith(start)
    ]


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
async def test_a_write_builds_no_update_applied_when_nothing_listens(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``UpdateApplied`` is never logged, so a write builds it only when a handler or a
    stream is there to receive it; from the first subscriber on, every write reports."""
    from noetic_scratchpad.layer import writer

    built: list[UpdateApplied] = []

    def counting(*args: Any) -> Any:
        built.append(unvalidated(*args))
        return built[-1]

    monkeypatch.setattr(writer, "unvalidated", counting)
    layer = scratchpad()
    events = EventBus()
    handle = await layer.open(await open_storage("memory://"), thread_id="t1", events=events)
    await handle.update({"goal": "ship"})
    assert built == []

    received: list[ScratchpadEvent] = []
    unsubscribe = events.subscribe(received.append)
    await handle.update({"goal": "ship it"})
    async with events.stream() as stream:
        unsubscribe()
        await handle.update({"turn": 2})
        streamed = await stream.receive()

    assert [event.revision for event in built] == [2, 3]
    assert received == built[:1]
    assert streamed == built[1]
    assert handle.revision == 3


def test_repeated_call_ids_are_told_apart_by_typed_events(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A new call under a reused id is an ``UpdateApplied`` that says so (default: not
    reused); a retry is an ``UpdateRetried``, immutable, logged at info with its fields."""
    caplog.set_level(logging.DEBUG, logger="noetic_scratchpad")
    applied = UpdateApplied(layer_id="s", scope_key="t", source="tool", keys=("a",))
    reused = UpdateApplied(
        layer_id="s", scope_key="t", source="store", keys=("b",), call_id="c", reused_call_id=True
    )
    retried = UpdateRetried(
        layer_id="s", scope_key="t", source="tool", keys=("a",), call_id="c", revision=3
    )
    assert (applied.reused_call_id, reused.reused_call_id) == (False, True)
    assert (retried.kind, retried.call_id, retried.revision) == ("update_retried", "c", 3)
    with pytest.raises(pydantic.ValidationError):
        retried.revision = 4  # type: ignore[misc]
    with pytest.raises(pydantic.ValidationError):
        UpdateRetried(layer_id="s", scope_key="t", source="tool", keys=())  # type: ignore[call-arg]

    bus = EventBus()
    for event in (applied, reused, retried):
        bus.emit(event)

    assert [(r.levelname, r.getMessage()) for r in bus_records(caplog)] == [
        (
            "INFO",
            "update_retried layer_id=s scope_key=t source=tool keys=a call_id=c revision=3",
        )
    ]


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
async def test_failing_handlers_are_logged_and_do_not_break_anything(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A raising sync or async handler is logged as an error naming it, with the traceback;
    emit returns and other handlers still run."""
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

    bus.emit(event)
    await bus.drain()

    assert seen == ["update_applied"]
    failures = bus_records(caplog, "event handler failed")
    assert [record.levelname for record in failures] == ["ERROR", "ERROR"]
    assert ".broken_sync kind=update_applied" in failures[0].getMessage()
    assert failures[1].getMessage().endswith(".broken_async")
    assert all(record.exc_info is not None for record in failures)


@pytest.mark.asyncio
async def test_hanging_async_handler_does_not_block_emit_and_is_cut_by_timeout(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A handler that never returns holds nothing up and is cancelled at ``handler_timeout``."""
    bus = EventBus(handler_timeout=0.05)
    cancelled = anyio.Event()

    async def hang(event: ScratchpadEvent) -> None:
        try:
            await anyio.sleep_forever()
        finally:
            cancelled.set()

    bus.subscribe(hang)
    started = time.perf_counter()
    bus.emit(sample_events()[0])
    emit_seconds = time.perf_counter() - started
    with anyio.fail_after(5):
        await bus.drain()

    assert emit_seconds < 0.05
    assert cancelled.is_set()
    timeouts = bus_records(caplog, "event handler timed out")
    assert [record.levelname for record in timeouts] == ["ERROR"]
    assert timeouts[0].getMessage().endswith(".hang timeout=0.05")


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
async def test_stream_drops_newest_events_past_its_buffer_with_a_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A consumer that falls behind loses the newest events; emit never waits for it."""
    bus = EventBus()
    first, second, third, _ = sample_events()

    async with bus.stream(max_buffer=2) as stream:
        for event in (first, second, third):
            bus.emit(event)
        received = [await stream.receive(), await stream.receive()]

    assert received == [first, second]
    dropped = bus_records(caplog, "event stream full; event dropped")
    assert [(r.levelname, r.getMessage()) for r in dropped] == [
        ("WARNING", "event stream full; event dropped kind=state_discarded")
    ]


def test_diagnostics_are_logged_through_stdlib_logging_and_routine_ones_are_not(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Rejections and discards are warnings of logger ``noetic_scratchpad.events``; a cut view
    is routine (every turn over budget) and only info; applied updates are not logged."""
    caplog.set_level(logging.DEBUG, logger="noetic_scratchpad")
    bus = EventBus()
    for event in sample_events():
        bus.emit(event)

    logged = [(r.levelname, r.getMessage()) for r in bus_records(caplog)]
    assert logged == [
        (
            "WARNING",
            "update_rejected layer_id=scratchpad scope_key=t1 hook=store reason=schema "
            "message=bad errors=goal:string_type",
        ),
        ("WARNING", 'state_discarded layer_id=scratchpad scope_key=u7 reason="not an object"'),
        (
            "INFO",
            "view_truncated layer_id=scratchpad scope_key=t1 budget=10 total_tokens=30 "
            "omitted_tokens=25",
        ),
    ]


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


def test_emit_without_a_running_loop_never_raises(caplog: pytest.LogCaptureFixture) -> None:
    """Emitting from sync code (no event loop) skips async handlers with a log line, closes
    their coroutines (no "never awaited" warning) and still calls sync handlers."""
    bus, seen = bus_with_async_and_sync_handlers()

    bus.emit(sample_events()[0])

    assert seen == ["sync"]
    assert [(r.levelname, r.getMessage().split(" handler=")[0]) for r in bus_records(caplog)] == [
        ("ERROR", "async event handler skipped: no event loop runs in this thread")
    ]
    assert not bus._running


@pytest.mark.asyncio
async def test_emit_from_another_thread_never_raises() -> None:
    """A worker thread (no loop of its own) may emit; drain does not wait for skipped work."""
    bus, seen = bus_with_async_and_sync_handlers()

    await anyio.to_thread.run_sync(bus.emit, sample_events()[0])
    with anyio.fail_after(1):
        await bus.drain()

    assert seen == ["sync"]


# -- closing: bounded even when a handler ignores its cancellation (asyncio and trio) --------

TIMEOUT = 0.3  # handler_timeout of the closing tests


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    """The ``pytest.mark.anyio`` tests below run under asyncio and under trio."""
    backend: str = request.param
    return backend


class Stubborn:
    """An async subscriber that ignores its cancellation until ``release()``.

    ``how`` is ``"swallow"`` (catches every cancellation and awaits again) or ``"shield"``
    (waits in a shielded cancel scope). ``release`` lets it end, so the test's event loop can
    shut down (asyncio's and trio's runners wait for every task at exit).
    """

    def __init__(self, how: str) -> None:
        self.started = anyio.Event()
        self.done = anyio.Event()
        self._released = anyio.Event()
        self.handler: EventHandler = self._swallowing if how == "swallow" else self._shielded

    async def _swallowing(self, event: ScratchpadEvent) -> None:
        self.started.set()
        try:
            while not self._released.is_set():
                # the bug under test: every cancellation swallowed
                with contextlib.suppress(BaseException):
                    await anyio.sleep(0.01)
        finally:
            self.done.set()

    async def _shielded(self, event: ScratchpadEvent) -> None:
        self.started.set()
        try:
            with anyio.CancelScope(shield=True):
                await self._released.wait()
        finally:
            self.done.set()

    async def release(self) -> None:
        self._released.set()
        with anyio.fail_after(5):
            await self.done.wait()


@pytest.mark.anyio
@pytest.mark.parametrize("how", ["swallow", "shield"])
async def test_aclose_is_bounded_by_handler_timeout_even_if_a_handler_ignores_cancellation(
    how: str, caplog: pytest.LogCaptureFixture
) -> None:
    """``aclose`` waits at most ``handler_timeout`` + ``CLOSE_GRACE`` for a handler that
    swallows or shields its cancellation, then cancels it, stops waiting and logs an error
    naming it. A second ``aclose`` returns at once."""
    bus = EventBus(handler_timeout=TIMEOUT)
    stubborn = Stubborn(how)
    bus.subscribe(stubborn.handler)
    bus.emit(sample_events()[0])
    await stubborn.started.wait()
    try:
        started = time.perf_counter()
        with anyio.fail_after(TIMEOUT + 3):  # a regression fails here instead of hanging
            await bus.aclose()
        elapsed = time.perf_counter() - started
        with anyio.fail_after(1):
            await bus.aclose()
            await bus.drain()
    finally:
        await stubborn.release()

    assert TIMEOUT <= elapsed < TIMEOUT + CLOSE_GRACE + 0.5
    assert bus.closed
    (abandoned,) = bus_records(caplog, "event bus closed; abandoned")
    assert abandoned.levelname == "ERROR"
    assert abandoned.getMessage().endswith(f"Stubborn._{how}{'ing' if how == 'swallow' else 'ed'}")


@pytest.mark.anyio
async def test_drain_is_bounded_too_and_logs_the_stuck_handler_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """``drain`` never hangs either: it stops waiting for a handler past its timeout and
    grace (an error names it, once), and still waits for a well-behaved one."""
    bus = EventBus(handler_timeout=TIMEOUT)
    stubborn = Stubborn("swallow")
    finished: list[str] = []

    async def slow_but_fine(event: ScratchpadEvent) -> None:
        await anyio.sleep(TIMEOUT / 2)
        finished.append(event.kind)

    bus.subscribe(stubborn.handler)
    bus.subscribe(slow_but_fine)
    bus.emit(sample_events()[0])
    try:
        with anyio.fail_after(TIMEOUT + 3):
            await bus.drain()
            await bus.drain()
    finally:
        await stubborn.release()

    assert finished == ["update_applied"]
    stuck = bus_records(caplog, "event handler ignored its cancellation")
    assert len(stuck) == 1
    assert "Stubborn._swallowing" in stuck[0].getMessage()


@pytest.mark.anyio
async def test_aclose_waits_for_well_behaved_handlers_and_cancels_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Handlers that finish in time are awaited by ``aclose``, not cut short."""
    bus = EventBus(handler_timeout=5)
    finished: list[str] = []

    async def slow(event: ScratchpadEvent) -> None:
        await anyio.sleep(0.05)
        finished.append(event.kind)

    bus.subscribe(slow)
    for event in sample_events():
        bus.emit(event)
    with anyio.fail_after(2):
        await bus.aclose()

    assert sorted(finished) == sorted(event.kind for event in sample_events())
    assert bus_records(caplog, "event bus closed") == []


@pytest.mark.anyio
async def test_stream_ends_when_the_bus_closes() -> None:
    """A consumer iterating ``bus.stream()`` gets the events sent so far and its loop ends
    when the bus closes; a stream opened on a closed bus ends at once."""
    bus = EventBus()
    events = sample_events()
    received: list[ScratchpadEvent] = []
    ended = anyio.Event()
    opened = anyio.Event()

    async def consume() -> None:
        async with bus.stream() as stream:
            opened.set()
            async for event in stream:
                received.append(event)
        ended.set()

    with anyio.fail_after(3):
        async with anyio.create_task_group() as tg:
            tg.start_soon(consume)
            await opened.wait()
            for event in events:
                bus.emit(event)
            await bus.aclose()
    assert ended.is_set()
    assert received == events  # what was buffered is still delivered, then the loop ends

    with anyio.fail_after(1):
        async with bus.stream() as late:
            assert [event async for event in late] == []


@pytest.mark.anyio
async def test_emit_after_aclose_logs_and_calls_sync_handlers_but_starts_no_task(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """After ``aclose`` the event is still logged and sync handlers still run inline, but no
    async handler starts (nothing would bound it any more): its coroutine is closed unawaited
    (no "never awaited" warning) and the skip is logged at debug level."""
    caplog.set_level(logging.DEBUG, logger="noetic_scratchpad")
    bus, seen = bus_with_async_and_sync_handlers()
    await bus.aclose()

    bus.emit(sample_events()[1])
    await anyio.sleep(0.05)

    assert seen == ["sync"]
    assert not bus._running
    assert [r.levelname for r in bus_records(caplog, "update_rejected")] == ["WARNING"]
    (skipped,) = bus_records(caplog, "async event handler skipped: the bus is closed")
    assert skipped.levelname == "DEBUG"


def harness_with(events: EventBus | None = None) -> AgentHarness:
    return AgentHarness(
        "h", Agent(model=ScriptedModel([])), {}, [scratchpad()], "memory://", events=events
    )


@pytest.mark.anyio
@pytest.mark.parametrize("how", ["swallow", "shield"])
async def test_harness_aclose_returns_despite_a_subscriber_that_ignores_cancellation(
    how: str,
) -> None:
    """``harness.aclose()`` closes the harness's own bus, bounded by its handler_timeout: a
    stuck subscriber cannot hang it, and the harness's streams end."""
    harness = harness_with()
    harness.events.handler_timeout = TIMEOUT
    stubborn = Stubborn(how)
    harness.events.subscribe(stubborn.handler)
    ended = anyio.Event()

    async def consume() -> None:
        async with harness.events.stream() as stream:
            async for _ in stream:
                pass
        ended.set()

    try:
        with anyio.fail_after(TIMEOUT + 3):
            async with anyio.create_task_group() as tg:
                tg.start_soon(consume)
                await harness.update_state("scratchpad", {"a": 1}, thread_id="t")
                await stubborn.started.wait()
                await harness.aclose()
    finally:
        await stubborn.release()

    assert ended.is_set()
    assert harness.events.closed


@pytest.mark.anyio
async def test_harness_aclose_only_drains_a_bus_passed_in() -> None:
    """A bus passed to the harness belongs to the caller: ``aclose`` drains it (bounded too)
    but leaves it open, so its async subscribers keep working."""
    bus = EventBus(handler_timeout=TIMEOUT)
    harness = harness_with(bus)
    stubborn = Stubborn("swallow")
    unsubscribe = bus.subscribe(stubborn.handler)
    try:
        with anyio.fail_after(TIMEOUT + 3):
            await harness.update_state("scratchpad", {"a": 1}, thread_id="t")
            await harness.aclose()
    finally:
        await stubborn.release()
    unsubscribe()

    seen: list[str] = []

    async def record(event: ScratchpadEvent) -> None:
        seen.append(event.kind)

    bus.subscribe(record)
    bus.emit(sample_events()[0])
    with anyio.fail_after(2):
        await bus.drain()
    assert not bus.closed
    assert seen == ["update_applied"]
