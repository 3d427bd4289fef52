"""The atomic read-modify-write of a key: one transaction that holds the row's lock.

The transaction locks the key's row (``SELECT ... FOR UPDATE``, inserting the row first if
it is absent) and holds the lock from its read to its commit, so writers on any number of
servers serialize per key and never lose each other's updates, while different keys never
wait for each other. The row's new value and revision, the journal rows of the commits and
the journal's trim are one statement (:attr:`~.table.TableSql.write_journaled`), so the
journal costs no round trip: BEGIN, lock, write, COMMIT, as without it.

Inside one process the writes of a key also go through a :class:`~noetic_scratchpad.locks.
KeyedBatcher` (see :mod:`.store`): the writes queued behind a running transaction are
combined into the next one, which runs them here in order, each on the result of the one
before it. A write that raises fails alone; when every write fails, the transaction is
rolled back, which also removes a row inserted only to be locked.

A row inserted to be locked belongs to a key that is missing: its first write is seen as
``Revision(None, 0)`` but stored above the key's last revision before it was deleted (the
retired table's), so that a key's revisions never repeat.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any

import anyio
import asyncpg  # type: ignore[import-untyped, unused-ignore]

from ... import _json
from ...errors import StorageError, StorageOutcomeUnknownError
from ..base import JournalRow, Revision
from ..notices import ChangeNotice, encode_notice
from .codec import decode_text, escape
from .failures import CONNECTION_LOST, DRIVER_ERRORS, UNCONFIRMED, storage_error
from .journal import decode_journal
from .options import PostgresSettings
from .table import TableSql

__all__ = ("CommitJob", "announce", "update_row")

logger = logging.getLogger("noetic_scratchpad.storage")

#: How long an announcement may take before it is given up (the write is stored).
_ANNOUNCE_TIMEOUT = 5.0

# A row deleted between the insert-if-absent and the lock makes the lock statement retry.
_LOCK_ATTEMPTS = 8


# A plain slotted class: a frozen dataclass's __init__ costs twice as much, on every write.
@dataclass(slots=True)
class CommitJob:
    """A read-modify-write. ``plain``: an ``update`` (``fn`` maps the value to the new
    value, its outcome); else a ``commit`` (``fn`` maps a ``Revision`` to a ``Commit``,
    whose entry is journaled when ``keep`` is positive). ``after``: a
    ``commit_with_journal``, whose ``fn`` also gets the journal rows above that revision."""

    fn: Callable[..., Any]
    keep: int = 0
    plain: bool = True
    after: int | None = None


@dataclass(slots=True)
class _Outcome:
    """What the jobs of one transaction came to: one outcome per job, and what to write."""

    value: Any
    revision: int
    outcomes: list[Any] = field(default_factory=list)
    data: bytes | None = None  # the value's JSON text; None: nothing to write
    journal: list[tuple[int, bytes]] = field(default_factory=list)
    floor: int = 0  # journal rows at or below this revision are trimmed
    # (revision, (source, call id)) of each write made, for the notices of other processes
    made: list[tuple[int, tuple[str, str | None] | None]] = field(default_factory=list)


async def update_row(
    conn: asyncpg.Connection,
    sql: TableSql,
    settings: PostgresSettings,
    key: str,
    jobs: Sequence[CommitJob],
    origin: str | None = None,
) -> list[Any]:
    """Run ``jobs`` on the row of ``key`` in one transaction holding its row lock.

    With ``origin``, each write is announced on the table's channel right after the
    commit (:func:`announce`). Returns one outcome per job: its result, or the exception
    that fails it alone.
    A commit cut off by a lost connection is a :class:`StorageOutcomeUnknownError`.
    """
    transaction = conn.transaction(isolation="read_committed")
    await transaction.start()
    try:
        # The row lock is held from here to the end of the transaction.
        current, base = await _lock_row(conn, sql, settings, key)
        wanted = [job.after for job in jobs if job.after is not None]
        stored = await _stored_journal(conn, sql, settings, key, min(wanted)) if wanted else []
        done = _apply(jobs, current, base, stored)
        if done.data is not None:
            await _write(conn, sql, key, done)
    except BaseException:
        await _rollback_quietly(transaction)
        raise
    if done.data is None:  # every write failed: also drops a row inserted to lock
        await _rollback_quietly(transaction)
        return done.outcomes
    try:
        await transaction.commit()
    except CONNECTION_LOST as exc:
        what = f"commit of an update of {key!r}"
        raise storage_error(settings, what, exc, UNCONFIRMED, StorageOutcomeUnknownError) from exc
    if origin is not None:
        notices = []
        for revision, about in done.made:
            source, call_id = about if about is not None else (None, None)
            notices.append(ChangeNotice(key, origin, revision, False, source, call_id))
        await announce(conn, sql, settings, notices)
    return done.outcomes


async def _lock_row(
    conn: asyncpg.Connection, sql: TableSql, settings: PostgresSettings, key: str
) -> tuple[Revision, int]:
    """The value and revision of ``key`` once its row is locked (``Revision(None, 0)`` for
    a row inserted to lock), and the revision its next write adds 1 to: the row's, or for
    an inserted row the key's last one before it was deleted (0: never written)."""
    for _ in range(_LOCK_ATTEMPTS):
        row = await conn.fetchrow(sql.lock, key)
        if row is None:  # the statement always yields one row
            raise StorageError(f"locking the row of {key!r} returned nothing; retry")
        if row["created"]:
            # After the lock statement, so that a delete the insert waited for is seen.
            retired: int = await conn.fetchval(sql.retired_revision, key)
            return Revision(None, 0), retired
        if row["found"]:
            return Revision(row["value"], row["revision"]), row["revision"]
    raise StorageError(
        f"could not lock the row of {key!r} in {settings.table!r}: it was deleted "
        f"by another writer {_LOCK_ATTEMPTS} times in a row; nothing was written, retry"
    )


async def _stored_journal(
    conn: asyncpg.Connection, sql: TableSql, settings: PostgresSettings, key: str, after: int
) -> list[JournalRow]:
    """The stored journal rows above ``after`` that a ``commit_with_journal`` of the batch
    needs, read once the row is locked, so that no commit adds or trims any until this
    transaction ends. (A row inserted to be locked has none: the lock statement cleared
    what a writer without journal left.)"""
    records = await conn.fetch(sql.journal_above, key, after)
    return decode_journal(settings.journal_table, key, records)


def _apply(
    jobs: Sequence[CommitJob], current: Revision, base: int, stored: list[JournalRow]
) -> _Outcome:
    """Run the queued jobs in order, each on the result of the last one that worked; the
    first write is stored at ``base + 1`` (``current.revision + 1`` but for a created row).
    ``stored``: the journal rows the ``commit_with_journal`` jobs need."""
    done = _Outcome(current.value, base)
    seen = current.revision  # what a commit's fn is shown: 0 until a write is made
    for job in jobs:
        try:
            about = None
            if job.plain:
                new, entry = job.fn(done.value), None
                data = _json.dumps(new)
            elif job.after is not None:
                rows = _journal_above(done, stored, job.after)
                commit = job.fn(Revision(done.value, seen), rows)
                new, entry, data, about = commit.value, commit.entry, commit.json(), commit.about
            else:
                commit = job.fn(Revision(done.value, seen))
                new, entry, data, about = commit.value, commit.entry, commit.json(), commit.about
            encoded = escape(data)
            if entry is not None:
                entry = escape(_json.dumps(entry)) if job.keep > 0 else None
        except Exception as exc:
            done.outcomes.append(exc)
            continue
        revision = seen = done.revision = done.revision + 1
        done.value, done.data = new, encoded
        done.made.append((revision, about))
        if entry is not None:
            done.journal.append((revision, entry))
            done.floor = max(done.floor, revision - job.keep)
        done.outcomes.append(new if job.plain else Revision(new, revision))
    return done


def _journal_above(done: _Outcome, stored: list[JournalRow], after: int) -> list[JournalRow]:
    """The journal rows above ``after``, newest first, as the batch leaves them so far:
    those of its earlier commits, then the stored ones, less what it trims."""
    floor = max(after, done.floor)
    now = time.time()
    rows = [
        JournalRow(revision, now, decode_text(entry))
        for revision, entry in reversed(done.journal)
        if revision > floor
    ]
    return rows + [row for row in stored if row.revision > floor]


async def _write(conn: asyncpg.Connection, sql: TableSql, key: str, done: _Outcome) -> None:
    """The new row; with journal rows, them and the journal's trim in the same statement."""
    if not done.journal:
        await conn.execute(sql.write, key, done.data, done.revision)
        return
    # Rows the trim would delete at once are never written.
    rows = [(revision, entry) for revision, entry in done.journal if revision > done.floor]
    await conn.execute(
        sql.write_journaled,
        key,
        done.data,
        done.revision,
        [revision for revision, _ in rows],
        [entry for _, entry in rows],
        done.floor,
    )


async def announce(
    conn: asyncpg.Connection,
    sql: TableSql,
    settings: PostgresSettings,
    notices: Sequence[ChangeNotice],
) -> None:
    """``pg_notify`` each notice, in one statement of its own, right after the commit of
    the writes it tells of. Not in their transaction: a transaction that notifies holds a
    lock of the whole database from its commit's start to its end, so that concurrent
    writers on different scopes would commit one at a time (100 writers on 100 scopes ran
    at 741 writes a second with the notices in the transaction, against 1,972 without
    them). A notifying statement alone writes no WAL and holds that lock for a moment.
    The price: a process that dies between its commit and this statement has not
    announced that write. The statement is not cancelled with its caller (the write is
    stored: its caller must hear so); a failure is logged."""
    payloads = [text for text in map(encode_notice, notices) if text is not None]
    if not payloads:
        return
    with anyio.CancelScope(shield=True), anyio.move_on_after(_ANNOUNCE_TIMEOUT):
        try:
            await conn.execute(sql.notify, settings.channel, payloads)
        except DRIVER_ERRORS as exc:
            logger.warning(
                "a write was stored but not announced to other processes key=%s: %s",
                notices[0].key,
                settings.scrub(f"{type(exc).__name__}: {exc}"),
            )


async def _rollback_quietly(transaction: Any) -> None:
    # On a lost connection the server rolls the transaction back by itself.
    with suppress(Exception):
        await transaction.rollback()
