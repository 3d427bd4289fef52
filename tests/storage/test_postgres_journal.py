"""What only the PostgreSQL backend does for revisions and the journal: the upgrade of a 0.1
table, the journal table's name and shape, the statements a commit costs, a delete racing a
write from another server, rows a writer without journal left, and durability; the retired
table that keeps deleted keys' revisions from repeating: its upgrade, its shape, and deletes
racing writes of other connections and servers."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from noetic_scratchpad import StorageConfigError, open_storage
from noetic_scratchpad.storage.base import Commit, Revision
from noetic_scratchpad.storage.postgres import PostgresStorage, parse_postgres_url
from tests.conftest import postgres_test_url, require_postgres

pytestmark = [pytest.mark.postgres, pytest.mark.asyncio]


class Tables:
    """A test's own table and journal on the test server, and a raw connection to them."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.settings = parse_postgres_url(url)
        self.table = self.settings.quoted_table
        self.journal = self.settings.quoted_journal_table
        self.retired = self.settings.quoted_retired_table

    async def connect(self) -> Any:
        import asyncpg

        return await asyncpg.connect(self.settings.dsn)

    async def run(self, sql: str, *args: Any) -> list[Any]:
        conn = await self.connect()
        try:
            return list(await conn.fetch(sql, *args))
        finally:
            await conn.close()


@pytest_asyncio.fixture
async def tables() -> AsyncIterator[Tables]:
    require_postgres()
    made = Tables(postgres_test_url())
    try:
        yield made
    finally:
        await made.run(f"DROP TABLE IF EXISTS {made.retired}, {made.journal}, {made.table}")


def journaled(entry: Any, value: Any = None) -> Any:
    return lambda current: Commit(entry if value is None else value, entry)


async def test_a_table_of_version_0_1_is_upgraded_at_open(tables: Tables) -> None:
    """A 0.1 table (no revision column, no journal) opens: its rows read at revision 1, the
    column's default for new rows is 0, the journal table exists, and commits journal."""
    await tables.run(
        f'CREATE TABLE {tables.table} (key text COLLATE "C" PRIMARY KEY, value jsonb NOT NULL, '
        "updated_at timestamptz NOT NULL DEFAULT now())"
    )
    await tables.run(f"INSERT INTO {tables.table} (key, value) VALUES ('k', '{{\"a\": 1}}')")
    async with await open_storage(tables.url) as storage:
        assert await storage.get_revision("k") == Revision({"a": 1}, 1)
        assert await storage.commit("k", journaled("e"), keep=5) == Revision("e", 2)
        assert [row.entry for row in await storage.journal("k", limit=5)] == ["e"]
    (default,) = await tables.run(
        "SELECT column_default FROM information_schema.columns "
        "WHERE table_name = $1 AND column_name = 'revision'",
        tables.settings.table,
    )
    assert default[0] == "0"


async def test_journal_rows_survive_reopen(tables: Tables) -> None:
    async with await open_storage(tables.url) as storage:
        for n in range(4):
            await storage.commit("k", journaled({"n": n}), keep=3)
    async with await open_storage(tables.url) as storage:
        assert await storage.get_revision("k") == Revision({"n": 3}, 4)
        assert [(r.revision, r.entry) for r in await storage.journal("k", limit=9)] == [
            (4, {"n": 3}),
            (3, {"n": 2}),
            (2, {"n": 1}),
        ]


async def test_a_long_table_name_works(tables: Tables) -> None:
    url = tables.url.split("table=")[0] + "table=" + "t" * 50 + tables.settings.table[-12:]
    long = Tables(url)
    try:
        async with await open_storage(url) as storage:
            await storage.commit("k", journaled(1), keep=2)
            assert [row.entry for row in await storage.journal("k", limit=2)] == [1]
    finally:
        await long.run(f"DROP TABLE IF EXISTS {long.retired}, {long.journal}, {long.table}")


async def test_a_journal_table_of_another_shape_is_refused(tables: Tables) -> None:
    await tables.run(f"CREATE TABLE {tables.journal} (id serial PRIMARY KEY, note text)")
    with pytest.raises(StorageConfigError) as caught:
        await open_storage(tables.url)
    message = str(caught.value)
    assert f"the table {tables.settings.journal_table!r}" in message
    assert "is not a scratchpad journal" in message
    assert "revision is missing" in message
    assert f"DROP TABLE {tables.journal}" in message


async def test_a_commit_is_begin_lock_write_commit(tables: Tables) -> None:
    """A journaled commit costs the round trips of an unjournaled update: BEGIN, the lock,
    one write statement (state, journal row and trim together), COMMIT; then, outside the
    transaction, the notice to other processes (``SELECT pg_notify``)."""
    async with await open_storage(f"{tables.url}&pool_size=1") as storage:
        assert isinstance(storage, PostgresStorage)
        await storage.commit("k", journaled(0), keep=2)
        queries: list[str] = []
        async with storage._pool.acquire() as conn:  # the pool's only connection
            conn.add_query_logger(lambda record: queries.append(record.query))
        for n in range(1, 4):
            await storage.commit("k", journaled(n), keep=2)
        await storage.update("k", lambda current: "plain")
        journaled_commit = ["BEGIN", "WITH", "WITH", "COMMIT;", "SELECT"]
        update = ["BEGIN", "WITH", "UPDATE", "COMMIT;", "SELECT"]
        assert [query.split()[0] for query in queries] == journaled_commit * 3 + update
        assert [row.revision for row in await storage.journal("k", limit=9)] == [4, 3]


async def test_a_delete_waits_for_a_write_in_flight_and_removes_its_journal(
    tables: Tables,
) -> None:
    """While another server's transaction holds the row and has added a journal row, a
    delete waits; once that transaction commits, the delete removes the key and every
    journal row of it, that one included."""
    async with await open_storage(tables.url) as storage:
        await storage.commit("k", journaled("mine"), keep=5)
        other = await tables.connect()
        try:
            transaction = other.transaction()
            await transaction.start()
            await other.execute(f"SELECT 1 FROM {tables.table} WHERE key = 'k' FOR UPDATE")
            await other.execute(
                f"INSERT INTO {tables.journal} (key, revision, entry) VALUES ('k', 2, '\"theirs\"')"
            )
            await other.execute(f"UPDATE {tables.table} SET revision = 2 WHERE key = 'k'")
            deleting = asyncio.create_task(storage.delete("k"))
            await asyncio.sleep(0.2)
            assert not deleting.done()  # waiting for the row
            await transaction.commit()
            await asyncio.wait_for(deleting, 10)
        finally:
            await other.close()
        assert await storage.get_revision("k") is None
        assert await storage.journal("k", limit=5) == []
        assert await tables.run(f"SELECT * FROM {tables.journal}") == []


async def test_journal_rows_left_by_a_writer_without_journal_are_dropped(tables: Tables) -> None:
    """Rows of a key that a 0.1 server deleted (leaving its journal) never show as the
    history of a new key of that name and never block its writes."""
    async with await open_storage(tables.url) as storage:
        for n in range(3):
            await storage.commit("k", journaled(n), keep=5)
        await tables.run(f"DELETE FROM {tables.table} WHERE key = 'k'")
        assert await storage.commit("k", journaled("new"), keep=5) == Revision("new", 1)
        assert [(r.revision, r.entry) for r in await storage.journal("k", limit=5)] == [(1, "new")]
        await tables.run(f"DELETE FROM {tables.table} WHERE key = 'k'")
        await storage.set("k", "set")  # revision 1, leaving the row of revision 2 behind
        assert await storage.commit("k", journaled("two"), keep=5) == Revision("two", 2)
        assert (await storage.journal("k", limit=5))[0].entry == "two"


async def test_an_unreadable_journal_row_is_skipped_and_reported(
    tables: Tables, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A journal row whose entry cannot be decoded is left out with a warning naming the
    key and revision; the other rows and the state still read, alone or together."""
    from noetic_scratchpad.storage.postgres import journal

    decode = journal.decode_text

    def picky(text: bytes) -> Any:
        if b"bad" in text:
            raise ValueError("cannot decode")
        return decode(text)

    monkeypatch.setattr(journal, "decode_text", picky)
    async with await open_storage(tables.url) as storage:
        for entry in ("ok 1", "bad", "ok 3"):
            await storage.commit("k", journaled(entry), keep=5)
        with caplog.at_level(logging.WARNING, logger="noetic_scratchpad.storage.postgres"):
            rows = await storage.journal("k", limit=5)
        assert [(row.revision, row.entry) for row in rows] == [(3, "ok 3"), (1, "ok 1")]
        (record,) = caplog.records
        assert "'k'" in record.getMessage()
        assert "revision 2" in record.getMessage()
        assert await storage.get_revision("k") == Revision("ok 3", 3)
        view = await storage.journal_view("k", limit=5)
        assert (view.current, view.rows) == (Revision("ok 3", 3), rows)


# -- the retired table: a key's revisions never repeat, even across delete -----------------


def table_sql(tables: Tables) -> Any:
    from noetic_scratchpad.storage.postgres.table import TableSql

    return TableSql(tables.table, tables.journal, tables.retired)


async def make_tables_of_the_previous_version(tables: Tables) -> None:
    """The key-value table with revisions and the journal, value and entry jsonb, as the
    version before the retired table made them."""
    await tables.run(
        f'CREATE TABLE {tables.table} (key text COLLATE "C" PRIMARY KEY, value jsonb NOT NULL, '
        "updated_at timestamptz NOT NULL DEFAULT now(), revision bigint NOT NULL DEFAULT 0)"
    )
    await tables.run(
        f'CREATE TABLE {tables.journal} (key text COLLATE "C" NOT NULL, revision bigint NOT NULL, '
        "written_at timestamptz NOT NULL DEFAULT now(), entry jsonb NOT NULL, "
        "PRIMARY KEY (key, revision))"
    )


async def test_tables_of_the_previous_version_get_the_retired_table_at_open(
    tables: Tables,
) -> None:
    """Tables made by the version before the retired table (key-value table with revisions,
    journal) open: the retired table is created (key text primary key, revision bigint), the
    stored rows and journal are intact, and from then on a deleted key continues above its
    last revision, through several deletes."""
    await make_tables_of_the_previous_version(tables)
    await tables.run(f"INSERT INTO {tables.table} (key, value, revision) VALUES ('k', '\"v\"', 3)")
    await tables.run(f"INSERT INTO {tables.journal} (key, revision, entry) VALUES ('k', 3, '3')")
    async with await open_storage(tables.url) as storage:
        assert await storage.get_revision("k") == Revision("v", 3)
        assert [row.entry for row in await storage.journal("k", limit=5)] == [3]
        await storage.delete("k")
        await storage.set("k", "set")
        assert await storage.get_revision("k") == Revision("set", 4)
        await storage.delete("k")
        assert await storage.update("k", lambda current: ["update", current]) == ["update", None]
        assert await storage.get_revision("k") == Revision(["update", None], 5)
    columns = await tables.run(
        "SELECT column_name, data_type, is_nullable FROM information_schema.columns "
        "WHERE table_name = $1 ORDER BY ordinal_position",
        tables.settings.retired_table,
    )
    assert [tuple(row) for row in columns] == [("key", "text", "NO"), ("revision", "bigint", "NO")]
    async with await open_storage(tables.url) as storage:  # kept across a reopen
        await storage.delete("k")
        assert await storage.commit("k", journaled("again"), keep=5) == Revision("again", 6)


async def test_a_retired_table_of_another_shape_is_refused(tables: Tables) -> None:
    await tables.run(f"CREATE TABLE {tables.retired} (id serial PRIMARY KEY, note text)")
    with pytest.raises(StorageConfigError) as caught:
        await open_storage(tables.url)
    message = str(caught.value)
    assert f"the table {tables.settings.retired_table!r}" in message
    assert "is not a scratchpad table of deleted keys' revisions" in message
    assert "key is missing" in message
    assert "revision is missing" in message
    assert f"DROP TABLE {tables.retired}" in message


async def test_a_retired_table_made_by_hand_without_a_unique_key_is_refused(
    tables: Tables,
) -> None:
    """Deletes upsert on its key: a table without a unique index on it cannot serve."""
    await tables.run(f"CREATE TABLE {tables.retired} (key text, revision bigint)")
    with pytest.raises(StorageConfigError, match="key has no unique index"):
        await open_storage(tables.url)


@pytest.mark.parametrize("write", ["set", "update", "commit"])
async def test_a_write_waiting_for_a_delete_of_another_connection_continues_above_it(
    tables: Tables, write: str
) -> None:
    """While another connection's delete of the key (the backend's own statements) is not
    yet committed, a write of the key waits for it; once it commits, the write creates the
    key at its last revision + 1, not at 1, though the delete committed after the write's
    statement began."""
    async with await open_storage(tables.url) as storage:
        for n in range(3):
            await storage.commit("k", journaled(n), keep=5)
        sql = table_sql(tables)
        other = await tables.connect()
        try:
            transaction = other.transaction()
            await transaction.start()
            await other.execute(sql.retire, "k")
            await other.execute(sql.clear_journal, "k")
            writing: asyncio.Task[Any]
            if write == "set":
                writing = asyncio.create_task(storage.set("k", "new"))
            elif write == "update":
                writing = asyncio.create_task(storage.update("k", lambda current: "new"))
            else:
                writing = asyncio.create_task(storage.commit("k", journaled("new"), keep=5))
            await asyncio.sleep(0.2)
            assert not writing.done()  # waiting for the row
            await transaction.commit()
            await asyncio.wait_for(writing, 10)
        finally:
            await other.close()
        assert await storage.get_revision("k") == Revision("new", 4)
        if write == "commit":
            assert [(r.revision, r.entry) for r in await storage.journal("k", limit=5)] == [
                (4, "new")
            ]


async def test_deletes_racing_commits_of_two_servers_never_repeat_a_revision(
    tables: Tables,
) -> None:
    """Two servers (two storages, each with its own pool) commit and delete one key at the
    same time: no revision a commit returns ever names two values."""
    named: dict[int, Any] = {}
    deletes = 0

    async def committer(storage: Any, writer: str) -> None:
        for i in range(20):
            value = f"{writer}:{i}"
            done = await storage.commit("k", journaled(value), keep=3)
            assert named.setdefault(done.revision, value) == value, done.revision

    async def deleter(storage: Any) -> None:
        nonlocal deletes
        for _ in range(15):
            await storage.delete("k")
            deletes += 1
            await asyncio.sleep(0.002)

    async with (
        await open_storage(tables.url, pool_size=3) as first,
        await open_storage(tables.url, pool_size=3) as second,
    ):
        await asyncio.wait_for(
            asyncio.gather(
                *(committer(first, f"a{n}") for n in range(3)),
                *(committer(second, f"b{n}") for n in range(3)),
                deleter(first),
                deleter(second),
            ),
            60,
        )
        last = await first.get_revision("k")
    assert len(named) == 120
    assert deletes == 30
    # The revisions climb past every delete: the last one is the highest handed out.
    assert last is None or last.revision == max(named)
