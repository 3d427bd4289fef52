"""Writes across many scopes on the grouping backends (PostgreSQL's group commit, Redis's
rounds, SQLite's transactions of queued writes, whose idle writer lets a write's caller
run it alone), raced: writers on 30 scopes, a third of them cancelled mid-way in every way an
application cancels (``task.cancel()``, ``asyncio.timeout``, an anyio cancel scope),
while a second client of the same store writes some of the scopes in between. Every
acknowledged write is stored, every write lands whole or not at all (each scope's state
and journal agree, revision by revision), and the store writes on afterwards: with a
journal that never fills, and with one that is full from the second write on (SQLite then
rewrites its oldest row as the newest, in the race)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import pytest

from noetic_scratchpad.storage import StorageBackend, open_storage
from noetic_scratchpad.storage.base import Commit, Revision
from tests.conftest import postgres_test_url, redis_test_url, require_postgres, require_redis

pytestmark = pytest.mark.asyncio

KEYS = [f"scope-{i}" for i in range(30)]
WRITES = 3
#: Journal rows kept: more than a scope's writes, or full after its second write.
KEEPS = {"journal-not-full": 50, "journal-full": 2}


def increment(current: Revision) -> Commit:
    """``n`` one up, journaled: a scope's ``n`` is then its revision less one."""
    n = current.value["n"] + 1
    return Commit({"n": n}, {"n": n})


@asynccontextmanager
async def two_clients(
    kind: str, directory: Path
) -> AsyncIterator[tuple[StorageBackend, StorageBackend]]:
    """Two clients of one store (as two processes would hold)."""
    if kind == "sqlite":  # two writer connections on one file: SQLite serializes them
        url = f"sqlite:///{directory / 'races.db'}"
        async with await open_storage(url) as one, await open_storage(url) as two:
            yield one, two
        return
    if kind == "postgres":
        require_postgres()
        url = f"{postgres_test_url()}&pool_size=2"  # few transactions: batches queue
    else:
        require_redis()
        url = redis_test_url()
    one = await open_storage(url)
    two = await open_storage(url)
    try:
        yield one, two
    finally:
        await two.aclose()
        await one.aclose()
        cleanup = await open_storage(url)
        try:
            if kind == "postgres":
                await _drop_tables(cleanup)
            else:
                await cleanup.drop_keys()  # type: ignore[attr-defined]
        finally:
            await cleanup.aclose()


async def _drop_tables(storage: Any) -> None:
    settings = storage.settings
    async with storage._pool.acquire() as conn:
        await conn.execute(
            f"DROP TABLE IF EXISTS {settings.quoted_retired_table}, "
            f"{settings.quoted_journal_table}, {settings.quoted_table}"
        )


def _count_groups(storage: Any) -> list[int]:
    """The sizes of the groups ``storage`` writes from now on (its scheduler's runs of
    several scopes at once; SQLite's transactions of several writes)."""
    if hasattr(storage, "_writer"):
        writer = storage._writer
        transaction = writer.transaction
        counted_sizes: list[int] = []

        def counted_transaction(jobs: list[Any]) -> list[Any]:
            if len(jobs) > 1:
                counted_sizes.append(len(jobs))
            return transaction(jobs)

        writer.transaction = counted_transaction
        return counted_sizes
    scheduler = storage._groups if hasattr(storage, "_groups") else storage._rounds
    sizes: list[int] = []
    run_many = scheduler._run_many

    async def counted(members: list[Any]) -> None:
        sizes.append(len(members))
        await run_many(members)

    scheduler._run_many = counted
    return sizes


#: Seconds after which a writer is cancelled: mid-way through its writes. SQLite's, with no
#: round trip to a server, take a tenth of a millisecond each.
CANCEL_AFTER = {"postgres": 0.003, "redis": 0.003, "sqlite": 0.0005}


async def cancelled(how: str, write: Callable[[], Awaitable[None]], after: float) -> None:
    """Run ``write()`` and cancel it after ``after`` seconds, as ``how`` does."""
    if how == "task.cancel":
        task = asyncio.create_task(write())
        await asyncio.sleep(after)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    elif how == "asyncio.timeout":
        try:
            async with asyncio.timeout(after):
                await write()
        except TimeoutError:
            pass
    else:
        with anyio.move_on_after(after):
            await write()


@pytest.mark.parametrize("keep", list(KEEPS.values()), ids=list(KEEPS))
@pytest.mark.parametrize("kind", ["postgres", "redis", "sqlite"])
@pytest.mark.parametrize("how", ["task.cancel", "asyncio.timeout", "anyio"])
async def test_writes_across_scopes_raced_and_cancelled_land_whole_or_not_at_all(
    kind: str, how: str, keep: int, tmp_path: Path
) -> None:
    async with two_clients(kind, tmp_path) as (storage, elsewhere):
        for key in KEYS:
            await storage.set(key, {"n": 0})
        acknowledged: dict[str, list[int]] = {key: [] for key in KEYS}
        grouped = _count_groups(storage)

        async def writer(key: str, client: StorageBackend) -> None:
            for _ in range(WRITES):
                done = await client.commit(key, increment, keep=keep)
                acknowledged[key].append(done.revision)

        async with anyio.create_task_group() as tg:
            for i, key in enumerate(KEYS):
                if i % 3 == 0:
                    tg.start_soon(cancelled, how, partial(writer, key, storage), CANCEL_AFTER[kind])
                else:
                    tg.start_soon(writer, key, storage)
                if i % 5 == 0:  # the other client writes this scope in between
                    tg.start_soon(writer, key, elsewhere)

        for key in KEYS:
            stored = await storage.get_revision(key)
            assert stored is not None
            assert stored.value == {"n": stored.revision - 1}, key  # no write half-applied
            rows = await storage.journal(key, limit=keep + 1)
            # The newest revisions, down to the seed's (set: not journaled) or to keep rows.
            kept = list(range(stored.revision, max(stored.revision - keep, 1), -1))
            assert [row.revision for row in rows] == kept, key
            assert all(row.entry == {"n": row.revision - 1} for row in rows), key
            newest = {r for r in acknowledged[key] if r > stored.revision - keep}
            assert newest <= {row.revision for row in rows}, key  # none lost
            assert all(r <= stored.revision for r in acknowledged[key]), key
            if KEYS.index(key) % 3:  # not cancelled: all its writes acknowledged
                ours = WRITES + (WRITES if KEYS.index(key) % 5 == 0 else 0)
                assert len(acknowledged[key]) == ours, key

        cut = [key for i, key in enumerate(KEYS) if i % 3 == 0 and len(acknowledged[key]) < WRITES]
        assert cut  # the cancellations did land mid-way
        assert grouped  # and scopes did share transactions (rounds)
        # The store writes on: a write of every scope now lands at once.
        after = await asyncio.wait_for(
            asyncio.gather(*(storage.commit(key, increment, keep=keep) for key in KEYS)), 10
        )
        assert all(done.value == {"n": done.revision - 1} for done in after)
