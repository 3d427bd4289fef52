"""``_runtime``: where background work runs (a lent task group, asyncio's fast path, a task
group of the owner's), on asyncio with the fast path on and off, and under trio."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import anyio
import anyio.lowlevel
import pytest

from noetic_scratchpad import _runtime, open_storage
from noetic_scratchpad._runtime import TaskOwner
from noetic_scratchpad.events import EventBus, StateDiscarded
from noetic_scratchpad.locks import KeyedBatcher
from noetic_scratchpad.storage import OwnedStorage
from tests.test_locks import SCENARIOS, bounded


@pytest.fixture(params=["asyncio", "asyncio-generic", "trio"])
def anyio_backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """asyncio with the fast path, asyncio on the generic path, and trio."""
    name: str = request.param
    if name == "asyncio-generic":
        monkeypatch.setattr(_runtime, "FAST_PATH", False)
        return "asyncio"
    return name


@pytest.fixture
def generic_asyncio(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_runtime, "FAST_PATH", False)


@pytest.mark.anyio
async def test_a_lent_task_group_runs_the_work_and_waits_for_it(anyio_backend: str) -> None:
    """While ``hosted_by(group)`` holds, work starts in ``group`` (on asyncio's fast path,
    in tasks its keeper there answers for): leaving the group waits for it, and cancelling
    the group cancels it; afterwards work starts elsewhere again."""
    owner = TaskOwner()
    release = anyio.Event()
    finished: list[str] = []

    async def job(name: str) -> None:
        await release.wait()
        finished.append(name)

    with anyio.fail_after(5):
        async with anyio.create_task_group() as group:
            with owner.hosted_by(group):
                assert owner.start_soon(job, "waited for")
            await anyio.sleep(0.01)
            release.set()
        assert finished == ["waited for"]

        release = anyio.Event()
        async with anyio.create_task_group() as group:
            with owner.hosted_by(group):
                assert owner.start_soon(job, "cancelled")
            await anyio.sleep(0.01)
            group.cancel_scope.cancel()
        assert finished == ["waited for"]

        done = anyio.Event()

        async def after() -> None:
            done.set()

        assert owner.start_soon(after)
        await done.wait()


@pytest.mark.anyio
async def test_a_failing_task_is_logged_and_cancels_nothing_else(
    anyio_backend: str, caplog: pytest.LogCaptureFixture
) -> None:
    owner = TaskOwner()
    done = anyio.Event()

    async def broken() -> None:
        raise ValueError("boom")

    async def fine() -> None:
        await anyio.sleep(0.05)
        done.set()

    with anyio.fail_after(5), caplog.at_level(logging.ERROR, "noetic_scratchpad"):
        async with anyio.create_task_group() as group:
            with owner.hosted_by(group):
                owner.start_soon(broken)
                owner.start_soon(fine)
        await done.wait()
    assert "background task failed" in caplog.text


@pytest.mark.anyio
async def test_the_owners_own_group_lasts_as_long_as_its_work(anyio_backend: str) -> None:
    """Without a lent group (generic path): a host task's group runs a burst of work and
    ends with it; the next burst starts a new one."""
    owner = TaskOwner()
    for _ in range(3):
        done = [anyio.Event() for _ in range(3)]

        async def job(event: anyio.Event) -> None:
            await anyio.sleep(0.01)
            event.set()

        for event in done:
            assert owner.start_soon(job, event)
        with anyio.fail_after(5):
            for event in done:
                await event.wait()
            while owner._group is not None:  # noqa: ASYNC110  # cleared as its last task ends
                await anyio.sleep(0.001)


@pytest.mark.asyncio
@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda fn: fn.__name__)
async def test_batcher_scenarios_on_the_generic_path(
    generic_asyncio: None, scenario: object
) -> None:
    """Every batcher scenario holds on asyncio with its workers in a task group."""
    await bounded(scenario)  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_batcher_and_bus_run_in_a_lent_group(anyio_backend: str) -> None:
    """A core-like owner lends its group to a batcher and to a bus: batches and async
    handlers run there, and leaving the group finds nothing left running."""
    batches: list[list[str]] = []
    handled: list[str] = []

    async def runner(key: str, jobs: list[str]) -> list[str]:
        await anyio.sleep(0.01)
        batches.append(jobs)
        return jobs

    async def handler(event: object) -> None:
        await anyio.sleep(0.01)
        handled.append("handled")

    batcher: KeyedBatcher[str, str, str] = KeyedBatcher(runner)
    bus = EventBus(handler_timeout=2)
    bus.subscribe(handler)
    with anyio.fail_after(5):
        async with anyio.create_task_group() as group:
            with batcher.tasks.hosted_by(group), bus.tasks.hosted_by(group):
                assert await batcher.submit("k", "job") == "job"
                bus.emit(StateDiscarded(layer_id="l", scope_key="k", reason="test"))
        assert (batches, handled) == ([["job"]], ["handled"])
        await bus.aclose()


@pytest.mark.anyio
async def test_storage_opened_in_one_task_is_written_and_closed_from_others(
    anyio_backend: str,
) -> None:
    """No caller enters a task group: a backend opened by one task, written by others and
    closed by yet another keeps working on every path."""
    owned = OwnedStorage("memory://")
    opened: list[object] = []

    async def open_it() -> None:
        opened.append(await owned.backend())

    async def write(n: int) -> None:
        backend = await owned.backend()
        await backend.set(f"k{n}", {"n": n})

    with anyio.fail_after(5):
        async with anyio.create_task_group() as group:
            group.start_soon(open_it)
        async with anyio.create_task_group() as group:
            for n in range(10):
                group.start_soon(write, n)
        async with anyio.create_task_group() as group:
            group.start_soon(owned.aclose)
    assert opened
    assert owned.opened is None


@pytest.mark.asyncio
async def test_a_sqlite_backend_writes_in_a_lent_group(tmp_path: Path) -> None:
    """``backend.tasks`` lends a backend's writes to an owner's group."""
    backend = await open_storage(f"sqlite:///{tmp_path / 'pad.db'}")
    try:
        async with anyio.create_task_group() as group:
            with backend.tasks.hosted_by(group):  # type: ignore[attr-defined]
                await backend.set("k", {"n": 1})
                assert await backend.get("k") == {"n": 1}
    finally:
        await backend.aclose()


def current_task() -> object:
    if _runtime.running_trio():
        import trio

        return trio.lowlevel.current_task()
    return asyncio.current_task()


@pytest.mark.anyio
async def test_a_worker_runs_burst_after_burst_in_one_task_of_a_lent_group(
    anyio_backend: str, caplog: pytest.LogCaptureFixture
) -> None:
    """While a group is lent, a worker's bursts all run in one task there, woken per
    burst; a burst that fails is logged and the next still runs; leaving the lending ends
    that task (the group closes), and later wakes run the job elsewhere."""
    owner = TaskOwner()
    tasks: list[object] = []
    finished: list[anyio.Event] = []

    async def burst() -> None:
        await anyio.lowlevel.checkpoint()
        tasks.append(current_task())  # the task itself: ids are reused
        finished[-1].set()
        if len(tasks) == 2:
            raise ValueError("boom")

    worker = owner.worker(burst)

    async def run_once() -> None:
        finished.append(anyio.Event())
        assert worker.wake()
        await finished[-1].wait()
        await anyio.sleep(0.01)  # the burst returns

    with anyio.fail_after(5), caplog.at_level(logging.ERROR, "noetic_scratchpad"):
        async with anyio.create_task_group() as group:
            with owner.hosted_by(group):
                for _ in range(4):
                    await run_once()
        assert len(set(tasks)) == 1
        assert len(tasks) == 4
        assert "background task failed" in caplog.text
        await run_once()  # no group lent: a task of its own
        assert tasks[-1] != tasks[0]
        async with anyio.create_task_group() as group:  # lent again: a new resident task
            with owner.hosted_by(group):
                await run_once()
                await run_once()
        assert len(set(tasks[-2:])) == 1
        assert tasks[-1] not in tasks[:-2]


@pytest.mark.anyio
async def test_a_worker_whose_group_was_cancelled_starts_anew(anyio_backend: str) -> None:
    """A resident task cancelled with its group leaves nothing behind: the worker's next
    wake, in the next lent group, runs the job."""
    owner = TaskOwner()
    ran = anyio.Event()

    async def burst() -> None:
        ran.set()

    worker = owner.worker(burst)
    with anyio.fail_after(5):
        async with anyio.create_task_group() as group:
            with owner.hosted_by(group):
                assert worker.wake()
                await ran.wait()
                group.cancel_scope.cancel()
        ran = anyio.Event()
        async with anyio.create_task_group() as group:
            with owner.hosted_by(group):
                assert worker.wake()
                await ran.wait()


@pytest.mark.anyio
async def test_a_second_lender_changes_nothing(anyio_backend: str) -> None:
    """An owner lent one group keeps it while a second lender's block runs."""
    owner = TaskOwner()
    async with anyio.create_task_group() as first, anyio.create_task_group() as second:
        with owner.hosted_by(first) as lent:
            assert lent
            with owner.hosted_by(second) as lent_again:
                assert not lent_again
            assert owner.lent
        assert not owner.lent


@pytest.mark.anyio
async def test_a_wake_just_before_the_lending_ends_still_runs(anyio_backend: str) -> None:
    """A worker woken as its group's lending ends (its resident task not yet resumed), or
    as the group is cancelled, still runs the job: its queue's callers would wait forever
    otherwise."""
    owner = TaskOwner()
    ran: list[str] = []
    second = anyio.Event()

    async def burst() -> None:
        ran.append("ran")
        if len(ran) == 2:
            second.set()

    worker = owner.worker(burst)
    with anyio.fail_after(5):
        async with anyio.create_task_group() as group:
            with owner.hosted_by(group):
                await anyio.sleep(0.01)  # the resident task waits
                assert worker.wake()
        assert ran == ["ran"]

        async with anyio.create_task_group() as group:
            with owner.hosted_by(group):
                await anyio.sleep(0.01)
                assert worker.wake()
                group.cancel_scope.cancel()
        await second.wait()  # run there, or handed on to a task of the owner's
