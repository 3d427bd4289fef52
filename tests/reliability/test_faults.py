"""Fault injection at the layer: backends that raise or stall in the middle of a write, and
event subscribers that raise or hang. Nothing stored may be lost or changed by a failed
write, every failure surfaces as an error and an ``UpdateRejected`` event, and the layer
keeps working once the fault is gone.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from noetic_scratchpad import (
    EventBus,
    ExecutionContext,
    ScopedStorage,
    ScratchpadHandle,
    ScratchpadLayer,
    StorageBusyError,
    StorageError,
    StorageOutcomeUnknownError,
    UpdateApplied,
    UpdateRejected,
    open_storage,
    scratchpad,
)
from noetic_scratchpad.items import FunctionCall
from noetic_scratchpad.storage import MemoryStorage, StorageBackend
from noetic_scratchpad.testing import FaultyStorage, InjectedFault, capture_events

from .helpers import write_lock_held

STATE_KEY = "scopes/scratchpad/thread/t1/state"
PRIOR = {"goal": "ship the release", "steps": ["write tests"], "notes": {"owner": "ana"}}


async def bind(
    layer: ScratchpadLayer, backend: StorageBackend, *, bus: EventBus | None = None
) -> tuple[ExecutionContext, ScratchpadHandle]:
    """Run the layer's init for thread ``t1`` on ``backend`` and return the bound handle."""
    ctx = ExecutionContext(thread_id="t1", events=bus or EventBus())
    scoped = ScopedStorage.for_layer(backend, layer, ctx)
    await layer.hooks.init(storage=scoped, scope_key=scoped.scope_key, ctx=ctx)
    handle = ctx.context[layer.id]
    assert isinstance(handle, ScratchpadHandle)
    return ctx, handle


@pytest.fixture
def faulty(storage: StorageBackend) -> FaultyStorage:
    """Every backend behind a fault injector that is healthy until a test arms it."""
    return FaultyStorage(storage)


# -- a backend that raises in the middle of a write ------------------------------------------


@pytest.mark.asyncio
async def test_update_failing_mid_write_keeps_prior_state(faulty: FaultyStorage) -> None:
    """A write whose transaction breaks after the new state was computed raises
    ``StorageError`` (caused by the backend's error), emits one ``UpdateRejected`` with reason
    ``storage``, and leaves both the stored state and the handle's state exactly as they were.
    Once the backend is healthy again the next write lands on the intact prior state."""
    _, handle = await bind(scratchpad(), faulty)
    await handle.update(PRIOR)
    faulty.fail_on = {"commit"}

    with capture_events(handle.ctx.events) as events, pytest.raises(StorageError) as info:
        await handle.update({"goal": "abandon", "notes": {"owner": "bob"}})

    assert info.value.__cause__ is faulty.error
    assert isinstance(faulty.error, InjectedFault)
    assert faulty.injected == 1
    assert events.of(UpdateApplied) == []
    [rejected] = events.of(UpdateRejected)
    assert (rejected.hook, rejected.reason, rejected.scope_key) == ("api", "storage", "t1")
    assert "injected I/O error" in rejected.message
    assert await faulty.inner.get(STATE_KEY) == PRIOR
    assert handle.snapshot == PRIOR

    faulty.heal()
    await handle.update({"steps": ["write tests", "fix bugs"]})
    assert handle.snapshot == {
        **PRIOR,
        "steps": ["write tests", "fix bugs"],
    }
    assert await faulty.inner.get(STATE_KEY) == {**PRIOR, "steps": ["write tests", "fix bugs"]}


@pytest.mark.asyncio
async def test_write_whose_commit_went_unconfirmed_says_it_may_have_landed(
    faulty: FaultyStorage,
) -> None:
    """When the backend lost contact during the commit (``StorageOutcomeUnknownError``),
    the error reaches the caller as it is and ``UpdateRejected`` says ``unconfirmed``: the
    update may have been saved, not that the state is unchanged."""
    _, handle = await bind(scratchpad(), faulty)
    await handle.update(PRIOR)
    faulty.error = StorageOutcomeUnknownError("connection lost during COMMIT")
    faulty.fail_on = {"commit"}

    with capture_events(handle.ctx.events) as events, pytest.raises(StorageOutcomeUnknownError):
        await handle.update({"goal": "maybe"})

    [rejected] = events.of(UpdateRejected)
    assert (rejected.hook, rejected.reason) == ("api", "unconfirmed")
    assert "may or may not have been saved" in rejected.message
    assert "connection lost during COMMIT" in rejected.message
    assert "unchanged" not in rejected.message


@pytest.mark.asyncio
async def test_tool_call_failing_mid_write_reports_the_call(faulty: FaultyStorage) -> None:
    """On the tool path a broken write raises ``StorageError`` and its ``UpdateRejected``
    carries ``hook="tool"`` and the call id, so the runtime can answer that call with an
    error output; the stored state is untouched."""
    ctx, handle = await bind(scratchpad(), faulty)
    await handle.update(PRIOR)
    faulty.fail_on = {"commit"}

    with capture_events(ctx.events) as events, pytest.raises(StorageError):
        await handle.call("update", '{"goal": "other"}', call_id="call-1")

    [rejected] = events.of(UpdateRejected)
    assert (rejected.hook, rejected.reason, rejected.call_id) == ("tool", "storage", "call-1")
    assert await faulty.inner.get(STATE_KEY) == PRIOR


@pytest.mark.asyncio
async def test_store_hook_survives_a_broken_write(faulty: FaultyStorage) -> None:
    """The store hook never raises for a storage failure: the call whose write broke is
    reported (reason ``storage``, hook ``store``) and skipped, and the next call in the same
    response is still applied on top of the intact prior state."""
    layer = scratchpad()
    ctx, handle = await bind(layer, faulty)
    await handle.update(PRIOR)
    faulty.fail_on = {"commit"}
    faulty.faults_left = 1
    calls = [
        FunctionCall(call_id="c1", name="scratchpad/update", arguments='{"goal": "lost"}'),
        FunctionCall(call_id="c2", name="scratchpad/update", arguments='{"steps": ["ok"]}'),
    ]

    with capture_events(ctx.events) as events:
        result = await layer.hooks.store(new_items=calls, state=handle.state, ctx=ctx)

    assert result is not None
    assert result.state == {**PRIOR, "steps": ["ok"]}
    assert await faulty.inner.get(STATE_KEY) == {**PRIOR, "steps": ["ok"]}
    [rejected] = events.of(UpdateRejected)
    assert (rejected.hook, rejected.reason, rejected.call_id) == ("store", "storage", "c1")
    assert [(e.source, e.call_id) for e in events.of(UpdateApplied)] == [("store", "c2")]


@pytest.mark.asyncio
async def test_store_hook_with_storage_down_changes_nothing(faulty: FaultyStorage) -> None:
    """With every write failing, the store hook returns ``None``, reports each call once and
    the stored state stays byte-for-byte what it was."""
    layer = scratchpad()
    ctx, handle = await bind(layer, faulty)
    await handle.update(PRIOR)
    before = await faulty.inner.describe("scopes/")
    faulty.fail_on = {"commit"}
    calls = [
        FunctionCall(call_id=f"c{i}", name="scratchpad/update", arguments=f'{{"n": {i}}}')
        for i in range(3)
    ]

    with capture_events(ctx.events) as events:
        result = await layer.hooks.store(new_items=calls, state=handle.state, ctx=ctx)

    assert result is None
    assert [(e.reason, e.call_id) for e in events.of(UpdateRejected)] == [
        ("storage", "c0"),
        ("storage", "c1"),
        ("storage", "c2"),
    ]
    assert await faulty.inner.get(STATE_KEY) == PRIOR
    assert [(i.key, i.size) for i in await faulty.inner.describe("scopes/")] == [
        (i.key, i.size) for i in before
    ]


@pytest.mark.asyncio
async def test_concurrent_writers_with_some_writes_failing(faulty: FaultyStorage) -> None:
    """Forty writers race on one scope while the first twelve writes break mid-transaction.
    Exactly the writers that got no error are in the stored state, each failed writer got a
    ``StorageError`` and an event, and no failure takes a neighbour's write down with it (a
    backend that commits writes in groups must abort only the failed one)."""
    layer = scratchpad()
    _, seed = await bind(layer, faulty)
    await seed.update({"seed": True})
    faulty.fail_on = {"commit"}
    faulty.faults_left = 12
    bus = EventBus()
    outcomes: dict[str, bool] = {}

    async def writer(index: int) -> None:
        _, handle = await bind(layer, faulty, bus=bus)
        try:
            await handle.update({"by": {f"w{index}": index}})
        except StorageError:
            outcomes[f"w{index}"] = False
        else:
            outcomes[f"w{index}"] = True

    with capture_events(bus) as events:
        async with anyio.create_task_group() as tg:
            for index in range(40):
                tg.start_soon(writer, index)

    succeeded = {name for name, ok in outcomes.items() if ok}
    assert len(outcomes) == 40
    assert len(succeeded) == 28
    stored = await faulty.inner.get(STATE_KEY)
    assert stored == {"seed": True, "by": {name: int(name[1:]) for name in succeeded}}
    assert len(events.of(UpdateRejected)) == 12
    assert len(events.of(UpdateApplied)) == 28


# -- a backend that stalls ---------------------------------------------------------------------


@pytest.mark.asyncio
async def test_stalled_write_is_bounded_by_write_timeout(faulty: FaultyStorage) -> None:
    """A backend that hangs before writing is cut off after ``write_timeout``: the caller
    gets a ``StorageOutcomeUnknownError`` saying the scratchpad did not answer in time and
    what to do, an ``UpdateRejected`` with reason ``timeout`` is emitted, and the stored
    state is intact, also after the stalled call is released (the abandoned write never
    lands late)."""
    _, handle = await bind(scratchpad(write_timeout=0.2), faulty)
    await handle.update(PRIOR)
    faulty.stall_on = {"commit"}

    started = time.perf_counter()
    with capture_events(handle.ctx.events) as events, pytest.raises(StorageError) as info:
        await handle.update({"goal": "late"})
    elapsed = time.perf_counter() - started

    assert 0.2 <= elapsed < 2.0
    # The public type (no private subclass leaks): whether a write cut off landed is unknown.
    assert type(info.value) is StorageOutcomeUnknownError
    assert "did not answer within 0.2 s" in str(info.value)
    assert "repeat" in str(info.value)
    [rejected] = events.of(UpdateRejected)
    assert (rejected.hook, rejected.reason) == ("api", "timeout")
    assert rejected.message == str(info.value)
    faulty.release()
    await anyio.sleep(0.01)
    assert await faulty.inner.get(STATE_KEY) == PRIOR
    await handle.update({"goal": "on time"})
    assert handle.snapshot == {**PRIOR, "goal": "on time"}


@pytest.mark.asyncio
async def test_write_acknowledged_late_is_not_reported_as_lost(faulty: FaultyStorage) -> None:
    """When the backend stores the write but its answer comes after ``write_timeout``, the
    caller gets a timeout error whose message does not claim the update was lost (it may
    have been saved), and repeating the same update is harmless: merging is idempotent."""
    faulty.stall_at = "after"
    _, handle = await bind(scratchpad(write_timeout=0.1), faulty)
    await handle.update(PRIOR)
    faulty.stall_on = {"commit"}

    with pytest.raises(StorageOutcomeUnknownError) as info:
        await handle.update({"notes": {"reviewer": "eve"}})

    assert "may have been saved" in str(info.value)
    written = {**PRIOR, "notes": {"owner": "ana", "reviewer": "eve"}}
    assert await faulty.inner.get(STATE_KEY) == written
    faulty.release()
    await handle.update({"notes": {"reviewer": "eve"}})
    assert handle.snapshot == written


@pytest.mark.asyncio
async def test_stalled_store_hook_returns_within_the_timeout() -> None:
    """A store hook whose backend hangs returns (it never raises) once ``write_timeout`` has
    passed for each call, reports each call with reason ``timeout``, and changes nothing."""
    faulty = FaultyStorage(MemoryStorage())
    layer = scratchpad(write_timeout=0.1)
    ctx, handle = await bind(layer, faulty)
    await handle.update(PRIOR)
    faulty.stall_on = {"commit"}
    calls = [FunctionCall(call_id="c1", name="scratchpad/update", arguments='{"a": 1}')]

    with capture_events(ctx.events) as events, anyio.fail_after(2):
        result = await layer.hooks.store(new_items=calls, state=handle.state, ctx=ctx)

    assert result is None
    assert [(e.hook, e.reason) for e in events.of(UpdateRejected)] == [("store", "timeout")]
    faulty.release()
    assert await faulty.inner.get(STATE_KEY) == PRIOR


@pytest.mark.asyncio
async def test_stalled_reads_at_init_and_refresh_are_bounded_by_read_timeout(
    faulty: FaultyStorage,
) -> None:
    """A backend that hangs while the state is loaded holds up ``init`` and ``refresh`` no
    longer than ``read_timeout``: each raises ``StorageError`` saying what happened and
    what to do, and a refresh that times out leaves the handle's state as it was."""
    layer = scratchpad(read_timeout=0.2)
    _, handle = await bind(layer, faulty)
    await handle.update(PRIOR)

    faulty.stall_on = {"get_revision"}
    started = time.perf_counter()
    with pytest.raises(StorageError, match=r"could not be loaded within 0\.2 s \(read_timeout\)"):
        await bind(layer, faulty)
    assert 0.2 <= time.perf_counter() - started < 2.0
    with pytest.raises(StorageError, match="raise read_timeout"):
        await handle.refresh()
    assert handle.snapshot == PRIOR

    faulty.release()
    await handle.update({"goal": "after"})
    assert await handle.refresh() == {**PRIOR, "goal": "after"}


@pytest.mark.anyio
async def test_faults_are_contained_under_trio(anyio_backend: str) -> None:
    """On trio too, a write that breaks mid-transaction and a write that stalls past the
    timeout each raise ``StorageError`` with an event, and the prior state survives both;
    a load that stalls past ``read_timeout`` raises ``StorageError``."""
    faulty = FaultyStorage(MemoryStorage())
    _, handle = await bind(scratchpad(write_timeout=0.1), faulty)
    await handle.update(PRIOR)

    with capture_events(handle.ctx.events) as events:
        faulty.fail_on = {"commit"}
        with pytest.raises(StorageError):
            await handle.update({"goal": "broken"})
        faulty.heal()
        faulty.stall_on = {"commit"}
        with pytest.raises(StorageError):
            await handle.update({"goal": "stalled"})
        faulty.release()

    assert [e.reason for e in events.of(UpdateRejected)] == ["storage", "timeout"]
    assert await faulty.inner.get(STATE_KEY) == PRIOR
    stalled_reads = FaultyStorage(faulty.inner, stall_on={"get_revision"})
    with anyio.fail_after(2), pytest.raises(StorageError, match="read_timeout"):
        await bind(scratchpad(read_timeout=0.1), stalled_reads)


@pytest.fixture
def anyio_backend() -> str:
    return "trio"


# -- subscribers that raise or hang -------------------------------------------------------------


@pytest.mark.asyncio
async def test_failing_and_hanging_subscribers_never_stop_writes() -> None:
    """Subscribers that raise (sync and async) or hang (async, past the bus's handler
    timeout) do not fail, delay or drop a write: every update lands, a well-behaved
    subscriber still sees every event in order, and the hung handler is abandoned after
    ``handler_timeout``."""
    bus = EventBus(handler_timeout=0.2)
    hung = anyio.Event()
    seen: list[tuple[str, ...]] = []

    def raising_sync(event: Any) -> None:
        raise RuntimeError("sync subscriber broke")

    async def raising_async(event: Any) -> None:
        raise RuntimeError("async subscriber broke")

    async def hanging_async(event: Any) -> None:
        hung.set()
        await anyio.sleep_forever()

    def good(event: Any) -> None:
        if isinstance(event, UpdateApplied):
            seen.append(event.keys)

    for handler in (raising_sync, raising_async, hanging_async, good):
        bus.subscribe(handler)
    backend = MemoryStorage()
    _, handle = await bind(scratchpad(), backend, bus=bus)

    started = time.perf_counter()
    for index in range(20):
        await handle.update({f"k{index}": index})
    writing = time.perf_counter() - started

    assert writing < 2.0  # waiting on the hung handler would take 20 x 0.2 s
    assert seen == [(f"k{index}",) for index in range(20)]
    assert await backend.get(STATE_KEY) == {f"k{index}": index for index in range(20)}
    with anyio.fail_after(2):
        await bus.drain()  # the hung handlers were cut off by handler_timeout
    assert hung.is_set()


@pytest.mark.asyncio
async def test_slow_sync_subscriber_delays_but_never_loses_writes() -> None:
    """A sync subscriber runs inline, so a slow one slows writes down by its own time, but
    every update still lands and the handle's state matches storage."""
    bus = EventBus()

    def slow(event: Any) -> None:
        time.sleep(0.01)

    bus.subscribe(slow)
    backend = MemoryStorage()
    _, handle = await bind(scratchpad(), backend, bus=bus)
    for index in range(5):
        await handle.update({"n": index, f"k{index}": True})

    expected = {"n": 4, **{f"k{index}": True for index in range(5)}}
    assert await backend.get(STATE_KEY) == expected
    assert handle.snapshot == expected


@pytest.mark.asyncio
async def test_stream_consumer_that_never_reads_does_not_block_writes() -> None:
    """An event stream whose consumer never reads fills its buffer and then drops events;
    writes never wait for it, and the buffered events are the first ones, in order."""
    bus = EventBus()
    backend = MemoryStorage()
    _, handle = await bind(scratchpad(), backend, bus=bus)

    async with bus.stream(max_buffer=3) as stream:
        with anyio.fail_after(2):
            for index in range(10):
                await handle.update({f"k{index}": index})
        received = [stream.receive_nowait() for _ in range(3)]
        with pytest.raises(anyio.WouldBlock):
            stream.receive_nowait()

    assert [e.keys for e in received if isinstance(e, UpdateApplied)] == [
        ("k0",),
        ("k1",),
        ("k2",),
    ]
    assert await backend.get(STATE_KEY) == {f"k{index}": index for index in range(10)}


# -- a SQLite database locked by another process -------------------------------------------------


@pytest.mark.slow
@pytest.mark.asyncio
async def test_sqlite_locked_by_another_process_past_the_busy_timeout(tmp_path: Path) -> None:
    """While another process holds SQLite's write lock (``BEGIN IMMEDIATE``, with an
    uncommitted write to the same row), a write waits ``busy_timeout`` per attempt, then
    fails with ``StorageBusyError`` naming the cause and the fix, and emits
    ``UpdateRejected(reason="storage")``. Readers still see the prior state, never the other
    process's uncommitted row. Once the lock is released, writes succeed again."""
    path = tmp_path / "locked.db"
    backend = await open_storage(f"sqlite:///{path}?busy_timeout=200&busy_retries=1")
    try:
        layer = scratchpad()
        ctx, handle = await bind(layer, backend)
        await handle.update(PRIOR)

        async with write_lock_held(path, STATE_KEY) as lock:
            started = time.perf_counter()
            with capture_events(ctx.events) as events, pytest.raises(StorageBusyError) as info:
                await handle.update({"goal": "blocked"})
            waited = time.perf_counter() - started
            calls = [FunctionCall(call_id="c1", name="scratchpad/update", arguments='{"a": 1}')]
            stored_during = await backend.get(STATE_KEY)
            with capture_events(ctx.events) as store_events:
                result = await layer.hooks.store(new_items=calls, state=handle.state, ctx=ctx)
            await lock.release()

        assert 0.4 <= waited < 5  # two attempts of 200 ms
        message = str(info.value)
        assert "stayed locked by another connection" in message
        assert "2 attempt(s) of busy_timeout=200 ms; nothing was written" in message
        assert "busy_timeout=30000" in message  # how to wait longer
        [rejected] = events.of(UpdateRejected)
        assert (rejected.hook, rejected.reason) == ("api", "storage")
        assert message in rejected.message
        assert stored_during == PRIOR
        assert handle.snapshot == PRIOR
        assert result is None
        assert [(e.hook, e.reason) for e in store_events.of(UpdateRejected)] == [
            ("store", "storage")
        ]

        await handle.update({"goal": "unblocked"})
        assert handle.snapshot == {**PRIOR, "goal": "unblocked"}
        assert await backend.get(STATE_KEY) == {**PRIOR, "goal": "unblocked"}
    finally:
        await backend.aclose()


@pytest.mark.slow
@pytest.mark.asyncio
async def test_sqlite_write_waits_for_a_lock_released_within_the_busy_timeout(
    tmp_path: Path,
) -> None:
    """A lock held by another process for less than ``busy_timeout`` only delays a write:
    the write lands on the prior state once the lock is released, with no error or
    rejection, and the other process's rolled-back row never shows."""
    path = tmp_path / "briefly-locked.db"
    backend = await open_storage(f"sqlite:///{path}?busy_timeout=10000")
    try:
        _, handle = await bind(scratchpad(), backend)
        await handle.update(PRIOR)
        async with write_lock_held(path, STATE_KEY) as lock, anyio.create_task_group() as tg:
            landed: list[Any] = []

            async def write() -> None:
                await handle.update({"goal": "after the lock"})
                landed.append(handle.snapshot)

            with capture_events(handle.ctx.events) as events:
                tg.start_soon(write)
                await anyio.sleep(0.3)
                assert landed == []  # still waiting for the lock
                await lock.release()
        assert landed == [{**PRIOR, "goal": "after the lock"}]
        assert events.of(UpdateRejected) == []
        assert await backend.get(STATE_KEY) == {**PRIOR, "goal": "after the lock"}
    finally:
        await backend.aclose()


@pytest.mark.slow
@pytest.mark.asyncio
async def test_write_timeout_bounds_a_sqlite_write_stuck_behind_a_lock(tmp_path: Path) -> None:
    """A SQLite write that waits for another process's lock (busy_timeout 2 s) is cut off
    by the layer's ``write_timeout`` (0.3 s): the caller gets the timeout error and a
    ``timeout`` event long before the busy timeout, and the backend stays usable. The write
    it abandoned goes on in the background and lands once the lock is released, which is
    why the error says it may have been saved."""
    path = tmp_path / "stuck.db"
    backend = await open_storage(f"sqlite:///{path}?busy_timeout=2000&busy_retries=0")
    try:
        _, handle = await bind(scratchpad(write_timeout=0.3), backend)
        await handle.update(PRIOR)
        async with write_lock_held(path, STATE_KEY) as lock:
            started = time.perf_counter()
            with capture_events(handle.ctx.events) as events, pytest.raises(StorageError) as info:
                await handle.update({"goal": "abandoned"})
            waited = time.perf_counter() - started
            assert await backend.get(STATE_KEY) == PRIOR
            await lock.release()

        assert 0.3 <= waited < 1.5
        assert "did not answer within 0.3 s" in str(info.value)
        assert [e.reason for e in events.of(UpdateRejected)] == ["timeout"]
        # The writer is FIFO: this write queues behind the abandoned one, which lands first.
        await handle.update({"steps": []})
        assert handle.snapshot == {**PRIOR, "goal": "abandoned", "steps": []}
    finally:
        await backend.aclose()


@pytest.mark.anyio
async def test_bad_subscribers_are_contained_under_trio(anyio_backend: str) -> None:
    """Under trio, subscribers that raise or hang never fail or hold up a write, and a
    hung async subscriber is abandoned after ``handler_timeout``."""
    bus = EventBus(handler_timeout=0.1)
    seen: list[str] = []

    def raising(event: Any) -> None:
        raise RuntimeError("sync subscriber broke")

    async def hanging(event: Any) -> None:
        await anyio.sleep_forever()

    for handler in (raising, hanging, lambda event: seen.append(event.kind)):
        bus.subscribe(handler)
    backend = MemoryStorage()
    _, handle = await bind(scratchpad(), backend, bus=bus)
    with anyio.fail_after(2):
        for index in range(5):
            await handle.update({f"k{index}": index})
        await bus.drain()

    assert seen == ["update_applied"] * 5
    assert await backend.get(STATE_KEY) == {f"k{index}": index for index in range(5)}


# -- the fault injector itself ---------------------------------------------------------------


@pytest.mark.asyncio
async def test_faulty_storage_fails_chosen_operations_a_bounded_number_of_times() -> None:
    """``FaultyStorage`` raises its error on the chosen operations only, before they reach
    the inner backend, for at most ``faults`` calls; it counts every call and passes every
    other one through."""
    inner = MemoryStorage()
    faulty = FaultyStorage(inner, fail_on={"set", "get"}, faults=2)

    with pytest.raises(InjectedFault):
        await faulty.set("a", 1)
    with pytest.raises(InjectedFault):
        await faulty.get("a")
    await faulty.set("a", 2)  # the two faults are spent
    await faulty.delete("missing")

    assert await faulty.get("a") == 2
    assert await inner.list() == ["a"]
    assert faulty.injected == 2
    assert (faulty.calls["set"], faulty.calls["get"], faulty.calls["delete"]) == (2, 2, 1)


@pytest.mark.asyncio
async def test_faulty_storage_stall_ends_after_stall_for() -> None:
    """A stall lasts ``stall_for`` seconds, then the call goes through; with
    ``stall_at="after"`` the inner write has already happened while the call hangs."""
    inner = MemoryStorage()
    faulty = FaultyStorage(inner, stall_on={"update"}, stall_at="after", stall_for=0.1)

    started = time.perf_counter()
    async with anyio.create_task_group() as tg:
        tg.start_soon(faulty.update, "k", lambda current: {"v": 1})
        await anyio.sleep(0.02)
        assert await inner.get("k") == {"v": 1}  # written, not yet acknowledged
    assert 0.1 <= time.perf_counter() - started < 2


@pytest.mark.asyncio
async def test_a_write_storage_refuses_is_not_reported_as_retryable(
    storage: StorageBackend,
) -> None:
    """When the backend refuses a write with ValueError (PostgreSQL: a key too long for its
    index), the caller gets StorageError and the event says ``refused``, never "try again
    later": the same write would fail the same way."""
    faulty = FaultyStorage(
        storage, fail_on={"commit"}, error=ValueError("the key is too long for the index")
    )
    ctx, handle = await bind(scratchpad(), faulty)
    with capture_events(ctx.events) as events, pytest.raises(StorageError) as caught:
        await handle.update({"n": 1})
    (rejected,) = events.of(UpdateRejected)
    assert rejected.reason == "refused"
    assert "too long" in rejected.message
    assert "later" not in rejected.message
    assert str(caught.value) == rejected.message
    assert await storage.get(STATE_KEY) is None
