"""The SQLite journal as a ring (see ``storage/sqlite/table.py``): whatever mix of keeps,
unjournaled revisions, sets, deletes and batches a key sees, its journal holds what the
journal keyed by revision held, the journaled revisions above each write's revision less
its keep; and a full ring costs one page per journaled commit."""

from __future__ import annotations

import asyncio
import random
import sqlite3
from pathlib import Path
from typing import Any

import anyio
import pytest

from noetic_scratchpad import open_storage
from noetic_scratchpad.storage.base import Commit, Revision, StorageBackend
from noetic_scratchpad.storage.sqlite import SqliteStorage

from .helpers import (
    CANCELS,
    JournalModel,
    acks,
    finish,
    in_one_transaction,
    journals,
    model_write,
    random_writes,
    start_journal_writer,
)

pytestmark = pytest.mark.asyncio


def _groups(rng: random.Random, count: int) -> list[list[tuple[Any, ...]]]:
    """:func:`random_writes` in groups; a group runs as one SQLite transaction."""
    groups: list[list[tuple[Any, ...]]] = []
    for step in random_writes(rng, count):
        if groups and rng.random() < 0.3:
            groups[-1].append(step)
        else:
            groups.append([step])
    return groups


def _assert_each_row_in_its_slot(path: Path) -> None:
    """Each row sits in the slot of its revision, in the ring of the keep it has: what
    lets a write rewrite a slot without looking at the others."""
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT keep, slot, revision FROM scratchpad_kv_journal")
        assert all(slot == revision % keep for keep, slot, revision in rows.fetchall())


@pytest.mark.parametrize("seed", range(24))
async def test_the_ring_holds_the_rows_a_revision_window_holds_whatever_the_history(
    tmp_path: Path, seed: int
) -> None:
    rng = random.Random(seed)
    model = JournalModel()
    path = tmp_path / "ring.db"
    async with await open_storage(f"sqlite:///{path}") as sqlite:
        for group in _groups(rng, 300):
            await in_one_transaction(sqlite, *(model_write(sqlite, step) for step in group))
            for step in group:
                model.apply(step)
            assert await journals(sqlite) == model.rows, group
            _assert_each_row_in_its_slot(path)


_EMPTY_WAL = "PRAGMA wal_checkpoint(TRUNCATE)"


def _wal_frames(path: Path) -> int:
    wal = path.with_name(path.name + "-wal")
    return (wal.stat().st_size - 32) // (4096 + 24) if wal.exists() else 0


async def test_a_full_ring_costs_one_page_per_journaled_commit(tmp_path: Path) -> None:
    """Pages written to the WAL by 200 commits of a full ring against 200 commits that
    journal nothing: one more per commit (its row, rewritten in place), where a journal
    keyed by revision wrote two (the row and its index entry)."""
    path = tmp_path / "pages.db"
    value = {"text": "x" * 500}
    async with await SqliteStorage.open(f"sqlite:///{path}") as storage:
        for key, keep in (("journaled", 50), ("plain", 0)):
            for _ in range(60):  # the ring fills
                await storage.commit(key, lambda _c: Commit(value, {"e": 1}), keep=keep)
        frames = {}
        conn = storage._writer.conn
        for key, keep in (("journaled", 50), ("plain", 0)):
            # The WAL emptied first, for a clean count.
            await storage._writer.call(lambda: conn.execute(_EMPTY_WAL).fetchall())
            for _ in range(200):
                await storage.commit(key, lambda _c: Commit(value, {"e": 1}), keep=keep)
            frames[key] = _wal_frames(path)
    per_commit = (frames["journaled"] - frames["plain"]) / 200
    assert 0.9 <= per_commit <= 1.1, frames


RACED = ("k0", "k1", "k2")
RACE_KEEP = 5


def _counted(writer: str, n: int) -> Any:
    """A journal writer's commit: the stored count plus one, journaling (writer, n)."""
    entry = {"writer": writer, "n": n}

    def fn(current: Revision) -> Commit:
        return Commit({**entry, "count": (current.value or {}).get("count", 0) + 1}, entry)

    return fn


async def _ours_cancelled_or_not(
    storage: StorageBackend,
    key: str,
    n: int,
    how: str,
    delays: random.Random,
    acked: dict[Any, Any],
) -> None:
    """One of this process's commits, cut short after 0-2 ms as ``how`` (one of
    :data:`CANCELS`) does, or left to finish; what it was acknowledged with is recorded."""
    delay = delays.uniform(0, 0.002)
    write = storage.commit(key, _counted("here", n), keep=RACE_KEEP)
    done: Revision | None = None
    if how == "task.cancel":
        task = asyncio.ensure_future(write)
        await asyncio.sleep(delay)
        task.cancel()
        done = (await asyncio.gather(task, return_exceptions=True))[0]
    elif how == "asyncio.timeout":
        try:
            async with asyncio.timeout(delay):
                done = await write
        except TimeoutError:
            pass
    else:
        with anyio.move_on_after(delay):
            done = await write
    if isinstance(done, Revision):
        acked[key, done.revision] = {"writer": "here", "n": n}


@pytest.mark.slow
async def test_full_rings_raced_by_processes_and_cancelled_writers_stay_whole(
    tmp_path: Path,
) -> None:
    """Two processes and this one's tasks commit to three keys at once, all keeping 5
    rows (the processes' commits land before, between and after this one's), while this
    process cancels a third of its own commits mid-flight in each of the three ways:
    every key ends with exactly the rows of its 5 newest revisions, each in its slot;
    its count is its revision (no commit lost or doubled, cancelled ones included); and
    each acknowledged commit still in the window is its revision's row."""
    url = f"sqlite:///{tmp_path / 'race.db'}"
    async with await open_storage(url):  # the tables, before any writer starts
        pass
    children = [start_journal_writer(url, f"p{i}", 3, 400, RACE_KEEP) for i in range(2)]
    acked: dict[Any, Any] = {}
    delays = random.Random(26)
    try:
        for child in children:
            assert child.stdout is not None
            assert child.stdout.readline() == "ready\n"
        async with await open_storage(url) as storage:
            for child in children:
                assert child.stdin is not None
                child.stdin.write("go\n")
                child.stdin.flush()
            writes = [
                _ours_cancelled_or_not(storage, key, n, CANCELS[n // 3 % 3], delays, acked)
                if n % 3 == 0
                else storage.commit(key, _counted("here", n), keep=RACE_KEEP)
                for n in range(120)
                for key in RACED
            ]
            outcomes = await asyncio.gather(*writes)
            for n, outcome in enumerate(outcomes):
                if isinstance(outcome, Revision):
                    acked[RACED[n % 3], outcome.revision] = {"writer": "here", "n": n // 3}
            outputs = [finish(child)[0] for child in children]
            for index, output in enumerate(outputs):
                for key, revision, n in acks(output.splitlines()):
                    acked[key, revision] = {"writer": f"p{index}", "n": n}
            for key in RACED:
                stored = await storage.get_revision(key)
                assert stored is not None
                revision = stored.value["count"]
                assert stored.revision == revision
                rows = await storage.journal(key, limit=100)
                assert [row.revision for row in rows] == list(range(revision, revision - 5, -1))
                assert {k: v for k, v in stored.value.items() if k != "count"} == rows[0].entry
                for row in rows:
                    assert acked.get((key, row.revision), row.entry) == row.entry
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
    _assert_each_row_in_its_slot(tmp_path / "race.db")
    with sqlite3.connect(tmp_path / "race.db") as conn:
        assert conn.execute("SELECT DISTINCT keep FROM scratchpad_kv_journal").fetchall() == [(5,)]
