"""After an erasure, nothing of the erased id is left in the database itself.

Not through the contract (test_portability.py does that) but the way an auditor would
look: every row of every table of the SQLite file, read with sqlite3; every row of every
table of the backend's PostgreSQL schema; every key (name and content) under the Redis
prefix; everything the memory backend holds. Each looks for the ids as given and as the
key layout encodes them, and for a marker written into the subject's states, and first
checks that the same search finds them before the erasure (so it can find them at all).
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
import pytest_asyncio

from noetic_scratchpad import scratchpad
from noetic_scratchpad.keys import state_key
from noetic_scratchpad.portability import Subject, erase_subject
from noetic_scratchpad.storage import StorageBackend, open_storage
from tests.conftest import postgres_test_url, redis_test_url, require_postgres, require_redis

pytestmark = pytest.mark.asyncio

RESOURCE = "alice/erasure test"  # a '/' and a space: the key layout percent-encodes both
THREADS = ("alice-thread-1", "alice-thread-2", "alice-thread-reset")
MARKER = "alice-private-note"
OTHER = "bob-stays"
SUBJECT = Subject(RESOURCE, THREADS)
NEEDLES = (RESOURCE, quote(RESOURCE, safe=""), *THREADS, MARKER)


async def write_subject_and_another(storage: StorageBackend) -> None:
    user = await scratchpad(scope="resource").open(
        storage, thread_id=THREADS[0], resource_id=RESOURCE
    )
    await user.update({"note": MARKER})
    await user.update({"city": "Lyon"})  # a second journal row
    for thread in THREADS:
        pad = await scratchpad().open(storage, thread_id=thread)
        await pad.update({"goal": MARKER})
    await storage.set(state_key("notes", "resource", RESOURCE), {"n": MARKER})
    # A reset before the erasure: its only trace is the revision kept of the deleted key.
    await storage.delete(state_key("scratchpad", "thread", THREADS[2]))
    other = await scratchpad(scope="resource").open(storage, thread_id="t", resource_id=OTHER)
    await other.update({"note": OTHER})


def found(text: str) -> set[str]:
    return {needle for needle in (*NEEDLES, OTHER) if needle in text}


async def erase_and_look(storage: StorageBackend, look: Callable[[], Awaitable[str]]) -> None:
    """Write, check the look finds every id, erase, check it finds none but the other's."""
    await write_subject_and_another(storage)
    # The id as given is stored nowhere (keys hold it encoded); everything else is.
    assert found(await look()) >= {*NEEDLES, OTHER} - {RESOURCE}
    report = await erase_subject(storage, SUBJECT)
    assert report.as_json()["complete"] is True
    assert found(await look()) == {OTHER}


# -- SQLite ------------------------------------------------------------------------------


def every_sqlite_row(path: Path) -> str:
    """Every row of every table of the file, as text (blobs decoded)."""
    with sqlite3.connect(path) as conn:
        tables = [
            name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        ]
        assert {"scratchpad_kv", "scratchpad_kv_journal", "scratchpad_kv_retired"} <= set(tables)
        cells = [
            cell.decode(errors="replace") if isinstance(cell, bytes) else str(cell)
            for table in tables
            for row in conn.execute(f'SELECT * FROM "{table}"')
            for cell in row
        ]
    return "\n".join(cells)


async def test_nothing_of_an_erased_id_is_left_in_any_table_of_the_sqlite_file(
    tmp_path: Path,
) -> None:
    path = tmp_path / "pad.db"
    async with await open_storage(f"sqlite:///{path}") as storage:

        async def look() -> str:
            return every_sqlite_row(path)

        await erase_and_look(storage, look)
        # The file's bytes too, WAL included, while the storage is still open: an
        # erasure checkpoints the WAL, and a build that zeroes freed pages (secure_delete,
        # Debian's default) keeps no old copy in the file.
        if secure_delete_by_default():
            for file in (path, Path(f"{path}-wal")):
                data = file.read_bytes() if file.exists() else b""
                assert {n for n in NEEDLES if n.encode() in data} == set(), file
    assert found(every_sqlite_row(path)) == {OTHER}  # and after the storage closed


def secure_delete_by_default() -> bool:
    with sqlite3.connect(":memory:") as conn:
        return bool(conn.execute("PRAGMA secure_delete").fetchone()[0])


# -- PostgreSQL --------------------------------------------------------------------------


async def every_postgres_row(url: str) -> str:
    """Every row of every table in the schema the backend's tables live in, as text."""
    import asyncpg  # type: ignore[import-untyped, unused-ignore]

    dsn = url.split("?", 1)[0]
    conn = await asyncpg.connect(dsn)
    try:
        tables = await conn.fetch(
            "SELECT table_schema, table_name FROM information_schema.tables "
            "WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'"
        )
        texts = []
        for table in tables:
            name = f'"{table["table_schema"]}"."{table["table_name"]}"'
            rows = await conn.fetch(f"SELECT t::text AS row FROM {name} AS t")
            texts.extend(row["row"] for row in rows)
    finally:
        await conn.close()
    return "\n".join(texts)


@pytest_asyncio.fixture
async def postgres_url() -> AsyncIterator[str]:
    require_postgres()
    url = postgres_test_url()
    yield url
    async with await open_storage(url) as cleanup:
        await cleanup.drop_table()  # type: ignore[attr-defined]


async def test_nothing_of_an_erased_id_is_left_in_any_table_of_the_postgres_schema(
    postgres_url: str,
) -> None:
    async with await open_storage(postgres_url) as storage:

        async def look() -> str:
            return await every_postgres_row(postgres_url)

        await erase_and_look(storage, look)


# -- Redis -------------------------------------------------------------------------------


async def every_redis_key(url: str, prefix: str) -> str:
    """Every key under the prefix, its name and its content, as text."""
    import redis.asyncio

    client = redis.asyncio.from_url(url.split("?", 1)[0])
    texts: list[str] = []
    try:
        async for key in client.scan_iter(match=prefix.encode() + b"*"):
            kind = (await client.type(key)).decode()
            content: Any
            if kind == "hash":
                content = await client.hgetall(key)
            elif kind == "zset":
                content = await client.zrange(key, 0, -1, withscores=True)
            else:
                content = await client.get(key)
            texts.append(f"{key.decode(errors='replace')} {content!r}")
    finally:
        await client.aclose()
    return "\n".join(texts)


async def test_nothing_of_an_erased_id_is_left_under_the_redis_prefix() -> None:
    require_redis()
    url = redis_test_url()
    prefix = url.rsplit("prefix=", 1)[1]
    storage = await open_storage(url)
    try:

        async def look() -> str:
            # Redis shows bytes as Python escapes: decode the text of values for the search.
            return (await every_redis_key(url, prefix)).encode().decode("unicode_escape")

        await erase_and_look(storage, look)
    finally:
        await storage.aclose()
        await storage.drop_keys()  # type: ignore[attr-defined]


# -- memory ------------------------------------------------------------------------------


async def test_nothing_of_an_erased_id_is_left_in_the_memory_backend() -> None:
    async with await open_storage("memory://") as storage:

        async def look() -> str:
            return repr(vars(storage))

        await erase_and_look(storage, look)
