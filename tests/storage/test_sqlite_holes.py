"""SQLite: the data-loss holes a second connection, a bad row or an odd table used to open.

Each test here failed before the fix it names: other connections writing between this
writer's transactions, rows that are not JSON text, a table of another shape.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from noetic_scratchpad import Agent, AgentHarness, ScriptedModel, scratchpad
from noetic_scratchpad.errors import StorageConfigError, StorageError
from noetic_scratchpad.storage.sqlite import SqliteStorage

from .test_sqlite import url_of

pytestmark = pytest.mark.asyncio


def add(name: str) -> Any:
    return lambda current: {**(current or {}), name: 1}


async def test_a_second_writer_on_the_file_is_never_overwritten(tmp_path: Path) -> None:
    """A writes t1, B writes t1, A writes t2, A writes t1 again: B's note stays. (A's row
    cache was trusted again once a transaction had seen another connection's commit.)"""
    url = url_of(tmp_path / "two.db")
    async with await SqliteStorage.open(url) as a, await SqliteStorage.open(url) as b:
        await a.update("t1", add("a1"))
        await b.update("t1", add("b1"))
        await a.update("t2", add("a2"))
        assert await a.update("t1", add("a3")) == {"a1": 1, "b1": 1, "a3": 1}
        assert await b.get("t1") == {"a1": 1, "b1": 1, "a3": 1}


async def test_a_reset_by_another_connection_stays_reset(tmp_path: Path) -> None:
    """After another connection deletes t1 (the CLI's reset), writing t2 and then t1 does
    not bring the deleted notes back."""
    path = tmp_path / "reset.db"
    async with await SqliteStorage.open(url_of(path)) as app:
        await app.update("t1", add("old"))
        with sqlite3.connect(path) as cli:
            cli.execute("DELETE FROM scratchpad_kv WHERE key = 't1'")
        await app.update("t2", add("x"))
        assert await app.update("t1", add("new")) == {"new": 1}


async def test_two_harnesses_on_one_file_lose_nothing(tmp_path: Path) -> None:
    """Two harnesses in one process on one sqlite:// URL, writing two scopes in turn
    under contention: every acknowledged update is stored."""
    url = url_of(tmp_path / "h.db")
    harnesses = [
        AgentHarness(
            name=f"h{i}",
            agent=Agent(model=ScriptedModel([])),
            params={},
            context_layers=[scratchpad()],
            storage=url,
        )
        for i in (0, 1)
    ]
    async with harnesses[0], harnesses[1]:

        async def writer(h: int, task: int) -> None:
            for n in range(15):
                thread = f"t{(task + n) % 2}"
                await harnesses[h].update_state(
                    "scratchpad", {f"h{h}-{task}-{n}": n}, thread_id=thread
                )

        await asyncio.gather(*(writer(h, task) for h in (0, 1) for task in range(8)))
        stored: dict[str, Any] = {}
        for thread in ("t0", "t1"):
            stored.update(await harnesses[0].read_state("scratchpad", thread_id=thread))
    assert len(stored) == 2 * 8 * 15


def _insert_raw(path: Path, key: str, value_sql: str) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute(
            f"INSERT INTO scratchpad_kv (key, value, updated_at) VALUES (?, {value_sql}, 0)",
            (key,),
        )


async def test_a_row_that_is_not_utf8_fails_only_its_own_reads(tmp_path: Path) -> None:
    """Reading a row that is not valid UTF-8 is a StorageError naming the key; the read
    connection does not stay on its old snapshot: later reads see new writes by other
    connections, and the WAL can still be checkpointed."""
    path = tmp_path / "bad.db"
    async with await SqliteStorage.open(url_of(path)) as storage:
        await storage.set("good", 1)
        _insert_raw(path, "bad", "CAST(X'FF' AS TEXT)")
        for _ in range(2):
            with pytest.raises(StorageError, match="'bad'"):
                await storage.get("bad")
        with pytest.raises(StorageError, match="'bad'"):
            await storage.get_many(["good", "bad"])
        async with await SqliteStorage.open(url_of(path)) as other:
            await other.set("good", 2)
        assert await storage.get("good") == 2  # a fresh snapshot
        with sqlite3.connect(path) as conn:
            busy, _, _ = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        assert busy == 0  # no reader holds an old snapshot


async def test_a_row_that_is_not_json_is_a_storage_error(tmp_path: Path) -> None:
    """A row of text that is not JSON reads as StorageError saying what to do, not as a
    raw JSONDecodeError."""
    path = tmp_path / "text.db"
    async with await SqliteStorage.open(url_of(path)) as storage:
        _insert_raw(path, "k", "'not json'")
        with pytest.raises(StorageError, match="not JSON text") as caught:
            await storage.get("k")
        assert "reset" in str(caught.value)


@pytest.mark.parametrize("value_sql", ["CAST(X'FF' AS TEXT)", "'{not json'"])
async def test_a_bad_row_fails_only_the_writes_of_its_key(tmp_path: Path, value_sql: str) -> None:
    """Writes to healthy keys that share a transaction with a write to a bad row commit;
    only the write to the bad row fails (with StorageError naming it)."""
    path = tmp_path / "batch.db"
    async with await SqliteStorage.open(url_of(path)) as storage:
        _insert_raw(path, "bad", value_sql)
        outcomes = await asyncio.gather(
            *(storage.update(f"k{n}", add("n")) for n in range(50)),
            storage.update("bad", add("n")),
            *(storage.update(f"k{n}", add("m")) for n in range(50)),
            return_exceptions=True,
        )
        failed = [outcome for outcome in outcomes if isinstance(outcome, BaseException)]
        assert len(failed) == 1
        assert isinstance(failed[0], StorageError)
        assert "'bad'" in str(failed[0])
        stored = await storage.get_many(f"k{n}" for n in range(50))
        assert stored == {f"k{n}": {"n": 1, "m": 1} for n in range(50)}


async def test_a_table_of_another_shape_is_refused_at_open(tmp_path: Path) -> None:
    """A table of the configured name with other columns is a StorageConfigError at open
    naming the columns found and the fix, not a write failure with a disk-space hint."""
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE scratchpad_kv (id INTEGER PRIMARY KEY, payload BLOB)")
    with pytest.raises(StorageConfigError, match=r"columns id, payload.*table=") as caught:
        await SqliteStorage.open(url_of(path))
    assert "disk" not in str(caught.value)
