"""History and revert while other writers write the same scope, on every backend.

A revert rebuilds an older state from the stored state and the journal; a history lists
the journal with each entry's diff. Both must see the state and the journal as they were
at one instant: read apart, a write in between leaves the journal ahead of the state,
which looked like a gap in the history ("older than the kept history", diffs missing).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from noetic_scratchpad import (
    ScratchpadHandle,
    UpdateApplied,
    open_storage,
    scratchpad,
)
from noetic_scratchpad.keys import state_key
from noetic_scratchpad.layer.journal import state_at
from noetic_scratchpad.storage import StorageBackend
from noetic_scratchpad.testing import capture_events
from tests.conftest import run_python
from tests.storage.helpers import REPO

pytestmark = pytest.mark.asyncio

KEY = state_key("scratchpad", "thread", "t1")
WRITERS = 6
#: Writes per writer task: with the seeds and the reverts, fewer than ``HISTORY_LIMIT``,
#: so the whole journal is kept and every revert can be checked against it afterwards.
WRITES = 100
REVERTS = 60
HISTORY_LIMIT = 1000
RACER = Path(__file__).with_name("journal_racer.py")


async def write_until(storage: StorageBackend, name: str, stop: anyio.Event) -> None:
    """Update the scope ``WRITES`` times (or until ``stop``), yielding between writes."""
    handle = await scratchpad(history_limit=HISTORY_LIMIT).open(storage, thread_id="t1")
    for n in range(WRITES):
        if stop.is_set():
            return
        await handle.update({name: n})
        await anyio.lowlevel.checkpoint()


async def among_writers(storage: StorageBackend, work: Callable[[], Awaitable[None]]) -> None:
    """Run ``work`` while ``WRITERS`` tasks update the scope; they stop when it ends."""
    stop = anyio.Event()

    async def run_work() -> None:
        try:
            await work()
        finally:
            stop.set()

    async with anyio.create_task_group() as group:
        for index in range(WRITERS):
            group.start_soon(write_until, storage, f"w{index}", stop)
        group.start_soon(run_work)


async def reverts_among_writers(storage: StorageBackend, reverter: ScratchpadHandle) -> int:
    """``REVERTS`` reverts to two revisions back while the writers write; any error
    propagates. Returns how many found the scope moved on since they looked."""
    for n in range(3):
        await reverter.update({"seed": n})
    raced = 0

    async def revert_loop() -> None:
        nonlocal raced
        for _ in range(REVERTS):
            await reverter.refresh()
            seen = reverter.revision
            await anyio.lowlevel.checkpoint()  # writers write between the look and the revert
            await reverter.revert(seen - 2)
            raced += reverter.revision > seen + 1
            await anyio.lowlevel.checkpoint()

    await among_writers(storage, revert_loop)
    return raced


async def check_each_revert_restored_its_target(storage: StorageBackend) -> int:
    """Rebuild every kept revision from the journal: the state a revert wrote is the state
    of the revision it reverted to. Returns how many reverts were checked."""
    stored = await storage.get_revision(KEY)
    assert stored is not None
    rows = await storage.journal(KEY, limit=HISTORY_LIMIT)
    assert [row.revision for row in rows] == list(range(stored.revision, 0, -1))

    def at(revision: int) -> Any:
        newest_first = ((row.revision, row.entry) for row in rows)
        return state_at(revision, stored.value, stored.revision, newest_first)

    checked = 0
    for row in rows:
        if row.entry["source"] == "revert":
            assert at(row.revision) == at(row.entry["update"]["revert"]), row
            checked += 1
    return checked


async def test_revert_among_writers_never_reports_a_false_history_error(backend: Any) -> None:
    """Six writers and a revert to two revisions back, over and over: the target is always
    in the kept journal, so every revert succeeds: none raises ScratchpadHistoryError
    and, as the revert rebuilds inside its own write, none ScratchpadConflictError either
    (either would propagate and fail this test)."""
    reverter = await scratchpad(history_limit=HISTORY_LIMIT).open(backend, thread_id="t1")
    with capture_events(reverter.ctx.events) as events:
        raced = await reverts_among_writers(backend, reverter)
    assert raced > 0  # writes did land between the look and the revert
    reverted = [event for event in events.of(UpdateApplied) if event.source == "revert"]
    assert len(reverted) == REVERTS
    assert await check_each_revert_restored_its_target(backend) == REVERTS


async def test_history_among_writers_has_every_diff(backend: Any) -> None:
    """A history read while writers write lists consecutive revisions from the handle's
    new revision down, each with its diff: none is cut off as if a row were missing."""
    layer = scratchpad(history_limit=HISTORY_LIMIT)
    reader = await layer.open(backend, thread_id="t1")
    await reader.update({"seed": 0})
    reads = 0

    async def read_loop() -> None:
        nonlocal reads
        for _ in range(REVERTS):
            entries = await reader.history(limit=5)
            assert entries[0].revision == reader.revision
            revisions = [entry.revision for entry in entries]
            assert revisions == list(range(reader.revision, reader.revision - len(entries), -1))
            assert all(entry.changes is not None for entry in entries), entries
            reads += 1
            await anyio.lowlevel.checkpoint()

    await among_writers(backend, read_loop)
    assert reads == REVERTS


@pytest.mark.slow
async def test_revert_among_writer_processes_on_one_sqlite_file(tmp_path: Path) -> None:
    """The same race across processes sharing one SQLite file: three processes write, two
    revert to two revisions back; no revert fails, and each restored its target."""
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    async with await open_storage(url):
        pass  # the tables exist before any process starts

    async def run(role: str, name: str) -> dict[str, int]:
        done = await anyio.to_thread.run_sync(
            lambda: run_python(str(RACER), url, role, name, str(tmp_path), cwd=REPO, timeout=120)
        )
        assert done.returncode == 0, done.stderr
        counts: dict[str, int] = json.loads(done.stdout.splitlines()[-1])
        return counts

    results: dict[str, dict[str, int]] = {}

    async def collect(role: str, name: str) -> None:
        results[name] = await run(role, name)

    async with anyio.create_task_group() as group:
        for index in range(3):
            group.start_soon(collect, "write", f"p{index}")
        for index in range(2):
            group.start_soon(collect, "revert", f"r{index}")
    for name in ("r0", "r1"):
        assert results[name] == {"reverted": 40}, results
    async with await open_storage(url) as storage:
        assert await check_each_revert_restored_its_target(storage) == 80
