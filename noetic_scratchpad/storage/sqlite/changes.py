"""Other processes' changes of an SQLite file: a table of changes and a watcher polling it.

SQLite has no notifications, so while another process watches (below) each write is also
a row of ``{table}_changes (id, key, revision, deleted, origin, source, call_id)``, written
in the write's own transaction: by the writer, after a batch's rows, one per journal row
it wrote (with the write's source and call id) and one for a key's row whose revision has
no journal row, then the table trimmed (:meth:`~.writer.SqliteWriter._announce`); and for
a delete, watched or not (deletes are rare), by a *temporary* trigger that each process's
writer connection installs (:func:`install`) on the key-value table. Temporary, so that
it carries the process's origin as a literal, and a program that opens the file without
it (an older version, the ``sqlite3`` shell) writes as it always did, its changes
unannounced. (Triggers announced the writes too until they measured 64k instructions an
update, an eighth of it, and several times that with a savepoint open.) The table keeps
its newest :data:`KEEP` rows, and up to :data:`TRIM_EVERY` more: trimmed in steps, not on
every commit.

The watcher (:func:`watch`) reads the rows past the last one it saw every ``interval``
seconds, on a connection opened for that read alone (see :func:`_read`): an idle file
costs an open, one page of the table's index and a close a poll (``PRAGMA data_version``
would need one connection kept across polls, used from the worker threads in turn).
The polls run on asyncio's default executor (SQLite is refused under trio), not on anyio's
worker threads: one of those stops only when the task it is bound to ends, so a watch left
running on a loop closed without cancelling its tasks held the process at exit.

A watcher first says so in ``{table}_watchers (origin, until)``: its process is watching
until ``until`` (a lease of :data:`LEASE` seconds, renewed a third of the way in, so that a
watcher that died is forgotten). A writer announces its writes only while a process other
than its own watches: a row of the table of changes cost a fifth of an uncontended
write, for no reader in a single process. The writer asks again whenever another
connection has committed (``PRAGMA data_version``, read by every transaction anyway): a
registration or a renewal is such a commit, so a write that commits after a watcher
registered is announced. A watcher registers before it reads where it starts from, so
nothing after its start goes unannounced; one that renews too late (its lease ran out
while its event loop was blocked) may have missed writes, and logs that. Writes
batched into one transaction on one key are one row of the key-value table but one
journal row each: they are announced one by one when journaled, the last one only when
not.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
from collections.abc import AsyncGenerator
from typing import Any

import anyio

from ..notices import ChangeNotice
from .table import changes_table, watchers_table

__all__ = ("DEFAULT_INTERVAL", "KEEP", "LEASE", "changes_table", "install", "watch")

logger = logging.getLogger("noetic_scratchpad.storage.sqlite")

#: Seconds between two looks at the file for changes of other processes.
DEFAULT_INTERVAL = 0.1
#: Rows the table of changes keeps (a write makes one): a watcher that falls further
#: behind between two polls misses some (logged). Small, so that the file stays the size
#: it was: 1,000 writes of other processes in one ``interval``, 10,000 a second at the
#: default, before any is missed.
KEEP = 1_000
#: Seconds a watcher's registration lasts (at least ten polls); it is renewed when a third
#: of it has passed, so a watcher that died makes writers announce for this long at most.
LEASE = 30.0
#: The writer trims the table when its newest id passes a multiple of this (see
#: :meth:`~.writer.SqliteWriter._announce`): it holds up to this many rows more.
TRIM_EVERY = 8


def install(conn: sqlite3.Connection, table: str, origin: str) -> None:
    """Create the tables of changes and of watchers if they are missing, and the trigger of
    this connection that records its deletes there (in the connection's thread)."""
    c = changes_table(table)
    conn.execute(
        f"CREATE TABLE IF NOT EXISTS main.{watchers_table(table)} "
        "(origin TEXT PRIMARY KEY, until REAL NOT NULL)"
    )
    quoted = "'" + origin.replace("'", "''") + "'"
    trim = f"DELETE FROM {c} WHERE id <= last_insert_rowid() - {KEEP};"
    row = f"INSERT INTO {c} (key, revision, deleted, origin, source, call_id) VALUES"
    conn.execute(
        f"CREATE TABLE IF NOT EXISTS main.{c} (id INTEGER PRIMARY KEY AUTOINCREMENT, "
        "key TEXT NOT NULL, revision INTEGER, deleted INTEGER NOT NULL, "
        "origin TEXT NOT NULL, source TEXT, call_id TEXT)"
    )
    triggers = {
        "deleted": f"AFTER DELETE ON main.{table} BEGIN "
        f"{row} (old.key, old.revision, 1, {quoted}, NULL, NULL); {trim} END",
    }
    for name, body in triggers.items():
        conn.execute(f"CREATE TEMP TRIGGER IF NOT EXISTS {table}_{name}_announced {body}")


async def watch(
    path: str, table: str, origin: str, *, interval: float = DEFAULT_INTERVAL, busy_ms: int = 5000
) -> AsyncGenerator[ChangeNotice, None]:
    """The changes of other processes from now on, polled every ``interval`` seconds,
    while this process is registered as watching (see the module's docs)."""
    c, lease = changes_table(table), max(LEASE, 10 * interval)
    register = (watchers_table(table), origin, lease)
    # Registered before reading where to start: every write after that point is announced.
    until = await asyncio.to_thread(_register, path, busy_ms, *register)
    newest = await asyncio.to_thread(_read, path, busy_ms, _NEWEST.format(c), ())
    last = int(newest[0][0])
    while True:
        await anyio.sleep(interval)
        now = time.time()
        if until - now < lease * 2 / 3:
            try:
                renewed = await asyncio.to_thread(_register, path, busy_ms, *register)
            except sqlite3.Error as exc:
                logger.warning("renewing the watch of other processes' changes failed: %s", exc)
            else:
                if now > until:
                    logger.warning(
                        "other processes' changes may have been missed: the watch renewed "
                        "its registration %.1f s after it lapsed, and writers do not "
                        "announce their changes to a watch they do not know of",
                        now - until,
                    )
                until = renewed
        try:
            found = await asyncio.to_thread(_read, path, busy_ms, _SINCE.format(c), (last,))
        except sqlite3.Error as exc:
            logger.warning("reading other processes' changes failed; retrying: %s", exc)
            continue
        if not found:
            continue
        if found[0][0] > last + 1:
            logger.warning(
                "other processes' changes were missed: the watch fell %d rows behind",
                found[0][0] - last - 1,
            )
        last = found[-1][0]
        for notice in _notices(found, origin):
            yield notice


_NEWEST = "SELECT coalesce(max(id), 0) FROM {}"
_REGISTER = (
    "INSERT INTO {} (origin, until) VALUES (?, ?) "
    "ON CONFLICT (origin) DO UPDATE SET until = excluded.until"
)
_FORGET_LAPSED = "DELETE FROM {} WHERE until < ?"
_SINCE = (
    "SELECT id, key, revision, deleted, origin, source, call_id FROM {} WHERE id > ? ORDER BY id"
)


def _read(path: str, busy_ms: int, sql: str, params: tuple[int, ...]) -> list[Any]:
    """``sql``'s rows, on a connection opened and closed in this one call (in a worker
    thread): a poll shares nothing with another, so no connection is ever used by two
    threads, nor outlives a loop that ends while a poll runs. The newest row's id is a
    primary key's last entry: a poll that finds nothing new reads one page."""
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    try:
        conn.execute(f"PRAGMA busy_timeout = {int(busy_ms)}")
        conn.execute("PRAGMA query_only = ON")
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def _register(path: str, busy_ms: int, watchers: str, origin: str, lease: float) -> float:
    """Register ``origin`` in the table ``watchers`` as watching for ``lease`` seconds from
    now, and forget the registrations that lapsed (processes gone), in one transaction on
    a connection of this one call, as :func:`_read`; returns until when."""
    now = time.time()
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    try:
        conn.execute(f"PRAGMA busy_timeout = {int(busy_ms)}")
        # No fsync of its own (sqlite3's default, FULL, waits for the disk at the commit,
        # 5-50 ms here): a registration a crash loses is made again by the next renewal.
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(_FORGET_LAPSED.format(watchers), (now,))
        conn.execute(_REGISTER.format(watchers), (origin, now + lease))
        conn.execute("COMMIT")
    finally:
        conn.close()  # (rolls back what did not commit)
    return now + lease


def _notices(rows: list[Any], origin: str) -> list[ChangeNotice]:
    """One notice per change: a write's journal row and its key's row say the same write
    (the journal's names its source), so each (key, revision) is told once."""
    told: dict[tuple[str, int | None, bool], ChangeNotice] = {}
    first: dict[str, int] = {}  # each key's first row: keys in the order they changed
    for row_id, key, revision, deleted, row_origin, source, call_id in rows:
        if row_origin == origin:
            continue
        first.setdefault(key, row_id)
        what = (key, revision, bool(deleted))
        known = told.get(what)
        if known is None or (known.source is None and source is not None):
            told[what] = ChangeNotice(
                key,
                row_origin,
                revision,
                bool(deleted),
                source if isinstance(source, str) else None,
                call_id if isinstance(call_id, str) else None,
            )
    return sorted(told.values(), key=lambda n: (first[n.key], n.revision or 0, n.deleted))
