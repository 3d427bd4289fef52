"""What only the PostgreSQL backend does: URL options, the table, row locks across processes
and connections, and failures of the server. The shared behaviour is in test_contract.py."""

from __future__ import annotations

import asyncio
import json
import sys
import threading
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
import pytest_asyncio

from noetic_scratchpad import open_storage
from noetic_scratchpad.errors import (
    StorageBusyError,
    StorageConfigError,
    StorageError,
    StorageOutcomeUnknownError,
)
from tests.conftest import postgres_test_url, require_postgres

HERE = Path(__file__).parent
ROOT = HERE.parent.parent


def _postgres_module() -> Any:
    pytest.importorskip("asyncpg", reason="asyncpg is not installed (the [postgres] extra)")
    from noetic_scratchpad.storage import postgres

    return postgres


# -- URL and options (no server needed) ------------------------------------------------


@pytest.mark.parametrize("scheme", ["postgresql", "postgres"])
def test_url_forms_strip_own_parameters(scheme: str) -> None:
    """Both schemes are accepted; table and pool sizes are read from the query string and
    removed from the DSN given to asyncpg, other parameters pass through as written, and the
    password never appears in the display form."""
    pg = _postgres_module()
    settings = pg.parse_postgres_url(
        f"{scheme}://app:s3cret@db.example:6543/prod"
        "?table=tenant_a.notes&pool_size=7&min_size=2&sslmode=require&application_name=web"
        "&options=-c%20search_path%3Dapp"
    )
    assert settings.table == "tenant_a.notes"
    assert settings.quoted_table == '"tenant_a"."notes"'
    assert (settings.min_size, settings.max_size) == (2, 7)
    passed = "sslmode=require&application_name=web&options=-c%20search_path%3Dapp"
    assert settings.dsn == f"{scheme}://app:s3cret@db.example:6543/prod?{passed}"
    assert settings.display == f"{scheme}://app:***@db.example:6543/prod?{passed}"


def test_url_defaults() -> None:
    """Without options the table is scratchpad_kv and the pool opens 1 to 10 connections."""
    pg = _postgres_module()
    settings = pg.parse_postgres_url("postgresql://postgres@localhost/app")
    assert (settings.table, settings.min_size, settings.max_size) == ("scratchpad_kv", 1, 10)
    assert settings.dsn == "postgresql://postgres@localhost/app"


def test_the_journal_of_a_long_table_name_fits_postgres_identifiers() -> None:
    """``{table}_journal`` where it fits in 63 bytes; past that, cut and made unique by a
    hash of the table's name, in the table's schema."""
    parse_postgres_url = _postgres_module().parse_postgres_url
    assert parse_postgres_url("postgresql://h/db?table=s.pad").journal_table == "s.pad_journal"
    long_a, long_b = "a" * 60 + "x", "a" * 60 + "y"
    journal_a = parse_postgres_url(f"postgresql://h/db?table={long_a}").journal_table
    journal_b = parse_postgres_url(f"postgresql://h/db?table={long_b}").journal_table
    assert len(journal_a.encode()) <= 63
    assert journal_a.endswith("_journal")
    assert journal_a != journal_b


def test_the_retired_table_is_named_as_the_journal_is() -> None:
    """``{table}_retired`` beside the table; a long name is cut as the journal's is, and
    never collides with the journal's."""
    parse_postgres_url = _postgres_module().parse_postgres_url
    assert parse_postgres_url("postgresql://h/db?table=s.pad").retired_table == "s.pad_retired"
    settings = parse_postgres_url("postgresql://h/db?table=" + "a" * 60 + "x")
    assert len(settings.retired_table.encode()) <= 63
    assert settings.retired_table.endswith("_retired")
    assert settings.retired_table.removesuffix("_retired") == settings.journal_table.removesuffix(
        "_journal"
    )
    assert settings.quoted_retired_table == f'"{settings.retired_table}"'


def test_keyword_options_win_over_url() -> None:
    """Keyword options replace the same URL parameters; max_size is pool_size's other name."""
    pg = _postgres_module()
    settings = pg.parse_postgres_url(
        "postgresql://u@h/db?table=from_url&pool_size=4", table="from_code", pool_size=12
    )
    assert (settings.table, settings.max_size) == ("from_code", 12)
    assert pg.parse_postgres_url("postgresql://u@h/db", max_size=3, min_size=0).max_size == 3


@pytest.mark.parametrize(
    ("url", "options", "message"),
    [
        ("postgresql://u@h/db?pool_size=ten", {}, "pool_size='ten' must be an integer"),
        ("postgresql://u@h/db?pool_size=0", {}, "at least 1"),
        ("postgresql://u@h/db?min_size=-1", {}, "at least 0"),
        ("postgresql://u@h/db?pool_size=5&max_size=6", {}, "disagree"),
        ("postgresql://u@h/db?pool_size=2&min_size=3", {}, "larger than the pool's maximum"),
        ("postgresql://u@h/db?table=a&table=b", {}, "gives 'table' twice"),
        ("postgresql://u@h/db", {"poolsize": 3}, "unknown PostgreSQL storage option"),
        ("mysql://u@h/db", {}, "not a PostgreSQL URL"),
    ],
)
def test_bad_options_are_config_errors(url: str, options: dict[str, Any], message: str) -> None:
    """A malformed, conflicting or unknown option is a StorageConfigError that says which."""
    pg = _postgres_module()
    with pytest.raises(StorageConfigError, match=message):
        pg.parse_postgres_url(url, **options)


@pytest.mark.parametrize(
    "table",
    ["drop table x;--", "1abc", "a.b.c", "", "has space", 'quo"te', "x" * 64, "é", "a."],
)
@pytest.mark.asyncio
async def test_bad_table_name_is_refused_before_connecting(table: str) -> None:
    """A table name that is not a (schema-qualified) identifier is refused by open_storage
    with a StorageConfigError naming it, before any connection is tried (the port is closed)."""
    _postgres_module()
    with pytest.raises(StorageConfigError, match="is not a PostgreSQL identifier") as info:
        await open_storage("postgresql://postgres@127.0.0.1:1/test", table=table)
    assert repr(table) in str(info.value)


@pytest.mark.asyncio
async def test_missing_driver_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without asyncpg, opening a postgresql:// or postgres:// URL is a StorageConfigError that
    tells the user to install the [postgres] extra."""
    monkeypatch.setitem(sys.modules, "asyncpg", None)  # makes `import asyncpg` fail
    monkeypatch.delitem(sys.modules, "noetic_scratchpad.storage.postgres", raising=False)
    for url in ("postgresql://postgres@127.0.0.1/test", "postgres://postgres@127.0.0.1/test"):
        with pytest.raises(StorageConfigError) as info:
            await open_storage(url)
        message = str(info.value)
        assert "asyncpg" in message
        assert 'pip install "noetic-scratchpad[postgres]"' in message


@pytest.mark.asyncio
async def test_unreachable_server_is_a_storage_error() -> None:
    """A server that does not answer makes open_storage raise StorageError naming the URL
    (without its password) and saying what to check."""
    _postgres_module()
    with pytest.raises(StorageError, match="cannot connect to PostgreSQL") as info:
        await open_storage("postgresql://postgres:pw@127.0.0.1:1/test")
    assert not isinstance(info.value, StorageConfigError)
    assert "postgres:***@127.0.0.1:1/test" in str(info.value)
    assert "pw@" not in str(info.value)


def test_display_redacts_password_query_parameters() -> None:
    """The display form (messages, logs, repr) replaces every password by ``***``: the
    one of ``user:password@`` and the query parameters ``password`` and ``sslpassword``,
    whatever the case or percent-encoding of their names; ``passfile`` (a path) and the
    other parameters are kept. asyncpg still gets the passwords."""
    pg = _postgres_module()
    settings = pg.parse_postgres_url(
        "postgresql://app:s3cret@db.example:5432/prod?sslmode=require&password=hunter2"
        "&sslpassword=k3y%2Fpass&passfile=/home/app/.pgpass&PassWord=hunter3"
        "&pass%77ord=hunter4&table=notes"
    )

    assert settings.display == (
        "postgresql://app:***@db.example:5432/prod?sslmode=require&password=***"
        "&sslpassword=***&passfile=/home/app/.pgpass&PassWord=***&pass%77ord=***"
    )
    assert "password=hunter2" in settings.dsn
    assert "sslpassword=k3y%2Fpass" in settings.dsn
    for secret in ("s3cret", "hunter2", "k3y", "hunter3", "hunter4"):
        assert secret not in repr(settings)
    assert pg.parse_postgres_url("postgresql://u@h/db?password=").display == (
        "postgresql://u@h/db?password=***"
    )


@pytest.mark.parametrize(
    ("url", "message"),
    [
        # An unencoded "/" ends the host part early: "SEC" reads as the port.
        ("postgresql://app:SEC/RET@127.0.0.1/test", "port of"),
        ("postgresql://app:SECRET@127.0.0.1:99999/test", "port of"),
        ("postgresql://app:SECRET@127.0.0.1:0/test", "port of"),
        ("postgresql://app:SECRET@127.0.0.1:" + "9" * 5000 + "/test", "port of"),
        ("postgresql://app:SECRET@h1:5432,h2:port/test", "port of"),
    ],
)
@pytest.mark.asyncio
async def test_a_bad_port_is_a_config_error_that_shows_no_password(url: str, message: str) -> None:
    """A port that is not a number from 1 to 65535 (often a password with an unencoded
    ``/``) is a StorageConfigError that says what to fix, with no part of the password."""
    _postgres_module()
    with pytest.raises(StorageConfigError, match=message) as info:
        await open_storage(url)

    assert "SEC" not in str(info.value)
    assert "percent-encode" in str(info.value)


@pytest.mark.asyncio
async def test_password_query_parameter_never_shown_when_the_server_is_unreachable() -> None:
    """A ``?password=`` in the URL of a server that does not answer is not in the error's
    message nor in its repr."""
    _postgres_module()
    with pytest.raises(StorageError, match="cannot connect to PostgreSQL") as info:
        await open_storage("postgresql://postgres@127.0.0.1:1/test?password=hunter2")

    assert "hunter2" not in str(info.value)
    assert "hunter2" not in repr(info.value)
    assert "postgresql://postgres@127.0.0.1:1/test?password=***" in str(info.value)


@pytest.mark.asyncio
async def test_driver_error_texts_are_scrubbed_of_passwords(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Should the driver's own error text echo the URL or a password, the message shows
    the redacted form instead."""
    pg = _postgres_module()
    url = "postgresql://app:s3cr%40t@127.0.0.1:1/test?password=hunter2&sslpassword=k3y-k3y"

    async def failing_pool(dsn: str, **_: Any) -> Any:
        raise OSError(f"cannot use {dsn} (password hunter2, s3cr@t, k3y-k3y)")

    monkeypatch.setattr(pg.asyncpg, "create_pool", failing_pool)
    with pytest.raises(StorageError) as info:
        await open_storage(url)

    message = str(info.value)
    for secret in ("hunter2", "s3cr%40t", "s3cr@t", "k3y-k3y"):
        assert secret not in message
    assert "cannot use postgresql://app:***@127.0.0.1:1/test?password=***&sslpassword=***" in (
        message
    )


# -- against the server -----------------------------------------------------------------


class Server:
    """A test's own table on the test server, and raw connections to look at it."""

    def __init__(self) -> None:
        self.app = f"nsp_{uuid.uuid4().hex[:10]}"
        self.url = f"{postgres_test_url()}&application_name={self.app}"
        self.settings = _postgres_module().parse_postgres_url(self.url)
        self.table = self.settings.quoted_table
        self.journal = self.settings.quoted_journal_table
        self.retired = self.settings.quoted_retired_table

    async def connect(self) -> Any:
        import asyncpg

        # A different application_name, so the backend's own connections can be counted.
        return await asyncpg.connect(self.settings.dsn, server_settings={"application_name": ""})

    async def execute(self, sql: str) -> None:
        conn = await self.connect()
        try:
            await conn.execute(sql)
        finally:
            await conn.close()

    async def scalar(self, sql: str, *args: Any) -> Any:
        conn = await self.connect()
        try:
            return await conn.fetchval(sql, *args)
        finally:
            await conn.close()

    async def backend_connections(self) -> int:
        count: int = await self.scalar(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1", self.app
        )
        return count

    async def pids_waiting_for_lock(self) -> list[int]:
        conn = await self.connect()
        try:
            rows = await conn.fetch(
                "SELECT pid FROM pg_stat_activity WHERE application_name = $1 "
                "AND wait_event_type = 'Lock'",
                self.app,
            )
        finally:
            await conn.close()
        return [row["pid"] for row in rows]


@pytest_asyncio.fixture
async def server() -> AsyncIterator[Server]:
    require_postgres()
    srv = Server()
    try:
        yield srv
    finally:
        await srv.scalar(f"DROP TABLE IF EXISTS {srv.retired}, {srv.journal}, {srv.table}")


async def wait_until(condition: Callable[[], Awaitable[bool]], what: str) -> None:
    with anyio.move_on_after(10):
        # The condition is the server's state: there is no local event to wait on.
        while not await condition():  # noqa: ASYNC110
            await anyio.sleep(0.01)
        return
    pytest.fail(f"timed out waiting for {what}")


@pytest.mark.postgres
@pytest.mark.asyncio
async def test_open_creates_the_table_with_the_documented_columns(server: Server) -> None:
    """Opening creates the table (key text primary key, value json, updated_at timestamptz,
    revision bigint) and its journal (key, revision, written_at, entry json; primary key
    (key, revision)), and opens min_size connections; opening it again (a second server)
    reuses the tables."""
    url = f"{server.url}&min_size=2&pool_size=3"
    async with await open_storage(url) as first, await open_storage(url) as second:
        assert await server.backend_connections() == 4
        conn = await server.connect()
        try:
            columns = {
                table: await conn.fetch(
                    "SELECT column_name, data_type, is_nullable FROM information_schema.columns "
                    "WHERE table_name = $1 ORDER BY ordinal_position",
                    name,
                )
                for table, name in (
                    ("kv", server.settings.table),
                    ("journal", server.settings.journal_table),
                )
            }
            primary = {
                table: await conn.fetchval(
                    "SELECT array_agg(a.attname::text ORDER BY a.attnum) FROM pg_index i "
                    "JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) "
                    "WHERE i.indrelid = to_regclass($1) AND i.indisprimary",
                    name,
                )
                for table, name in (("kv", server.table), ("journal", server.journal))
            }
        finally:
            await conn.close()
        assert [tuple(row) for row in columns["kv"]] == [
            ("key", "text", "NO"),
            ("value", "json", "NO"),
            ("updated_at", "timestamp with time zone", "NO"),
            ("revision", "bigint", "NO"),
        ]
        assert [tuple(row) for row in columns["journal"]] == [
            ("key", "text", "NO"),
            ("revision", "bigint", "NO"),
            ("written_at", "timestamp with time zone", "NO"),
            ("entry", "json", "NO"),
        ]
        assert primary == {"kv": ["key"], "journal": ["key", "revision"]}
        await first.set("k", 1)
        assert await second.get("k") == 1


@pytest.mark.postgres
@pytest.mark.asyncio
async def test_values_are_json_that_sql_can_query(server: Server) -> None:
    """Values are stored as JSON text, as written: SQL can query into them (and cast them to
    jsonb), and object keys come back in the order they were written."""
    async with await open_storage(server.url) as storage:
        await storage.set("doc", {"zeta": 1, "b": {"inner": "x"}, "aa": [1, -0.0, 1e20]})
        kind = await server.scalar(
            f"SELECT json_typeof(value) || ':' || (value #>> '{{b,inner}}') || ':' "
            f"|| (value::jsonb -> 'aa' ->> 0) FROM {server.table} WHERE key = 'doc'"
        )
        assert kind == "object:x:1"
        text = await server.scalar(f"SELECT value::text FROM {server.table} WHERE key = 'doc'")
        assert text == '{"zeta":1,"b":{"inner":"x"},"aa":[1,-0.0,1e+20]}'
        got = await storage.get("doc")
        assert got == {"zeta": 1, "b": {"inner": "x"}, "aa": [1, -0.0, 1e20]}
        assert list(got) == ["zeta", "b", "aa"]


@pytest.mark.postgres
@pytest.mark.asyncio
async def test_prefix_listing_at_code_point_edges(server: Server) -> None:
    """list and describe by prefix use code point order, also for prefixes ending in the
    last code point or just before the surrogate gap."""
    keys = ["a\U0010ffff", "a\U0010ffff/x", "b", "\ud7ff", "\ud7ff/y", "\ue000"]
    async with await open_storage(server.url) as storage:
        for key in keys:
            await storage.set(key, key)
        assert await storage.list("a\U0010ffff") == ["a\U0010ffff", "a\U0010ffff/x"]
        assert await storage.list("\ud7ff") == ["\ud7ff", "\ud7ff/y"]
        assert [info.key for info in await storage.describe("\ud7ff")] == ["\ud7ff", "\ud7ff/y"]
        assert await storage.list() == sorted(keys)


@pytest.mark.postgres
@pytest.mark.asyncio
async def test_unknown_database_is_a_config_error(server: Server) -> None:
    """A database that does not exist is a StorageConfigError that says to check the URL."""
    url = server.settings.dsn.replace("/test?", "/no_such_db_nsp?")
    with pytest.raises(StorageConfigError, match="check the database name"):
        await open_storage(url)


@pytest.mark.postgres
@pytest.mark.slow
@pytest.mark.asyncio
async def test_four_processes_with_own_pools_lose_no_update(server: Server) -> None:
    """4 processes, each with its own pool, write 25 updates each to one scope at the same
    time: the final state has all 100 keys, and the 100 writes were serialized (the states
    they produced had 1, 2, ..., 100 keys: no two writes read the same state)."""
    processes, writes = 4, 25
    async with await open_storage(server.url):  # creates the table before the race
        pass
    procs = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            str(HERE / "pg_race_writer.py"),
            server.url,
            str(index),
            str(writes),
            "race-thread",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            cwd=ROOT,
        )
        for index in range(processes)
    ]
    try:
        with anyio.fail_after(60):
            for proc in procs:
                assert proc.stdout is not None
                assert await proc.stdout.readline() == b"ready\n"
            outputs = await asyncio.gather(*(proc.communicate(b"go\n") for proc in procs))
    finally:
        for proc in procs:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
    assert [proc.returncode for proc in procs] == [0] * processes
    sizes = sorted(size for stdout, _ in outputs for size in json.loads(stdout))
    assert sizes == list(range(1, processes * writes + 1))

    async with await open_storage(server.url) as storage:
        state = await storage.get("scopes/scratchpad/thread/race-thread/state")
    assert state == {f"p{i}_{n}": n for i in range(processes) for n in range(writes)}


@pytest.mark.postgres
@pytest.mark.asyncio
async def test_locked_scope_does_not_block_another(server: Server) -> None:
    """While another server holds the row lock of scope A, a write to A waits and a write
    to scope B completes; A's write completes on the latest value once the lock is gone."""
    async with await open_storage(server.url) as storage:
        await storage.set("A", {"n": 0})
        raw = await server.connect()
        try:
            transaction = await _hold_row(raw, server, "A", changed_to='{"n": 10}')
            async with anyio.create_task_group() as tg:
                results: dict[str, Any] = {}

                async def write_a() -> None:
                    results["A"] = await storage.update("A", lambda cur: {"n": cur["n"] + 1})

                tg.start_soon(write_a)
                await wait_until(
                    lambda: _has_waiter(server), "the write to A to wait for the row lock"
                )
                with anyio.fail_after(5):
                    assert await storage.update("B", lambda cur: {"b": True}) == {"b": True}
                assert "A" not in results
                await transaction.commit()
            assert results["A"] == {"n": 11}
            assert await storage.get("A") == {"n": 11}
        finally:
            await raw.close()


async def _hold_row(raw: Any, server: Server, key: str, *, changed_to: str | None = None) -> Any:
    """Start a transaction on ``raw`` (another server's connection) that locks ``key``'s row
    and, given ``changed_to`` (JSON text), changes its value without committing; return it."""
    transaction = raw.transaction()
    await transaction.start()
    await raw.execute(f"SELECT 1 FROM {server.table} WHERE key = $1 FOR UPDATE", key)
    if changed_to is not None:
        await raw.execute(
            f"UPDATE {server.table} SET value = $2::text::json WHERE key = $1", key, changed_to
        )
    return transaction


async def _has_waiter(server: Server) -> bool:
    return len(await server.pids_waiting_for_lock()) == 1


@pytest.mark.postgres
@pytest.mark.asyncio
async def test_hundred_writers_on_one_scope_share_one_connection(server: Server) -> None:
    """100 concurrent writers on one scope lose nothing, use one pool connection between
    them and, queued behind a lock, commit as one transaction: with a pool of 2 and scope A
    locked elsewhere, a write to scope B still gets a connection, and after the lock is
    released A sees exactly 2 writes (the first writer's, then the other 99 combined)."""
    async with await open_storage(f"{server.url}&pool_size=2") as storage:
        await storage.set("A", {})
        # Counts the UPDATEs of A's row: one per transaction that wrote it.
        writes, count = f'"{server.settings.table}_writes"', f'"{server.settings.table}_count"'
        await server.execute(
            f"CREATE TABLE {writes} (n int); "
            f"CREATE FUNCTION {count}() RETURNS trigger LANGUAGE plpgsql "
            f"AS $$ BEGIN INSERT INTO {writes} VALUES (1); RETURN NULL; END $$; "
            f"CREATE TRIGGER count_writes AFTER UPDATE ON {server.table} "
            f"FOR EACH ROW WHEN (NEW.key = 'A') EXECUTE FUNCTION {count}()"
        )
        raw = await server.connect()
        try:
            transaction = await _hold_row(raw, server, "A")
            async with anyio.create_task_group() as tg:

                async def write(index: int) -> None:
                    await storage.update("A", lambda cur: {**cur, f"w{index}": index})

                tg.start_soon(write, 0)
                await wait_until(lambda: _has_waiter(server), "the first writer to wait")
                for index in range(1, 100):
                    tg.start_soon(write, index)
                await anyio.wait_all_tasks_blocked()  # the 99 are queued
                with anyio.fail_after(5):
                    await storage.update("B", lambda cur: "free")
                assert await server.backend_connections() == 2
                await transaction.commit()
        finally:
            await raw.close()
        assert await storage.get("A") == {f"w{index}": index for index in range(100)}
        assert await server.scalar(f"SELECT count(*) FROM {writes}") == 2
        await server.execute(
            f"DROP TABLE {server.table}; DROP FUNCTION {count}(); DROP TABLE {writes}"
        )


@pytest.mark.postgres
@pytest.mark.asyncio
async def test_hundred_concurrent_writers_unblocked_use_one_connection(server: Server) -> None:
    """100 concurrent writers on one scope, nothing else running: all 100 writes land and
    the pool never opens a second connection."""
    async with await open_storage(f"{server.url}&pool_size=10") as storage:

        async def write(index: int) -> None:
            await storage.update("S", lambda cur: {**(cur or {}), f"w{index}": index})

        async with anyio.create_task_group() as tg:
            for index in range(100):
                tg.start_soon(write, index)
        assert await storage.get("S") == {f"w{index}": index for index in range(100)}
        assert await server.backend_connections() == 1


@pytest.mark.postgres
@pytest.mark.asyncio
async def test_connection_killed_inside_the_transaction(server: Server) -> None:
    """The server connection of a write is terminated while its transaction holds the row
    lock (between the read and the write): update raises StorageError saying nothing was
    written, the prior state is intact, and the next writes work on a new connection."""
    async with await open_storage(server.url) as storage:
        await storage.set("k", {"v": "prior"})
        in_fn, killed = threading.Event(), threading.Event()
        victims: list[int] = []

        def kill() -> None:
            async def terminate() -> None:
                conn = await server.connect()
                try:
                    pids = await conn.fetch(
                        "SELECT DISTINCT pid FROM pg_locks WHERE locktype = 'relation' "
                        "AND relation = to_regclass($1) AND granted AND pid <> pg_backend_pid()",
                        server.table,
                    )
                    victims.extend(row["pid"] for row in pids)
                    for pid in victims:
                        await conn.execute("SELECT pg_terminate_backend($1, 5000)", pid)
                finally:
                    await conn.close()

            in_fn.wait(10)
            asyncio.run(terminate())
            killed.set()

        def fn(current: Any) -> Any:
            in_fn.set()
            killed.wait(10)  # blocks the loop on purpose: the server side dies meanwhile
            return {"v": "new"}

        thread = threading.Thread(target=kill)
        thread.start()
        try:
            with pytest.raises(StorageError, match="nothing was written") as info:
                await storage.update("k", fn)
        finally:
            thread.join()
        assert len(victims) == 1
        assert not isinstance(info.value, StorageConfigError)
        assert await storage.get("k") == {"v": "prior"}
        assert await storage.update("k", lambda cur: {**cur, "after": 1}) == {
            "v": "prior",
            "after": 1,
        }
        assert await storage.get("k") == {"v": "prior", "after": 1}


@pytest.mark.postgres
@pytest.mark.asyncio
async def test_connection_killed_while_waiting_for_the_lock(server: Server) -> None:
    """A write whose connection is terminated while it waits for another server's row lock
    fails with StorageError alone: the writes queued behind it in this process run next on
    a new connection, and the other server's committed value is kept under theirs."""
    async with await open_storage(server.url) as storage:
        await storage.set("k", {"v": 0})
        raw = await server.connect()
        outcomes: dict[int, Any] = {}
        try:
            transaction = await _hold_row(raw, server, "k", changed_to='{"v": 1}')
            async with anyio.create_task_group() as tg:

                async def write(index: int) -> None:
                    try:
                        outcomes[index] = await storage.update(
                            "k", lambda cur: {**cur, f"w{index}": index}
                        )
                    except StorageError as exc:
                        outcomes[index] = exc

                tg.start_soon(write, 0)
                await wait_until(lambda: _has_waiter(server), "the first writer to wait")
                for index in range(1, 5):
                    tg.start_soon(write, index)
                await anyio.wait_all_tasks_blocked()  # the 4 are queued
                (pid,) = await server.pids_waiting_for_lock()
                assert await raw.fetchval("SELECT pg_terminate_backend($1, 5000)", pid)
                await wait_until(lambda: _no_waiter(server, pid), "the writer to die")
                await transaction.commit()
        finally:
            await raw.close()
        assert isinstance(outcomes[0], StorageError)
        assert "nothing was written" in str(outcomes[0])
        expected = {"v": 1, **{f"w{index}": index for index in range(1, 5)}}
        assert outcomes[4] == expected
        assert await storage.get("k") == expected


async def _no_waiter(server: Server, pid: int) -> bool:
    return pid not in await server.pids_waiting_for_lock()


@pytest.mark.postgres
@pytest.mark.asyncio
async def test_lock_timeout_is_a_busy_error(server: Server) -> None:
    """With lock_timeout set through the URL (a server setting passed through to asyncpg), a
    write that cannot get the row lock in time raises StorageBusyError and changes nothing."""
    async with await open_storage(f"{server.url}&lock_timeout=100ms") as storage:
        await storage.set("k", "prior")
        raw = await server.connect()
        try:
            async with raw.transaction():
                await raw.execute(f"SELECT 1 FROM {server.table} WHERE key = 'k' FOR UPDATE")
                with anyio.fail_after(5), pytest.raises(StorageBusyError, match="lock_timeout"):
                    await storage.update("k", lambda cur: "new")
        finally:
            await raw.close()
        assert await storage.get("k") == "prior"
        assert await storage.update("k", lambda cur: cur + "+1") == "prior+1"


@pytest.mark.postgres
@pytest.mark.asyncio
async def test_update_failing_on_a_missing_key_leaves_no_row(server: Server) -> None:
    """When every queued update of a missing key fails, the row inserted to lock it is
    rolled back: no row, no empty value left behind."""
    async with await open_storage(server.url) as storage:

        def fail(current: Any) -> Any:
            raise KeyError("nope")

        with pytest.raises(KeyError):
            await storage.update("ghost", fail)
        assert await server.scalar(f"SELECT count(*) FROM {server.table}") == 0


async def _install_commit_trigger(server: Server, body: str) -> None:
    """A deferred constraint trigger on the test table: its body runs inside COMMIT."""
    function = f'"{server.settings.table}_at_commit"'
    await server.execute(
        f"CREATE FUNCTION {function}() RETURNS trigger LANGUAGE plpgsql "
        f"AS $$ BEGIN {body}; RETURN NULL; END $$; "
        f"CREATE CONSTRAINT TRIGGER at_commit AFTER UPDATE ON {server.table} "
        "DEFERRABLE INITIALLY DEFERRED FOR EACH ROW "
        f"WHEN (NEW.value::jsonb ? 'fault') EXECUTE FUNCTION {function}()"
    )


@pytest.mark.postgres
@pytest.mark.asyncio
async def test_connection_lost_during_commit_says_the_outcome_is_unknown(server: Server) -> None:
    """When the connection dies while COMMIT runs (the server process ends itself inside
    the commit), update raises StorageError saying the write may or may not have been
    applied, since the client cannot know; here the server aborted it, so the prior value
    is still there, and the next update works."""
    async with await open_storage(server.url) as storage:
        await storage.set("k", {"v": "prior"})
        await _install_commit_trigger(server, "PERFORM pg_terminate_backend(pg_backend_pid())")
        unknown = pytest.raises(StorageOutcomeUnknownError, match="may or may not have applied")
        with unknown as info:
            await storage.update("k", lambda cur: {**cur, "fault": True})
        assert "commit of an update of 'k'" in str(info.value)
        assert await storage.get("k") == {"v": "prior"}
        assert await storage.update("k", lambda cur: {**cur, "after": 1}) == {
            "v": "prior",
            "after": 1,
        }


@pytest.mark.postgres
@pytest.mark.asyncio
async def test_commit_refused_by_the_server_is_rolled_back(server: Server) -> None:
    """When PostgreSQL refuses the COMMIT itself (a deferred constraint fails), update
    raises StorageError saying the transaction was rolled back, and the value is intact."""
    async with await open_storage(server.url) as storage:
        await storage.set("k", {"v": "prior"})
        await _install_commit_trigger(server, "RAISE EXCEPTION 'refused at commit'")
        with pytest.raises(StorageError, match="rolled back: nothing was written") as info:
            await storage.update("k", lambda cur: {**cur, "fault": True})
        assert "refused at commit" in str(info.value)
        assert await storage.get("k") == {"v": "prior"}


@pytest.mark.postgres
@pytest.mark.asyncio
async def test_key_postgres_cannot_hold_is_a_value_error(server: Server) -> None:
    """A key with the character U+0000 (PostgreSQL text cannot hold it) is a ValueError for
    set and update, and nothing is stored."""
    async with await open_storage(server.url) as storage:
        with pytest.raises(ValueError, match="PostgreSQL refused the key or value"):
            await storage.set("bad\x00key", 1)
        with pytest.raises(ValueError, match="PostgreSQL refused the key or value"):
            await storage.update("bad\x00key", lambda cur: 1)
        assert await storage.list() == []


@pytest.mark.postgres
@pytest.mark.asyncio
async def test_idle_connections_terminated_by_the_server_are_replaced(server: Server) -> None:
    """When the server ends the pool's idle connections (a restart, an administrator), the
    next calls reconnect instead of failing: the writes succeed on new connections."""
    async with await open_storage(f"{server.url}&min_size=3") as storage:
        await storage.set("k", 0)
        old = set(await _backend_pids(server))
        assert len(old) == 3
        assert await server.scalar(
            "SELECT count(pg_terminate_backend(pid, 5000)) FROM pg_stat_activity "
            "WHERE application_name = $1",
            server.app,
        ) == len(old)
        for expected in range(1, 6):
            assert await storage.update("k", lambda cur: cur + 1) == expected
        assert await storage.get("k") == 5
        assert old.isdisjoint(await _backend_pids(server))


async def _backend_pids(server: Server) -> list[int]:
    conn = await server.connect()
    try:
        rows = await conn.fetch(
            "SELECT pid FROM pg_stat_activity WHERE application_name = $1", server.app
        )
    finally:
        await conn.close()
    return [row["pid"] for row in rows]


@pytest.mark.postgres
@pytest.mark.asyncio
async def test_repr_of_an_open_storage_hides_a_password_query_parameter(server: Server) -> None:
    """The repr of storage opened with ``?password=`` (the test server trusts any) shows
    ``password=***``."""
    async with await open_storage(f"{server.url}&password=hunter2") as storage:
        assert "hunter2" not in repr(storage)
        assert "password=***" in repr(storage)
        assert "hunter2" not in repr(storage.settings)  # type: ignore[attr-defined]


def incompressible_key(size: int) -> str:
    """Letters in no pattern PostgreSQL's compression could shorten."""
    import random

    rng = random.Random(size)
    return "".join(
        rng.choice("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ") for _ in range(size)
    )


@pytest.mark.postgres
@pytest.mark.asyncio
@pytest.mark.parametrize("size", [3_000, 10_000])
async def test_key_too_long_for_the_index_is_a_value_error(server: Server, size: int) -> None:
    """A key past the btree index's row limit (2,704 bytes, SQLSTATE 54000) is a ValueError
    for set and update that says so, gives the limit and says nothing was written; it does
    not ask to retry or to check the server, and the message does not repeat the whole key."""
    key = incompressible_key(size)
    async with await open_storage(server.url) as storage:
        await storage.set("other", 1)
        for write in (lambda: storage.set(key, 1), lambda: storage.update(key, lambda cur: 1)):
            with pytest.raises(ValueError, match="too long for PostgreSQL's index") as info:
                await write()
            message = str(info.value)
            assert not isinstance(info.value, StorageError)
            assert "at most 2,704 bytes" in message
            assert f"this one has {size:,}" in message
            assert "nothing was written" in message
            assert "retry" not in message
            assert "again" not in message
            assert "reachable" not in message
            assert key not in message
        assert await storage.list() == ["other"]
        assert await storage.get(key) is None
        await storage.set(key[:2_000], 2)  # a key under the limit is fine
        assert await storage.get(key[:2_000]) == 2


#: (case id, the table as someone else made it, words the message must contain)
OTHER_SHAPES: list[tuple[str, str, list[str]]] = [
    ("unrelated", "(id int)", ["columns are (id integer)", "key is missing", "value is missing"]),
    ("no-columns", "()", ["columns are (none)", "key is missing"]),
    (
        "text-not-json",
        "(key text PRIMARY KEY, value text NOT NULL, updated_at timestamptz DEFAULT now())",
        ["value is text", "value json NOT NULL (or jsonb)"],
    ),
    (
        "no-updated-at",
        "(key text PRIMARY KEY, value jsonb NOT NULL)",
        ["updated_at is missing"],
    ),
    (
        "key-not-unique",
        "(key text, value jsonb, updated_at timestamptz DEFAULT now())",
        ["key has no unique index"],
    ),
    (
        "required-extra-column",
        "(key text PRIMARY KEY, value jsonb, updated_at timestamptz DEFAULT now(), "
        "owner text NOT NULL)",
        ["owner is NOT NULL without a default"],
    ),
]


@pytest.mark.postgres
@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("columns", "words"), [c[1:] for c in OTHER_SHAPES], ids=[c[0] for c in OTHER_SHAPES]
)
async def test_existing_table_of_another_shape_is_refused_at_open(
    server: Server, columns: str, words: list[str]
) -> None:
    """A table of the chosen name that lacks the columns this backend writes is refused by
    open_storage with a StorageConfigError naming the table, its columns and the fix; the
    table is left alone and the pool is closed."""
    await server.execute(f"CREATE TABLE {server.table} {columns}")

    with pytest.raises(StorageConfigError) as info:
        await open_storage(server.url)

    message = str(info.value)
    assert f"the table {server.settings.table!r}" in message
    assert "is not a scratchpad table" in message
    for word in words:
        assert word in message
    assert "?table=" in message
    assert f"DROP TABLE {server.table}" in message
    assert await server.scalar(f"SELECT count(*) FROM {server.table}") == 0
    await wait_until(lambda: _no_connections(server), "the pool's connections to close")


async def _no_connections(server: Server) -> bool:
    return await server.backend_connections() == 0


@pytest.mark.postgres
@pytest.mark.asyncio
async def test_existing_table_made_by_hand_with_the_columns_is_used(server: Server) -> None:
    """A table made by hand with the needed columns (a unique index instead of a primary
    key, an extra column that may be null) is accepted and used."""
    await server.execute(
        f"CREATE TABLE {server.table} (key text NOT NULL UNIQUE, value jsonb NOT NULL, "
        "updated_at timestamptz NOT NULL DEFAULT now(), note text)"
    )
    async with await open_storage(server.url) as storage:
        await storage.set("k", {"a": 1})
        assert await storage.update("k", lambda cur: {**cur, "b": 2}) == {"a": 1, "b": 2}
