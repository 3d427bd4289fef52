"""Helpers for the storage tests: other processes that use the same SQLite file, writes
run as one transaction of a SQLite storage, the sizes of the transactions it runs, a
write cancelled in each way an application cancels, and the changes a backend watches."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.streams.memory import MemoryObjectReceiveStream

from noetic_scratchpad.storage import StorageBackend
from noetic_scratchpad.storage.notices import ChangeNotice, watch_changes
from noetic_scratchpad.storage.sqlite.writer import SqliteWriter

REPO = Path(__file__).resolve().parents[2]
#: The kinds the contract suite runs: the shared backends, two wrappers (a FaultyStorage,
#: a namespace) and the example of docs/storage.md (see the ``storage`` fixture).
CONTRACT_KINDS = (
    "memory",
    "sqlite",
    "postgres",
    "redis",
    "faulty-sqlite",
    "namespaced-sqlite",
    "example",
)

_LOCKER = textwrap.dedent(
    """
    import sqlite3, sys
    conn = sqlite3.connect(sys.argv[1], isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")
    print("locked", flush=True)
    sys.stdin.readline()  # hold the write lock until the test says so
    conn.execute("ROLLBACK")
    conn.close()
    """
)


def python(code: str, *args: str) -> subprocess.Popen[str]:
    """Start ``code`` in a fresh interpreter (the package importable), pipes on all streams."""
    return subprocess.Popen(
        [sys.executable, "-c", code, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )


def start_journal_writer(
    url: str, name: str, tasks: int, commits: int, keep: int
) -> subprocess.Popen[str]:
    """A ``journal_writer.py`` process (see there): it prints ``ready``, then waits for a
    line on stdin before its ``tasks`` tasks commit to the keys ``k0``, ``k1``, ..."""
    args = [url, name, str(tasks), str(commits), str(keep)]
    return subprocess.Popen(
        [sys.executable, str(Path(__file__).with_name("journal_writer.py")), *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )


def acks(lines: list[str]) -> list[tuple[str, int, int]]:
    """The (key, revision, n) of each ``ack`` line of a journal writer."""
    return [
        (key, int(revision), int(n))
        for key, revision, n in (line.split()[1:] for line in lines if line.startswith("ack "))
    ]


def finish(proc: subprocess.Popen[str], timeout: float = 60) -> tuple[str, str]:
    """Wait for ``proc`` and return its output; kill it if it outlives ``timeout``."""
    try:
        return proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
        raise AssertionError(f"the process did not finish within {timeout} s: {err}") from None


@contextmanager
def write_lock_held_by_another_process(path: Path) -> Iterator[Callable[[], None]]:
    """Inside the block another process holds ``BEGIN IMMEDIATE`` on the database at ``path``.

    Yields ``release``, which ends the other process's transaction early; otherwise it
    ends when the block does.
    """
    proc = python(_LOCKER, str(path))

    def release() -> None:
        if proc.poll() is None:
            proc.communicate("release\n", timeout=10)

    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if line.strip() != "locked":
            _, err = proc.communicate(timeout=10)
            raise AssertionError(f"the locking process did not start: {line!r} {err}")
        yield release
    finally:
        release()


class BatchSpy:
    """Records the size of each transaction a SqliteStorage runs (SqliteWriter.transaction
    runs one batch of writes as one transaction)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.sizes: list[int] = []
        original = SqliteWriter.transaction

        def spy(writer: SqliteWriter, jobs: Sequence[Any]) -> list[Any]:
            self.sizes.append(len(jobs))
            return original(writer, jobs)

        monkeypatch.setattr(SqliteWriter, "transaction", spy)


async def in_one_transaction(
    storage: Any, *writes: Awaitable[Any], return_exceptions: bool = False
) -> list[Any]:
    """The outcomes of ``writes`` (coroutines of ``storage``, a SQLite storage), run in
    order as one transaction. An idle writer runs the first write of a burst alone, its
    caller awaiting that transaction, and those started with it queue behind it as the
    next one: a write of a key of its own goes first (a transaction of one, then theirs)."""
    outcomes = await asyncio.gather(
        storage.set("(first of the burst)", None), *writes, return_exceptions=return_exceptions
    )
    return list(outcomes[1:])


#: The ways an application cancels a write: ``task.cancel()``, ``asyncio.timeout``, an
#: anyio cancel scope.
CANCELS = ("task.cancel", "asyncio.timeout", "anyio")


async def cancelled(how: str, write: Callable[[], Awaitable[Any]], after: float) -> None:
    """Run ``write()``, cancelled as ``how`` (one of :data:`CANCELS`) does after ``after``
    seconds, while it still waits; fails unless it was cut short."""
    if how == "task.cancel":
        task = asyncio.ensure_future(write())
        await asyncio.sleep(after)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    elif how == "asyncio.timeout":
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(after):
                await write()
    else:
        with anyio.move_on_after(after) as scope:
            await write()
        assert scope.cancelled_caught


Notices = MemoryObjectReceiveStream[ChangeNotice]


@asynccontextmanager
async def watching(backend: StorageBackend, buffer: int = 100) -> AsyncIterator[Notices]:
    """The notices ``backend`` watches, as a stream (of ``buffer`` notices), from once it
    listens (0.3 s) until the block ends."""
    notices = watch_changes(backend)
    assert notices is not None
    send, receive = anyio.create_memory_object_stream[ChangeNotice](buffer)

    async def forward() -> None:
        async with send:
            async for notice in notices:
                await send.send(notice)

    async with receive, anyio.create_task_group() as tg:
        tg.start_soon(forward)
        await anyio.sleep(0.3)  # listening
        yield receive
        tg.cancel_scope.cancel()
    await notices.aclose()
