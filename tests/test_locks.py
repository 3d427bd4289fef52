"""KeyedBatcher: per-key order, independent keys, combining, cancellation, registry cleanup.

Each behaviour is a scenario coroutine, run on asyncio (pytest-asyncio) by its own test and
under trio by ``test_scenarios_under_trio``: the batcher runs on both (its only switch
between them is in ``_runtime``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from noetic_scratchpad.errors import StorageOutcomeUnknownError
from noetic_scratchpad.locks import KeyedBatcher, WorkAbandoned


class Recorder:
    """A batch runner that records every batch and can hold a batch open until released."""

    def __init__(self) -> None:
        self.batches: list[tuple[str, list[Any]]] = []
        self.hold: dict[str, anyio.Event] = {}
        self.started: dict[str, anyio.Event] = {}
        self.after_batch: Callable[[str, list[Any]], None] | None = None

    def block(self, key: str) -> None:
        """The next batches of ``key`` wait for :meth:`release`."""
        self.hold[key] = anyio.Event()
        self.started[key] = anyio.Event()

    def release(self, key: str) -> None:
        self.hold.pop(key).set()

    async def __call__(self, key: str, jobs: list[Any]) -> Sequence[Any]:
        self.batches.append((key, list(jobs)))
        if key in self.started:
            self.started[key].set()
        if key in self.hold:
            await self.hold[key].wait()
        if self.after_batch is not None:
            self.after_batch(key, jobs)
        return [
            ValueError(f"job {job} refused") if isinstance(job, str) and "bad" in job else job
            for job in jobs
        ]


async def bounded(scenario: Callable[[], Awaitable[None]]) -> None:
    """Run ``scenario`` with a deadline, so a batcher that hangs fails the test instead."""
    with anyio.fail_after(20):
        await scenario()


async def wait_until(predicate: Callable[[], bool]) -> None:
    """Yield to the loop until ``predicate()`` holds (bounded, so a bug fails fast)."""
    with anyio.fail_after(5):
        while not predicate():  # polls state no event announces
            await anyio.lowlevel.checkpoint()


async def submit_behind_a_blocked_batch(
    batcher: KeyedBatcher[str, Any, Any], recorder: Recorder, count: int
) -> dict[int, Any]:
    """Submit job 0 of key ``k``; while its batch is blocked, submit jobs 1 to
    ``count - 1``, each queued before the next; then release. Returns each job's result."""
    results: dict[int, Any] = {}

    async def submit(index: int) -> None:
        results[index] = await batcher.submit("k", index)

    recorder.block("k")
    async with anyio.create_task_group() as tg:
        tg.start_soon(submit, 0)
        await recorder.started["k"].wait()
        for index in range(1, count):
            tg.start_soon(submit, index)
            await wait_until(lambda index=index: _queued(batcher, "k") == index)
        assert results == {}  # nothing is acknowledged while its batch is blocked
        recorder.release("k")
    return results


async def scenario_order_per_key() -> None:
    recorder = Recorder()
    batcher: KeyedBatcher[str, Any, Any] = KeyedBatcher(recorder)
    results = await submit_behind_a_blocked_batch(batcher, recorder, 20)
    ran = [job for key, jobs in recorder.batches for job in jobs]
    assert ran == list(range(20))
    assert results == {index: index for index in range(20)}
    assert len(batcher) == 0


@pytest.mark.asyncio
async def test_order_per_key() -> None:
    """Jobs of one key run in the order they were submitted, and each gets its own result."""
    await bounded(scenario_order_per_key)


async def scenario_keys_independent() -> None:
    recorder = Recorder()
    batcher: KeyedBatcher[str, Any, Any] = KeyedBatcher(recorder)
    recorder.block("slow")
    async with anyio.create_task_group() as tg:
        tg.start_soon(batcher.submit, "slow", "s1")
        await recorder.started["slow"].wait()
        with anyio.fail_after(2):
            assert await batcher.submit("fast", "f1") == "f1"
            assert await batcher.submit("fast", "f2") == "f2"
        assert len(batcher) == 1  # only "slow" still running
        recorder.release("slow")
    assert [key for key, _ in recorder.batches] == ["slow", "fast", "fast"]
    assert len(batcher) == 0


@pytest.mark.asyncio
async def test_keys_do_not_wait_for_each_other() -> None:
    """While a batch of one key is blocked, jobs of another key run to completion."""
    await bounded(scenario_keys_independent)


async def scenario_combining() -> None:
    recorder = Recorder()
    batcher: KeyedBatcher[str, Any, Any] = KeyedBatcher(recorder, max_batch=4)
    results = await submit_behind_a_blocked_batch(batcher, recorder, 11)
    assert [jobs for _, jobs in recorder.batches] == [[0], [1, 2, 3, 4], [5, 6, 7, 8], [9, 10]]
    assert results == {index: index for index in range(11)}
    assert len(batcher) == 0


@pytest.mark.asyncio
async def test_jobs_queued_during_a_batch_run_as_one_batch() -> None:
    """Jobs that arrive while a batch runs are combined into the next batch (up to
    ``max_batch`` per batch), in arrival order."""
    await bounded(scenario_combining)


def _queued(batcher: KeyedBatcher[Any, Any, Any], key: Any) -> int:
    queue = batcher._queues.get(key)
    return 0 if queue is None else len(queue)


async def scenario_errors_isolated() -> None:
    recorder = Recorder()
    batcher: KeyedBatcher[str, Any, Any] = KeyedBatcher(recorder)
    outcomes: dict[str, Any] = {}

    async def submit(job: str) -> None:
        try:
            outcomes[job] = await batcher.submit("k", job)
        except ValueError as exc:
            outcomes[job] = str(exc)

    recorder.block("k")
    async with anyio.create_task_group() as tg:
        tg.start_soon(submit, "first")
        await recorder.started["k"].wait()
        for count, job in enumerate(("ok-1", "bad-2", "ok-3"), start=1):
            tg.start_soon(submit, job)
            await wait_until(lambda count=count: _queued(batcher, "k") == count)
        recorder.release("k")
    assert recorder.batches[1] == ("k", ["ok-1", "bad-2", "ok-3"])
    assert outcomes == {
        "first": "first",
        "ok-1": "ok-1",
        "bad-2": "job bad-2 refused",
        "ok-3": "ok-3",
    }
    assert len(batcher) == 0


@pytest.mark.asyncio
async def test_errors_are_isolated_per_job() -> None:
    """A job that fails gets its own exception; the other jobs of its batch get their results."""
    await bounded(scenario_errors_isolated)


async def scenario_runner_failure() -> None:
    async def broken(key: str, jobs: list[Any]) -> Sequence[Any]:
        raise OSError("disk gone")

    batcher: KeyedBatcher[str, Any, Any] = KeyedBatcher(broken)
    with pytest.raises(OSError, match="disk gone"):
        await batcher.submit("k", 1)
    assert len(batcher) == 0


@pytest.mark.asyncio
async def test_a_failing_runner_fails_its_batch_and_frees_the_key() -> None:
    """When the runner itself raises, every job of the batch gets that error and the key is
    forgotten, so later jobs are not stuck."""
    await bounded(scenario_runner_failure)


async def scenario_cancel_queued() -> None:
    recorder = Recorder()
    batcher: KeyedBatcher[str, Any, Any] = KeyedBatcher(recorder)
    results: dict[str, Any] = {}
    cancelled = anyio.CancelScope()

    async def submit(job: str, scope: anyio.CancelScope | None = None) -> None:
        with scope or anyio.CancelScope():
            results[job] = await batcher.submit("k", job)

    recorder.block("k")
    async with anyio.create_task_group() as tg:
        tg.start_soon(submit, "leader")
        await recorder.started["k"].wait()
        tg.start_soon(submit, "cancelled", cancelled)
        await wait_until(lambda: _queued(batcher, "k") == 1)
        tg.start_soon(submit, "kept")
        await wait_until(lambda: _queued(batcher, "k") == 2)
        cancelled.cancel()
        await wait_until(lambda: _queued(batcher, "k") == 1)
        recorder.release("k")
    assert cancelled.cancelled_caught
    assert [jobs for _, jobs in recorder.batches] == [["leader"], ["kept"]]
    assert results == {"leader": "leader", "kept": "kept"}
    assert len(batcher) == 0


@pytest.mark.asyncio
async def test_cancelled_queued_waiter_never_runs() -> None:
    """A job cancelled while it waits in the queue is removed: it never runs, the jobs
    behind it still do, and the key is forgotten afterwards."""
    await bounded(scenario_cancel_queued)


async def scenario_leader_cancelled_mid_batch() -> None:
    gates = {"first": anyio.Event(), "leader": anyio.Event()}
    shared_started = anyio.Event()
    batches: list[list[str]] = []

    async def runner(key: str, jobs: list[str]) -> list[str]:
        batches.append(list(jobs))
        if "leader" in jobs:
            shared_started.set()
        await gates[jobs[0]].wait()
        return jobs

    batcher: KeyedBatcher[str, str, str] = KeyedBatcher(runner)
    leader_scope = anyio.CancelScope()
    results: dict[str, str] = {}

    async def submit(job: str, scope: anyio.CancelScope | None = None) -> None:
        with scope or anyio.CancelScope():
            results[job] = await batcher.submit("k", job)

    async with anyio.create_task_group() as tg:
        tg.start_soon(submit, "first")
        await wait_until(lambda: batches == [["first"]])
        tg.start_soon(submit, "leader", leader_scope)
        await wait_until(lambda: _queued(batcher, "k") == 1)
        tg.start_soon(submit, "rider")
        await wait_until(lambda: _queued(batcher, "k") == 2)
        gates["first"].set()
        await shared_started.wait()  # "leader" now leads the batch [leader, rider]
        leader_scope.cancel()
        await anyio.lowlevel.checkpoint()
        gates["leader"].set()
    # The shared batch ran to its end although its leader was cancelled: the rider got its
    # result, and the queue moved on.
    assert batches == [["first"], ["leader", "rider"]]
    assert results["first"] == "first"
    assert results["rider"] == "rider"
    assert len(batcher) == 0


@pytest.mark.asyncio
async def test_cancelling_a_leader_does_not_abandon_a_shared_batch() -> None:
    """Cancelling the task whose job opened a batch that carries other writers' jobs lets
    the batch finish (it runs in the batcher's own task), and those writers get their
    results."""
    await bounded(scenario_leader_cancelled_mid_batch)


async def scenario_lone_writer_cancelled() -> None:
    batches: list[list[str]] = []
    stuck = anyio.Event()

    async def runner(key: str, jobs: list[str]) -> list[str]:
        batches.append(list(jobs))
        if jobs == ["stuck"]:
            await stuck.wait()
        return jobs

    batcher: KeyedBatcher[str, str, str] = KeyedBatcher(runner)
    with anyio.move_on_after(0.2) as scope:
        await batcher.submit("k", "stuck")
    assert scope.cancelled_caught  # the caller's wait ended at once
    results: list[str] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: _append(results, batcher.submit("k", "next")))
        await wait_until(lambda: _queued(batcher, "k") == 1)
        assert batches == [["stuck"]]  # still running: the key stays serialized behind it
        stuck.set()
    assert results == ["next"]
    assert batches == [["stuck"], ["next"]]
    assert len(batcher) == 0


async def _append(results: list[Any], pending: Awaitable[Any]) -> None:
    results.append(await pending)


async def _keep_outcome(outcomes: dict[str, Any], name: str, pending: Awaitable[Any]) -> None:
    """``outcomes[name]``: what ``pending`` returns, or the exception it raises."""
    try:
        outcomes[name] = await pending
    except Exception as exc:
        outcomes[name] = exc


@pytest.mark.asyncio
async def test_a_timeout_ends_the_wait_but_the_batch_keeps_its_key() -> None:
    """A timeout around a writer whose batch hangs ends that writer's wait at once; the
    batch goes on in the batcher's task, and the next job of the key runs after it, never
    beside it (its write may still land, and order per key is kept)."""
    await bounded(scenario_lone_writer_cancelled)


async def scenario_woken_writers_share_a_batch() -> None:
    sizes: list[int] = []

    async def runner(key: str, jobs: list[Any]) -> list[Any]:
        sizes.append(len(jobs))
        await anyio.lowlevel.checkpoint()  # a real batch suspends (a thread hop, a query)
        return jobs

    batcher: KeyedBatcher[str, Any, Any] = KeyedBatcher(runner)

    async def writer(w: int) -> None:
        for j in range(3):
            assert await batcher.submit("k", (w, j)) == (w, j)

    async with anyio.create_task_group() as tg:
        for w in range(10):
            tg.start_soon(writer, w)
    # All 10 writers arrive before the worker starts, and the 10 a batch wakes join the
    # next batch together.
    assert sizes == [10, 10, 10]


@pytest.mark.asyncio
async def test_writers_woken_by_a_batch_share_the_next_one() -> None:
    """Under contention the writers a batch wakes queue up together for the next one, so
    group commit keeps combining instead of alternating with batches of one. (asyncio
    only: trio runs ready tasks in a deliberately shuffled order, so it fixes no batch
    sizes.)"""
    await bounded(scenario_woken_writers_share_a_batch)


async def scenario_registry_empties() -> None:
    recorder = Recorder()
    batcher: KeyedBatcher[str, Any, Any] = KeyedBatcher(recorder)
    async with anyio.create_task_group() as tg:
        for index in range(2_000):
            tg.start_soon(batcher.submit, f"scope-{index}", index + 1)
            tg.start_soon(batcher.submit, f"scope-{index}", -index - 1)
    ran = sorted(job for _, jobs in recorder.batches for job in jobs)
    assert ran == [*range(-2_000, 0), *range(1, 2_001)]
    assert len(batcher) == 0
    assert batcher._queues == {}


@pytest.mark.asyncio
async def test_registry_empties_after_many_keys() -> None:
    """After jobs on 2,000 distinct keys finish, the batcher remembers no key."""
    await bounded(scenario_registry_empties)


def test_max_batch_must_be_positive() -> None:
    """max_batch below 1 is refused at construction with a message naming the value."""
    with pytest.raises(ValueError, match="max_batch must be at least 1, not 0"):
        KeyedBatcher(Recorder(), max_batch=0)


async def scenario_worker_cancelled_mid_batch() -> None:
    """The group hosting the workers is cancelled (its owner shutting down) while a batch
    runs and more jobs wait: the batch's callers learn that their writes may have landed,
    the queued ones that nothing was written (they never run); no caller is left waiting."""
    recorder = Recorder()
    recorder.block("k")
    batcher: KeyedBatcher[str, Any, Any] = KeyedBatcher(recorder)
    outcomes: dict[str, Any] = {}
    async with anyio.create_task_group() as callers, anyio.create_task_group() as host:
        with batcher.tasks.hosted_by(host):
            for job in ("under way", "queued"):
                callers.start_soon(_keep_outcome, outcomes, job, batcher.submit("k", job))
                if job == "under way":
                    await recorder.started["k"].wait()
            await wait_until(lambda: _queued(batcher, "k") == 1)
            host.cancel_scope.cancel()
    assert isinstance(outcomes["under way"], StorageOutcomeUnknownError)
    assert "may have been written or not" in str(outcomes["under way"])
    assert isinstance(outcomes["queued"], WorkAbandoned)
    assert "nothing was written" in str(outcomes["queued"])
    assert recorder.batches == [("k", ["under way"])]
    assert len(batcher) == 0


@pytest.mark.asyncio
async def test_a_worker_cancelled_mid_batch_tells_each_caller_what_became_of_its_job() -> None:
    await bounded(scenario_worker_cancelled_mid_batch)


SCENARIOS: list[Callable[[], Awaitable[None]]] = [
    scenario_order_per_key,
    scenario_keys_independent,
    scenario_combining,
    scenario_errors_isolated,
    scenario_runner_failure,
    scenario_cancel_queued,
    scenario_leader_cancelled_mid_batch,
    scenario_lone_writer_cancelled,
    scenario_registry_empties,
    scenario_worker_cancelled_mid_batch,
]


@pytest.fixture
def anyio_backend() -> str:
    return "trio"


@pytest.mark.anyio
@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda fn: fn.__name__)
async def test_scenarios_under_trio(
    anyio_backend: str, scenario: Callable[[], Awaitable[None]]
) -> None:
    """Every scenario above holds under trio as well."""
    await bounded(scenario)


# -- native asyncio cancellation: a cancelled writer never fails its batch's other jobs ------


async def _cancel_one_writer_of_a_shared_batch(cancel: str) -> None:
    """Three writers share a blocked batch; the first of them (the one whose task used to
    lead the batch) is cancelled natively."""
    batches: list[list[str]] = []
    started = [asyncio.Event(), asyncio.Event()]
    gates = [asyncio.Event(), asyncio.Event()]

    async def runner(key: str, jobs: list[str]) -> list[str]:
        number = len(batches)
        batches.append(list(jobs))
        if number < len(gates):
            started[number].set()
            await gates[number].wait()
        return jobs

    batcher: KeyedBatcher[str, str, str] = KeyedBatcher(runner)
    first = asyncio.ensure_future(batcher.submit("k", "first"))
    await started[0].wait()

    async def bounded_submit(job: str) -> str:
        bounded = cancel == "timeout" and job == "a"
        async with asyncio.timeout(0.05 if bounded else None):
            return await batcher.submit("k", job)

    writers = [asyncio.ensure_future(bounded_submit(job)) for job in ("a", "b", "c")]
    await wait_until(lambda: _queued(batcher, "k") == 3)
    gates[0].set()  # the first batch ends; [a, b, c] starts and blocks
    assert await first == "first"
    await started[1].wait()
    if cancel == "task.cancel":
        writers[0].cancel()
    await asyncio.sleep(0.1)  # the cancellation (or the timeout) takes effect
    gates[1].set()
    outcomes = await asyncio.gather(*writers, return_exceptions=True)
    assert batches == [["first"], ["a", "b", "c"]]  # "a" ran although cancelled: it was taken
    expected = asyncio.CancelledError if cancel == "task.cancel" else TimeoutError
    assert isinstance(outcomes[0], expected)
    assert outcomes[1:] == ["b", "c"]
    assert len(batcher) == 0
    assert await batcher.submit("k", "after") == "after"  # the key works as before


@pytest.mark.asyncio
@pytest.mark.parametrize("cancel", ["task.cancel", "timeout"])
async def test_native_asyncio_cancellation_never_reaches_other_writers(cancel: str) -> None:
    """``task.cancel()`` or ``asyncio.timeout`` on one writer of a running batch ends that
    writer's wait only: the batch runs to its end and the others get their results (the
    batcher used to shield only against anyio cancel scopes)."""
    await bounded(lambda: _cancel_one_writer_of_a_shared_batch(cancel))
