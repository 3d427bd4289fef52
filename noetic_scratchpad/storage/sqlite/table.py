"""The tables: their shape, the SQL this backend runs on them, and how a stored value is read.

Each key is a row of the key-value table ``(key, value, updated_at, revision)``; the writes
journaled by :meth:`~noetic_scratchpad.storage.base.StorageBackend.commit` are rows of
``{table}_journal (key, keep, slot, revision, written_at, entry)``. A key's journal is a
ring: the row of revision ``r`` written with ``keep`` rows kept sits in slot ``r % keep``,
so a full journal's next row overwrites its oldest in place, primary key ``(key, keep,
slot)`` untouched: one page written per journaled commit, where a key indexed by revision
cost two (the row and its index entry). Rows written with another ``keep`` move to a
write's slots when it trims (see ``TableSql.journal_recycle``). A deleted
key's last revision is a row of ``{table}_retired (key, revision)``: writing the key again
continues above it, so a key's revisions never repeat.

Values are stored as JSON text but read as bytes (``CAST(value AS BLOB)``) and decoded
here: a row that is not valid UTF-8 (written by another program) is then an error of
that key alone, raised as :class:`StorageError` naming the key, not a failure of the
connection or of every other key read with it.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
from collections.abc import Iterable
from typing import Any

from ... import _json
from ...errors import StorageConfigError, StorageCorruptError
from .._prefix import prefix_upper_bound
from ..base import JournalRow, JsonValue

__all__ = (
    "TableSql",
    "changes_table",
    "create_table",
    "decode_journal",
    "decode_row",
    "journal_table",
    "retired_table",
    "watchers_table",
)

logger = logging.getLogger("noetic_scratchpad.storage.sqlite")


def journal_table(table: str) -> str:
    """The name of the journal table of the key-value table ``table``."""
    return f"{table}_journal"


def changes_table(table: str) -> str:
    """The name of the table of the latest changes, announced to other processes (see
    :mod:`.changes`), of the key-value table ``table``."""
    return f"{table}_changes"


def watchers_table(table: str) -> str:
    """The name of the table of the processes watching for changes, each until a time
    (see :mod:`.changes`), of the key-value table ``table``."""
    return f"{table}_watchers"


def retired_table(table: str) -> str:
    """The name of the table of deleted keys' last revisions, of the key-value table ``table``."""
    return f"{table}_retired"


class TableSql:
    """Every statement this backend runs on its tables (named by a checked identifier)."""

    __slots__ = (
        "announce",
        "announce_row",
        "announce_trim",
        "clear_journal",
        "delete",
        "get",
        "get_revision",
        "journal",
        "journal_above",
        "journal_insert",
        "journal_recycle",
        "journal_reslot",
        "journal_rows",
        "journal_trim",
        "retire",
        "retired_revision",
        "set_row",
        "table",
        "upsert",
        "watched",
    )

    def __init__(self, table: str) -> None:
        self.table = table
        self.journal = j = journal_table(table)
        self.get = f"SELECT CAST(value AS BLOB) FROM {table} WHERE key = ?"
        # The writer's read too: the value and the revision the next write builds on.
        self.get_revision = f"SELECT CAST(value AS BLOB), revision FROM {table} WHERE key = ?"
        # A row whose new revision is known (the writer read or wrote it in this batch).
        self.upsert = (
            f"INSERT INTO {table} (key, value, updated_at, revision) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value, "
            "updated_at = excluded.updated_at, revision = excluded.revision"
        )
        r = retired_table(table)
        # A set on a row whose revision was never read: it advances by the sets made (?4),
        # from the row's revision, or from the key's last one when it was deleted.
        self.set_row = (
            f"INSERT INTO {table} (key, value, updated_at, revision) VALUES (?1, ?2, ?3, "
            f"coalesce((SELECT revision FROM {r} WHERE key = ?1), 0) + ?4) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value, "
            f"updated_at = excluded.updated_at, revision = {table}.revision + ?4"
        )
        # Run before the row's delete: keeps the higher of the one the writer handed out
        # last (?2) and the stored one (the row's, else the key's last) plus the sets made
        # on it unread (?3), so that no write of the key repeats either. (A row left for a
        # key that lives again is harmless: the key's row is above it.)
        self.retire = (
            f"INSERT INTO {r} (key, revision) SELECT ?1, last FROM (SELECT max(?2, "
            f"coalesce((SELECT revision FROM {table} WHERE key = ?1), "
            f"(SELECT revision FROM {r} WHERE key = ?1), 0) + ?3) AS last) "
            "WHERE last > 0 ON CONFLICT (key) DO UPDATE SET "
            "revision = max(revision, excluded.revision)"
        )
        self.retired_revision = f"SELECT revision FROM {r} WHERE key = ?"
        self.delete = f"DELETE FROM {table} WHERE key = ?"
        # OR REPLACE: a row a version without journal left behind (deleting the key but
        # not its journal) must not make the key unwritable.
        self.journal_insert = (
            f"INSERT OR REPLACE INTO {j} (key, keep, slot, revision, written_at, entry) "
            "VALUES (?1, ?2, ?3 % ?2, ?3, ?4, ?5)"
        )
        # (No index on the revision: the trims scan the key's rows, at most its keep.)
        self.journal_trim = f"DELETE FROM {j} WHERE key = ? AND revision <= ?"
        # A full ring's next row (?3) over its oldest, in place: only when that slot holds
        # revision ?3 - keep and the one before holds ?3 - 1, both with this keep. The
        # oldest is then the only row to go: any row older than it (another keep's, or
        # left by a gap) would have failed this check at an earlier revision, whose
        # write then trimmed and moved them all. Else (a revision never journaled,
        # another keep) the writer trims, reslots and inserts instead.
        self.journal_recycle = (
            f"UPDATE {j} SET revision = ?3, written_at = ?4, entry = ?5 "
            "WHERE key = ?1 AND keep = ?2 AND slot = ?3 % ?2 AND revision = ?3 - ?2 "
            f"AND EXISTS (SELECT 1 FROM {j} WHERE key = ?1 AND keep = ?2 "
            "AND slot = (?3 - 1) % ?2 AND revision = ?3 - 1)"
        )
        # A key's rows moved to the slots of another keep (?2), after the trim has left
        # at most that many consecutive revisions: their new slots differ from each other
        # and from those of the rows already there.
        self.journal_reslot = (
            f"UPDATE {j} SET keep = ?2, slot = revision % ?2 WHERE key = ?1 AND keep <> ?2"
        )
        # The writes announced to other processes (see .changes): a key, its revision,
        # the origin, the source and call id; a row whose revision SQL alone knows (a set
        # on a row never read); the trim of the rows up to an id.
        c = changes_table(table)
        columns = f"INSERT INTO {c} (key, revision, deleted, origin, source, call_id)"
        self.announce = f"{columns} VALUES (?, ?, 0, ?, ?, ?)"
        self.announce_row = (
            f"{columns} SELECT key, revision, 0, ?, NULL, NULL FROM {table} WHERE key = ?"
        )
        self.announce_trim = f"DELETE FROM {c} WHERE id <= ?"
        # Until when some process other than this one (?) watches for the changes: the
        # writes are announced only until then.
        self.watched = f"SELECT max(until) FROM {watchers_table(table)} WHERE origin <> ?"
        self.clear_journal = f"DELETE FROM {j} WHERE key = ?"
        self.journal_rows = (
            f"SELECT revision, written_at, CAST(entry AS BLOB) FROM {j} WHERE key = ? "
            "ORDER BY revision DESC LIMIT ?"
        )
        self.journal_above = (
            f"SELECT revision, written_at, CAST(entry AS BLOB) FROM {j} WHERE key = ? "
            "AND revision > ? ORDER BY revision DESC"
        )

    def get_many(self, count: int) -> str:
        marks = ", ".join("?" * count)
        return f"SELECT key, CAST(value AS BLOB) FROM {self.table} WHERE key IN ({marks})"

    def keys(self, prefix: str) -> tuple[str, list[str]]:
        where, params = _prefix_range(prefix)
        return f"SELECT key FROM {self.table}{where} ORDER BY key", params

    def purge_deleted(self, prefix: str) -> list[tuple[str, list[str]]]:
        """The statements that forget the deleted keys under ``prefix``: their retired
        revisions and any journal rows left without a value (never a live key's); the
        last forgets their announcements to other processes, which are no records of
        the subject's and are not counted."""
        where, params = _prefix_range(prefix)
        where = where or " WHERE 1"
        live = f"key NOT IN (SELECT key FROM {self.table})"
        return [
            (f"DELETE FROM {retired_table(self.table)}{where} AND {live}", params),
            (f"DELETE FROM {self.journal}{where} AND {live}", params),
            (f"DELETE FROM {changes_table(self.table)}{where} AND {live}", params),
        ]

    def written_by(self, prefix: str) -> tuple[str, list[str]]:
        """The keys under ``prefix`` last written at or before a time, at most a number of
        them (the two parameters after the prefix's): a range scan of the key index."""
        where, params = _prefix_range(prefix)
        where = f"{where} AND" if where else " WHERE"
        return f"SELECT key FROM {self.table}{where} updated_at <= ? ORDER BY key LIMIT ?", params

    def trim_journals(self, prefix: str) -> tuple[str, list[str]]:
        """The delete of the journal rows under ``prefix`` written at or before a time, at
        most a number of them (the two parameters after the prefix's), each key's oldest
        first: in the key index's order, since a row's place in the table is no guide to
        its age (a full ring's oldest row is rewritten as its newest)."""
        where, params = _prefix_range(prefix)
        where = f"{where} AND" if where else " WHERE"
        j = self.journal
        return (
            f"DELETE FROM {j} WHERE (key, keep, slot) IN (SELECT key, keep, slot FROM {j}"
            f"{where} written_at <= ? ORDER BY key, revision LIMIT ?)",
            params,
        )

    def describe(self, prefix: str) -> tuple[str, list[str]]:
        where, params = _prefix_range(prefix)
        sql = (
            f"SELECT key, length(CAST(value AS BLOB)), updated_at, revision "
            f"FROM {self.table}{where} ORDER BY key"
        )
        return sql, params


def _prefix_range(prefix: str) -> tuple[str, list[str]]:
    """A ``WHERE`` clause matching keys that start with ``prefix``, usable by the index.

    Keys compare as UTF-8 bytes (BINARY collation), which is code-point order.
    """
    if not prefix:
        return "", []
    upper = prefix_upper_bound(prefix)
    if upper is None:
        return " WHERE key >= ?", [prefix]
    return " WHERE key >= ? AND key < ?", [prefix, upper]


def decode_row(path: str, key: str, data: bytes) -> JsonValue:
    """The value of a row read as bytes; :class:`StorageCorruptError` for a row that
    cannot be (a permanent fault of that key, not an outage)."""
    try:
        return _json.loads(data.decode())
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        where = f"the value stored at {key!r} in {path}"
        raise StorageCorruptError.unreadable(where, exc) from None


def decode_journal(
    path: str, key: str, rows: Iterable[tuple[int, float, bytes]]
) -> list[JournalRow]:
    """Journal rows read as (revision, written_at, entry bytes); a row whose entry is not
    JSON text (another program's) is logged and skipped: it costs its entry alone."""
    journal: list[JournalRow] = []
    for revision, written_at, data in rows:
        try:
            entry = _json.loads(data.decode())
        except (UnicodeDecodeError, ValueError, RecursionError) as exc:
            logger.warning(
                "skipped the journal row of %r at revision %s in %s: its entry is not "
                "JSON text (%s); delete the row or the key's journal to silence this",
                key,
                revision,
                path,
                exc,
            )
            continue
        journal.append(JournalRow(revision, written_at, entry))
    return journal


# -- creating and upgrading ---------------------------------------------------------------

_KV_COLUMNS = ("key", "value", "updated_at")
#: The journal's columns and their places in its primary key.
_JOURNAL_COLUMNS = {"key": 1, "keep": 2, "slot": 3, "revision": 0, "written_at": 0, "entry": 0}
_JOURNAL_DDL = (
    "CREATE TABLE IF NOT EXISTS {name} (key TEXT NOT NULL, keep INTEGER NOT NULL, "
    "slot INTEGER NOT NULL, revision INTEGER NOT NULL, written_at REAL NOT NULL, "
    "entry TEXT NOT NULL, PRIMARY KEY (key, keep, slot))"
)


def create_table(conn: sqlite3.Connection, path: str, table: str) -> None:
    """Create the tables when missing, add the revision column to a table made by an
    earlier version; refuse tables of another shape. Writes nothing when all is in place."""
    journal = journal_table(table)
    in_place = "revision" in _columns(conn, table) and "slot" in _columns(conn, journal)
    if in_place and _columns(conn, retired_table(table)):
        _check_shapes(conn, path, table)
        return
    # Under the write lock: processes opening an old file together upgrade it once.
    conn.execute("BEGIN IMMEDIATE")
    try:
        _create(conn, path, table)
        conn.execute("COMMIT")
    except BaseException:
        with contextlib.suppress(sqlite3.Error):  # SQLite may have rolled back already
            conn.execute("ROLLBACK")
        raise


def _create(conn: sqlite3.Connection, path: str, table: str) -> None:
    # A rowid table, not WITHOUT ROWID: values are kilobytes of JSON, and SQLite's
    # WITHOUT ROWID B-trees suit small rows; measured 2-3x faster here with 100 scopes.
    conn.execute(
        f"CREATE TABLE IF NOT EXISTS {table} ("
        "key TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL, updated_at REAL NOT NULL, "
        "revision INTEGER NOT NULL DEFAULT 0)"
    )
    _check_kv_shape(conn, path, table)
    if "revision" not in _columns(conn, table):
        # A table of version 0.1: each stored value was made by (at least) one write.
        conn.execute(f"ALTER TABLE {table} ADD COLUMN revision INTEGER NOT NULL DEFAULT 0")
        conn.execute(f"UPDATE {table} SET revision = 1")
    # A rowid table too: an entry is a few hundred bytes, past what WITHOUT ROWID suits
    # (a twentieth of a page), and new rows then go at the table's end, only the small
    # index entries among the other keys'. Inserts measured 1.4-3x faster with 100 scopes.
    journal = journal_table(table)
    columns = _columns(conn, journal)
    if columns and "slot" not in columns:
        _ring_journal(conn, path, journal, columns)
    conn.execute(_JOURNAL_DDL.format(name=journal))
    # Files made before it have none: the revisions of keys deleted before are gone, and
    # keys deleted from now on keep theirs.
    conn.execute(
        f"CREATE TABLE IF NOT EXISTS {retired_table(table)} ("
        "key TEXT PRIMARY KEY NOT NULL, revision INTEGER NOT NULL) WITHOUT ROWID"
    )
    _check_shapes(conn, path, table)


def _ring_journal(
    conn: sqlite3.Connection, path: str, journal: str, columns: dict[str, int]
) -> None:
    """Move the rows of a journal keyed by (key, revision), as versions up to 0.2 made
    it, into the ring's table. They keep their revisions; ``keep`` 0 (no writer's) puts
    each in a slot of its own, its revision, and a key's next write moves them to the
    slots of its keep. A table of another shape is left for the check to refuse."""
    if (columns.get("key"), columns.get("revision")) != (1, 2):
        return
    if not {"written_at", "entry"} <= columns.keys():
        return
    moved = f"{journal}_upgrade"
    if _columns(conn, moved):  # another program's table: never dropped nor filled
        raise StorageConfigError(
            f"the journal in {path} has the shape of version 0.2 and moves, once, through "
            f"a new table named {moved!r}, but {path} already has a table of that name. "
            "Rename or drop that table, then open the file again"
        )
    conn.execute(_JOURNAL_DDL.format(name=moved))
    conn.execute(
        f"INSERT INTO {moved} (key, keep, slot, revision, written_at, entry) "
        f"SELECT key, 0, revision, revision, written_at, entry FROM {journal}"
    )
    conn.execute(f"DROP TABLE {journal}")
    conn.execute(f"ALTER TABLE {moved} RENAME TO {journal}")


def _columns(conn: sqlite3.Connection, table: str) -> dict[str, int]:
    """The columns of ``table`` with their place in its primary key (0: not in it)."""
    return {row[1]: row[5] for row in conn.execute(f"PRAGMA table_info({table})")}


def _check_shapes(conn: sqlite3.Connection, path: str, table: str) -> None:
    _check_kv_shape(conn, path, table)
    journal = journal_table(table)
    columns = _columns(conn, journal)
    if not _JOURNAL_COLUMNS.items() <= columns.items():
        found = ", ".join(columns) or "none"
        raise StorageConfigError(
            f"the table {journal!r} in {path} is not a scratchpad journal: it has the "
            f"columns {found}, not key, keep and slot (the primary key), revision, "
            "written_at and entry. Rename or drop that table, or use another table name "
            "(sqlite:///...?table=scratchpad_kv2)"
        )
    retired = retired_table(table)
    columns = _columns(conn, retired)
    if set(columns) >= {"key", "revision"} and columns["key"] == 1:
        return
    found = ", ".join(columns) or "none"
    raise StorageConfigError(
        f"the table {retired!r} in {path} is not a scratchpad table of deleted keys' "
        f"revisions: it has the columns {found}, not key (the primary key) and revision. "
        "Rename or drop that table, or use another table name "
        "(sqlite:///...?table=scratchpad_kv2)"
    )


def _check_kv_shape(conn: sqlite3.Connection, path: str, table: str) -> None:
    """Refuse, at open, a table of that name that another program made for other rows."""
    columns: dict[str, Any] = _columns(conn, table)
    if set(columns) >= set(_KV_COLUMNS) and columns["key"] == 1:
        return
    found = ", ".join(columns) or "none"
    raise StorageConfigError(
        f"the table {table!r} in {path} is not a scratchpad table: it has "
        f"the columns {found}, not key (the primary key), value and updated_at. Use another "
        "table name (sqlite:///...?table=scratchpad_kv2) or another file"
    )
