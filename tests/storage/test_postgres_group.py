"""Group commit on PostgreSQL: the batches of many keys queued while the pool's
transactions run share one transaction, and each key keeps its own rules: its revisions,
its journal rows and trim, its notices; a row held elsewhere or missing runs alone; a
write that fails fails alone."""

from __future__ import annotations

import asyncio
from typing import Any

import anyio
import pytest

from noetic_scratchpad import open_storage
from noetic_scratchpad.storage.base import Commit, Revision
from noetic_scratchpad.storage.postgres import PostgresStorage
from tests.storage.test_postgres_journal import Tables, tables

pytestmark = [pytest.mark.postgres, pytest.mark.asyncio]

__all__ = ("tables",)


def entry_commit(n: int) -> Any:
    return lambda current: Commit({"n": n, "was": current.revision}, {"n": n})


async def _writes(storage: Any, keys: list[str], rounds: int, keep: int) -> dict[str, list[Any]]:
    results: dict[str, list[Any]] = {key: [] for key in keys}

    async def writer(key: str) -> None:
        for n in range(rounds):
            results[key].append(await storage.commit(key, entry_commit(n), keep=keep))

    async with anyio.create_task_group() as tg:
        for key in keys:
            tg.start_soon(writer, key)
    return results


async def test_writes_of_many_keys_share_transactions_and_keep_each_keys_journal(
    tables: Tables,
) -> None:
    async with await open_storage(f"{tables.url}&pool_size=1") as storage:
        assert isinstance(storage, PostgresStorage)
        keys = [f"k{i}" for i in range(20)]
        for key in keys:
            await storage.commit(key, entry_commit(-1), keep=2)
        queries: list[str] = []
        async with storage._pool.acquire() as conn:  # the pool's only connection
            conn.add_query_logger(lambda record: queries.append(record.query))
        results = await _writes(storage, keys, rounds=3, keep=2)
        for key in keys:
            assert results[key] == [Revision({"n": n, "was": n + 1}, n + 2) for n in range(3)]
            assert await storage.get_revision(key) == Revision({"n": 2, "was": 3}, 4)
            journal = await storage.journal(key, limit=9)
            assert [(row.revision, row.entry) for row in journal] == [
                (4, {"n": 2}),
                (3, {"n": 1}),
            ]
        begins = sum(1 for query in queries if query.startswith("BEGIN"))
        assert begins < 60 / 4  # 60 writes, in far fewer transactions


async def test_a_row_held_elsewhere_waits_alone_and_a_missing_key_is_created(
    tables: Tables,
) -> None:
    async with await open_storage(f"{tables.url}&pool_size=2") as storage:
        for key in ("held", "a", "b", "c"):
            await storage.set(key, 0)
        other = await tables.connect()
        try:
            transaction = other.transaction()
            await transaction.start()
            await other.execute(f"SELECT 1 FROM {tables.table} WHERE key = 'held' FOR UPDATE")
            # The write of the held row waits in one of the pool's two transactions.
            blockers = [asyncio.create_task(storage.update("held", lambda v: v + 1))]
            await asyncio.sleep(0.1)
            results = await asyncio.wait_for(_free_keys(storage), 5)
            assert results == [1, 1, 1, "created"]
            assert not blockers[0].done()
            await transaction.commit()
            assert await asyncio.wait_for(blockers[0], 5) == 1
        finally:
            await other.close()
        assert await storage.get_revision("new") == Revision("created", 1)
        assert await storage.get("held") == 1


async def _free_keys(storage: Any) -> list[Any]:
    return list(
        await asyncio.gather(
            *(storage.update(key, lambda v: (v or 0) + 1) for key in "abc"),
            storage.update("new", lambda v: "created"),
        )
    )


async def test_a_write_that_fails_in_a_group_fails_alone(tables: Tables) -> None:
    async with await open_storage(f"{tables.url}&pool_size=1") as storage:
        keys = [f"k{i}" for i in range(10)]
        for key in keys:
            await storage.set(key, 0)

        def fail(current: Any) -> Any:
            raise KeyError("nope")

        outcomes = await asyncio.gather(
            *(storage.update(key, fail if key == "k3" else lambda v: v + 1) for key in keys),
            *(storage.update(key, lambda v: v + 1) for key in keys),
            return_exceptions=True,
        )
        assert isinstance(outcomes[3], KeyError)
        assert [o for i, o in enumerate(outcomes) if i != 3] == [1] * 9 + [
            1 if key == "k3" else 2 for key in keys
        ]
        assert await storage.get_many(keys) == {key: 1 if key == "k3" else 2 for key in keys}


async def test_a_row_that_cannot_be_read_fails_only_its_key(tables: Tables) -> None:
    async with await open_storage(f"{tables.url}&pool_size=1") as storage:
        keys = [f"k{i}" for i in range(6)]
        for key in keys:
            await storage.set(key, 0)
        # Deeper than the JSON parser goes: a permanent fault of this row alone.
        await tables.run(
            f"UPDATE {tables.table} SET value = (repeat('[', 5000) || repeat(']', 5000))::json "
            "WHERE key = 'k2'"
        )
        outcomes = await asyncio.gather(
            *(storage.update(key, lambda v: v + 1) for key in keys),
            *(storage.update(key, lambda v: v + 1) for key in keys),
            return_exceptions=True,
        )
        errors = [i for i, o in enumerate(outcomes) if isinstance(o, Exception)]
        assert errors == [2, 8]
        assert await storage.get_many([k for k in keys if k != "k2"]) == {
            key: 2 for key in keys if key != "k2"
        }


async def test_writes_waiting_for_row_locks_held_elsewhere_never_hold_up_other_keys(
    tables: Tables,
) -> None:
    """More keys held by another connection than transactions run at a time: the writes
    of the held keys wait for their locks, the write of a free key still commits."""
    async with await open_storage(tables.url) as storage:
        held = [f"held{i}" for i in range(4)]
        for key in [*held, "free"]:
            await storage.set(key, 0)
        other = await tables.connect()
        try:
            transaction = other.transaction()
            await transaction.start()
            await other.execute(
                f"SELECT 1 FROM {tables.table} WHERE key = ANY($1::text[]) FOR UPDATE", held
            )
            waiting = []
            for key in held:
                waiting.append(asyncio.create_task(storage.update(key, lambda v: v + 1)))
                await asyncio.sleep(0.05)
            assert await asyncio.wait_for(storage.update("free", lambda v: v + 1), 5) == 1
            assert not any(task.done() for task in waiting)
            await transaction.commit()
            assert await asyncio.wait_for(asyncio.gather(*waiting), 5) == [1, 1, 1, 1]
        finally:
            await other.close()
