"""A write on an idle SQLite writer: its caller awaits its transaction itself, with no
worker task to start and wake (one pass of the event loop less for an uncontended write);
the writes started meanwhile queue behind it as the next transaction, and a caller
cancelled while its transaction runs (``task.cancel()``, ``asyncio.timeout``, an anyio
cancel scope) only stops waiting: the transaction ends in the thread before the next."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import anyio
import pytest

from noetic_scratchpad.errors import StorageOutcomeUnknownError
from noetic_scratchpad.locks import WorkAbandoned
from noetic_scratchpad.storage.sqlite import SqliteStorage
from noetic_scratchpad.storage.sqlite.writer import SqliteWriter

from .helpers import CANCELS, BatchSpy, cancelled

pytestmark = pytest.mark.asyncio


class Spy(BatchSpy):
    """The sizes of the transactions a writer runs, and how many times its worker ran."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        super().__init__(monkeypatch)
        self.bursts = 0
        work = SqliteWriter._work

        async def spy_work(writer: SqliteWriter) -> None:
            self.bursts += 1
            await work(writer)

        monkeypatch.setattr(SqliteWriter, "_work", spy_work)


def append(item: str) -> Any:
    return lambda current: [*(current or []), item]


async def test_an_uncontended_write_runs_without_the_worker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spy = Spy(monkeypatch)
    async with await SqliteStorage.open(f"sqlite:///{tmp_path / 'a.db'}") as storage:
        for item in "abc":
            await storage.update("k", append(item))
        assert (spy.sizes, spy.bursts) == ([1, 1, 1], 0)
        assert len(storage._writer) == 0  # idle between writes

        # Started together: the first runs alone, the rest are the worker's next batch.
        await asyncio.gather(*(storage.update("k", append(item)) for item in "defg"))
        assert (spy.sizes[3:], spy.bursts) == ([1, 3], 1)
        assert await storage.get("k") == list("abcdefg")
        assert len(storage._writer) == 0


@pytest.mark.parametrize("how", CANCELS)
async def test_a_caller_cancelled_while_its_transaction_waits_in_the_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """The write lands (its transaction was in the thread's queue), the writes started
    after it run after it, in order, and the writer ends idle."""
    spy = Spy(monkeypatch)
    async with await SqliteStorage.open(f"sqlite:///{tmp_path / 'c.db'}") as storage:
        writer = storage._writer
        await storage.update("k", append("before"))
        gate = threading.Event()
        blocked = asyncio.create_task(writer.call(gate.wait, 5))  # holds the thread
        await asyncio.sleep(0.01)

        await cancelled(how, lambda: storage.update("k", append("cancelled")), 0.02)
        assert len(writer) == 1  # still working: the cancelled transaction is to run
        later = asyncio.gather(*(storage.update("k", append(item)) for item in ("b", "c")))
        await asyncio.sleep(0.01)
        assert not later.done()

        gate.set()
        await blocked
        with anyio.fail_after(5):
            await later
        assert await storage.get("k") == ["before", "cancelled", "b", "c"]
        assert spy.sizes == [1, 1, 2]
        with anyio.fail_after(5):
            await writer.wait_idle()
        assert len(writer) == 0
        await storage.update("k", append("after"))
        assert spy.sizes[-1] == 1


async def test_a_worker_cancelled_mid_batch_tells_each_caller_what_became_of_its_write(
    tmp_path: Path,
) -> None:
    """The group hosting the writer's worker is cancelled (its owner shutting down) while
    the worker's batch waits in the connection's thread and another write queues: the
    batch's callers learn that their writes may have landed (the transaction is in the
    thread, and commits), the queued caller that nothing was written (it never runs), and
    the storage takes writes afterwards."""
    async with await SqliteStorage.open(f"sqlite:///{tmp_path / 'h.db'}") as storage:
        writer = storage._writer
        await storage.update("k", append("before"))
        first_gate, batch_gate = threading.Event(), threading.Event()
        outcomes: dict[str, Any] = {}

        async def write(item: str) -> None:
            try:
                outcomes[item] = await storage.update("k", append(item))
            except Exception as exc:
                outcomes[item] = exc

        async def until(predicate: Any) -> None:
            with anyio.fail_after(5):
                while not predicate():  # noqa: ASYNC110  # polls state no event announces
                    await asyncio.sleep(0.001)

        async with anyio.create_task_group() as callers, anyio.create_task_group() as host:
            with writer.tasks.hosted_by(host):
                held = asyncio.ensure_future(writer.call(first_gate.wait, 5))
                await asyncio.sleep(0.01)
                callers.start_soon(write, "alone")  # the idle writer's: its caller runs it
                await asyncio.sleep(0.01)
                # The thread then waits again, so the worker's batch waits behind this.
                held_again = asyncio.ensure_future(writer.call(batch_gate.wait, 5))
                for item in ("b1", "b2"):
                    callers.start_soon(write, item)
                await until(lambda: len(writer._queue) == 2)
                first_gate.set()
                await until(lambda: "alone" in outcomes and not writer._queue)  # batch taken
                callers.start_soon(write, "queued")
                await until(lambda: len(writer._queue) == 1)
                host.cancel_scope.cancel()
        assert outcomes["alone"] == ["before", "alone"]
        for item in ("b1", "b2"):
            assert isinstance(outcomes[item], StorageOutcomeUnknownError), outcomes[item]
            assert "may have been written or not" in str(outcomes[item])
        assert isinstance(outcomes["queued"], WorkAbandoned), outcomes["queued"]
        assert "nothing was written" in str(outcomes["queued"])

        batch_gate.set()
        await held
        await held_again
        await storage.update("k", append("after"))  # runs after the batch, in the thread
        assert await storage.get("k") == ["before", "alone", "b1", "b2", "after"]
        assert len(writer) == 0
