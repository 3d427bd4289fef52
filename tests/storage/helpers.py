"""Helpers for the storage tests: other processes that use the same SQLite file, writes
run as one transaction of a SQLite storage, the sizes of the transactions it runs, a
write cancelled in each way an application cancels, the changes a backend watches, and
a model of the journal every backend keeps."""

from __future__ import annotations

import asyncio
import random
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
from noetic_scratchpad.storage.base import Commit
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


# -- the journal's rule, as a model ----------------------------------------------------------

#: The keys and keeps of :func:`random_writes`.
MODEL_KEYS = ("a", "b")
MODEL_KEEPS = (1, 2, 3, 5, 20, 40)


def random_writes(rng: random.Random, count: int) -> list[tuple[Any, ...]]:
    """``count`` writes ``(kind, key, n, keep)`` of the keys :data:`MODEL_KEYS`: mostly
    journaled commits, with a keep that changes now and then (so journals fill, shrink
    and grow), and commits without an entry, sets and deletes among them."""
    keep = 3
    steps = []
    for n in range(count):
        if rng.random() < 0.1:
            keep = rng.choice(MODEL_KEEPS)
        kind = rng.choices(("journaled", "unjournaled", "set", "delete"), weights=(80, 8, 6, 3))[0]
        steps.append((kind, rng.choice(MODEL_KEYS), n, keep))
    return steps


def model_write(storage: StorageBackend, step: tuple[Any, ...]) -> Awaitable[Any]:
    """The write ``step`` (see :func:`random_writes`) describes, as a coroutine of
    ``storage``."""
    kind, key, n, keep = step
    if kind == "journaled":
        return storage.commit(key, lambda _current: Commit({"n": n}, {"e": n}), keep=keep)
    if kind == "unjournaled":
        return storage.commit(key, lambda _current: Commit({"n": n}), keep=keep)
    if kind == "set":
        return storage.set(key, {"n": n})
    return storage.delete(key)


class JournalModel:
    """What every backend's journal holds: a journaled commit at revision ``r`` with
    keep ``k`` adds its row and drops those at or below ``r - k`` (so the rows of the
    key's last ``k`` revisions stay, fewer where some were never journaled); a delete
    drops them all; nothing else touches it."""

    def __init__(self) -> None:
        self.revisions = dict.fromkeys(MODEL_KEYS, 0)
        self.rows: dict[str, list[tuple[int, Any]]] = {key: [] for key in MODEL_KEYS}

    def apply(self, step: tuple[Any, ...]) -> None:
        kind, key, n, keep = step
        if kind == "delete":
            self.rows[key] = []
            return
        revision = self.revisions[key] = self.revisions[key] + 1
        if kind == "journaled":
            kept = [row for row in self.rows[key] if row[0] > revision - keep]
            self.rows[key] = [(revision, {"e": n}), *kept]


async def journals(storage: StorageBackend) -> dict[str, Any]:
    """Each of :data:`MODEL_KEYS`'s journal as ``(revision, entry)`` pairs, newest first."""
    return {
        key: [(row.revision, row.entry) for row in await storage.journal(key, limit=100)]
        for key in MODEL_KEYS
    }
