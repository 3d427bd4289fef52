"""Revisions and the journal across processes, on the stores processes share (SQLite,
PostgreSQL, Redis): writers racing on one key get consecutive revisions with no gap or duplicate,
and a writer killed with SIGKILL mid-stream leaves each key's state at the revision of its
newest journal row.

The writers are ``journal_writer.py`` processes, each with its own connections.
``NOETIC_KILL_ITERATIONS`` sets the kills per backend (default 3) and ``NOETIC_KILL_SEED``
replays a failing run's random choices.
"""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import time
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest
import pytest_asyncio

from noetic_scratchpad import open_storage
from noetic_scratchpad.storage import StorageBackend
from noetic_scratchpad.storage.base import Commit, Revision
from tests.conftest import postgres_test_url, redis_test_url, require_postgres, require_redis

from .helpers import acks, start_journal_writer

ITERATIONS = int(os.environ.get("NOETIC_KILL_ITERATIONS", "3"))
SEED = int(os.environ.get("NOETIC_KILL_SEED", str(random.randrange(2**32))))
KEEP = 20

pytestmark = [pytest.mark.slow, pytest.mark.asyncio]


@pytest_asyncio.fixture(params=["sqlite", "postgres", "redis"])
async def shared_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    """A store several processes can share, its tables created before any writer starts."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'shared.db'}"
    elif request.param == "redis":
        require_redis()
        url = redis_test_url()
    else:
        require_postgres()
        url = postgres_test_url()
    async with await open_storage(url):
        pass
    try:
        yield url
    finally:
        if request.param == "postgres":
            async with await open_storage(url) as cleanup:
                await cleanup.drop_table()  # type: ignore[attr-defined]
        if request.param == "redis":
            async with await open_storage(url) as cleanup:
                await cleanup.drop_keys()  # type: ignore[attr-defined]


def race(url: str, processes: int, commits: int) -> dict[str, list[tuple[str, int, int]]]:
    """Start the writers, let them go at once, and return each one's acks."""
    procs = {
        f"p{index}": start_journal_writer(url, f"p{index}", 1, commits, 1000)
        for index in range(processes)
    }
    try:
        for proc in procs.values():
            assert proc.stdout is not None
            assert proc.stdout.readline() == "ready\n"
        for proc in procs.values():
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        outputs = {name: proc.communicate(timeout=120)[0] for name, proc in procs.items()}
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert [proc.returncode for proc in procs.values()] == [0] * processes
    return {name: acks(output.splitlines()) for name, output in outputs.items()}


async def test_processes_committing_one_key_get_consecutive_revisions(shared_url: str) -> None:
    """4 processes commit 30 times each to one key at once: the 120 commits got the
    revisions 1..120, each exactly once, each process's in increasing order; the journal
    holds one row per revision, the entry of the commit that got it; the state is at
    revision 120 and counted every commit."""
    results = await anyio.to_thread.run_sync(race, shared_url, 4, 30)
    got = {revision: (name, n) for name, rows in results.items() for _, revision, n in rows}
    assert sorted(got) == list(range(1, 121))
    assert sum(len(rows) for rows in results.values()) == 120  # so no revision twice
    for rows in results.values():
        assert [revision for _, revision, _ in rows] == sorted(revision for _, revision, _ in rows)
    async with await open_storage(shared_url) as storage:
        journal = await storage.journal("k0", limit=1000)
        stored = await storage.get_revision("k0")
    assert [row.revision for row in journal] == list(range(120, 0, -1))
    assert {row.revision: (row.entry["writer"], row.entry["n"]) for row in journal} == got
    writer, n = got[120]
    assert stored == Revision({"writer": writer, "n": n, "count": 120}, 120)


def kill_mid_stream(url: str, rng: random.Random) -> tuple[dict[str, int], str]:
    """Run a writer of 3 keys, SIGKILL it after a random number of acks; return each
    key's last acknowledged revision and when the kill came."""
    process = start_journal_writer(url, "w", 3, 1_000_000, KEEP)
    assert process.stdout is not None
    assert process.stdin is not None
    lines: list[str] = []
    try:
        assert process.stdout.readline() == "ready\n"
        with process.stdin as stdin:
            stdin.write("go\n")
        target = rng.randrange(1, 600)
        while len(lines) < target:
            line = process.stdout.readline()
            assert line, f"the writer exited before {target} acks (rc={process.poll()})"
            lines.append(line)
        time.sleep(rng.uniform(0.0, 0.003))
        process.send_signal(signal.SIGKILL)
        with process.stdout as stream:  # what it printed before it died
            lines.extend(stream.read().splitlines())
        process.wait(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == -signal.SIGKILL
    last = dict.fromkeys(("k0", "k1", "k2"), 0)
    for key, revision, n in acks(lines):
        assert revision == n + 1  # one writer per key: its commit n made revision n + 1
        last[key] = max(last[key], revision)
    return last, f"after {target} acks"


async def check_consistent(storage: StorageBackend, key: str, acked: int, why: str) -> int:
    """The key's state is at its newest journal row's revision, every acknowledged commit
    is there, and the journal holds the KEEP newest commits with their entries."""
    stored = await storage.get_revision(key)
    rows = await storage.journal(key, limit=100)
    if stored is None:
        assert (acked, rows) == (0, []), why
        return 0
    revision = stored.revision
    assert acked <= revision <= acked + 1, f"{key}: revision {revision}, acked {acked} ({why})"
    assert stored.value == {"writer": "w", "n": revision - 1, "count": revision}, why
    assert [row.revision for row in rows] == list(range(revision, max(revision - KEEP, 0), -1))
    assert [row.entry for row in rows] == [{"writer": "w", "n": row.revision - 1} for row in rows]
    return revision


@pytest.mark.parametrize("iteration", range(ITERATIONS))
async def test_a_writer_killed_mid_stream_leaves_state_and_journal_consistent(
    shared_url: str, iteration: int
) -> None:
    """A writer streaming commits to 3 keys is killed with SIGKILL at a random moment: each
    key's state revision equals its newest journal row's, no acknowledged commit is lost,
    the journal holds the KEEP newest commits (the state's included) and no other, the
    SQLite file passes its integrity check, and the next commit continues the revisions."""
    rng = random.Random(SEED + iteration)
    last, moment = await anyio.to_thread.run_sync(kill_mid_stream, shared_url, rng)
    why = f"seed {SEED + iteration}, killed {moment}, acked {last}"
    if shared_url.startswith("sqlite"):
        with sqlite3.connect(shared_url.removeprefix("sqlite:///")) as raw:
            assert raw.execute("PRAGMA integrity_check").fetchall() == [("ok",)], why
    async with await open_storage(shared_url) as storage:
        for key, acked in last.items():
            revision = await check_consistent(storage, key, acked, why)
            after = await storage.commit(key, next_commit, keep=KEEP)
            assert after.revision == revision + 1, why


def next_commit(current: Revision) -> Commit:
    """The commit the writer process would have made next."""
    n = current.revision
    return Commit({"writer": "w", "n": n, "count": n + 1}, {"writer": "w", "n": n})
