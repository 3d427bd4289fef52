"""The write transaction: a batch of writes applied in one thread hop, one commit.

Every write of a process arrives here as a job, and the jobs queued while a transaction
runs become the next transaction (group commit; the queue is the store's
:class:`~noetic_scratchpad.locks.KeyedBatcher`). A transaction is one function run in the
writer connection's thread, so it costs one thread hop however many statements it needs.

- ``BEGIN IMMEDIATE`` takes SQLite's write lock before the transaction reads anything, so
  writers in other processes sharing the file are serialized by SQLite itself, and no
  read-modify-write can be interleaved with another's.
- The writer keeps the values of the rows it committed lately, and hands an update the
  very object it last stored. That cache is only true while no other connection
  has written: each transaction reads ``PRAGMA data_version``, which changes only when
  another connection has committed since our last transaction, and then drops it all
  before reading anything.
- Writes are isolated per key: an update function that raises fails only its own job, and
  a row that SQLite refuses (a trigger, a constraint) fails only the jobs of that key;
  their neighbours in the batch still commit. Only a failure of the transaction itself
  (BEGIN, COMMIT, a lost connection) fails the whole batch, after a rollback.
"""

from __future__ import annotations

import contextlib
import sqlite3
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import aiosqlite

from ... import _json
from ...errors import StorageBusyError, StorageError
from ..base import UpdateFn
from .connection import SQLITE_BUSY, error_code, raw_connection, run_in_connection_thread
from .options import SqliteOptions
from .table import TableSql, decode_row

__all__ = ("DeleteJob", "Job", "SetJob", "SqliteWriter", "UpdateJob")

_T = TypeVar("_T")

#: Rows whose last committed value the writer keeps (see ``_recent``).
_RECENT_ROWS = 256
_MISSING = object()


@dataclass(slots=True)
class _Unparsed:
    """A row written in this batch by a ``set``: its text, parsed only if an update of the
    same key follows in the batch."""

    text: str


# Plain slotted classes: a frozen dataclass's __init__ costs twice as much, on every write.
@dataclass(slots=True)
class UpdateJob:
    key: str
    fn: UpdateFn


@dataclass(slots=True)
class SetJob:
    key: str
    text: str


@dataclass(slots=True)
class DeleteJob:
    key: str


Job = UpdateJob | SetJob | DeleteJob


class _Batch:
    """What one transaction has done so far: rows by key, and one outcome per job."""

    __slots__ = ("latest", "outcomes", "written")

    def __init__(self) -> None:
        # The value of each row read or written in this batch (None: missing, _Unparsed
        # after a set), so jobs on one key chain without re-reading.
        self.latest: dict[str, Any] = {}
        # The final row of each key written, as (text, value), the value _MISSING for a
        # set; None deletes the row.
        self.written: dict[str, tuple[str, Any] | None] = {}
        # Per job: its result, or the exception that fails it alone.
        self.outcomes: list[Any] = []

    def set(self, key: str, text: str) -> None:
        self.latest[key] = _Unparsed(text)
        self.written[key] = (text, _MISSING)
        self.outcomes.append(None)

    def delete(self, key: str) -> None:
        self.latest[key] = None
        self.written[key] = None
        self.outcomes.append(None)

    def fail_key(self, key: str, jobs: Sequence[Job], error: StorageError) -> None:
        """Fail every job of ``key`` that has not failed already, and write nothing for it."""
        for index, job in enumerate(jobs):
            if job.key == key and not isinstance(self.outcomes[index], Exception):
                self.outcomes[index] = error
        del self.written[key]


class SqliteWriter:
    """The write side of a :class:`SqliteStorage`: its connection, and the state that
    connection's thread keeps between transactions (the row cache).

    :meth:`transaction` and what it calls run in the connection's thread only; the
    coroutines hop there.
    """

    def __init__(
        self, connection: aiosqlite.Connection, options: SqliteOptions, sql: TableSql
    ) -> None:
        self.connection = connection
        #: The sqlite3 connection; touch it only in the connection's thread (see :meth:`call`).
        self.conn = raw_connection(connection)
        self.options = options
        self._sql = sql
        # key -> value of rows this writer committed lately. Each entry was the stored
        # row when this writer's last transaction committed; see _forget_if_stale.
        self._recent: OrderedDict[str, Any] = OrderedDict()
        self._data_version: int | None = None

    async def call(self, fn: Callable[..., _T], *args: Any) -> _T:
        """``fn(*args)`` in the writer connection's thread, where :attr:`conn` may be used."""
        return await run_in_connection_thread(self.connection, fn, *args)

    async def run(self, jobs: Sequence[Job]) -> list[Any]:
        """Run ``jobs`` as one transaction: one thread hop, one outcome per job."""
        return await run_in_connection_thread(self.connection, self.transaction, jobs)

    async def close(self) -> None:
        await self.connection.close()

    # -- in the connection's thread ----------------------------------------------------------

    def transaction(self, jobs: Sequence[Job]) -> list[Any]:
        """Run ``jobs`` as one transaction in the writer's thread; one outcome per job.

        A job whose ``fn`` raises (or returns what JSON cannot hold) gets that exception and
        writes nothing; its neighbours still commit. A database error fails the whole
        batch with a StorageError, after a rollback, so no job is half-applied.
        """
        conn = self.conn
        try:
            self._begin(conn)
        except sqlite3.Error as exc:
            return [self._database_error(exc, "start a write transaction")] * len(jobs)
        try:
            self._forget_if_stale(conn)
            batch = self._apply(conn, jobs)
            conn.execute("COMMIT")
        except BaseException as exc:
            # SQLite may have rolled back already, or the connection is gone: nothing to undo.
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            if not isinstance(exc, sqlite3.Error):
                raise
            return [self._database_error(exc, "write")] * len(jobs)
        self._remember(batch.written)
        return batch.outcomes

    def _begin(self, conn: sqlite3.Connection) -> None:
        """``BEGIN IMMEDIATE`` with bounded retry; SQLite waits ``busy_timeout`` each time."""
        attempts = self.options.busy_retries + 1
        for attempt in range(attempts):
            try:
                conn.execute("BEGIN IMMEDIATE")
                return
            except sqlite3.OperationalError as exc:
                if error_code(exc) != SQLITE_BUSY or attempt + 1 == attempts:
                    raise
                time.sleep(0.01 * (attempt + 1))  # this thread is the writer's; nobody waits on it

    def _forget_if_stale(self, conn: sqlite3.Connection) -> None:
        """Drop every cached row if another connection has committed since our last
        transaction. Inside BEGIN IMMEDIATE no one else can commit; the version changes
        only on another connection's commit (our own commits leave it as it is)."""
        version = conn.execute("PRAGMA data_version").fetchone()[0]
        if version != self._data_version:
            self._recent.clear()
            self._data_version = version

    def _apply(self, conn: sqlite3.Connection, jobs: Sequence[Job]) -> _Batch:
        """Apply ``jobs`` in order inside the open transaction, then write each key's row."""
        batch = _Batch()
        for job in jobs:
            if isinstance(job, SetJob):
                batch.set(job.key, job.text)
            elif isinstance(job, DeleteJob):
                batch.delete(job.key)
            else:
                batch.outcomes.append(self._apply_update(conn, job, batch))
        self._write_rows(conn, jobs, batch)
        return batch

    def _apply_update(self, conn: sqlite3.Connection, job: UpdateJob, batch: _Batch) -> Any:
        """Run one update on the key's current row: its new value, or the exception that
        fails it alone. A database error is not the job's: it propagates, failing the batch."""
        key = job.key
        try:
            current = batch.latest[key] = self._current_value(conn, key, batch)
            value = job.fn(current)
            text = _json.dumps(value).decode()  # ValueError for what JSON cannot hold
        except sqlite3.Error:
            raise
        except Exception as exc:
            return exc
        batch.latest[key] = value
        batch.written[key] = (text, value)
        return value

    def _current_value(self, conn: sqlite3.Connection, key: str, batch: _Batch) -> Any:
        """The value of ``key`` as this transaction sees it; ``None`` when missing. Rows
        in ``_recent`` are what is stored (see ``_forget_if_stale``)."""
        if key in batch.latest:
            value = batch.latest[key]
            return _json.loads(value.text) if isinstance(value, _Unparsed) else value
        if key in self._recent:
            return self._recent[key]
        found = conn.execute(self._sql.get, (key,)).fetchone()
        return None if found is None else decode_row(self.options.path, key, found[0])

    def _write_rows(self, conn: sqlite3.Connection, jobs: Sequence[Job], batch: _Batch) -> None:
        """Write each key's final row. A statement SQLite refuses for that row alone (a
        trigger, a constraint) leaves the transaction open: then only the jobs of that key
        fail, and the row is dropped from ``written``. Anything else fails the batch."""
        now = time.time()
        for key, final in list(batch.written.items()):
            try:
                if final is None:
                    conn.execute(self._sql.delete, (key,))
                else:
                    conn.execute(self._sql.upsert, (key, final[0], now))
            except sqlite3.Error as exc:
                if not conn.in_transaction:
                    raise
                batch.fail_key(key, jobs, self._database_error(exc, f"write the key {key!r}"))

    def _remember(self, written: dict[str, tuple[str, Any] | None]) -> None:
        """Keep the rows a committed batch wrote, forgetting deleted and undecoded ones."""
        recent = self._recent
        for key, row in written.items():
            if row is None or row[1] is _MISSING:
                recent.pop(key, None)
            else:
                recent[key] = row[1]
                recent.move_to_end(key)
        while len(recent) > _RECENT_ROWS:
            recent.popitem(last=False)

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
