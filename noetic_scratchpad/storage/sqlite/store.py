""":class:`SqliteStorage`: the storage contract on one SQLite file.

Reads run on a read-only connection, one thread hop each, and never wait for a write
transaction (WAL). Writes (:class:`~.writer.SqliteWrites`) are queued on the
:class:`~.writer.SqliteWriter`: the writes that arrive while a transaction runs make up
the next one (group commit), which it runs in one thread hop.
"""

from __future__ import annotations

import builtins
import contextlib
import dataclasses
import sqlite3
from collections.abc import AsyncGenerator, Callable, Iterable, Sequence
from typing import Any, TypeVar

import aiosqlite
import anyio

from ...errors import StorageError
from ..base import (
    JournalRow,
    JournalView,
    JsonValue,
    KeyInfo,
    Revision,
    StorageBackend,
    journal_limit,
)
from ..notices import ChangeNotice, process_origin
from . import changes
from .connection import (
    check_aiosqlite,
    fetch_all,
    open_connections,
    raw_connection,
    run_in_connection_thread,
)
from .file import OpenedFile
from .options import SqliteOptions, check_path, parse_sqlite_url
from .table import TableSql, decode_journal, decode_row
from .writer import SqliteWriter, SqliteWrites

__all__ = ("SqliteStorage",)

_T = TypeVar("_T")

#: Keys per ``IN (...)`` query: under SQLite's smallest host-parameter limit (999).
_GET_MANY_CHUNK = 500


class SqliteStorage(SqliteWrites, StorageBackend):
    """A :class:`StorageBackend` on one SQLite file in WAL mode.

    Open it with ``await SqliteStorage.open("sqlite:///scratchpad.db")`` (or
    ``open_storage``). Values are stored as JSON text in one table,
    ``(key TEXT PRIMARY KEY, value TEXT, updated_at REAL, revision INTEGER)``, and journal
    entries in ``{table}_journal``; both are created on first open. Its writes are
    :class:`~.writer.SqliteWrites`'s methods.
    """

    url = "sqlite://"

    def __init__(
        self,
        options: SqliteOptions,
        writer: aiosqlite.Connection,
        reader: aiosqlite.Connection,
        file: OpenedFile,
    ) -> None:
        self.options = options
        self.path = options.path
        self._sql = TableSql(options.table)
        self._writer = SqliteWriter(writer, options, self._sql, file)
        self._reader = reader
        self._file = file
        self.tasks = self._writer.tasks
        """Where the writes run: an object owning this backend may lend them its task
        group (``with backend.tasks.hosted_by(group):``)."""
        self._closed = False
        self.origin = process_origin()
        """The process name this backend's changes carry (see :mod:`..notices`)."""
        self._announces = True
        self._installed = False  # the table of changes and the trigger: from open on
        self.watch_interval = changes.DEFAULT_INTERVAL
        """Seconds between two looks of :meth:`watch_changes` at the file."""

    @property
    def announces(self) -> bool:
        """Whether other processes' changes can be watched (:meth:`watch_changes`), and
        this process's own are recorded for theirs while they watch (from :meth:`open`
        on); false: neither."""
        return self._announces

    @announces.setter
    def announces(self, announces: bool) -> None:
        self._announces = announces
        if self._installed:
            self._writer.announce_as(self.origin if announces else None)

    def __repr__(self) -> str:
        return f"SqliteStorage({self.path!r}, synchronous={self.options.synchronous!r})"

    @classmethod
    async def open(cls, url: str, **options: Any) -> SqliteStorage:
        """Open (and create when missing) the database file of ``url``.

        Options, in the URL's query or as keyword arguments: ``synchronous`` (``normal``,
        the default, or ``full``/``extra``), ``busy_timeout`` (ms, default 5000),
        ``busy_retries`` (default 2), ``max_batch`` (default 256), ``table``.
        """
        check_aiosqlite()
        parsed = parse_sqlite_url(url, **options)
        parsed = dataclasses.replace(parsed, path=check_path(parsed.path))
        storage = cls(parsed, *await open_connections(parsed))
        try:
            await storage._writer.call(
                changes.install, storage._writer.conn, parsed.table, storage.origin
            )
            storage._installed = True
            if storage.announces:  # the writes are announced from now on, when watched
                storage._writer.announce_as(storage.origin)
        except BaseException:
            await storage.aclose()
            raise
        return storage

    def watch_changes(self) -> AsyncGenerator[ChangeNotice, None]:
        """The writes and deletes other processes commit to this file, polled every
        :attr:`watch_interval` seconds on a connection of its own; see :mod:`.changes`."""
        if self._closed:
            raise self._closed_error()
        return changes.watch(
            self.path,
            self.options.table,
            self.origin,
            interval=self.watch_interval,
            busy_ms=self.options.busy_timeout,
        )

    # -- reads: one hop each, on the read-only connection ----------------------------------

    async def get(self, key: str) -> JsonValue | None:
        for (data,) in await self._read(self._sql.get, (key,)):
            return decode_row(self.path, key, data)
        return None

    async def list(self, prefix: str = "") -> builtins.list[str]:
        return [key for (key,) in await self._read(*self._sql.keys(prefix))]

    async def get_many(self, keys: Iterable[str]) -> dict[str, JsonValue]:
        wanted = builtins.list(dict.fromkeys(keys))
        found: dict[str, JsonValue] = {}
        for start in range(0, len(wanted), _GET_MANY_CHUNK):
            chunk = wanted[start : start + _GET_MANY_CHUNK]
            for key, data in await self._read(self._sql.get_many(len(chunk)), chunk):
                found[key] = decode_row(self.path, key, data)
        return {key: found[key] for key in wanted if key in found}

    async def get_revision(self, key: str) -> Revision | None:
        for data, revision in await self._read(self._sql.get_revision, (key,)):
            return Revision(decode_row(self.path, key, data), revision)
        return None

    async def journal(self, key: str, *, limit: int) -> builtins.list[JournalRow]:
        limit = journal_limit(limit)
        if limit == 0:  # (SQLite reads a negative LIMIT as none)
            return []
        rows = await self._read(self._sql.journal_rows, (key, limit))
        return decode_journal(self.path, key, rows)

    async def journal_view(self, key: str, *, limit: int) -> JournalView:
        found, rows = await self._reading(_read_view, self._sql, key, journal_limit(limit))
        current = None
        for data, revision in found:
            current = Revision(decode_row(self.path, key, data), revision)
        return JournalView(current, decode_journal(self.path, key, rows))

    async def describe(self, prefix: str = "") -> builtins.list[KeyInfo]:
        rows = await self._read(*self._sql.describe(prefix))
        return [KeyInfo(*row) for row in rows]

    async def _read(self, sql: str, params: Sequence[Any]) -> builtins.list[Any]:
        return await self._reading(fetch_all, sql, params)

    async def _reading(self, fn: Callable[..., _T], *args: Any) -> _T:
        """``fn(conn, *args)`` in the read-only connection's thread, answered only while
        the file at the path is the one open (see :mod:`.file`)."""
        if self._closed:
            raise self._closed_error()
        try:
            return await run_in_connection_thread(
                self._reader, self._file.read, fn, raw_connection(self._reader), *args
            )
        except sqlite3.Error as exc:
            raise StorageError(
                f"reading the SQLite database {self.path} failed ({exc}); check that the file "
                "is intact and readable"
            ) from exc

    # -- closing ----------------------------------------------------------------------------

    async def aclose(self) -> None:
        """Wait for queued writes to commit, then close both connections. Idempotent."""
        if self._closed:
            return
        self._closed = True
        with anyio.CancelScope(shield=True):
            await self._writer.wait_idle()
            await self._writer.close()
            await self._reader.close()


def _read_view(
    conn: sqlite3.Connection, sql: TableSql, key: str, limit: int
) -> tuple[builtins.list[Any], builtins.list[Any]]:
    """A key's row and its newest journal rows, in one read transaction: one snapshot
    of the file (WAL), whatever commits meanwhile."""
    conn.execute("BEGIN")
    try:
        found = fetch_all(conn, sql.get_revision, (key,))
        rows = fetch_all(conn, sql.journal_rows, (key, limit)) if limit > 0 else []
    except BaseException:
        with contextlib.suppress(sqlite3.Error):  # SQLite may have ended it already
            conn.execute("ROLLBACK")
        raise
    conn.execute("ROLLBACK")  # a read: nothing to keep; releases the snapshot
    return found, rows
