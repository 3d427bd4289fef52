"""Write timeouts: on asyncio one loop timer for every limit in force; a cancel scope
under trio."""

from __future__ import annotations

import asyncio
import types
from collections.abc import Generator

import pytest

from noetic_scratchpad import _runtime
from noetic_scratchpad._runtime import _asyncio


def _keeper() -> _asyncio._Timekeeper:
    return _asyncio.timekeeper(asyncio.get_running_loop())


@pytest.mark.asyncio
async def test_an_await_past_its_limit_raises_timeout_error_and_is_marked_expired() -> None:
    limit = _asyncio.limit(0.05)
    started = asyncio.get_running_loop().time()
    with pytest.raises(TimeoutError), limit:
        await asyncio.sleep(10)
    assert limit.expired
    assert 0.04 <= asyncio.get_running_loop().time() - started < 2
    assert len(_keeper()) == 0


@pytest.mark.asyncio
async def test_an_await_within_its_limit_returns_and_leaves_nothing_behind() -> None:
    limit = _asyncio.limit(5)
    with limit:
        await asyncio.sleep(0)
    assert not limit.expired
    assert len(_keeper()) == 0


@pytest.mark.asyncio
async def test_hundreds_of_limits_share_one_loop_timer() -> None:
    loop = asyncio.get_running_loop()
    release = asyncio.Event()
    timers_before = len(loop._scheduled)  # type: ignore[attr-defined]  # asyncio's timer heap

    async def write() -> None:
        with _asyncio.limit(30):
            await release.wait()

    tasks = [asyncio.create_task(write()) for _ in range(300)]
    await asyncio.sleep(0)
    assert len(_keeper()) == 300
    assert len(loop._scheduled) - timers_before == 1  # type: ignore[attr-defined]
    release.set()
    await asyncio.gather(*tasks)
    assert len(_keeper()) == 0


@pytest.mark.asyncio
async def test_only_the_late_ones_expire_with_mixed_lengths_and_starts() -> None:
    """Limits of different lengths and start times: each one fires at its own deadline
    (one timer re-armed for the next), and those that finish in time are untouched."""
    outcomes: dict[str, str] = {}

    async def write(name: str, seconds: float, takes: float) -> None:
        try:
            with _asyncio.limit(seconds):
                await asyncio.sleep(takes)
            outcomes[name] = "done"
        except TimeoutError:
            outcomes[name] = "timeout"

    async with asyncio.TaskGroup() as group:
        group.create_task(write("long, slow", 0.3, 10))
        group.create_task(write("short, slow", 0.05, 10))
        group.create_task(write("short, quick", 0.05, 0))
        await asyncio.sleep(0.02)
        group.create_task(write("late start, slow", 0.05, 10))
        group.create_task(write("long, in time", 5, 0.1))
    assert outcomes == {
        "long, slow": "timeout",
        "short, slow": "timeout",
        "short, quick": "done",
        "late start, slow": "timeout",
        "long, in time": "done",
    }
    assert len(_keeper()) == 0


@pytest.mark.asyncio
@pytest.mark.parametrize("expired_too", [False, True], ids=["alone", "while-expiring"])
async def test_a_cancellation_from_elsewhere_stays_a_cancellation(expired_too: bool) -> None:
    """A task cancelled from outside inside the block gets CancelledError, also when its
    limit has just expired too and it has not run since: turning that into a TimeoutError
    would swallow the outer cancellation."""
    entered = asyncio.Event()
    limit = _asyncio.limit(30)

    async def write() -> None:
        with limit:
            entered.set()
            await asyncio.sleep(10)

    task = asyncio.create_task(write())
    await entered.wait()
    if expired_too:
        limit._expire()  # what the loop timer does at the deadline
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert limit.expired is expired_too
    assert len(_keeper()) == 0


@pytest.mark.asyncio
async def test_a_limit_outside_a_task_says_so() -> None:
    async def no_task() -> None:
        with _asyncio.limit(1):
            pass

    coroutine = no_task()
    loop = asyncio.get_running_loop()
    # Run the coroutine's first step as a plain callback, where no task is current.
    errors: list[BaseException] = []

    def step() -> None:
        try:
            coroutine.send(None)
        except BaseException as exc:
            errors.append(exc)

    loop.call_soon(step)
    await asyncio.sleep(0.01)
    assert len(errors) == 1
    assert isinstance(errors[0], RuntimeError)
    assert "inside an asyncio task" in str(errors[0])


def test_a_finished_loop_is_not_kept_alive_by_its_timekeeper() -> None:
    """Timekeepers are found by loop through a weak mapping: a loop that has finished, even
    with a limit's timer still pending in it, is freed with its timekeeper."""
    import gc
    import weakref

    loops: list[weakref.ref[asyncio.AbstractEventLoop]] = []

    async def write() -> None:
        loops.append(weakref.ref(asyncio.get_running_loop()))
        with _asyncio.limit(30):  # leaves a timer 30 s ahead in the loop
            await asyncio.sleep(0)

    for _ in range(5):
        asyncio.run(write())
    gc.collect()
    assert [ref() for ref in loops] == [None] * 5


@pytest.mark.asyncio
async def test_wait_for_gives_up_with_expired_and_lets_a_calls_own_timeout_through() -> None:
    async def slow() -> str:
        await asyncio.sleep(10)
        return "never"

    async def own_timeout() -> str:
        raise TimeoutError("the backend's own")

    async def quick() -> str:
        return "done"

    with pytest.raises(_runtime.Expired):
        await _runtime.wait_for(0.02, slow())
    with pytest.raises(TimeoutError, match="the backend's own"):
        await _runtime.wait_for(5, own_timeout())
    assert await _runtime.wait_for(5, quick()) == "done"
    assert await _runtime.wait_for(None, quick()) == "done"
    assert len(_keeper()) == 0


@pytest.mark.asyncio
async def test_wait_for_arms_no_timer_for_a_call_that_never_suspends() -> None:
    """A call that finishes without suspending (memory storage) runs with no limit in
    force; one that suspends gets its limit at its first suspension, which still expires,
    and a cancellation from elsewhere still reaches it as a cancellation."""
    in_force: list[int] = []

    async def immediate() -> str:
        in_force.append(len(_keeper()))
        return "now"

    async def suspends_then_returns() -> str:
        await asyncio.sleep(0)
        in_force.append(len(_keeper()))
        await asyncio.sleep(0)
        return "later"

    assert await _runtime.wait_for(5, immediate()) == "now"
    assert await _runtime.wait_for(5, suspends_then_returns()) == "later"
    assert in_force == [0, 1]
    assert len(_keeper()) == 0

    async def suspends_forever() -> None:
        await asyncio.sleep(0)
        await asyncio.sleep(10)

    with pytest.raises(_runtime.Expired):
        await _runtime.wait_for(0.02, suspends_forever())
    task = asyncio.ensure_future(_runtime.wait_for(5, suspends_forever()))
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert len(_keeper()) == 0


@pytest.mark.asyncio
async def test_wait_for_follows_a_call_that_survives_a_cancellation_and_suspends_again() -> None:
    """A call that catches the cancellation thrown in at its first suspension and waits
    again is followed to its end, under the same limit (which still expires it)."""

    async def shrugs_off_one_cancellation(release: asyncio.Event) -> str:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            asyncio.current_task().uncancel()  # type: ignore[union-attr]  # in a task
            await release.wait()
            return "finished"
        return "slept"

    async def cancelled_once(seconds: float, release: asyncio.Event) -> asyncio.Task[str]:
        task = asyncio.ensure_future(
            _runtime.wait_for(seconds, shrugs_off_one_cancellation(release))
        )
        await asyncio.sleep(0.01)
        task.cancel()
        await asyncio.sleep(0.01)
        return task

    release = asyncio.Event()
    task = await cancelled_once(5, release)
    assert len(_keeper()) == 1  # still waiting, still limited
    release.set()
    assert await task == "finished"
    assert len(_keeper()) == 0

    task = await cancelled_once(0.05, asyncio.Event())  # never released: the limit ends it
    with pytest.raises(_runtime.Expired):
        await task
    assert len(_keeper()) == 0


@pytest.mark.asyncio
async def test_a_bounded_wait_passes_on_a_value_sent_in() -> None:
    """asyncio's tasks resume with ``None``; driven by hand with a value, the bounded wait
    hands it to the call, as ``await`` would."""
    received: list[object] = []

    @types.coroutine
    def receives() -> Generator[str, object, str]:
        received.append((yield "first"))
        received.append((yield "second"))
        return "done"

    steps = receives()
    bounded = _asyncio._bounded(steps, steps.send(None), 5)
    assert bounded.send(None) == "first"
    assert bounded.send("a") == "second"
    with pytest.raises(StopIteration) as done:
        bounded.send("b")
    assert (done.value.value, received) == ("done", ["a", "b"])
    assert len(_keeper()) == 0


@pytest.mark.anyio
async def test_wait_for_under_trio_uses_a_cancel_scope(anyio_backend: str) -> None:
    import anyio

    async def slow() -> str:
        await anyio.sleep(10)
        return "never"

    async def quick() -> str:
        return "done"

    with anyio.fail_after(2), pytest.raises(_runtime.Expired):
        await _runtime.wait_for(0.02, slow())
    assert await _runtime.wait_for(5, quick()) == "done"


@pytest.fixture
def anyio_backend() -> str:
    return "trio"
