"""Creating the three tables, upgrading tables of an earlier version, checking their shape.

An existing key-value table is used only if it has the columns this backend writes
(``key`` text with a unique index, ``value`` json or jsonb, ``updated_at`` timestamptz); a
table of another shape is refused when the storage opens, not at its first write.

New tables keep values (and journal entries) as json, whose text PostgreSQL stores as it
is sent, so every number reads back as written. Tables of earlier versions keep jsonb and
work as before, numbers included (jsonb reads ``-0.0`` as ``0.0`` and the float ``1e20`` as
an integer); opening one logs a warning with the statements that convert it. Opening never
converts it: a server of an earlier version, still running, would read json values as
strings. A table of
version 0.1 gets its ``revision`` column (every stored row at revision 1, which costs no
rewrite of the table) and its journal table; tables made before the retired table get it
(the revisions of keys deleted before are not known: those keys start again at 1, keys
deleted from then on never repeat a revision). Servers that start together and find
something missing take turns creating it, under an advisory lock; when everything is in
place, opening writes nothing and needs no privilege beyond reading and writing rows.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

import asyncpg  # type: ignore[import-untyped, unused-ignore]

from ...errors import StorageConfigError
from .options import PostgresSettings
from .table import TableSql

__all__ = ("prepare_tables",)

logger = logging.getLogger("noetic_scratchpad.storage.postgres")

# The types a column holding JSON may have: json (exact) first, then jsonb (earlier tables).
_JSON = ("json", "jsonb")
# What this backend reads and writes: (column, its types as format_type() names them).
_COLUMNS = (
    ("key", ("text",)),
    ("value", _JSON),
    ("updated_at", ("timestamp with time zone",)),
)
_REVISION = ("revision", ("bigint",))
_JOURNAL_COLUMNS = (
    ("key", ("text",)),
    ("revision", ("bigint",)),
    ("written_at", ("timestamp with time zone",)),
    ("entry", _JSON),
)
_RETIRED_COLUMNS = (("key", ("text",)), ("revision", ("bigint",)))
# First key of the advisory lock that serializes CREATE TABLE across servers (arbitrary).
_DDL_LOCK_CLASS = 0x5C7A
_SQL_COLUMNS = (
    "SELECT attname AS name, format_type(atttypid, atttypmod) AS type, "
    "attnotnull AND NOT atthasdef AND attidentity = '' AND attgenerated = '' AS required "
    "FROM pg_attribute WHERE attrelid = to_regclass($1) AND attnum > 0 AND NOT attisdropped "
    "ORDER BY attnum"
)
# A unique index on exactly the columns $2 (what ON CONFLICT needs), neither partial nor
# on an expression.
_SQL_IS_UNIQUE = (
    "SELECT EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = to_regclass($1) "
    "AND i.indisunique AND i.indpred IS NULL AND i.indexprs IS NULL "
    "AND i.indnkeyatts = cardinality($2::text[]) "
    "AND ARRAY(SELECT a.attname::text FROM unnest(i.indkey::int2[]) WITH ORDINALITY "
    "AS k(attnum, n) JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum "
    "WHERE k.n <= i.indnkeyatts ORDER BY k.n) = $2::text[])"
)


class _Ddl(NamedTuple):
    table: str
    journal: str
    retired: str
    upgrade: Sequence[str]
    """Of a 0.1 table: its revision column."""


def _create_sql(sql: TableSql) -> _Ddl:
    """The DDL: the key-value table, the journal, the retired table, and the upgrade of a
    0.1 table."""
    create = (
        f'CREATE TABLE IF NOT EXISTS {sql.table} (key text COLLATE "C" PRIMARY KEY, '
        "value json NOT NULL, updated_at timestamptz NOT NULL DEFAULT now(), "
        "revision bigint NOT NULL DEFAULT 0)"
    )
    journal = (
        f'CREATE TABLE IF NOT EXISTS {sql.journal} (key text COLLATE "C" NOT NULL, '
        "revision bigint NOT NULL, written_at timestamptz NOT NULL DEFAULT now(), "
        "entry json NOT NULL, PRIMARY KEY (key, revision))"
    )
    # The key collated as the key-value table's is.
    retired = (
        f'CREATE TABLE IF NOT EXISTS {sql.retired} (key text COLLATE "C" PRIMARY KEY, '
        "revision bigint NOT NULL)"
    )
    # Added with DEFAULT 1, a constant: existing rows read 1 without a rewrite of the
    # table; rows inserted later get 0, then the revision their write sets.
    upgrade = (
        f"ALTER TABLE {sql.table} ADD COLUMN IF NOT EXISTS revision bigint NOT NULL DEFAULT 1",
        f"ALTER TABLE {sql.table} ALTER COLUMN revision SET DEFAULT 0",
    )
    return _Ddl(create, journal, retired, upgrade)


async def prepare_tables(
    conn: asyncpg.Connection, sql: TableSql, settings: PostgresSettings
) -> None:
    """Create what is missing, upgrade tables of an earlier version, and raise
    :class:`StorageConfigError` for a table of another shape (before changing anything in
    it)."""
    ddl = _create_sql(sql)
    if not await _exists(conn, sql.table):
        await _under_ddl_lock(conn, sql, [ddl.table, ddl.journal, ddl.retired])
    columns = await _columns(conn, sql.table)
    problems = _shape_problems(columns, _COLUMNS, _REVISION, written=("key", "value"))
    if "key" in columns and not await _is_unique(conn, sql.table, ("key",)):
        problems.append("key has no unique index (such as a primary key)")
    _check(settings, settings.table, "a scratchpad table", columns, problems, _KV_FIX)
    value_type = columns["value"]["type"]
    # Only what is missing: the ALTERs of the upgrade lock the key-value table.
    missing = [
        *(ddl.upgrade if _REVISION[0] not in columns else ()),
        *(() if await _exists(conn, sql.journal) else (ddl.journal,)),
        *(() if await _exists(conn, sql.retired) else (ddl.retired,)),
    ]
    if missing:
        await _under_ddl_lock(conn, sql, missing)
    columns = await _columns(conn, sql.journal)
    written = ("key", "revision", "entry")
    problems = _shape_problems(columns, _JOURNAL_COLUMNS, None, written=written)
    if not await _is_unique(conn, sql.journal, ("key", "revision")):
        problems.append("(key, revision) has no unique index (such as a primary key)")
    journal = "a scratchpad journal"
    _check(settings, settings.journal_table, journal, columns, problems, _JOURNAL_FIX)
    entry_type = columns["entry"]["type"]
    columns = await _columns(conn, sql.retired)
    problems = _shape_problems(columns, _RETIRED_COLUMNS, None, written=("key", "revision"))
    if not await _is_unique(conn, sql.retired, ("key",)):
        problems.append("key has no unique index (such as a primary key)")
    retired = "a scratchpad table of deleted keys' revisions"
    _check(settings, settings.retired_table, retired, columns, problems, _RETIRED_FIX)
    _warn_of_jsonb(settings, ((sql.table, "value", value_type), (sql.journal, "entry", entry_type)))


def _warn_of_jsonb(settings: PostgresSettings, columns: Iterable[tuple[str, str, str]]) -> None:
    """Log that tables of an earlier version still hold jsonb, and how to convert them;
    ``columns``: (table, column, its type) of the columns holding JSON."""
    converts = [
        f"ALTER TABLE {table} ALTER COLUMN {column} TYPE json USING {column}::json"
        for table, column, kind in columns
        if kind == "jsonb"
    ]
    if converts:
        logger.warning(
            "the table %r at %r keeps values as jsonb (made by an earlier version), which "
            "changes some numbers: -0.0 reads back as 0.0, a float such as 1e20 as an "
            "integer. Once every server runs this version, run as the tables' owner: %s",
            settings.table,
            settings.display,
            "; ".join(converts),
        )


async def _exists(conn: asyncpg.Connection, table: str) -> bool:
    return bool(await conn.fetchval("SELECT to_regclass($1) IS NOT NULL", table))


async def _under_ddl_lock(conn: asyncpg.Connection, sql: TableSql, ddl: Iterable[str]) -> None:
    async with conn.transaction():
        # Concurrent CREATE TABLE IF NOT EXISTS can still collide in the catalog;
        # servers starting together take turns instead.
        await conn.execute(
            "SELECT pg_advisory_xact_lock($1, hashtext($2))", _DDL_LOCK_CLASS, sql.table
        )
        for statement in ddl:
            try:
                await conn.execute(statement)
            except asyncpg.InsufficientPrivilegeError as exc:
                raise StorageConfigError(
                    f"the database user may not create or change this backend's tables "
                    f"({exc}); run this once as the tables' owner, then open again: "
                    f"{'; '.join(ddl)}"
                ) from exc


async def _columns(conn: asyncpg.Connection, table: str) -> dict[str, Any]:
    return {row["name"]: row for row in await conn.fetch(_SQL_COLUMNS, table)}


async def _is_unique(conn: asyncpg.Connection, table: str, columns: Sequence[str]) -> bool:
    return bool(await conn.fetchval(_SQL_IS_UNIQUE, table, list(columns)))


def _shape_problems(
    found: dict[str, Any],
    needed: Sequence[tuple[str, Sequence[str]]],
    optional: tuple[str, Sequence[str]] | None,
    *,
    written: Sequence[str],
) -> list[str]:
    """What is wrong with a table whose columns (by name) are ``found``, each needed
    column one of its types; ``written``: the columns an insert of this backend fills
    (the others need a default)."""
    expected = [*needed, *([optional] if optional and optional[0] in found else [])]
    problems = [
        f"{name} is missing" if name not in found else f"{name} is {found[name]['type']}"
        for name, kinds in expected
        if name not in found or found[name]["type"] not in kinds
    ]
    problems.extend(
        f"{name} is NOT NULL without a default, and this backend never writes it"
        for name, row in found.items()
        if name not in written and row["required"]
    )
    return problems


_KV_FIX = (
    "This backend needs (key text PRIMARY KEY, value json NOT NULL (or jsonb), updated_at "
    "timestamptz NOT NULL DEFAULT now(), revision bigint NOT NULL DEFAULT 0)"
)
_JOURNAL_FIX = (
    "The journal needs (key text, revision bigint, written_at timestamptz NOT NULL DEFAULT "
    "now(), entry json NOT NULL (or jsonb), PRIMARY KEY (key, revision))"
)
_RETIRED_FIX = (
    "The table of deleted keys' revisions needs (key text PRIMARY KEY, revision bigint NOT NULL)"
)


def _check(
    settings: PostgresSettings,
    table: str,
    kind: str,
    found: dict[str, Any],
    problems: list[str],
    fix: str,
) -> None:
    """Raise :class:`StorageConfigError` saying that ``table`` is not ``kind``, naming its
    columns, problems and the fix."""
    if not problems:
        return
    quoted = ".".join(f'"{part}"' for part in table.split("."))
    shown = ", ".join(f"{name} {row['type']}" for name, row in found.items()) or "none"
    raise StorageConfigError(
        f"the table {table!r} at {settings.display!r} exists but is not {kind}: "
        f"its columns are ({shown}), and {'; '.join(problems)}. {fix}. Choose another "
        "table with ?table=name in the URL (or the table= option), or, if its rows are "
        f"not needed, DROP TABLE {quoted} so that it is created again with these columns"
    )
