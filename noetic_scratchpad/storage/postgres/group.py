"""Group commit: the writes of many keys queued at once share one transaction.

The store groups the batches of different keys with :class:`..grouping.GroupedWrites`: at
most :data:`CONCURRENT` transactions of writes run at a time (or the pool's size if
smaller), and batches that have waited :data:`HOLD_SECONDS` start a transaction anyway
(those running may wait for row locks that another process holds), so that no key waits long
for another key's lock. (100 writers on 100 scopes: with 2 transactions at a time this
process spends 174-215 us of CPU per update, with 10 at a time 237-281, with 1 170-178 but
the server's round trips no longer overlap its work.) A transaction of one key is
:func:`.writer.update_row`, the round trips of one write; one of many keys
(:func:`update_rows`) costs the same five round trips for all of them: BEGIN, one statement
locking every row, one statement writing every row with its journal rows and trim, COMMIT,
then one notice statement. Under load the round trips, the commits (each a flush of the
server's log) and this process's work per statement are shared by the keys.

Each key keeps its own rules: its row is locked from the read to the commit, its revision
goes up by one per write, its journal rows and trim are written with its state, and its
writes are announced after the commit. The rows are locked with ``SKIP LOCKED``: a row
another transaction holds, or a key without a row, is left out of the group, and its batch
runs alone (:func:`.writer.update_row`), waiting for the lock or creating the row as before;
so a group never waits for a row lock, and keys never wait for each other's locks. A
statement of the group that fails (a row that cannot be read, a value the server refuses)
rolls the group back and runs each batch alone, so that the failure is its own key's (its
``fn`` runs again, on the state read then, as a retry would). A connection lost during the
group's COMMIT fails every key of it with
:class:`~noetic_scratchpad.errors.StorageOutcomeUnknownError`, as it would one key.
"""

from __future__ import annotations

from contextlib import suppress
from typing import Any

import asyncpg  # type: ignore[import-untyped, unused-ignore]

from ...errors import StorageOutcomeUnknownError
from ..base import Revision
from ..grouping import Member
from ..notices import ChangeNotice
from .failures import CONNECTION_LOST, UNCONFIRMED, action_text, storage_error
from .options import PostgresSettings
from .table import TableSql
from .writer import _apply, _Outcome, announce

__all__ = ("CONCURRENT", "HOLD_SECONDS", "update_rows")

#: How many transactions of writes run at a time, at most (but see HOLD_SECONDS).
CONCURRENT = 2

#: How long batches wait before a transaction starts for them anyway.
HOLD_SECONDS = 0.02


async def update_rows(
    conn: asyncpg.Connection,
    sql: TableSql,
    settings: PostgresSettings,
    members: list[Member],
    origin: str | None = None,
) -> None:
    """Run the batches of ``members`` (distinct keys, no ``commit_with_journal``) in one
    transaction on ``conn``; finish each member with its outcomes, or as to run alone."""
    transaction = conn.transaction(isolation="read_committed")
    await transaction.start()
    written: list[tuple[Member, _Outcome]] = []
    try:
        try:
            rows = await conn.fetch(sql.lock_many, [member.key for member in members])
        except CONNECTION_LOST:
            raise
        except Exception:  # e.g. a row that cannot be read: each on its own
            await _rollback_quietly(transaction)
            for member in members:
                member.finish(alone=True)
            return
        locked = {row["key"]: row for row in rows}
        for member in members:
            row = locked.get(member.key)
            if row is None:  # held by another transaction, or no row yet
                member.finish(alone=True)
                continue
            revision = row["revision"]
            done = _apply(member.jobs, Revision(row["value"], revision), revision, [])
            if done.data is None:  # every write failed
                member.finish(done.outcomes)
            else:
                written.append((member, done))
        if not written:
            await _rollback_quietly(transaction)
            return
        try:
            await conn.execute(sql.write_many, *_write_arguments(written))
        except CONNECTION_LOST:
            raise
        except Exception:  # a value the server refuses: each on its own
            await _rollback_quietly(transaction)
            for member, _ in written:
                member.finish(alone=True)
            return
    except BaseException:
        await _rollback_quietly(transaction)
        raise
    try:
        await transaction.commit()
    except CONNECTION_LOST as exc:
        for member, _ in written:
            what = action_text("commit of an update", member.key)
            error = storage_error(settings, what, exc, UNCONFIRMED, StorageOutcomeUnknownError)
            error.__cause__ = exc
            member.finish(error)
        raise
    except asyncpg.PostgresError:  # refused at commit (a deferred check): each on its own
        for member, _ in written:
            member.finish(alone=True)
        return
    for member, done in written:
        member.finish(done.outcomes)
    if origin is not None:
        notices = []
        for member, done in written:
            for revision, about in done.made:
                source, call_id = about if about is not None else (None, None)
                notices.append(ChangeNotice(member.key, origin, revision, False, source, call_id))
        await announce(conn, sql, settings, notices)


def _write_arguments(written: list[tuple[Member, _Outcome]]) -> tuple[list[Any], ...]:
    """The arguments of :attr:`TableSql.write_many`: each key's state, the trims of the
    keys with journal rows, and those rows (less those the trim would delete at once)."""
    keys: list[str] = []
    values: list[bytes | None] = []
    revisions: list[int] = []
    trim_keys: list[str] = []
    floors: list[int] = []
    entry_keys: list[str] = []
    entry_revisions: list[int] = []
    entries: list[bytes] = []
    for member, done in written:
        keys.append(member.key)
        values.append(done.data)
        revisions.append(done.revision)
        if done.journal:
            trim_keys.append(member.key)
            floors.append(done.floor)
            for revision, entry in done.journal:
                if revision > done.floor:
                    entry_keys.append(member.key)
                    entry_revisions.append(revision)
                    entries.append(entry)
    return keys, values, revisions, trim_keys, floors, entry_keys, entry_revisions, entries


async def _rollback_quietly(transaction: Any) -> None:
    # On a lost connection the server rolls the transaction back by itself.
    with suppress(Exception):
        await transaction.rollback()
