"""A layer's ``ttl`` on every backend: an expired scope reads as empty, a write after the
expiry starts it afresh above its old revisions, and the boundary is exact."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from noetic_scratchpad import (
    ScratchpadConfigError,
    ScratchpadConflictError,
    ScratchpadHandle,
    ScratchpadHistoryError,
    ScratchpadLayer,
    scratchpad,
)
from noetic_scratchpad.keys import state_key
from noetic_scratchpad.storage import StorageBackend
from tests.conftest import POSTGRES_URL
from tests.test_erasure_evidence import every_redis_key, every_sqlite_row

pytestmark = pytest.mark.asyncio

TTL = 30.0
KEY = state_key("scratchpad", "thread", "t1")


class Clock:
    """An injectable clock: Unix seconds, set by the test."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


async def _written_at(storage: StorageBackend) -> float:
    """When the backend says the scope's state was last written (its own clock's time)."""
    (info,) = [info for info in await storage.describe(KEY) if info.key == KEY]
    return info.updated_at


async def test_a_scope_reads_as_empty_from_exactly_ttl_after_its_last_write(
    storage: StorageBackend,
) -> None:
    clock = Clock()
    layer = scratchpad(ttl=timedelta(seconds=TTL), clock=clock)
    writer = await layer.open(storage, thread_id="t1")
    await writer.update({"goal": "ship"})
    await writer.update({"step": "tests"})
    written = await _written_at(storage)

    clock.now = written + TTL - 0.001
    live = await layer.open(storage, thread_id="t1")
    assert (live.snapshot, live.revision) == ({"goal": "ship", "step": "tests"}, 2)
    assert [entry.revision for entry in await live.history()] == [2, 1]

    clock.now = written + TTL
    gone = await layer.open(storage, thread_id="t1")
    assert (gone.snapshot, gone.revision) == (layer.initial_state(), 0)
    assert await gone.history() == []
    assert (gone.snapshot, gone.revision) == (layer.initial_state(), 0)  # history's read agrees
    await writer.refresh()
    assert (writer.snapshot, writer.revision) == (layer.initial_state(), 0)


async def _expired(
    storage: StorageBackend, *updates: dict[str, str], late: float = 0
) -> tuple[Clock, ScratchpadLayer, ScratchpadHandle]:
    """A scope written with ``updates``, then the clock ``late`` seconds past its expiry."""
    clock = Clock()
    layer = scratchpad(ttl=TTL, clock=clock)
    handle = await layer.open(storage, thread_id="t1")
    for update in updates:
        await handle.update(update)
    clock.now = await _written_at(storage) + TTL + late
    return clock, layer, handle


async def test_a_write_after_expiry_starts_afresh_above_the_old_revisions(
    storage: StorageBackend,
) -> None:
    clock, layer, before = await _expired(storage, {"goal": "ship"}, {"step": "tests"}, late=1)

    # A handle that last saw revision 2 and never re-read: its write must not merge into
    # the expired state, nor reuse a revision number.
    await before.update({"fresh": True})
    assert (before.snapshot, before.revision) == ({"fresh": True}, 3)
    clock.now = await _written_at(storage)  # that write is new
    again = await layer.open(storage, thread_id="t1")
    assert (again.snapshot, again.revision) == ({"fresh": True}, 3)
    # The history starts at the write after the expiry; nothing before it can come back.
    assert [entry.revision for entry in await again.history()] == [3]
    with pytest.raises(ScratchpadHistoryError):
        await again.revert(2)
    assert await storage.get(KEY) == {"fresh": True}


async def test_an_expected_revision_from_before_the_expiry_no_longer_matches(
    storage: StorageBackend,
) -> None:
    _clock, _layer, handle = await _expired(storage, {"goal": "ship"})
    with pytest.raises(ScratchpadConflictError) as refused:
        await handle.update({"goal": "late"}, expected_revision=1)
    assert (refused.value.expected, refused.value.actual) == (1, 0)
    await handle.update({"goal": "new"}, expected_revision=0)  # what a reader sees now
    assert (handle.snapshot, handle.revision) == ({"goal": "new"}, 2)


async def test_expiry_with_the_real_clock(storage: StorageBackend) -> None:
    """No injected clock: the backend's write time (PostgreSQL's now(), the others' own
    clock) against this process's, with a short real ttl."""
    layer = scratchpad(ttl=0.3)
    handle = await layer.open(storage, thread_id="t1")
    await handle.update({"goal": "ship"})
    assert (await layer.open(storage, thread_id="t1")).snapshot == {"goal": "ship"}
    await asyncio.sleep(0.4)
    assert (await layer.open(storage, thread_id="t1")).snapshot == layer.initial_state()
    await handle.update({"goal": "again"})
    assert handle.revision == 2


async def test_a_scope_written_within_the_ttl_lives_on(storage: StorageBackend) -> None:
    clock = Clock()
    layer = scratchpad(ttl=TTL, clock=clock)
    handle = await layer.open(storage, thread_id="t1")
    await handle.update({"goal": "ship"})
    clock.now = await _written_at(storage) + TTL - 1
    await handle.update({"step": "tests"})  # the last write moves the expiry on
    clock.now = await _written_at(storage) + TTL - 1
    reread = await layer.open(storage, thread_id="t1")
    assert (reread.snapshot, reread.revision) == ({"goal": "ship", "step": "tests"}, 2)


@pytest.mark.parametrize("ttl", [0, -1, float("nan"), float("inf"), "30", True, timedelta(0)])
@pytest.mark.parametrize("name", ["ttl", "history_max_age"])
async def test_a_ttl_that_is_not_a_positive_duration_is_refused(name: str, ttl: object) -> None:
    with pytest.raises(ScratchpadConfigError, match=f"{name} must be"):
        scratchpad(**{name: ttl})


async def test_the_sweep_deletes_expired_scopes_and_keeps_their_revisions(
    storage: StorageBackend,
) -> None:
    """Expired scopes go from storage with their journals; a live one and another layer's
    scope stay; written again, a swept scope goes on above its old revision."""
    clock = Clock()
    layer = scratchpad(ttl=TTL, clock=clock)
    other = scratchpad(name="profile", ttl=TTL, clock=clock)
    for thread in ("old1", "old2"):
        await (await layer.open(storage, thread_id=thread)).update({"goal": thread})
    await (await other.open(storage, thread_id="old1")).update({"goal": "theirs"})
    old_key = state_key("scratchpad", "thread", "old2")
    (old,) = await storage.describe(old_key)
    await asyncio.sleep(0.05)  # so that the backend's clock puts the next write later
    fresh = await layer.open(storage, thread_id="fresh")
    await fresh.update({"goal": "new"})
    (new,) = await storage.describe(state_key("scratchpad", "thread", "fresh"))
    clock.now = (old.updated_at + new.updated_at) / 2 + TTL  # the first three expired

    assert await layer.sweep(storage, limit=1) == (1, 0)  # a bounded step
    assert await layer.sweep(storage) == (1, 0)
    assert await layer.sweep(storage) == (0, 0)
    left = await storage.list("scopes/")
    assert left == [
        state_key("profile", "thread", "old1"),
        state_key("scratchpad", "thread", "fresh"),
    ]
    assert await storage.journal(old_key, limit=10) == []
    again = await layer.open(storage, thread_id="old2")
    assert (again.snapshot, again.revision) == (layer.initial_state(), 0)
    await again.update({"goal": "back"})
    assert again.revision == 2


async def test_the_sweep_keeps_a_scope_written_since_it_expired(storage: StorageBackend) -> None:
    _clock, layer, handle = await _expired(storage, {"goal": "ship"}, late=1)
    sweep_before = (await _written_at(storage)) + 0.001
    await asyncio.sleep(0.05)
    await handle.update({"goal": "again"})  # written again after the expiry
    # A sweep that picked the cut-off before that write must not take it.
    from noetic_scratchpad.storage.sweep import sweep_expired

    assert await sweep_expired(storage, "scopes/", sweep_before) == 0
    assert await storage.get(KEY) == {"goal": "again"}
    assert layer.config.ttl == TTL


async def test_a_layer_without_a_ttl_refuses_to_sweep(storage: StorageBackend) -> None:
    with pytest.raises(ScratchpadConfigError, match="no ttl and no history_max_age"):
        await scratchpad().sweep(storage)


async def test_a_backend_that_cannot_sweep_still_hides_expired_scopes() -> None:
    """docs/storage.md's example backend implements the primitives only: ttl works on it
    through describe, and the sweep says it cannot."""
    from tests.storage.example_backend import example_backend

    async with example_backend()() as storage:
        _clock, layer, _handle = await _expired(storage, {"goal": "ship"})
        assert (await layer.open(storage, thread_id="t1")).revision == 0
        assert await layer.sweep(storage) == (None, 0)
        assert await storage.get(KEY) == {"goal": "ship"}


async def test_journal_entries_older_than_history_max_age_are_gone(
    storage: StorageBackend,
) -> None:
    """Retention by age beside count: history and revert stop at the first entry written
    history_max_age or more ago, and the sweep deletes such rows, oldest first, leaving
    the state and the newer rows."""
    clock = Clock()
    layer = scratchpad(history_max_age=timedelta(seconds=TTL), clock=clock)
    handle = await layer.open(storage, thread_id="t1")
    for step in ("one", "two"):
        await handle.update({"step": step})
    await asyncio.sleep(0.05)  # so that the backend's clock puts the next writes later
    for step in ("three", "four"):
        await handle.update({"step": step})
    rows = await storage.journal(KEY, limit=10)
    assert [row.revision for row in rows] == [4, 3, 2, 1]
    first, second, third = rows[3].written_at, rows[2].written_at, rows[1].written_at

    clock.now = first + TTL - 0.0001
    assert [entry.revision for entry in await handle.history()] == [4, 3, 2, 1]
    clock.now = second + TTL  # revision 2's entry (and 1's) are exactly that old
    assert [entry.revision for entry in await handle.history()] == [4, 3]
    with pytest.raises(ScratchpadHistoryError, match="older than the kept history"):
        await handle.revert(1)
    assert [row.revision for row in await storage.journal(KEY, limit=10)] == [4, 3, 2, 1]

    clock.now = (second + third) / 2 + TTL
    assert await layer.sweep(storage, limit=1) == (0, 1)  # a bounded step, oldest first
    assert [row.revision for row in await storage.journal(KEY, limit=10)] == [4, 3, 2]
    assert await layer.sweep(storage) == (0, 1)
    assert [row.revision for row in await storage.journal(KEY, limit=10)] == [4, 3]
    assert await storage.get(KEY) == {"step": "four"}
    await handle.revert(3)  # what is kept still rebuilds
    assert handle.snapshot == {"step": "three"}


async def _every_row_of_its_tables(settings: Any) -> str:
    """Every row of a PostgreSQL backend's three tables, as text (its own only: other
    tests create and drop tables of their own meanwhile)."""
    import asyncpg  # type: ignore[import-untyped, unused-ignore]

    conn = await asyncpg.connect(POSTGRES_URL.split("?", 1)[0])
    try:
        tables = (
            settings.quoted_table,
            settings.quoted_journal_table,
            settings.quoted_retired_table,
        )
        rows = [await conn.fetch(f"SELECT t::text AS row FROM {table} AS t") for table in tables]
        return "\n".join(row["row"] for found in rows for row in found)
    finally:
        await conn.close()


async def _everything_stored(storage: Any, kind: str) -> str:
    """Every row or key the backend holds, as text, read around it (the erasure test's
    auditor's look)."""
    if kind == "sqlite":
        return every_sqlite_row(Path(storage.path))
    if kind == "postgres":
        return await _every_row_of_its_tables(storage.settings)
    if kind == "redis":
        text = await every_redis_key(storage.settings.url, storage.settings.prefix)
        return text.encode().decode("unicode_escape")
    return repr(vars(storage))


async def test_a_swept_scope_leaves_nothing_of_its_state_or_journal_in_storage(
    storage: StorageBackend, backend_kind: str
) -> None:
    marker = f"swept-marker-{backend_kind}-{id(storage)}"
    _clock, layer, handle = await _expired(storage, {"goal": marker}, {"step": marker}, late=1)
    assert marker in await _everything_stored(storage, backend_kind)
    assert await layer.sweep(storage) == (1, 0)
    assert marker not in await _everything_stored(storage, backend_kind)
    await handle.update({"goal": "back"})
    assert handle.revision == 3  # the kept revision: all that is left of it
