"""The table: the SQL this backend runs on it, its creation, and the check of its shape.

Each key is a row ``(key text primary key, value jsonb, updated_at timestamptz)``, the key
collated ``"C"`` so that range scans run in code point order, as Python sorts.

An existing table is used only if it has the columns this backend writes (``key`` text
with a unique index, ``value`` jsonb, ``updated_at`` timestamptz); a table of another shape
is refused when the storage opens, not at its first write. Servers that start together and
find no table take turns creating it, under an advisory lock.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, NamedTuple

import asyncpg  # type: ignore[import-untyped, unused-ignore]

from ...errors import StorageConfigError
from .._prefix import prefix_upper_bound
from .options import PostgresSettings

__all__ = ("RangeScan", "TableSql", "check_shape", "create_table", "fetch_prefix")

# What this backend reads and writes: (column, type as format_type() names it).
_COLUMNS = (("key", "text"), ("value", "jsonb"), ("updated_at", "timestamp with time zone"))
# First key of the advisory lock that serializes CREATE TABLE across servers (arbitrary).
_DDL_LOCK_CLASS = 0x5C7A
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


class RangeScan(NamedTuple):
    """The three forms of one query over the keys that start with a prefix."""

    every: str
    """No prefix: every row."""
    start: str
    """``$1``: keys from the prefix on (a prefix with no upper bound)."""
    between: str
    """``$1``, ``$2``: keys from the prefix up to its upper bound."""


class TableSql:
    """Every statement this backend runs on its table (named by a checked identifier)."""

    __slots__ = (
        "create",
        "delete",
        "describe",
        "drop",
        "get",
        "get_many",
        "keys",
        "lock",
        "set",
        "table",
        "write",
    )

    def __init__(self, table: str) -> None:
        """``table``: the quoted table name (:attr:`PostgresSettings.quoted_table`)."""
        t = self.table = table
        self.create = (
            f'CREATE TABLE IF NOT EXISTS {t} (key text COLLATE "C" PRIMARY KEY, '
            "value jsonb NOT NULL, updated_at timestamptz NOT NULL DEFAULT now())"
        )
        # One round trip: insert the row if absent (without racing other inserters), then
        # lock it. A row this statement inserted is invisible to its own SELECT, hence
        # `created`; neither flag set means a concurrent delete won, and we try again.
        self.lock = (
            f"WITH created AS (INSERT INTO {t} (key, value) VALUES ($1, 'null'::jsonb) "
            "ON CONFLICT (key) DO NOTHING RETURNING true) "
            "SELECT EXISTS (SELECT 1 FROM created) AS created, "
            "locked.key IS NOT NULL AS found, locked.value "
            f"FROM (SELECT 1) AS one LEFT JOIN (SELECT key, value FROM {t} "
            "WHERE key = $1 FOR UPDATE) AS locked ON true"
        )
        self.write = f"UPDATE {t} SET value = $2, updated_at = now() WHERE key = $1"
        self.set = (
            f"INSERT INTO {t} (key, value) VALUES ($1, $2) ON CONFLICT (key) "
            "DO UPDATE SET value = EXCLUDED.value, updated_at = now()"
        )
        self.get = f"SELECT value FROM {t} WHERE key = $1"
        self.get_many = f"SELECT key, value FROM {t} WHERE key = ANY($1::text[])"
        self.delete = f"DELETE FROM {t} WHERE key = $1"
        self.keys = _range_scan(t, "key")
        self.describe = _range_scan(
            t, "key, value, extract(epoch FROM updated_at)::float8 AS updated_at"
        )
        self.drop = f"DROP TABLE IF EXISTS {t}"


def _range_scan(table: str, columns: str) -> RangeScan:
    # Range scans on the "C"-collated primary key: code point order, as Python sorts
    # (stated in each query too, in case the table was created by hand without it).
    after, before = 'key >= $1 COLLATE "C"', 'key < $2 COLLATE "C"'
    order = 'ORDER BY key COLLATE "C"'
    return RangeScan(
        f"SELECT {columns} FROM {table} {order}",
        f"SELECT {columns} FROM {table} WHERE {after} {order}",
        f"SELECT {columns} FROM {table} WHERE {after} AND {before} {order}",
    )


async def fetch_prefix(
    conn: asyncpg.Connection, scan: RangeScan, prefix: str
) -> list[asyncpg.Record]:
    """The rows of ``scan`` whose key starts with ``prefix``, in key order."""
    upper = prefix_upper_bound(prefix)
    rows: list[asyncpg.Record]
    if not prefix:
        rows = await conn.fetch(scan.every)
    elif upper is None:
        rows = await conn.fetch(scan.start, prefix)
    else:
        rows = await conn.fetch(scan.between, prefix, upper)
    return rows


async def create_table(
    conn: asyncpg.Connection, sql: TableSql
) -> tuple[list[asyncpg.Record], bool]:
    """Create the table if it is missing; its columns and whether ``key`` is unique, for
    :func:`check_shape`."""
    if not await conn.fetchval("SELECT to_regclass($1) IS NOT NULL", sql.table):
        # (An existing table needs no CREATE privilege and takes no lock.)
        async with conn.transaction():
            # Concurrent CREATE TABLE IF NOT EXISTS can still collide in the catalog;
            # servers starting together take turns instead.
            await conn.execute(
                "SELECT pg_advisory_xact_lock($1, hashtext($2))", _DDL_LOCK_CLASS, sql.table
            )
            await conn.execute(sql.create)
    columns = await conn.fetch(_SQL_COLUMNS, sql.table)
    key_is_unique = await conn.fetchval(_SQL_KEY_IS_UNIQUE, sql.table)
    return columns, bool(key_is_unique)


def check_shape(
    settings: PostgresSettings, columns: Iterable[asyncpg.Record], key_is_unique: bool
) -> None:
    """Raise :class:`StorageConfigError` unless the table has the columns this backend
    reads and writes, a unique index on ``key``, and no other column a write would
    have to fill."""
    found = {row["name"]: row for row in columns}
    problems = _shape_problems(found, key_is_unique)
    if not problems:
        return
    shown = ", ".join(f"{name} {row['type']}" for name, row in found.items()) or "none"
    raise StorageConfigError(
        f"the table {settings.table!r} at {settings.display!r} exists but is not "
        f"a scratchpad table: its columns are ({shown}), and {'; '.join(problems)}. This "
        "backend needs (key text PRIMARY KEY, value jsonb NOT NULL, updated_at timestamptz "
        "NOT NULL DEFAULT now()). Choose another table with ?table=name in the URL (or "
        f"the table= option), or, if its rows are not needed, DROP TABLE "
        f"{settings.quoted_table} so that it is created again with these columns"
    )


def _shape_problems(found: dict[str, Any], key_is_unique: bool) -> list[str]:
    """What is wrong with the table whose columns (by name) are ``found``."""
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
    return problems
