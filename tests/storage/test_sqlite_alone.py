"""A write on an idle SQLite writer: its caller awaits its transaction itself, with no
worker task to start and wake (one pass of the event loop less for an uncontended write);
the writes started meanwhile queue behind it as the next transaction, and a caller
cancelled while its transaction runs (``task.cancel()``, ``asyncio.timeout``, an anyio
cancel scope) only stops waiting: the transaction ends in the thread before the next."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest

from noetic_scratchpad.storage.sqlite import SqliteStorage
from noetic_scratchpad.storage.sqlite.writer import SqliteWriter

from .helpers import CANCELS, cancelled

pytestmark = pytest.mark.asyncio


class Spy:
    """The sizes of the transactions a writer runs, and how many times its worker ran."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.sizes: list[int] = []
        self.bursts = 0
        transaction, work = SqliteWriter.transaction, SqliteWriter._work

        def spy_transaction(writer: SqliteWriter, jobs: Sequence[Any]) -> list[Any]:
            self.sizes.append(len(jobs))
            return transaction(writer, jobs)

        async def spy_work(writer: SqliteWriter) -> None:
            self.bursts += 1
            await work(writer)

        monkeypatch.setattr(SqliteWriter, "transaction", spy_transaction)
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
