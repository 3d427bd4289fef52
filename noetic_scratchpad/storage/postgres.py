"""``postgresql://`` and ``postgres://``: one table shared by every app server.

Each key is a row ``(key text primary key, value jsonb, updated_at timestamptz)``. The
atomic read-modify-write of a key runs in one transaction that holds the row's lock
(``SELECT ... FOR UPDATE``) from its read to its commit, so writers on any number of
servers serialize per key and never lose each other's updates, while different keys never
wait for each other.

Inside one process the writes of a key also go through a :class:`~noetic_scratchpad.locks.
KeyedBatcher`: the writers queued behind a running transaction are combined into the next
one. A hundred tasks writing one scope therefore hold one pool connection and commit a few
times, instead of taking every connection of the pool and queueing on the row lock.

URL options (also keyword arguments of :meth:`PostgresStorage.open`, which win)::

    postgresql://user:secret@db.internal:5432/app?table=scratchpad_kv&pool_size=10

``table`` (``[schema.]name``, default ``scratchpad_kv``), ``pool_size`` (an alias of
``max_size``), ``min_size`` and ``max_size``. They are removed before the URL goes to
asyncpg; every other parameter (``sslmode``, ``application_name``, a server setting such
as ``lock_timeout``) passes through.

Messages, logs and ``repr`` show the URL with its secrets replaced by ``***``: the password
of ``user:password@``, and the query parameters ``password`` and ``sslpassword``.

An existing table is used only if it has the columns this backend writes (``key`` text
with a unique index, ``value`` jsonb, ``updated_at`` timestamptz); a table of another shape
is refused when the storage opens, not at its first write. A key is the table's primary key,
and PostgreSQL's btree index holds at most 2,704 bytes a row (keys are compressed first,
so a repetitive key may be longer): a longer key is refused with ``ValueError``.
"""

from __future__ import annotations

import builtins
import json
import re
from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, unquote, unquote_plus, urlsplit, urlunsplit

import anyio
import asyncpg  # type: ignore[import-untyped, unused-ignore]

from .. import _json
from ..errors import (
    StorageBusyError,
    StorageConfigError,
    StorageError,
    StorageOutcomeUnknownError,
)
from ..locks import KeyedBatcher
from ._options import int_option
from ._prefix import prefix_upper_bound
from .base import JsonValue, KeyInfo, StorageBackend, UpdateFn

__all__ = ("DEFAULT_TABLE", "PostgresSettings", "PostgresStorage", "parse_postgres_url")

DEFAULT_TABLE = "scratchpad_kv"
DEFAULT_MIN_SIZE = 1
DEFAULT_MAX_SIZE = 10

_SCHEMES = ("postgresql", "postgres")
_OUR_PARAMS = ("table", "pool_size", "min_size", "max_size")
# Query parameters whose value is a secret (libpq's and asyncpg's names; passfile is a path).
_SECRET_PARAMS = frozenset({"password", "sslpassword"})
_REDACTED = "***"
_SHORTEST_SECRET = 4  # shorter ones are not searched for in error texts: too many false hits
# What this backend reads and writes: (column, type as format_type() names it).
_COLUMNS = (("key", "text"), ("value", "jsonb"), ("updated_at", "timestamp with time zone"))
# PostgreSQL's largest btree index row (PostgreSQL 12+, 8 KB pages), for messages.
_MAX_INDEX_ROW = 2704
_INDEX_ROW_LIMIT = re.compile(r"index row (?:size \d+ exceeds .*?maximum (\d+)|requires)")
_SHOWN_KEY_CHARS = 60
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_MAX_IDENTIFIER_BYTES = 63  # PostgreSQL's NAMEDATALEN - 1; longer names are silently cut
# A JSON string escape of U+0000 (after an even number of backslashes): jsonb refuses it.
_NUL_ESCAPE = re.compile(rb"(?<!\\)((?:\\\\)*)\\u0000")
_SENTINEL = "\U0010ffff".encode()  # a noncharacter: never meant to appear in real text
_SENTINEL_TOKEN = re.compile(re.escape(_SENTINEL) + b"(" + re.escape(_SENTINEL) + b"|0)")
_DIGITS_TO_ZERO = bytes.maketrans(b"123456789", b"000000000")
_LONG_DIGITS = b"0" * 19  # an integer this long may not fit in 64 bits
# First key of the advisory lock that serializes CREATE TABLE across servers (arbitrary).
_DDL_LOCK_CLASS = 0x5C7A
# A row deleted between the insert-if-absent and the lock makes the lock statement retry.
_LOCK_ATTEMPTS = 8
_CLOSE_TIMEOUT = 10.0
_JSONB_VERSION = b"\x01"  # jsonb's binary wire format is this byte, then the JSON text


# What a failed call means for the stored data, as its error message says.
_UNCHANGED = "nothing was changed"
_ROLLED_BACK = "the transaction was rolled back: nothing was written, the stored value is intact"
_UNCONFIRMED = (
    "PostgreSQL may or may not have applied it before the connection failed; "
    "read the key to find out"
)
# Failures after which a sent COMMIT may or may not have taken effect.
_CONNECTION_LOST = (
    OSError,
    TimeoutError,
    asyncpg.PostgresConnectionError,
    asyncpg.InterfaceError,
    asyncpg.OperatorInterventionError,
)


@dataclass(frozen=True, slots=True)
class PostgresSettings:
    """What :func:`parse_postgres_url` makes of a URL and the keyword options."""

    dsn: str = field(repr=False)
    """The URL for asyncpg, without this backend's own query parameters (and with its
    password: never shown; see ``display``)."""
    table: str
    """The table name as given (``name`` or ``schema.name``), validated."""
    min_size: int
    max_size: int
    display: str
    """The URL without its password, for messages and logs."""
    secrets: tuple[str, ...] = field(default=(), repr=False)
    """The URL's passwords as written and decoded, to scrub from driver error texts."""

    @property
    def quoted_table(self) -> str:
        return ".".join(f'"{part}"' for part in self.table.split("."))

    def scrub(self, text: str) -> str:
        """``text`` with the URL and every password in it replaced by their redacted form."""
        if self.dsn in text:
            text = text.replace(self.dsn, self.display)
        for secret in self.secrets:
            if secret in text:
                text = text.replace(secret, _REDACTED)
        return text


def parse_postgres_url(url: str, **options: Any) -> PostgresSettings:
    """Split ``url`` into asyncpg's DSN and this backend's settings.

    Keyword ``options`` (``table``, ``pool_size``, ``min_size``, ``max_size``) win over
    the same parameters in the URL's query string. Raises :class:`StorageConfigError` for
    an unknown scheme, a repeated or malformed parameter or a table name that is not an
    identifier.
    """
    parts = urlsplit(url)
    display = _redact(url)
    if parts.scheme.lower() not in _SCHEMES:
        raise StorageConfigError(
            f"{display!r} is not a PostgreSQL URL; use postgresql://user@host:5432/dbname"
        )
    ours: dict[str, str] = {}
    passed: list[str] = []  # kept as written: asyncpg decodes them itself
    for segment in filter(None, parts.query.split("&")):
        [(name, value)] = parse_qsl(segment, keep_blank_values=True) or [(segment, "")]
        if name not in _OUR_PARAMS:
            passed.append(segment)
        elif name in ours:
            raise StorageConfigError(f"the storage URL {display!r} gives {name!r} twice")
        else:
            ours[name] = value
    unknown = sorted(set(options) - set(_OUR_PARAMS))
    if unknown:
        raise StorageConfigError(f"unknown PostgreSQL storage option(s): {', '.join(unknown)}")
    merged: dict[str, Any] = {**ours, **{k: v for k, v in options.items() if v is not None}}

    table = str(merged.get("table", DEFAULT_TABLE))
    _check_table_name(table)
    pool_size = _size_option(merged, "pool_size", minimum=1)
    max_size = _size_option(merged, "max_size", minimum=1)
    min_size = _size_option(merged, "min_size", minimum=0)
    if pool_size is not None and max_size is not None and pool_size != max_size:
        raise StorageConfigError(
            f"pool_size={pool_size} and max_size={max_size} disagree; give one of them "
            "(pool_size is the most connections the pool opens, the same as max_size)"
        )
    max_size = max_size or pool_size or DEFAULT_MAX_SIZE
    if min_size is None:
        min_size = min(DEFAULT_MIN_SIZE, max_size)
    if min_size > max_size:
        raise StorageConfigError(
            f"min_size={min_size} is larger than the pool's maximum ({max_size}); "
            "lower min_size or raise pool_size"
        )
    dsn = urlunsplit(parts._replace(query="&".join(passed)))
    return PostgresSettings(dsn, table, min_size, max_size, _redact(dsn), _secrets(url))


class PostgresStorage(StorageBackend):
    """A table of JSONB values in PostgreSQL, shared safely by many processes.

    Open it with ``await open_storage("postgresql://...")`` or :meth:`open`; close it with
    :meth:`aclose` (or ``async with``). asyncio only: asyncpg does not run under trio.
    """

    url = "postgresql://"

    def __init__(
        self,
        pool: asyncpg.Pool,
        settings: PostgresSettings,
        *,
        max_batch: int = 256,
    ) -> None:
        self._pool = pool
        self.settings = settings
        self._closed = False
        self._batcher: KeyedBatcher[str, UpdateFn, JsonValue] = KeyedBatcher(
            self._run_batch, max_batch=max_batch
        )
        t = settings.quoted_table
        self._sql_create = (
            f'CREATE TABLE IF NOT EXISTS {t} (key text COLLATE "C" PRIMARY KEY, '
            "value jsonb NOT NULL, updated_at timestamptz NOT NULL DEFAULT now())"
        )
        # One round trip: insert the row if absent (without racing other inserters), then
        # lock it. A row this statement inserted is invisible to its own SELECT, hence
        # `created`; neither flag set means a concurrent delete won, and we try again.
        self._sql_lock = (
            f"WITH created AS (INSERT INTO {t} (key, value) VALUES ($1, 'null'::jsonb) "
            "ON CONFLICT (key) DO NOTHING RETURNING true) "
            "SELECT EXISTS (SELECT 1 FROM created) AS created, "
            "locked.key IS NOT NULL AS found, locked.value "
            f"FROM (SELECT 1) AS one LEFT JOIN (SELECT key, value FROM {t} "
            "WHERE key = $1 FOR UPDATE) AS locked ON true"
        )
        self._sql_write = f"UPDATE {t} SET value = $2, updated_at = now() WHERE key = $1"
        self._sql_set = (
            f"INSERT INTO {t} (key, value) VALUES ($1, $2) ON CONFLICT (key) "
            "DO UPDATE SET value = EXCLUDED.value, updated_at = now()"
        )
        self._sql_get = f"SELECT value FROM {t} WHERE key = $1"
        self._sql_get_many = f"SELECT key, value FROM {t} WHERE key = ANY($1::text[])"
        self._sql_delete = f"DELETE FROM {t} WHERE key = $1"
        # Range scans on the "C"-collated primary key: code point order, as Python sorts
        # (stated in each query too, in case the table was created by hand without it).
        columns = "key, value, extract(epoch FROM updated_at)::float8 AS updated_at"
        after, before = 'key >= $1 COLLATE "C"', 'key < $2 COLLATE "C"'
        order = 'ORDER BY key COLLATE "C"'
        self._sql_list_all = f"SELECT key FROM {t} {order}"
        self._sql_list_from = f"SELECT key FROM {t} WHERE {after} {order}"
        self._sql_list_range = f"SELECT key FROM {t} WHERE {after} AND {before} {order}"
        self._sql_describe_all = f"SELECT {columns} FROM {t} {order}"
        self._sql_describe_from = f"SELECT {columns} FROM {t} WHERE {after} {order}"
        self._sql_describe_range = f"SELECT {columns} FROM {t} WHERE {after} AND {before} {order}"
        self._sql_drop = f"DROP TABLE IF EXISTS {t}"

    @classmethod
    async def open(
        cls,
        url: str,
        *,
        table: str | None = None,
        pool_size: int | None = None,
        min_size: int | None = None,
        max_size: int | None = None,
        max_batch: int = 256,
        **connect_options: Any,
    ) -> PostgresStorage:
        """Connect a pool to ``url`` and create the table if it is missing.

        ``connect_options`` go to :func:`asyncpg.create_pool` (for example ``ssl``,
        ``command_timeout`` or ``server_settings``). ``max_batch`` caps how many queued
        updates of one key share a transaction. Raises :class:`StorageConfigError` for a
        bad URL or option, an unknown database or refused credentials, and
        :class:`StorageError` when the server cannot be reached.
        """
        settings = parse_postgres_url(
            url, table=table, pool_size=pool_size, min_size=min_size, max_size=max_size
        )
        max_batch = int_option("max_batch", max_batch, minimum=1)
        try:
            pool = await asyncpg.create_pool(
                settings.dsn,
                min_size=settings.min_size,
                max_size=settings.max_size,
                init=_init_connection,
                reset=_keep_session,
                **connect_options,
            )
        except TypeError as exc:
            raise StorageConfigError(
                f"bad connection option for {settings.display!r}: {settings.scrub(str(exc))}"
            ) from exc
        except (
            asyncpg.InvalidCatalogNameError,
            asyncpg.InvalidAuthorizationSpecificationError,
            asyncpg.InvalidPasswordError,
        ) as exc:
            raise StorageConfigError(
                f"PostgreSQL at {settings.display!r} refused the connection: "
                f"{settings.scrub(str(exc))}; check the database name, user and password in "
                "the URL"
            ) from exc
        except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
            raise StorageError(
                f"cannot connect to PostgreSQL at {settings.display!r} "
                f"({type(exc).__name__}: {settings.scrub(str(exc))}); check that the server "
                "is running and that the URL's host and port are right"
            ) from exc
        storage = cls(pool, settings, max_batch=max_batch)
        try:
            await storage._create_table()
        except BaseException:
            pool.terminate()
            raise
        return storage

    async def _create_table(self) -> None:
        async with self._connection("create the table") as conn:
            if not await conn.fetchval("SELECT to_regclass($1) IS NOT NULL", self._table_ref):
                # (An existing table needs no CREATE privilege and takes no lock.)
                async with conn.transaction():
                    # Concurrent CREATE TABLE IF NOT EXISTS can still collide in the catalog;
                    # servers starting together take turns instead.
                    await conn.execute(
                        "SELECT pg_advisory_xact_lock($1, hashtext($2))",
                        _DDL_LOCK_CLASS,
                        self._table_ref,
                    )
                    await conn.execute(self._sql_create)
            columns = await conn.fetch(_SQL_COLUMNS, self._table_ref)
            key_is_unique = await conn.fetchval(_SQL_KEY_IS_UNIQUE, self._table_ref)
        self._check_shape(columns, bool(key_is_unique))

    def _check_shape(self, columns: Iterable[asyncpg.Record], key_is_unique: bool) -> None:
        """Raise :class:`StorageConfigError` unless the table has the columns this backend
        reads and writes, a unique index on ``key``, and no other column a write would
        have to fill."""
        found = {row["name"]: row for row in columns}
        problems = [
            f"{name} is missing" if name not in found else f"{name} is {found[name]['type']}"
            for name, kind in _COLUMNS
            if name not in found or found[name]["type"] != kind
        ]
        if "key" in found and not key_is_unique:
            problems.append("key has no unique index (such as a primary key)")
        problems.extend(
            f"{name} is NOT NULL without a default, and this backend never writes it"
            for name, row in found.items()
            if name not in ("key", "value") and row["required"]
        )
        if not problems:
            return
        shown = ", ".join(f"{name} {row['type']}" for name, row in found.items()) or "none"
        raise StorageConfigError(
            f"the table {self.settings.table!r} at {self.settings.display!r} exists but is not "
            f"a scratchpad table: its columns are ({shown}), and {'; '.join(problems)}. This "
            "backend needs (key text PRIMARY KEY, value jsonb NOT NULL, updated_at timestamptz "
            "NOT NULL DEFAULT now()). Choose another table with ?table=name in the URL (or "
            f"the table= option), or, if its rows are not needed, DROP TABLE {self._table_ref} "
            "so that it is created again with these columns"
        )

    @property
    def _table_ref(self) -> str:
        return self.settings.quoted_table

    # -- the contract ---------------------------------------------------------------

    async def get(self, key: str) -> JsonValue | None:
        async with self._connection("read", key) as conn:
            return await conn.fetchval(self._sql_get, key)

    async def set(self, key: str, value: JsonValue) -> None:
        data = _encode(value)
        async with self._connection("write", key, outcome=_UNCONFIRMED) as conn:
            await conn.execute(self._sql_set, key, data)

    async def delete(self, key: str) -> None:
        async with self._connection("delete", key, outcome=_UNCONFIRMED) as conn:
            await conn.execute(self._sql_delete, key)

    async def list(self, prefix: str = "") -> builtins.list[str]:
        async with self._connection("list keys") as conn:
            rows = await self._fetch_prefix(
                conn, prefix, self._sql_list_all, self._sql_list_from, self._sql_list_range
            )
        return [row["key"] for row in rows]

    async def get_many(self, keys: Iterable[str]) -> dict[str, JsonValue]:
        wanted = builtins.list(dict.fromkeys(keys))
        if not wanted:
            return {}
        async with self._connection("read") as conn:
            rows = await conn.fetch(self._sql_get_many, wanted)
        return {row["key"]: row["value"] for row in rows}

    async def update(self, key: str, fn: UpdateFn) -> JsonValue:
        """Apply ``fn`` under the row lock of ``key``; see :meth:`StorageBackend.update`.

        Updates of ``key`` queued in this process while a transaction runs share the next
        transaction: each ``fn`` sees the result of the one before it, one that raises
        fails alone, and every caller gets its own result after the commit.
        """
        self._check_open()
        result: JsonValue = await self._batcher.submit(key, fn)
        return result

    async def describe(self, prefix: str = "") -> builtins.list[KeyInfo]:
        async with self._connection("describe keys") as conn:
            rows = await self._fetch_prefix(
                conn,
                prefix,
                self._sql_describe_all,
                self._sql_describe_from,
                self._sql_describe_range,
            )
        # The size of the compact JSON text, as the other backends report it.
        return [
            KeyInfo(row["key"], len(_json.dumps(row["value"])), row["updated_at"]) for row in rows
        ]

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        with anyio.move_on_after(_CLOSE_TIMEOUT) as scope:
            await self._batcher.wait_idle()  # writes already queued still commit
            await self._pool.close()
        if scope.cancelled_caught:
            self._pool.terminate()

    async def drop_table(self) -> None:
        """Drop this backend's table and everything in it (tests and tear-downs).

        Works after :meth:`aclose` too, on a connection of its own.
        """
        if not self._closed:
            async with self._connection("drop the table") as conn:
                await conn.execute(self._sql_drop)
            return
        try:
            conn = await asyncpg.connect(self.settings.dsn)
            try:
                await conn.execute(self._sql_drop)
            finally:
                await conn.close()
        except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
            raise self._error("drop the table", exc, _UNCHANGED) from exc

    def __repr__(self) -> str:
        return f"PostgresStorage({self.settings.display!r}, table={self.settings.table!r})"

    # -- the read-modify-write ------------------------------------------------------

    async def _run_batch(self, key: str, fns: builtins.list[UpdateFn]) -> builtins.list[Any]:
        async with self._connection("update", key, outcome=_ROLLED_BACK) as conn:
            transaction = conn.transaction(isolation="read_committed")
            await transaction.start()
            try:
                # The row lock is held from here to the end of the transaction.
                outcomes, data = _apply(fns, await self._lock_row(conn, key))
                if data is not None:
                    await conn.execute(self._sql_write, key, data)
            except BaseException:
                await _rollback_quietly(transaction)
                raise
            if data is None:  # every update failed: also drops a row inserted to lock
                await _rollback_quietly(transaction)
                return outcomes
            try:
                await transaction.commit()
            except _CONNECTION_LOST as exc:
                what = f"commit of an update of {key!r}"
                raise self._error(what, exc, _UNCONFIRMED, StorageOutcomeUnknownError) from exc
        return outcomes

    async def _lock_row(self, conn: asyncpg.Connection, key: str) -> JsonValue | None:
        for _ in range(_LOCK_ATTEMPTS):
            row = await conn.fetchrow(self._sql_lock, key)
            if row is None:  # the statement always yields one row
                raise StorageError(f"locking the row of {key!r} returned nothing; retry")
            if row["created"]:
                return None
            if row["found"]:
                return row["value"]
        raise StorageError(
            f"could not lock the row of {key!r} in {self.settings.table!r}: it was deleted "
            f"by another writer {_LOCK_ATTEMPTS} times in a row; nothing was written, retry"
        )

    # -- plumbing -------------------------------------------------------------------

    async def _fetch_prefix(
        self, conn: asyncpg.Connection, prefix: str, every: str, start: str, between: str
    ) -> builtins.list[asyncpg.Record]:
        upper = prefix_upper_bound(prefix)
        rows: builtins.list[asyncpg.Record]
        if not prefix:
            rows = await conn.fetch(every)
        elif upper is None:
            rows = await conn.fetch(start, prefix)
        else:
            rows = await conn.fetch(between, prefix, upper)
        return rows

    def _check_open(self) -> None:
        if self._closed:
            raise StorageError(
                f"the PostgreSQL storage {self.settings.display!r} is closed; "
                "open a new one with open_storage(url)"
            )

    @asynccontextmanager
    async def _connection(
        self, action: str, key: str | None = None, *, outcome: str = _UNCHANGED
    ) -> AsyncIterator[Any]:
        """A pool connection; driver and network failures become :class:`StorageError`
        whose message ends with ``outcome``: what a failure means for the stored data."""
        self._check_open()
        what = action if key is None else f"{action} of {_shown_key(key)}"
        try:
            conn = await self._pool.acquire()
        except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
            raise self._error(what, exc, "nothing was sent to the server") from exc
        try:
            yield conn
        except (asyncpg.LockNotAvailableError, asyncpg.QueryCanceledError) as exc:
            raise StorageBusyError(
                f"PostgreSQL {what} in {self.settings.table!r} timed out waiting "
                f"({type(exc).__name__}: {exc}); {outcome}. Another writer held the row "
                "lock past lock_timeout or statement_timeout: retry, or raise them"
            ) from exc
        except asyncpg.DataError as exc:  # SQLSTATE class 22, e.g. a NUL in a key
            raise ValueError(f"PostgreSQL refused the key or value of {what}: {exc}") from exc
        except asyncpg.ProgramLimitExceededError as exc:  # SQLSTATE class 54: never retry
            raise self._too_big(action, key, exc) from exc
        except asyncpg.InterfaceError as exc:
            if isinstance(exc, ValueError):  # asyncpg could not encode an argument
                raise ValueError(f"cannot send the arguments of {what}: {exc}") from exc
            raise self._error(what, exc, outcome) from exc
        except (OSError, TimeoutError, asyncpg.PostgresError) as exc:
            raise self._error(what, exc, outcome) from exc
        finally:
            # A release that fails has terminated the connection; the pool opens a new one.
            with suppress(Exception):
                await self._pool.release(conn)

    def _error(
        self,
        what: str,
        exc: BaseException,
        outcome: str,
        kind: type[StorageError] = StorageError,
    ) -> StorageError:
        return kind(
            f"PostgreSQL {what} in {self.settings.table!r} at {self.settings.display!r} "
            f"failed ({type(exc).__name__}: {self.settings.scrub(str(exc))}); {outcome}. "
            "Check that the server is reachable; the pool reconnects on the next call"
        )

    def _too_big(self, action: str, key: str | None, exc: BaseException) -> ValueError:
        """A key or value past a fixed limit of PostgreSQL: retrying can never help."""
        what = action if key is None else f"{action} of {_shown_key(key)}"
        text = str(exc).split("\n", 1)[0]
        limit = _INDEX_ROW_LIMIT.search(text)
        if limit is None or key is None:
            return ValueError(
                f"PostgreSQL refused the key or value of {what} in {self.settings.table!r} as "
                f"past one of its limits ({type(exc).__name__}: {text}); nothing was written. "
                "Use a smaller key or value"
            )
        maximum = int(limit[1]) if limit[1] else _MAX_INDEX_ROW
        size = len(key.encode(errors="replace"))
        return ValueError(
            f"the key {_shown_key(key)} is too long for PostgreSQL's index on the key column "
            f"of {self.settings.table!r}: an index row holds at most {maximum:,} bytes, so a "
            f"key can have at most about {maximum - 8:,} bytes of UTF-8 text (more only if it "
            f"compresses well), and this one has {size:,}; nothing was written. Use a shorter "
            f"key, such as a hash of the long one (PostgreSQL said: {text})"
        )


def _apply(fns: Iterable[UpdateFn], current: Any) -> tuple[builtins.list[Any], bytes | None]:
    """Run the queued updates in order, each on the result of the last one that worked.

    Returns one outcome per update (its value, or the exception that fails it alone) and
    the JSON text to write, ``None`` when no update worked.
    """
    outcomes: builtins.list[Any] = []
    data: bytes | None = None
    for fn in fns:
        try:
            new = fn(current)
            encoded = _escape(_json.dumps(new))
        except Exception as exc:
            outcomes.append(exc)
            continue
        current, data = new, encoded
        outcomes.append(new)
    return outcomes, data


async def _rollback_quietly(transaction: Any) -> None:
    # On a lost connection the server rolls the transaction back by itself.
    with suppress(Exception):
        await transaction.rollback()


async def _init_connection(conn: asyncpg.Connection) -> None:
    await conn.set_type_codec(
        "jsonb",
        schema="pg_catalog",
        encoder=_encode_jsonb,
        decoder=_decode_jsonb,
        format="binary",
    )


async def _keep_session(conn: asyncpg.Connection) -> None:
    """Release without asyncpg's reset query: this backend never changes session state,
    and an extra round trip per write is its largest fixed cost. (asyncpg still rolls
    back an open transaction before calling this.)"""


def _encode_jsonb(value: Any) -> bytes:
    # Values already encoded by _encode arrive as bytes; JSON itself never holds bytes.
    data = value if isinstance(value, bytes) else _encode(value)
    return _JSONB_VERSION + data


def _decode_jsonb(data: bytes) -> Any:
    text = data[1:]
    if _SENTINEL in text:
        text = _SENTINEL_TOKEN.sub(_unescape_token, text)
    if _LONG_DIGITS in text.translate(_DIGITS_TO_ZERO):
        # orjson reads integers past 64 bits as floats; the standard library keeps them.
        return json.loads(text)
    return _json.loads(text)


def _encode(value: Any) -> bytes:
    """JSON text of ``value`` for a jsonb column; ``ValueError`` when it is not JSON.

    jsonb refuses the character U+0000 in strings, so it is stored as the noncharacter
    U+10FFFF followed by ``0``, and a U+10FFFF of the value is doubled; reads undo both.
    """
    return _escape(_json.dumps(value))


def _escape(data: bytes) -> bytes:
    """Compact JSON ``data`` with U+0000 and U+10FFFF escaped as :func:`_encode` says."""
    if _SENTINEL in data:
        data = data.replace(_SENTINEL, _SENTINEL + _SENTINEL)
    if b"\\u0000" in data:
        data = _NUL_ESCAPE.sub(_escape_nul, data)
    return data


def _escape_nul(match: re.Match[bytes]) -> bytes:
    return match[1] + _SENTINEL + b"0"


def _unescape_token(match: re.Match[bytes]) -> bytes:
    return _SENTINEL if match[1] == _SENTINEL else b"\\u0000"


def _size_option(options: Mapping[str, Any], name: str, *, minimum: int) -> int | None:
    """The pool size option ``name``, or ``None`` when it is not given."""
    raw = options.get(name)
    return None if raw is None else int_option(name, raw, minimum=minimum)


def _check_table_name(table: str) -> None:
    parts = table.split(".")
    ok = 1 <= len(parts) <= 2 and all(
        _IDENTIFIER.match(part) and len(part.encode()) <= _MAX_IDENTIFIER_BYTES for part in parts
    )
    if not ok:
        raise StorageConfigError(
            f"table name {table!r} is not a PostgreSQL identifier; use letters, digits and "
            f"underscores, not starting with a digit, at most {_MAX_IDENTIFIER_BYTES} "
            "characters, optionally schema-qualified (myschema.scratchpad_kv)"
        )


_SQL_COLUMNS = (
    "SELECT attname AS name, format_type(atttypid, atttypmod) AS type, "
    "attnotnull AND NOT atthasdef AND attidentity = '' AND attgenerated = '' AS required "
    "FROM pg_attribute WHERE attrelid = to_regclass($1) AND attnum > 0 AND NOT attisdropped "
    "ORDER BY attnum"
)
# What ON CONFLICT (key) needs: a unique index on key alone, neither partial nor on an
# expression.
_SQL_KEY_IS_UNIQUE = (
    "SELECT EXISTS (SELECT 1 FROM pg_index i JOIN pg_attribute a "
    "ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0] "
    "WHERE i.indrelid = to_regclass($1) AND i.indisunique AND i.indnkeyatts = 1 "
    "AND i.indpred IS NULL AND i.indexprs IS NULL AND a.attname = 'key')"
)


def _shown_key(key: str) -> str:
    """``key`` for a message: its ``repr``, cut short when the key is long."""
    if len(key) <= _SHOWN_KEY_CHARS:
        return repr(key)
    return f"{key[:_SHOWN_KEY_CHARS]!r}... ({len(key):,} characters)"


def _redact(url: str) -> str:
    """``url`` with its secrets replaced by ``***``: the password of ``user:password@``
    and the values of the query parameters ``password`` and ``sslpassword``."""
    parts = urlsplit(url)
    userinfo, at, hostinfo = parts.netloc.rpartition("@")
    if at and ":" in userinfo:
        user = userinfo.split(":", 1)[0]
        parts = parts._replace(netloc=f"{user}:{_REDACTED}@{hostinfo}")
    if parts.query:
        segments = [
            f"{segment.split('=', 1)[0]}={_REDACTED}" if _is_secret(segment) else segment
            for segment in parts.query.split("&")
        ]
        parts = parts._replace(query="&".join(segments))
    return urlunsplit(parts)


def _is_secret(segment: str) -> bool:
    """Whether the query segment ``name=value`` gives a password (the name decoded)."""
    return unquote_plus(segment.split("=", 1)[0]).strip().lower() in _SECRET_PARAMS


def _secrets(url: str) -> tuple[str, ...]:
    """The passwords in ``url``, as written and decoded, longest first."""
    parts = urlsplit(url)
    found: set[str] = set()
    userinfo, at, _ = parts.netloc.rpartition("@")
    if at and ":" in userinfo:
        password = userinfo.split(":", 1)[1]
        found.update((password, unquote(password)))
    for segment in parts.query.split("&"):
        if _is_secret(segment):
            value = segment.partition("=")[2]
            found.update((value, unquote_plus(value)))
    return tuple(sorted((s for s in found if len(s) >= _SHORTEST_SECRET), key=len, reverse=True))
