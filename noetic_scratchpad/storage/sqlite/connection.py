"""The two aiosqlite connections of a storage: opened, configured, and run in their thread.

aiosqlite's public API costs one thread hop per statement, which makes a read-modify-write
four hops (BEGIN, SELECT, UPSERT, COMMIT) and about three times slower than one hop.
``Connection._execute`` is the only way to run a function of ours in the thread that owns
the sqlite3 connection, and ``Connection._conn`` the only way to reach that connection;
:func:`run_in_connection_thread`, :func:`executor` and :func:`raw_connection` are the only
places that touch aiosqlite's private API, and :func:`check_aiosqlite` verifies both exist
when a storage is opened. (:func:`daemonize` also reaches ``Connection._thread``, and
does nothing where it is missing.)

The writer connection puts the file in WAL mode, so the second, read-only connection reads
without ever waiting for a write transaction.
"""

from __future__ import annotations

import random
import sqlite3
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import aiosqlite
import anyio

from ...errors import StorageBusyError, StorageConfigError, StorageError
from .file import OpenedFile
from .options import SqliteOptions
from .table import create_table

__all__ = (
    "SQLITE_BUSY",
    "check_aiosqlite",
    "daemonize",
    "error_code",
    "executor",
    "fetch_all",
    "open_connections",
    "raw_connection",
    "run_in_connection_thread",
)

_T = TypeVar("_T")

#: SQLite's primary result code for "another connection holds the lock".
SQLITE_BUSY = 5


# -- the one private aiosqlite entry point ----------------------------------------------


async def run_in_connection_thread(
    connection: aiosqlite.Connection, fn: Callable[..., _T], *args: Any
) -> _T:
    """Run ``fn(*args)`` in the connection's worker thread and await its result."""
    # aiosqlite's private API, untyped: see the module's docstring.
    result: _T = await connection._execute(fn, *args)  # type: ignore[no-untyped-call]  # noqa: SLF001
    return result


def executor(connection: aiosqlite.Connection) -> Callable[..., Awaitable[Any]]:
    """:func:`run_in_connection_thread` bound to ``connection`` once: ``await
    executor(connection)(fn, *args)`` runs ``fn(*args)`` in its thread (a writer's every
    transaction goes this way)."""
    execute: Callable[..., Awaitable[Any]] = connection._execute  # noqa: SLF001  # see the module's docstring
    return execute


def raw_connection(connection: aiosqlite.Connection) -> sqlite3.Connection:
    """The sqlite3 connection that ``connection``'s worker thread owns."""
    raw: sqlite3.Connection = connection._conn  # noqa: SLF001  # see the module's docstring
    return raw


def daemonize(connection: aiosqlite.Connection) -> None:
    """Make the (not yet started) worker thread a daemon.

    aiosqlite's thread is not a daemon, so a storage that is never closed and still
    referenced at exit (a module global, say) makes the interpreter wait for it forever.
    Stopping the thread abruptly at exit is as safe as a crash of the process: every
    acknowledged write has committed, and WAL keeps the file consistent.
    """
    thread = getattr(connection, "_thread", None)
    if isinstance(thread, threading.Thread) and not thread.is_alive():
        thread.daemon = True


def check_aiosqlite() -> None:
    """Refuse, at open, an aiosqlite without the private API this backend runs on."""
    if not callable(getattr(aiosqlite.Connection, "_execute", None)) or not isinstance(
        getattr(aiosqlite.Connection, "_conn", None), property
    ):
        raise StorageConfigError(
            f"aiosqlite {getattr(aiosqlite, '__version__', '?')} lacks Connection._execute "
            "or Connection._conn, which the SQLite backend needs to run a whole transaction "
            "in one thread hop; "
            "install a version that has it: pip install 'aiosqlite>=0.20,<1'"
        )


# -- opening ------------------------------------------------------------------------------


async def open_connections(
    options: SqliteOptions,
) -> tuple[aiosqlite.Connection, aiosqlite.Connection, OpenedFile]:
    """The writer and the reader connection of ``options.path``, ready for use, and the
    file they opened (see :mod:`.file`).

    The writer creates the table when it is missing; a failure closes what was opened.
    Processes opening a new file together race to switch it to WAL and create its tables,
    and SQLite answers some of those lock upgrades with SQLITE_BUSY at once, without
    calling the busy handler (it would deadlock): the preparation is tried again, with a
    short random pause, until ``busy_timeout`` has passed.
    """
    deadline = time.monotonic() + options.busy_timeout / 1000
    while True:
        try:
            return await _open_connections(options)
        except StorageBusyError:
            if time.monotonic() >= deadline:
                raise
            await anyio.sleep(random.uniform(0.005, 0.05))


async def _open_connections(
    options: SqliteOptions,
) -> tuple[aiosqlite.Connection, aiosqlite.Connection, OpenedFile]:
    opened: list[aiosqlite.Connection] = []
    try:
        writer = await _connect(options)
        opened.append(writer)
        file = await run_in_connection_thread(
            writer, _prepare_writer, raw_connection(writer), options
        )
        reader = await _connect(options)
        opened.append(reader)
        await run_in_connection_thread(reader, _prepare_reader, raw_connection(reader), options)
    except BaseException as exc:
        for connection in opened:
            await connection.close()
        if isinstance(exc, sqlite3.Error):
            raise _open_error(options.path, exc) from exc
        raise
    return writer, reader, file


async def _connect(options: SqliteOptions) -> aiosqlite.Connection:
    # isolation_level=None: sqlite3 issues no implicit BEGIN; transactions are ours.
    connection = aiosqlite.connect(
        options.path, isolation_level=None, timeout=options.busy_timeout / 1000
    )
    daemonize(connection)
    return await connection


def _prepare_writer(conn: sqlite3.Connection, options: SqliteOptions) -> OpenedFile:
    """Configure the writer and create the tables; the file it opened (it exists now)."""
    conn.execute(f"PRAGMA busy_timeout = {options.busy_timeout}")
    mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
    if str(mode).lower() != "wal":
        raise sqlite3.OperationalError(
            f"the database stays in journal_mode={mode}, not WAL (is it on a network or "
            "read-only file system?)"
        )
    conn.execute(f"PRAGMA synchronous = {options.synchronous.upper()}")
    create_table(conn, options.path, options.table)
    try:
        return OpenedFile.at(options.path)
    except OSError as exc:  # moved away the instant it was opened
        raise sqlite3.OperationalError(f"the file it opened is not at its path ({exc})") from exc


def _prepare_reader(conn: sqlite3.Connection, options: SqliteOptions) -> None:
    conn.execute(f"PRAGMA busy_timeout = {options.busy_timeout}")
    conn.execute("PRAGMA query_only = ON")


def _open_error(path: str, exc: sqlite3.Error) -> StorageError:
    if error_code(exc) == SQLITE_BUSY:
        return StorageBusyError(
            f"the SQLite database {path} is locked by another connection and could not be "
            f"prepared ({exc}); retry when the other process has finished its transaction, "
            "or raise busy_timeout"
        )
    return StorageConfigError(
        f"cannot open the SQLite database {path} ({exc}); check that the path names a SQLite "
        "database file (or a new file) that this process can read and write"
    )


# -- running statements -------------------------------------------------------------------


def fetch_all(conn: sqlite3.Connection, sql: str, params: Sequence[Any]) -> list[Any]:
    """Run a query in the connection's thread and always close its cursor.

    A cursor left open by a failed fetch keeps its read transaction, and with it an old
    snapshot: every later read would return stale rows, and the WAL could never be
    checkpointed past it.
    """
    cursor = conn.execute(sql, params)
    try:
        return cursor.fetchall()
    finally:
        cursor.close()


def error_code(exc: sqlite3.Error) -> int:
    """SQLite's primary result code of ``exc`` (``SQLITE_BUSY`` for a held lock)."""
    code: int | None = getattr(exc, "sqlite_errorcode", None)
    if code is None:  # interpreters whose sqlite3 does not expose the code
        return SQLITE_BUSY if "locked" in str(exc) or "busy" in str(exc) else -1
    return code & 0xFF
