"""The SQL this backend runs on its three tables.

Each key is a row ``(key text primary key, value json, updated_at timestamptz, revision
bigint)`` of the key-value table, the key collated ``"C"`` so that range scans run in code
point order, as Python sorts. The writes journaled by ``commit`` are rows ``(key, revision,
written_at, entry json)`` of the journal table, whose primary key ``(key, revision)``
serves the newest-first reads and the trims. A deleted key's last revision is a row
``(key text primary key, revision bigint)`` of the retired table: the write that creates
the key again continues above it, so that a key's revisions never repeat. Creating,
upgrading and checking the tables is :mod:`.schema`'s job.

Every statement works on a ``value`` or ``entry`` column of either type, json or jsonb
(the tables of earlier versions): values are sent as parameters typed by their column, or
as json, which PostgreSQL converts to jsonb on assignment.
"""

from __future__ import annotations

from typing import NamedTuple

import asyncpg  # type: ignore[import-untyped, unused-ignore]

from .._prefix import prefix_upper_bound

__all__ = ("RangeScan", "TableSql", "fetch_prefix")


class RangeScan(NamedTuple):
    """The three forms of one query over the keys that start with a prefix."""

    every: str
    """No prefix: every row."""
    start: str
    """``$1``: keys from the prefix on (a prefix with no upper bound)."""
    between: str
    """``$1``, ``$2``: keys from the prefix up to its upper bound."""


class TableSql:
    """Every statement this backend runs on its tables (named by checked identifiers)."""

    __slots__ = (
        "clear_journal",
        "clear_journals",
        "describe",
        "drop",
        "get",
        "get_many",
        "get_revision",
        "journal",
        "journal_above",
        "journal_rows",
        "keys",
        "lock",
        "lock_many",
        "notify",
        "purge_deleted",
        "retire",
        "retired",
        "retired_revision",
        "set_existing",
        "sweep",
        "table",
        "trim_journals",
        "write",
        "write_journaled",
        "write_many",
    )

    def __init__(self, table: str, journal: str, retired: str) -> None:
        """``table``, ``journal``, ``retired``: the quoted names
        (:attr:`PostgresSettings.quoted_table`, :attr:`~PostgresSettings.quoted_journal_table`,
        :attr:`~PostgresSettings.quoted_retired_table`)."""
        t = self.table = table
        j = self.journal = journal
        r = self.retired = retired
        # One round trip: insert the row if absent (without racing other inserters), then
        # lock it. A row this statement inserted is invisible to its own SELECT, hence
        # `created`; neither flag set means a concurrent delete won, and we try again. A
        # created row also drops journal rows left by a writer that knew no journal. A
        # created row's revision is read next by `retired_revision`, not here: see there.
        self.lock = (
            f"WITH created AS (INSERT INTO {t} (key, value) VALUES ($1, 'null') "
            "ON CONFLICT (key) DO NOTHING RETURNING true), "
            f"cleared AS (DELETE FROM {j} WHERE key = $1 AND EXISTS (SELECT 1 FROM created)) "
            "SELECT EXISTS (SELECT 1 FROM created) AS created, "
            "locked.key IS NOT NULL AS found, locked.value, locked.revision "
            f"FROM (SELECT 1) AS one LEFT JOIN (SELECT key, value, revision FROM {t} "
            "WHERE key = $1 FOR UPDATE) AS locked ON true"
        )
        self.write = f"UPDATE {t} SET value = $2, revision = $3, updated_at = now() WHERE key = $1"
        # The state, its journal rows ($4, $5) and the trim (rows at or below $6) in one
        # round trip. The trim sees only rows committed before (the row lock orders the
        # writers), never those inserted here, which are all above $6.
        self.write_journaled = (
            f"WITH state AS ({self.write}), "
            f"trimmed AS (DELETE FROM {j} WHERE key = $1 AND revision <= $6) "
            f"INSERT INTO {j} (key, revision, entry) "
            "SELECT $1, n.revision, n.entry FROM unnest($4::bigint[], $5::json[]) "
            "AS n(revision, entry) "
            # A row left at that revision by a writer that knew no journal is replaced.
            "ON CONFLICT (key, revision) DO UPDATE SET written_at = EXCLUDED.written_at, "
            "entry = EXCLUDED.entry"
        )
        # A group of keys ($1) in one transaction (see .group): the rows no other transaction
        # holds are locked, the others skipped (they run alone, waiting for their lock), so
        # that a group never waits for a row lock.
        self.lock_many = (
            f"SELECT key, value, revision FROM {t} WHERE key = ANY($1::text[]) "
            "FOR UPDATE SKIP LOCKED"
        )
        # The group's writes in one round trip: each key's state ($1-$3), the trims of the
        # keys with journal rows ($4, $5) and those rows ($6-$8), as `write_journaled` does
        # for one key.
        self.write_many = (
            f"WITH state AS (UPDATE {t} AS t SET value = u.value, revision = u.revision, "
            "updated_at = now() FROM unnest($1::text[], $2::json[], $3::bigint[]) "
            "AS u(key, value, revision) WHERE t.key = u.key), "
            f"trimmed AS (DELETE FROM {j} AS j USING unnest($4::text[], $5::bigint[]) "
            "AS f(key, floor) WHERE j.key = f.key AND j.revision <= f.floor) "
            f"INSERT INTO {j} (key, revision, entry) "
            "SELECT n.key, n.revision, n.entry FROM unnest($6::text[], $7::bigint[], $8::json[]) "
            "AS n(key, revision, entry) "
            "ON CONFLICT (key, revision) DO UPDATE SET written_at = EXCLUDED.written_at, "
            "entry = EXCLUDED.entry"
        )
        # The revision a row created by `lock` continues from: the key's last before it
        # was deleted (0: never written). A statement of its own, after the lock: its
        # snapshot then sees the retired revision of a delete that the insert waited for
        # (a subquery of the insert's statement would not, as the snapshot is taken before
        # the wait, and the key would start again at 1).
        self.retired_revision = (
            f"SELECT COALESCE((SELECT revision FROM {r} WHERE key = $1), 0) AS revision"
        )
        # `set` of a key that has a row: one statement. (For the same reason, `set` creates
        # no row itself: a missing key is written as `update` does, under the row lock.)
        self.set_existing = (
            f"UPDATE {t} SET value = $2, revision = revision + 1, updated_at = now() "
            "WHERE key = $1 RETURNING revision"
        )
        self.get = f"SELECT value FROM {t} WHERE key = $1"
        self.get_revision = f"SELECT value, revision FROM {t} WHERE key = $1"
        self.get_many = f"SELECT key, value FROM {t} WHERE key = ANY($1::text[])"
        # Deletes the key's row and keeps its revision (the higher one, should deletes of
        # two lives of the key race), in one statement: no write can come in between.
        self.retire = (
            f"WITH gone AS (DELETE FROM {t} WHERE key = $1 RETURNING key, revision) "
            f"INSERT INTO {r} AS retired (key, revision) SELECT key, revision FROM gone "
            "ON CONFLICT (key) DO UPDATE SET "
            "revision = GREATEST(retired.revision, EXCLUDED.revision)"
        )
        # Forgetting deleted keys (see storage/purge.py): retired revisions and journal rows
        # of keys without a row, by prefix; $1 the prefix, $2 its upper bound (or NULL).
        live = f"NOT EXISTS (SELECT 1 FROM {t} AS live WHERE live.key = gone.key)"
        in_range = "gone.key >= $1 AND ($2::text IS NULL OR gone.key < $2::text)"
        self.purge_deleted = (
            f"DELETE FROM {r} AS gone WHERE {in_range} AND {live}",
            f"DELETE FROM {j} AS gone WHERE {in_range} AND {live}",
        )
        # Sweeping expired keys (see storage/sweep.py): at most $4 rows under the prefix
        # ($1, upper bound $2 or NULL) last written at or before $3 (Unix seconds) are deleted
        # with their revisions kept, as `retire` does; a row a writer holds is skipped, and
        # one written since it was picked is kept (the delete checks the time again). The
        # deleted keys come back, for their journal's delete in the same transaction.
        old_row = "updated_at <= to_timestamp($3::float8)"
        self.sweep = (
            f"WITH gone AS (DELETE FROM {t} WHERE key IN (SELECT key FROM {t} AS gone "
            f"WHERE {in_range} AND {old_row} ORDER BY key LIMIT $4 FOR UPDATE SKIP LOCKED) "
            f"AND {old_row} RETURNING key, revision), "
            f"kept AS (INSERT INTO {r} AS retired (key, revision) SELECT key, revision "
            "FROM gone ON CONFLICT (key) DO UPDATE SET "
            "revision = GREATEST(retired.revision, EXCLUDED.revision)) "
            "SELECT key FROM gone"
        )
        self.clear_journals = f"DELETE FROM {j} WHERE key = ANY($1::text[])"
        # Journal retention by age: at most $4 rows under the prefix written at or before $3.
        self.trim_journals = (
            f"DELETE FROM {j} WHERE (key, revision) IN (SELECT key, revision FROM {j} AS gone "
            f"WHERE {in_range} AND written_at <= to_timestamp($3::float8) LIMIT $4)"
        )
        # Run in one transaction, after `retire` has deleted (and so locked) the key's row.
        self.clear_journal = f"DELETE FROM {j} WHERE key = $1"
        # Entries as text, decoded row by row: one bad row is skipped, not the read.
        self.journal_rows = (
            "SELECT revision, extract(epoch FROM written_at)::float8 AS written_at, "
            f"entry::text AS entry FROM {j} WHERE key = $1 ORDER BY revision DESC LIMIT $2"
        )
        # The rows above a revision ($2), read under the row lock by a commit that needs them.
        self.journal_above = (
            "SELECT revision, extract(epoch FROM written_at)::float8 AS written_at, "
            f"entry::text AS entry FROM {j} WHERE key = $1 AND revision > $2 "
            "ORDER BY revision DESC"
        )
        self.keys = _range_scan(t, "key")
        self.describe = _range_scan(
            t,
            "key, value::text AS text, extract(epoch FROM updated_at)::float8 AS updated_at, "
            "revision",
        )
        self.drop = f"DROP TABLE IF EXISTS {r}, {j}, {t}"
        # A transaction's changes, announced when it commits (see ..notices).
        self.notify = "SELECT pg_notify($1, payload) FROM unnest($2::text[]) AS payload"


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
