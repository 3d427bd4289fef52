"""The writer: the queue of a storage's writes, and the transaction that runs them.

Every write of a process arrives here as a job (:meth:`SqliteWriter.submit`), and the jobs
queued while a transaction runs become the next transaction (group commit). A job that
finds the writer idle is run alone, its transaction awaited by its caller: an uncontended
write then costs no task and one pass of the event loop less. The queue's worker is a task
of the writer's own (:attr:`SqliteWriter.tasks`, which an owning object may host in its
task group: one task there then runs it, woken per burst of writes), never a caller's:
cancelling a caller only ends its wait; a job still queued is then removed and never runs,
one already in a running transaction runs to the end (its write may land), and the other
jobs of that transaction get their results as if nothing happened. Each caller gets its
result only after its transaction has committed. A transaction is one function run in the
writer connection's thread, so it costs one thread hop however many statements it needs.

- ``BEGIN IMMEDIATE`` takes SQLite's write lock before the transaction reads anything, so
  writers in other processes sharing the file are serialized by SQLite itself, and no
  read-modify-write can be interleaved with another's.
- The jobs of a transaction are applied in order to a :class:`KeyState` per key, which
  then writes each changed key's final row, its new journal rows and the journal's trim
  (a key's journal is a ring: when full, its oldest row is rewritten in place as the
  newest; see :mod:`.table`).
  A key's revision is known once the writer has read or cached the row; a ``set`` on a row
  it never read only counts itself (``bumps``), and the row's revision then advances by
  that count in SQL, so a ``set`` never costs a read.
- Each write advances the key's revision. A commit writes the key's row, its journal row
  and the journal's trim in the same transaction, so state and journal change together;
  a ``commit_with_journal`` reads the journal rows it needs in that transaction too.
- Just before ``COMMIT``, the transaction checks that the database file is still the one
  at the path (:mod:`.file`): a removed or replaced file fails the batch, unwritten.
- The writer keeps the rows it committed lately (each as the :class:`~..base.Revision` its
  commit returned), and hands an update the very object it last stored. That cache is
  only true while no other connection has written: each transaction reads
  ``PRAGMA data_version``, which changes only when another connection has committed since
  our last transaction, and then drops it all before reading anything.
- Writes are isolated per key: an update function that raises fails only its own job, and
  a row that SQLite refuses (a trigger, a constraint; journal rows included) fails only
  the jobs of that key; their neighbours in the batch still commit. SQLite undoes a
  refused statement itself; when a key of several statements is refused after some of
  them, the transaction is rolled back and run again with its rows under a savepoint,
  rolled back to undo that key's earlier statements before the other keys are written
  again (a savepoint on every batch would cost more than the rows). Only a
  failure of the transaction itself (BEGIN, COMMIT, a lost connection) fails the whole
  batch, after a rollback.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import aiosqlite

from ... import _json, _runtime
from ..._runtime import Event, TaskOwner
from ...errors import StorageBusyError, StorageError
from ...locks import WorkAbandoned, cut_short_at_shutdown
from ..base import (
    CommitFn,
    JournalCommitFn,
    JournalRow,
    JsonValue,
    Revision,
    UpdateFn,
    journal_limit,
    known_value,
)
from . import changes
from .connection import (
    SQLITE_BUSY,
    error_code,
    executor,
    raw_connection,
    run_in_connection_thread,
)
from .file import OpenedFile
from .options import SqliteOptions
from .table import TableSql, decode_journal, decode_row

__all__ = (
    "Batch",
    "CommitJob",
    "DeleteJob",
    "Job",
    "KeyState",
    "SetJob",
    "SqliteWriter",
    "SqliteWrites",
)

_T = TypeVar("_T")

#: Rows whose last committed value the writer keeps (see ``_recent``).
_RECENT_ROWS = 256


# Plain slotted classes: a frozen dataclass's __init__ costs twice as much, on every write.
@dataclass(slots=True)
class CommitJob:
    """A read-modify-write of ``key``. ``plain``: an ``update`` (``fn`` maps the value to
    the new value, and its outcome is that value); else a ``commit`` (``fn`` maps a
    ``Revision`` to a ``Commit``, whose entry is journaled when ``keep`` is positive).
    ``after``: a ``commit_with_journal``, whose ``fn`` also gets the journal rows above
    that revision."""

    key: str
    fn: Callable[..., Any]
    keep: int = 0
    plain: bool = True
    after: int | None = None


@dataclass(slots=True)
class SetJob:
    key: str
    text: str


@dataclass(slots=True)
class DeleteJob:
    key: str


Job = CommitJob | SetJob | DeleteJob


@dataclass(slots=True)
class Unparsed:
    """The value of a row written in this batch by a ``set``: its text, parsed only if a
    commit of the same key follows in the batch."""

    text: str


class KeyState:
    """One key as the transaction sees it so far, and what it will write for it."""

    __slots__ = (
        "bumps",
        "changed",
        "clear",
        "current",
        "exists",
        "floor",
        "journal",
        "revision",
        "text",
        "value",
    )

    def __init__(
        self,
        value: Any,
        revision: int | None,
        exists: bool = True,
        current: Revision | None = None,
    ) -> None:
        #: ``value`` and ``revision`` as the :class:`Revision` a commit's ``fn`` is handed
        #: (and a commit returns), when one is at hand: the row cache's, or the last
        #: commit's; ``None`` after a set or a delete, or for a row just read.
        self.current = current
        #: The current value (``None``: missing), or :class:`Unparsed` after a set.
        self.value = value
        #: Whether the key has a value (a commit's ``fn`` sees ``Revision(None, 0)`` if not).
        self.exists = exists
        #: The current revision, or for a missing key its last one (0: never written);
        #: ``None`` when the row was never read (see ``bumps``).
        self.revision = revision
        #: Sets made since the unread row's revision.
        self.bumps = 0
        #: Whether the key's row is to be written; ``text`` ``None``: deleted.
        self.changed = False
        self.text: str | None = None
        #: Journal rows to write, as (revision, entry text, source, call id, keep): the
        #: source and call id are announced with the row to other processes (see
        #: :mod:`.changes`); keep places it in the ring (see :mod:`.table`).
        self.journal: list[tuple[int, str, str | None, str | None, int]] = []
        #: Journal rows at or below this revision are trimmed (0: none).
        self.floor = 0
        #: Whether every journal row stored for the key is deleted first.
        self.clear = False

    def set(self, text: str) -> None:
        self.value, self.current = Unparsed(text), None
        self.text = text
        self.changed = self.exists = True
        if self.revision is None:
            self.bumps += 1
        else:
            self.revision += 1

    def delete(self) -> None:
        # The revision stays, and so do the sets counted on an unread row: the key's next
        # write continues above them.
        self.value, self.exists, self.current = None, False, None
        self.text = None
        self.changed = self.clear = True
        self.journal = []
        self.floor = 0

    def commit(
        self,
        value: Any,
        text: str,
        entry: str | None,
        keep: int,
        about: tuple[str | None, str | None] = (None, None),
    ) -> Revision:
        """Record a commit on the current (known) revision; return the new value and
        revision."""
        assert self.revision is not None
        if not self.exists:
            # A new row: journal rows of an earlier key of that name that a writer without
            # journal left behind must not show as its history.
            self.clear = True
        revision = self.revision = self.revision + 1
        self.value, self.text, self.changed, self.exists = value, text, True, True
        if entry is not None:
            self.journal.append((revision, entry, *about, keep))
            self.floor = max(self.floor, revision - keep)
        current = self.current = Revision(value, revision)
        return current


class Batch:
    """What one transaction has done so far: each key's state, and one outcome per job."""

    __slots__ = ("keys", "outcomes")

    def __init__(self) -> None:
        self.keys: dict[str, KeyState] = {}
        #: Per job: its result, or the exception that fails it alone.
        self.outcomes: list[Any] = []

    def fail_key(self, key: str, jobs: Sequence[Job], error: StorageError) -> None:
        """Fail every job of ``key`` that has not failed already, and write nothing for it."""
        for index, job in enumerate(jobs):
            if job.key == key and not isinstance(self.outcomes[index], Exception):
                self.outcomes[index] = error
        self.keys[key].changed = False


class _Waiter:
    """A queued job and the future its caller awaits its outcome on (an asyncio future,
    not an event: the writer runs on asyncio only, and a future is its cheapest wait)."""

    __slots__ = ("finished", "job")

    def __init__(self, job: Job, finished: asyncio.Future[Any]) -> None:
        self.job = job
        self.finished = finished

    def finish(self, outcome: Any) -> None:
        if not self.finished.done():  # (cancelled: its caller stopped waiting)
            self.finished.set_result(outcome)


class SqliteWriter:
    """The write side of a :class:`SqliteStorage`: the queue of its writes, its
    connection, and the state that connection's thread keeps between transactions (the
    row cache).

    :meth:`transaction` and what it calls run in the connection's thread only; the
    coroutines hop there. Made on a running loop (the store is opened there): the writer
    takes the event of that loop's runtime once (:func:`~..._runtime.implementation`).
    """

    def __init__(
        self,
        connection: aiosqlite.Connection,
        options: SqliteOptions,
        sql: TableSql,
        file: OpenedFile,
    ) -> None:
        self.connection = connection
        #: The database file the connection opened: each commit checks it is still there.
        self.file = file
        #: The sqlite3 connection; touch it only in the connection's thread (see :meth:`call`).
        self.conn = raw_connection(connection)
        # The cursor the transactions run their statements on, made in the connection's
        # thread at the first: ``conn.execute`` makes a cursor for every statement.
        self._cursor: sqlite3.Cursor | None = None
        self.options = options
        self._sql = sql
        # key -> the Revision (value and revision) of rows this writer committed lately, as
        # their commits returned them. Each entry was the stored row when this writer's last
        # transaction committed; see _forget_if_stale.
        self._recent: OrderedDict[str, Revision] = OrderedDict()
        self._data_version: int | None = None
        # The queue: jobs not yet taken by the worker, which runs while ``_working``.
        self._queue: deque[_Waiter] = deque()
        self._working = False
        # A transaction run alone whose caller was cancelled may still be in the thread.
        self._unfinished = False
        self._idle: Event | None = None
        self._new_event = _runtime.implementation().new_event
        self._execute = executor(connection)
        #: The process name its writes are announced with to other processes (see
        #: :mod:`.changes`), once the table of changes is in place; ``None``: not announced.
        self.origin: str | None = None
        # Until when another process watches (0: none), as of the last transaction after
        # another connection's commit: only a commit can register or renew a watcher.
        self._watched_until = 0.0
        self.tasks = TaskOwner()
        """Where the worker runs."""
        self._worker = self.tasks.worker(self._work)

    def announce_as(self, origin: str | None) -> None:
        """Announce this writer's writes as ``origin`` from its next transaction on, while
        another process watches (``None``: never; see :mod:`.changes`)."""
        self.origin = origin
        self._data_version = None  # the next transaction asks who watches

    def __len__(self) -> int:
        """1 while a worker runs (jobs queued or in a transaction), else 0."""
        return int(self._working)

    # -- on the event loop ---------------------------------------------------------------------

    async def submit(self, job: Job) -> Any:
        """Run ``job`` in a transaction after those queued before it; its outcome (a
        plain update's value, a commit's :class:`Revision`, ``None``)."""
        if not self._working:
            return await self._run_alone(job)
        waiter = _Waiter(job, asyncio.get_running_loop().create_future())
        self._queue.append(waiter)
        try:
            outcome = await waiter.finished
        except BaseException:  # the caller stopped waiting (cancelled, timed out)
            with contextlib.suppress(ValueError):  # in a running transaction: it runs
                self._queue.remove(waiter)  # still queued: it never runs
            raise
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    async def wait_idle(self) -> None:
        """Wait until the queue is empty and its last transaction has finished."""
        while self._working:
            if self._idle is None:
                self._idle = self._new_event()
            await self._idle.wait()

    async def _run_alone(self, job: Job) -> Any:
        """``job`` on an idle writer: its transaction, awaited by its caller itself. No
        worker is started and woken for it, which spares an uncontended write a task and
        a pass of the event loop. What is queued meanwhile goes to the worker after it.

        Cancelled, the caller only stops waiting, as in the queue: the transaction runs to
        its end in the connection's thread (its write may land), and the worker, woken
        now, first waits for the thread to finish it before running the next one."""
        self._working = True
        try:
            outcomes = await self._execute(self.transaction, [job])
        except Exception as exc:  # not the database's (it fails the job): closed, or a bug
            outcomes = [exc]
        except BaseException:  # cancelled: the transaction may still be running
            self._unfinished = True
            self._hand_on()
            raise
        self._hand_on()
        outcome = outcomes[0]
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    def _hand_on(self) -> None:
        """After a transaction run alone: the worker takes over what was queued meanwhile
        (and a transaction a cancelled caller left running); else the writer is idle."""
        if (self._queue or self._unfinished) and self._worker.wake():
            return
        self._stop_working()

    async def _work(self) -> None:
        """The worker: run what is queued, transaction after transaction, then end."""
        queue, max_batch = self._queue, self.options.max_batch
        try:
            if self._unfinished:  # the thread runs jobs in order: this one waits for it
                self._unfinished = False
                with contextlib.suppress(Exception):  # its outcome was nobody's
                    await self._execute(_nothing)
            while queue:
                batch = [queue.popleft() for _ in range(min(len(queue), max_batch))]
                try:
                    outcomes = await self._execute(self.transaction, [w.job for w in batch])
                except Exception as exc:  # not the database's (it fails the jobs): a bug
                    outcomes = [exc] * len(batch)
                except BaseException:  # cancelled: the loop is closing
                    for waiter in batch:  # its transaction is in the thread: it may commit
                        waiter.finish(cut_short_at_shutdown())
                    raise
                for waiter, outcome in zip(batch, outcomes, strict=True):
                    waiter.finish(outcome)
                if not queue:
                    # The writers just answered often write again at once: one pass of the
                    # loop lets them queue here, as the next batch, rather than the first
                    # of them run alone and the rest wait behind it.
                    await asyncio.sleep(0)
        finally:
            self._stop_working()

    def _stop_working(self) -> None:
        """The writer is idle (the loop is closing when jobs are still queued)."""
        queue = self._queue
        while queue:
            queue.popleft().finish(WorkAbandoned.at_shutdown())
        self._working = False
        if self._idle is not None:
            self._idle.set()
            self._idle = None

    async def call(self, fn: Callable[..., _T], *args: Any) -> _T:
        """``fn(*args)`` in the writer connection's thread, where :attr:`conn` may be used."""
        return await run_in_connection_thread(self.connection, fn, *args)

    async def close(self) -> None:
        await self.connection.close()

    async def purge_deleted(self, prefix: str) -> int:
        """Forget the deleted keys under ``prefix`` (see :mod:`..purge`), in one
        transaction of this connection's thread: never inside a batch of writes."""
        return await run_in_connection_thread(self.connection, self._purge_deleted, prefix)

    def _purge_deleted(self, prefix: str) -> int:
        *records, announcements = self._sql.purge_deleted(prefix)

        def purge(cursor: sqlite3.Cursor) -> int:
            counted = sum(cursor.execute(sql, params).rowcount for sql, params in records)
            cursor.execute(*announcements)
            return counted

        return self._maintain("forget deleted keys", purge)

    async def sweep_expired(self, prefix: str, written_by: float, limit: int) -> int:
        """Delete at most ``limit`` keys under ``prefix`` last written at or before
        ``written_by`` (see :mod:`..sweep`), as a delete does, in one transaction of
        this connection's thread: never inside a batch of writes."""
        return await run_in_connection_thread(
            self.connection,
            self._maintain,
            "sweep expired keys",
            self._sweep(prefix, written_by, limit),
        )

    async def trim_journals(self, prefix: str, written_by: float, limit: int) -> int:
        """Delete at most ``limit`` journal rows under ``prefix`` written at or before
        ``written_by`` (see :mod:`..sweep`), in one transaction of this thread."""
        sql, params = self._sql.trim_journals(prefix)
        return await run_in_connection_thread(
            self.connection,
            self._maintain,
            "trim journals",
            lambda cursor: cursor.execute(sql, (*params, written_by, limit)).rowcount,
        )

    def _sweep(self, prefix: str, written_by: float, limit: int) -> Callable[[sqlite3.Cursor], int]:
        def sweep(cursor: sqlite3.Cursor) -> int:
            sql = self._sql
            found, params = sql.written_by(prefix)
            gone = [key for (key,) in cursor.execute(found, (*params, written_by, limit))]
            for key in gone:
                cursor.execute(sql.clear_journal, (key,))
                cursor.execute(sql.retire, (key, 0, 0))
                cursor.execute(sql.delete, (key,))
                self._recent.pop(key, None)  # (were the commit to fail, only a cache miss)
            return len(gone)

        return sweep

    def _maintain(self, action: str, work: Callable[[sqlite3.Cursor], int]) -> int:
        """``work(cursor)`` as one write transaction of its own, then the WAL emptied: what
        it removed leaves the file now, not at some later checkpoint."""
        cursor = self._statements()
        try:
            self._begin(cursor)
        except sqlite3.Error as exc:
            raise self._failure(exc, "start a write transaction") from None
        try:
            removed = work(cursor)
            self.file.check("written")
            cursor.execute("COMMIT")
        except BaseException as exc:
            with contextlib.suppress(sqlite3.Error):
                cursor.execute("ROLLBACK")
            if not isinstance(exc, sqlite3.Error | StorageError):
                raise
            raise self._failure(exc, action) from None
        # The WAL still holds the pages as they were before the deletes: copy it into the
        # database and empty it now. (Busy readers only make it partial; the next
        # checkpoint finishes it.)
        with contextlib.suppress(sqlite3.Error):
            cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        return removed

    # -- in the connection's thread ----------------------------------------------------------

    def transaction(self, jobs: Sequence[Job]) -> list[Any]:
        """Run ``jobs`` as one transaction in the writer's thread; one outcome per job.

        A job whose ``fn`` raises (or returns what JSON cannot hold) gets that exception and
        writes nothing; its neighbours still commit. A database error fails the whole
        batch with a StorageError, after a rollback, so no job is half-applied.

        The rows are written without a savepoint first: a savepoint makes SQLite copy
        every page the batch then changes into its sub-journal (and spill it to a
        temporary file past 64 KiB), which measured 2-4x the cost of the statements with
        the journal on. Should SQLite refuse a statement of a key that has others, after
        them, nothing could undo those alone: the transaction is then rolled back and run
        again under a savepoint, its functions run anew (they may be retried).
        """
        outcomes = self._transaction(jobs, guarded=False)
        if outcomes is None:  # a key's row refused after its other rows: again, guarded
            outcomes = self._transaction(jobs, guarded=True)
            assert outcomes is not None
        return outcomes

    def _transaction(self, jobs: Sequence[Job], *, guarded: bool) -> list[Any] | None:
        """One attempt at :meth:`transaction`; ``None`` when unguarded and a key's
        statement was refused after another of that key (rolled back: nothing written)."""
        cursor = self._statements()
        try:
            self._begin(cursor)
        except sqlite3.Error as exc:
            return [self._failure(exc, "start a write transaction")] * len(jobs)
        try:
            self._forget_if_stale(cursor)
            batch = self._apply(cursor, jobs, guarded)
            if batch is None:
                cursor.execute("ROLLBACK")
                return None
            # The last moment before the commit: a file removed or replaced since it was
            # opened would take the batch where no one sees it (see .file).
            self.file.check("written")
            cursor.execute("COMMIT")
        except BaseException as exc:
            # SQLite may have rolled back already, or the connection is gone: nothing to undo.
            with contextlib.suppress(sqlite3.Error):
                cursor.execute("ROLLBACK")
            if not isinstance(exc, sqlite3.Error | StorageError):
                raise
            return [self._failure(exc, "write")] * len(jobs)
        self._remember(batch.keys)
        return batch.outcomes

    def _statements(self) -> sqlite3.Cursor:
        """The cursor of this thread's transactions (each statement's result is read before
        the next one runs)."""
        cursor = self._cursor
        if cursor is None:
            cursor = self._cursor = self.conn.cursor()
        return cursor

    def _begin(self, cursor: sqlite3.Cursor) -> None:
        """``BEGIN IMMEDIATE`` with bounded retry; SQLite waits ``busy_timeout`` each time."""
        attempts = self.options.busy_retries + 1
        for attempt in range(attempts):
            try:
                cursor.execute("BEGIN IMMEDIATE")
                return
            except sqlite3.OperationalError as exc:
                if error_code(exc) != SQLITE_BUSY or attempt + 1 == attempts:
                    raise
                time.sleep(0.01 * (attempt + 1))  # this thread is the writer's; nobody waits on it

    def _forget_if_stale(self, cursor: sqlite3.Cursor) -> None:
        """Drop every cached row if another connection has committed since our last
        transaction, and ask again whether another process watches (see :mod:`.changes`).
        Inside BEGIN IMMEDIATE no one else can commit; the version changes only on another
        connection's commit (our own commits leave it as it is)."""
        version = cursor.execute("PRAGMA data_version").fetchone()[0]
        if version != self._data_version:
            self._recent.clear()
            if self.origin is not None:
                self._watched_until = (
                    cursor.execute(self._sql.watched, (self.origin,)).fetchone()[0] or 0.0
                )
            self._data_version = version  # (only once both are current)

    def _apply(self, cursor: sqlite3.Cursor, jobs: Sequence[Job], guarded: bool) -> Batch | None:
        """Apply ``jobs`` in order inside the open transaction, then write each key's rows
        (``None``: refused unguarded, see :meth:`_write_rows`)."""
        batch = Batch()
        keys, outcomes = batch.keys, batch.outcomes
        for job in jobs:
            if isinstance(job, CommitJob):
                outcomes.append(self._apply_commit(cursor, job, batch))
                continue
            state = keys.get(job.key)
            if state is None:
                cached = self._recent.get(job.key)
                state = keys[job.key] = KeyState(None, None if cached is None else cached.revision)
            if isinstance(job, SetJob):
                state.set(job.text)
            else:
                state.delete()
            outcomes.append(None)
        return batch if self._write_rows(cursor, jobs, batch, guarded) else None

    def _apply_commit(self, cursor: sqlite3.Cursor, job: CommitJob, batch: Batch) -> Any:
        """Run one update or commit on the key's current row: its outcome, or the exception
        that fails it alone. A database error is not the job's: it propagates, failing the
        batch."""
        try:
            state = self._current(cursor, job.key, batch, job.fn)
            about: tuple[str | None, str | None] = (None, None)
            if job.plain:
                value, entry = job.fn(state.value), None
                data = _json.dumps(value)  # ValueError for what JSON cannot hold
            else:
                current = state.current
                if current is None:
                    # A missing key reads as revision 0, whatever revisions it had before.
                    current = Revision(state.value, (state.revision or 0) if state.exists else 0)
                if job.after is None:
                    commit = job.fn(current)
                else:
                    commit = job.fn(current, self._journal_above(cursor, job.key, state, job.after))
                # (The layer's commits carry their encoding: no call for it.)
                value, entry, data = commit.value, commit.entry, commit.encoded or commit.json()
                if entry is not None and job.keep > 0:
                    about = commit.about or _about(entry)
            text = data.decode()
            if entry is not None:
                entry = _json.dumps(entry).decode() if job.keep > 0 else None
        except sqlite3.Error:
            raise
        except Exception as exc:
            return exc
        committed = state.commit(value, text, entry, job.keep, about)
        return value if job.plain else committed

    def _journal_above(
        self, cursor: sqlite3.Cursor, key: str, state: KeyState, after: int
    ) -> list[JournalRow]:
        """The key's journal rows above ``after``, newest first, as this transaction leaves
        them so far: those of earlier commits in the batch, then the stored ones, less what
        the batch trims or clears (a deleted or new row keeps none of the stored ones)."""
        floor = max(after, state.floor)
        now = time.time()
        rows = [
            JournalRow(revision, now, _json.loads(entry))
            for revision, entry, *_ in reversed(state.journal)
            if revision > floor
        ]
        if state.exists and not state.clear:
            stored = cursor.execute(self._sql.journal_above, (key, floor)).fetchall()
            rows += decode_journal(self.options.path, key, stored)
        return rows

    def _current(
        self, cursor: sqlite3.Cursor, key: str, batch: Batch, fn: object = None
    ) -> KeyState:
        """``key`` as this transaction sees it, value parsed and revision known. Rows in
        ``_recent`` are what is stored (see ``_forget_if_stale``); a row read is parsed
        unless ``fn`` (the commit's) knows its value (see ``known_value``)."""
        state = batch.keys.get(key)
        if state is None:
            cached = self._recent.get(key)
            if cached is None:
                known = known_value(fn)
                state = batch.keys[key] = KeyState(*self._read(cursor, key, known=known))
            else:
                state = batch.keys[key] = KeyState(cached.value, cached.revision, True, cached)
            return state
        if state.revision is None:  # sets on a row never read: they count from its revision
            state.revision = self._read(cursor, key, decode=False)[1] + state.bumps
        if isinstance(state.value, Unparsed):
            state.value = _json.loads(state.value.text)
        return state

    def _read(
        self,
        cursor: sqlite3.Cursor,
        key: str,
        *,
        decode: bool = True,
        known: tuple[Any, int] | None = None,
    ) -> tuple[Any, int, bool]:
        """The row's value (when ``decode``: ``known``'s value when that is what is stored
        at its revision, else parsed), revision and whether it exists; a missing key's
        revision is the last one it had (0: never written)."""
        found = cursor.execute(self._sql.get_revision, (key,)).fetchone()
        if found is None:
            retired = cursor.execute(self._sql.retired_revision, (key,)).fetchone()
            return None, 0 if retired is None else retired[0], False
        data, revision = found
        if not decode:
            return None, revision, True
        if known is not None and known[1] == revision and _is_stored(known[0], data):
            return known[0], revision, True
        return decode_row(self.options.path, key, data), revision, True

    def _write_rows(
        self, cursor: sqlite3.Cursor, jobs: Sequence[Job], batch: Batch, guarded: bool
    ) -> bool:
        """Write each changed key's rows. A statement SQLite refuses for that key alone (a
        trigger, a constraint) leaves the transaction open: then only the jobs of that key
        fail, and nothing is written for it. Anything else fails the batch.

        SQLite undoes a refused statement by itself, so a key of one statement needs no
        more. A key of several may be refused after some of them: ``guarded``, a
        savepoint undoes them (and every key written so far, written again after); else
        this returns ``False``, having written what it must not keep, for the caller to
        roll the transaction back and run it again guarded."""
        now = time.time()
        keys = [key for key, state in batch.keys.items() if state.changed]
        if guarded:  # only where a key of several statements needs it
            guarded = any(batch.keys[key].clear or batch.keys[key].journal for key in keys)
        if guarded:
            cursor.execute("SAVEPOINT key_rows")
        index = 0
        while index < len(keys):
            key = keys[index]
            state = batch.keys[key]
            try:
                self._write_key(cursor, key, state, now)
                index += 1
            except sqlite3.Error as exc:
                if not cursor.connection.in_transaction:
                    raise
                if not guarded and (state.clear or state.journal):
                    return False
                batch.fail_key(key, jobs, self._database_error(exc, f"write the key {key!r}"))
                del keys[index]
                if guarded:  # undo every key written so far, and write the others again
                    cursor.execute("ROLLBACK TO key_rows")
                    index = 0
        if self.origin is not None and self._watched_until > now:
            self._announce(cursor, keys, batch.keys)
        if guarded:
            cursor.execute("RELEASE key_rows")
        return True

    def _announce(
        self, cursor: sqlite3.Cursor, written: Sequence[str], keys: dict[str, KeyState]
    ) -> None:
        """Record the writes of the keys ``written`` for other processes (see
        :mod:`.changes`), in this transaction: one row per journal row written, with the
        write's source and call id, and one for the key's row when its revision has none.
        (A delete is recorded by the trigger on the table.)"""
        sql, origin = self._sql, self.origin
        rows: list[tuple[str, int, str | None, str | None, str | None]] = []
        unread: list[tuple[str | None, str]] = []
        for key in written:
            state = keys[key]
            if state.text is None:
                continue
            floor = state.floor
            for revision, _, source, call_id, _ in state.journal:
                if revision > floor:  # (the journal rows written)
                    rows.append((key, revision, origin, source, call_id))
            if state.revision is None:  # sets on a row never read: SQL knows its revision
                unread.append((origin, key))
            elif not state.journal or state.journal[-1][0] != state.revision:
                rows.append((key, state.revision, origin, None, None))
        if len(rows) == 1:  # one write: execute, a third of executemany's cost
            newest = cursor.execute(sql.announce, rows[0]).lastrowid
        elif rows:
            cursor.executemany(sql.announce, rows)  # (which leaves lastrowid as it was)
            newest = cursor.execute("SELECT last_insert_rowid()").fetchone()[0]
        else:
            newest = None
        for params in unread:
            newest = cursor.execute(sql.announce_row, params).lastrowid
        # Trimmed only when the newest id passes a multiple of TRIM_EVERY: deleting the
        # oldest row on every commit changes one more page, written to the WAL each time.
        added = len(rows) + len(unread)
        if newest is not None and newest % changes.TRIM_EVERY < added:
            cursor.execute(sql.announce_trim, (newest - changes.KEEP,))

    def _write_key(self, cursor: sqlite3.Cursor, key: str, state: KeyState, now: float) -> None:
        sql = self._sql
        if state.clear:
            cursor.execute(sql.clear_journal, (key,))
        if state.text is None:
            cursor.execute(sql.retire, (key, state.revision or 0, state.bumps))
            cursor.execute(sql.delete, (key,))
        elif state.revision is None:
            cursor.execute(sql.set_row, (key, state.text, now, state.bumps))
        else:
            cursor.execute(sql.upsert, (key, state.text, now, state.revision))
        journal = state.journal
        if not journal:
            return
        floor = state.floor  # rows at or below it never land
        last_keep = journal[-1][4]  # the ring of the rows the usual writes leave
        if not state.clear:
            # The usual writes, a statement a row: over a full ring's oldest row, in place
            # (one page, see TableSql.journal_recycle), or added to a ring not yet full
            # (its slot is free: no row of its keep can sit at revision - keep <= 0).
            for index, (revision, entry, _, _, keep) in enumerate(journal):
                if revision <= floor:
                    continue
                write = sql.journal_recycle if revision > keep else sql.journal_insert
                if not cursor.execute(write, (key, keep, revision, now, entry)).rowcount:
                    journal = journal[index:]  # this row and those after it are left
                    break
            else:
                return
            if floor > 0:
                cursor.execute(sql.journal_trim, (key, floor))
            # The rows stored move to the slots of the last write's keep, where the rest
            # go: they span at most that many revisions now, so no two share a slot.
            cursor.execute(sql.journal_reslot, (key, last_keep))
        for revision, entry, *_ in journal:
            if revision > floor:
                cursor.execute(sql.journal_insert, (key, last_keep, revision, now, entry))

    def _remember(self, keys: dict[str, KeyState]) -> None:
        """Keep the rows a committed batch wrote; forget deleted ones and those whose value
        or revision it does not know (sets)."""
        recent = self._recent
        for key, state in keys.items():
            if not state.changed:
                continue
            if state.text is None or state.revision is None or isinstance(state.value, Unparsed):
                recent.pop(key, None)
            else:
                current = state.current
                if current is None:  # a set whose row a failed commit parsed
                    current = Revision(state.value, state.revision)
                recent[key] = current
                recent.move_to_end(key)
        while len(recent) > _RECENT_ROWS:
            recent.popitem(last=False)

    def _failure(self, exc: sqlite3.Error | StorageError, action: str) -> StorageError:
        """What every job of a failed transaction gets: ``exc`` if it is ours already;
        for a database error, that the file was moved if it was (its likely cause)."""
        if isinstance(exc, StorageError):
            return exc
        try:
            self.file.check("written")
        except StorageError as moved:
            return moved
        return self._database_error(exc, action)

    def _database_error(self, exc: sqlite3.Error, action: str) -> StorageError:
        path, busy_timeout = self.options.path, self.options.busy_timeout
        if error_code(exc) == SQLITE_BUSY:
            attempts = self.options.busy_retries + 1
            return StorageBusyError(
                f"the SQLite database {path} stayed locked by another connection "
                f"(another process holds a write transaction) through {attempts} attempt(s) "
                f"of busy_timeout={busy_timeout} ms; nothing was written. Find "
                "the process that keeps a transaction open, or raise the wait, for example "
                "sqlite:///...?busy_timeout=30000"
            )
        error = StorageError(
            f"could not {action} in the SQLite database {path} ({exc}); nothing was "
            "written. Check free disk space, permissions and the file's integrity"
        )
        error.__cause__ = exc
        return error


class SqliteWrites:
    """The storage contract's writes of :class:`~.store.SqliteStorage`, each queued on its
    :class:`SqliteWriter`: defined here, beside the queue and the transaction that serve
    them, so that a write goes from the contract to its transaction within this module."""

    path: str
    _writer: SqliteWriter
    _closed: bool

    async def set(self, key: str, value: JsonValue) -> None:
        text = _json.dumps(value).decode()  # ValueError here: nothing is queued
        await self._submit(SetJob(key, text))

    async def delete(self, key: str) -> None:
        await self._submit(DeleteJob(key))

    async def purge_deleted(self, prefix: str) -> int:
        """Forget the retired revisions (and stray journal rows) of the deleted keys under
        ``prefix``; see :mod:`..purge`. The writer's thread runs it between batches."""
        if self._closed:
            raise self._closed_error()
        return await self._writer.purge_deleted(prefix)

    async def sweep_expired(self, prefix: str, written_by: float, *, limit: int) -> int:
        """Delete at most ``limit`` keys under ``prefix`` last written at or before
        ``written_by``; see :mod:`..sweep`. The writer's thread runs it between
        batches."""
        if self._closed:
            raise self._closed_error()
        return await self._writer.sweep_expired(prefix, written_by, journal_limit(limit))

    async def trim_journals(self, prefix: str, written_by: float, *, limit: int) -> int:
        """Delete at most ``limit`` journal rows under ``prefix`` written at or before
        ``written_by``; see :mod:`..sweep`."""
        if self._closed:
            raise self._closed_error()
        return await self._writer.trim_journals(prefix, written_by, journal_limit(limit))

    async def update(self, key: str, fn: UpdateFn) -> JsonValue:
        return await self._submit(CommitJob(key, fn))

    async def commit(self, key: str, fn: CommitFn, *, keep: int) -> Revision:
        if self._closed:
            raise self._closed_error()
        revision: Revision = await self._writer.submit(CommitJob(key, fn, keep, False))
        return revision

    async def commit_with_journal(
        self, key: str, fn: JournalCommitFn, *, keep: int, after: int
    ) -> Revision:
        if self._closed:
            raise self._closed_error()
        revision: Revision = await self._writer.submit(CommitJob(key, fn, keep, False, after))
        return revision

    async def _submit(self, job: Job) -> Any:
        if self._closed:
            raise self._closed_error()
        return await self._writer.submit(job)

    def _closed_error(self) -> StorageError:
        return StorageError(
            f"the SQLite storage {self.path} is closed; open it again with open_storage()"
        )


def _is_stored(value: Any, data: bytes) -> bool:
    """Whether ``data``, a row's text, is ``value``'s JSON: an encode and a byte compare,
    a fraction of a parse."""
    try:
        return _json.dumps(value) == data
    except ValueError:  # not JSON at all: not what is stored
        return False


def _about(entry: Any) -> tuple[str | None, str | None]:
    """The source and call id announced with a journaled write whose commit names none:
    its entry's, when the entry names them (as the triggers' ``json_extract`` read them)."""
    if not isinstance(entry, dict):
        return None, None
    source, call_id = entry.get("source"), entry.get("call_id")
    return (
        source if isinstance(source, str) else None,
        call_id if isinstance(call_id, str) else None,
    )


def _nothing() -> None:
    """A job for the connection's thread that only marks the end of those before it."""
