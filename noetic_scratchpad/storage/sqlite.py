"""``sqlite:///path.db``: an embedded store on aiosqlite, safe for several processes per file.

Writes go through one writer per process: a :class:`~noetic_scratchpad.locks.KeyedBatcher`
with a single key turns every write that arrives while a transaction runs into the next
transaction (group commit), and each transaction is one function run in the connection's
thread, so an update costs one thread hop however many statements it needs. Each
transaction starts with ``BEGIN IMMEDIATE``, which takes SQLite's write lock before it
reads, so writers in other processes sharing the file are serialized by SQLite itself.
Reads run on a second, read-only connection and never wait for a write transaction (WAL).
"""

from __future__ import annotations

import builtins
import contextlib
import dataclasses
import os
import re
import sqlite3
import stat
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar
from urllib.parse import parse_qsl, unquote, urlsplit

import aiosqlite
import anyio

from .. import _json
from ..errors import StorageBusyError, StorageConfigError, StorageError
from ..locks import KeyedBatcher
from .base import EncodedUpdateFn, JsonValue, KeyInfo, StorageBackend, UpdateFn, with_json

__all__ = ("SqliteOptions", "SqliteStorage", "parse_sqlite_url")

Synchronous = Literal["normal", "full", "extra"]
_SYNCHRONOUS: tuple[Synchronous, ...] = ("normal", "full", "extra")
_TABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")
_T = TypeVar("_T")

#: SQLite's primary result code for "another connection holds the lock".
_SQLITE_BUSY = 5
#: Keys per ``IN (...)`` query: under SQLite's smallest host-parameter limit (999).
_GET_MANY_CHUNK = 500
#: Rows whose last committed text and decoded value the writer keeps (see ``_recent``).
_RECENT_ROWS = 256


@dataclass(frozen=True, slots=True)
class SqliteOptions:
    """What a ``sqlite://`` URL (or keyword arguments to ``open``) can set."""

    path: str
    synchronous: Synchronous = "normal"
    """``normal``: a commit survives a crash of the process (WAL); ``full``/``extra``: it
    also survives a power loss or an OS crash, at one fsync per transaction."""
    busy_timeout: int = 5000
    """Milliseconds SQLite waits for another connection's write lock, per attempt."""
    busy_retries: int = 2
    """Further attempts after a busy timeout before the write fails with StorageBusyError."""
    max_batch: int = 256
    """Most writes committed in one transaction."""
    table: str = "scratchpad_kv"


def parse_sqlite_url(url: str, **options: Any) -> SqliteOptions:
    """Read ``sqlite:///relative.db`` or ``sqlite:////absolute.db`` and its options.

    Options come from the query string (``?synchronous=full&busy_timeout=10000``) and from
    keyword arguments, which win. Raises :class:`StorageConfigError` for anything unusable.
    """
    parts = urlsplit(url)
    if parts.scheme.lower() != "sqlite":
        raise StorageConfigError(f"{url!r} is not a sqlite:// URL")
    if parts.netloc:
        raise StorageConfigError(
            f"sqlite URL {url!r} names a host ({parts.netloc!r}); SQLite is a local file: "
            "use sqlite:///relative/path.db or sqlite:////absolute/path.db"
        )
    path = unquote(parts.path[1:]) if parts.path.startswith("/") else unquote(parts.path)
    if not path:
        raise StorageConfigError(
            f"sqlite URL {url!r} has no file path; use sqlite:///relative/path.db or "
            "sqlite:////absolute/path.db"
        )
    if path == ":memory:" or path.startswith("file:"):
        raise StorageConfigError(
            f"sqlite URL {url!r}: an in-memory SQLite database is private to one connection, "
            "and this backend uses two; use memory:// for a process-local store, or a file path"
        )
    raw: dict[str, Any] = dict(parse_qsl(parts.query, keep_blank_values=True))
    raw.update(options)
    known = {"synchronous", "busy_timeout", "busy_retries", "max_batch", "table"}
    unknown = sorted(set(raw) - known)
    if unknown:
        raise StorageConfigError(
            f"unknown SQLite option(s) {', '.join(unknown)} in {url!r}; "
            f"known options: {', '.join(sorted(known))}"
        )
    values: dict[str, Any] = {"path": path}
    if "synchronous" in raw:
        synchronous = str(raw["synchronous"]).lower()
        if synchronous not in _SYNCHRONOUS:
            raise StorageConfigError(
                f"synchronous={raw['synchronous']!r} is not a durability level; use "
                "synchronous=normal (the default: survives a process crash) or synchronous=full "
                "(also survives a power loss)"
            )
        values["synchronous"] = synchronous
    for name, least in (("busy_timeout", 0), ("busy_retries", 0), ("max_batch", 1)):
        if name in raw:
            values[name] = _int_option(name, raw[name], least)
    if "table" in raw:
        table = str(raw["table"])
        if not _TABLE_NAME.fullmatch(table):
            raise StorageConfigError(
                f"table={table!r} is not a plain SQL identifier; use letters, digits and _"
            )
        values["table"] = table
    return SqliteOptions(**values)


def _int_option(name: str, value: Any, least: int) -> int:
    try:
        number = int(value)
    except (TypeError, ValueError):
        number = least - 1
    if isinstance(value, bool) or number < least:
        raise StorageConfigError(f"{name}={value!r} must be an integer of at least {least}")
    return number


# -- the one private aiosqlite entry point ----------------------------------------------


# aiosqlite's public API costs one thread hop per statement, which makes a read-modify-write
# four hops (BEGIN, SELECT, UPSERT, COMMIT) and about three times slower than one hop.
# ``Connection._execute`` is the only way to run a function of ours in the thread that owns
# the sqlite3 connection, and ``Connection._conn`` the only way to reach that connection;
# these functions are the only places that touch aiosqlite's private API, and
# :func:`_check_aiosqlite` verifies both exist when a storage is opened. (:func:`_daemonize`
# also reaches ``Connection._thread``, and does nothing where it is missing.)


async def _run_in_connection_thread(
    connection: aiosqlite.Connection, fn: Callable[..., _T], *args: Any
) -> _T:
    """Run ``fn(*args)`` in the connection's worker thread and await its result."""
    result: _T = await connection._execute(fn, *args)  # type: ignore[no-untyped-call]  # private, untyped
    return result


def _raw_connection(connection: aiosqlite.Connection) -> sqlite3.Connection:
    """The sqlite3 connection that ``connection``'s worker thread owns."""
    raw: sqlite3.Connection = connection._conn
    return raw


def _daemonize(connection: aiosqlite.Connection) -> None:
    """Make the (not yet started) worker thread a daemon.

    aiosqlite's thread is not a daemon, so a storage that is never closed and still
    referenced at exit (a module global, say) makes the interpreter wait for it forever.
    Stopping the thread abruptly at exit is as safe as a crash of the process: every
    acknowledged write has committed, and WAL keeps the file consistent.
    """
    thread = getattr(connection, "_thread", None)
    if isinstance(thread, threading.Thread) and not thread.is_alive():
        thread.daemon = True


def _check_aiosqlite() -> None:
    if not callable(getattr(aiosqlite.Connection, "_execute", None)) or not isinstance(
        getattr(aiosqlite.Connection, "_conn", None), property
    ):
        raise StorageConfigError(
            f"aiosqlite {getattr(aiosqlite, '__version__', '?')} lacks Connection._execute "
            "or Connection._conn, which the SQLite backend needs to run a whole transaction "
            "in one thread hop; "
            "install a version that has it: pip install 'aiosqlite>=0.20,<1'"
        )


# -- write jobs ---------------------------------------------------------------------------


# Plain slotted classes: a frozen dataclass's __init__ costs twice as much, on every write.
@dataclass(slots=True)
class _Update:
    key: str
    fn: EncodedUpdateFn


@dataclass(slots=True)
class _Set:
    key: str
    text: str


@dataclass(slots=True)
class _Delete:
    key: str


_Job = _Update | _Set | _Delete
_MISSING = object()
#: The value of a row written in this batch as text (a ``set``), not parsed yet.
_UNPARSED = object()


class SqliteStorage(StorageBackend):
    """A :class:`StorageBackend` on one SQLite file in WAL mode.

    Open it with ``await SqliteStorage.open("sqlite:///scratchpad.db")`` (or
    ``open_storage``). Values are stored as JSON text in one table,
    ``(key TEXT PRIMARY KEY, value TEXT, updated_at REAL)``, created on first open.
    """

    url = "sqlite://"

    def __init__(
        self,
        options: SqliteOptions,
        writer: aiosqlite.Connection,
        reader: aiosqlite.Connection,
    ) -> None:
        self.options = options
        self.path = options.path
        self._writer = writer
        self._writer_conn = _raw_connection(writer)
        self._reader = reader
        table = options.table
        # Values are read as bytes and decoded here: a row that is not valid UTF-8 (written
        # by another program) is then an error of that key alone, not of the connection.
        self._sql_get = f"SELECT CAST(value AS BLOB) FROM {table} WHERE key = ?"
        self._sql_upsert = (
            f"INSERT INTO {table} (key, value, updated_at) VALUES (?, ?, ?) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value, "
            "updated_at = excluded.updated_at"
        )
        self._sql_delete = f"DELETE FROM {table} WHERE key = ?"
        self._table = table
        self._batcher: KeyedBatcher[None, _Job, Any] = KeyedBatcher(
            self._run_batch, max_batch=options.max_batch
        )
        self._closed = False
        # key -> (text, value) of rows this writer committed lately; touched only in the
        # writer's thread. Each entry was the stored row when this writer's last transaction
        # committed; a transaction that finds PRAGMA data_version changed (another
        # connection committed meanwhile) drops them all before it reads anything.
        self._recent: OrderedDict[str, tuple[str, Any]] = OrderedDict()
        self._data_version: int | None = None

    def __repr__(self) -> str:
        return f"SqliteStorage({self.path!r}, synchronous={self.options.synchronous!r})"

    # -- opening ---------------------------------------------------------------------------

    @classmethod
    async def open(cls, url: str, **options: Any) -> SqliteStorage:
        """Open (and create when missing) the database file of ``url``.

        Options, in the URL's query or as keyword arguments: ``synchronous`` (``normal``,
        the default, or ``full``/``extra``), ``busy_timeout`` (ms, default 5000),
        ``busy_retries`` (default 2), ``max_batch`` (default 256), ``table``.
        """
        _check_aiosqlite()
        parsed = parse_sqlite_url(url, **options)
        path = _check_path(parsed.path)
        parsed = dataclasses.replace(parsed, path=path)
        opened: list[aiosqlite.Connection] = []
        try:
            writer = await _connect(parsed)
            opened.append(writer)
            await _run_in_connection_thread(
                writer, _prepare_writer, _raw_connection(writer), parsed
            )
            reader = await _connect(parsed)
            opened.append(reader)
            await _run_in_connection_thread(
                reader, _prepare_reader, _raw_connection(reader), parsed
            )
        except BaseException as exc:
            for connection in opened:
                await connection.close()
            if isinstance(exc, sqlite3.Error):
                raise _open_error(path, exc) from exc
            raise
        return cls(parsed, writer, reader)

    # -- reads: one hop each, on the read-only connection ----------------------------------

    async def get(self, key: str) -> JsonValue | None:
        found = await self.get_encoded(key)
        return None if found is None else found[0]

    async def get_encoded(self, key: str) -> tuple[JsonValue, str | None] | None:
        rows = await self._read(self._sql_get, (key,))
        for (data,) in rows:
            return _decode_row(self.path, key, data)
        return None

    async def list(self, prefix: str = "") -> builtins.list[str]:
        where, params = _prefix_range(prefix)
        rows = await self._read(f"SELECT key FROM {self._table}{where} ORDER BY key", params)
        return [key for (key,) in rows]

    async def get_many(self, keys: Iterable[str]) -> dict[str, JsonValue]:
        wanted = builtins.list(dict.fromkeys(keys))
        found: dict[str, JsonValue] = {}
        for start in range(0, len(wanted), _GET_MANY_CHUNK):
            chunk = wanted[start : start + _GET_MANY_CHUNK]
            marks = ", ".join("?" * len(chunk))
            sql = f"SELECT key, CAST(value AS BLOB) FROM {self._table} WHERE key IN ({marks})"
            for key, data in await self._read(sql, chunk):
                found[key] = _decode_row(self.path, key, data)[0]
        return {key: found[key] for key in wanted if key in found}

    async def describe(self, prefix: str = "") -> builtins.list[KeyInfo]:
        where, params = _prefix_range(prefix)
        sql = (
            f"SELECT key, length(CAST(value AS BLOB)), updated_at FROM {self._table}{where} "
            "ORDER BY key"
        )
        return [
            KeyInfo(key, size, updated_at)
            for key, size, updated_at in await self._read(sql, params)
        ]

    async def _read(self, sql: str, params: Sequence[Any]) -> builtins.list[Any]:
        if self._closed:
            raise self._closed_error()
        try:
            rows = await _run_in_connection_thread(
                self._reader, _fetch_all, _raw_connection(self._reader), sql, params
            )
        except sqlite3.Error as exc:
            raise StorageError(
                f"reading the SQLite database {self.path} failed ({exc}); check that the file "
                "is intact and readable"
            ) from exc
        return builtins.list(rows)

    # -- writes: one writer per process, group commit --------------------------------------

    async def set(self, key: str, value: JsonValue) -> None:
        text = _json.dumps(value).decode()  # ValueError here: nothing is queued
        await self._submit(_Set(key, text))

    async def delete(self, key: str) -> None:
        await self._submit(_Delete(key))

    async def update(self, key: str, fn: UpdateFn) -> JsonValue:
        return await self._submit(_Update(key, with_json(fn)))

    async def update_encoded(self, key: str, fn: EncodedUpdateFn) -> JsonValue:
        return await self._submit(_Update(key, fn))

    async def _submit(self, job: _Job) -> Any:
        if self._closed:
            raise self._closed_error()
        return await self._batcher.submit(None, job)

    async def _run_batch(self, _key: None, jobs: builtins.list[_Job]) -> builtins.list[Any]:
        outcomes: builtins.list[Any] = await _run_in_connection_thread(
            self._writer, self._transaction, jobs
        )
        return outcomes

    def _transaction(self, jobs: Sequence[_Job]) -> builtins.list[Any]:
        """Run ``jobs`` as one transaction in the writer's thread; one outcome per job.

        A job whose ``fn`` raises (or returns what JSON cannot hold) gets that exception and
        writes nothing; its neighbours still commit. A database error fails the whole
        batch with a StorageError, after a rollback, so no job is half-applied.
        """
        conn = self._writer_conn
        try:
            self._begin(conn)
        except sqlite3.Error as exc:
            return [self._database_error(exc, "start a write transaction")] * len(jobs)
        try:
            # Inside BEGIN IMMEDIATE no one else can commit. The version changes only when
            # another connection has committed since our last transaction (our own commits
            # leave it as it is); then any cached row may be stale, so none is kept.
            version = conn.execute("PRAGMA data_version").fetchone()[0]
            if version != self._data_version:
                self._recent.clear()
                self._data_version = version
            outcomes, written = self._apply(conn, jobs)
            conn.execute("COMMIT")
        except BaseException as exc:
            # SQLite may have rolled back already, or the connection is gone: nothing to undo.
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            if not isinstance(exc, sqlite3.Error):
                raise
            return [self._database_error(exc, "write")] * len(jobs)
        self._remember(written)
        return outcomes

    def _remember(self, written: dict[str, tuple[str, Any] | None]) -> None:
        """Keep the rows a committed batch wrote, forgetting deleted and undecoded ones."""
        recent = self._recent
        for key, row in written.items():
            if row is None or row[1] is _MISSING:
                recent.pop(key, None)
            else:
                recent[key] = row
                recent.move_to_end(key)
        while len(recent) > _RECENT_ROWS:
            recent.popitem(last=False)

    def _begin(self, conn: sqlite3.Connection) -> None:
        """``BEGIN IMMEDIATE`` with bounded retry; SQLite waits ``busy_timeout`` each time."""
        attempts = self.options.busy_retries + 1
        for attempt in range(attempts):
            try:
                conn.execute("BEGIN IMMEDIATE")
                return
            except sqlite3.OperationalError as exc:
                if _error_code(exc) != _SQLITE_BUSY or attempt + 1 == attempts:
                    raise
                time.sleep(0.01 * (attempt + 1))  # this thread is the writer's; nobody waits on it

    def _apply(
        self, conn: sqlite3.Connection, jobs: Sequence[_Job]
    ) -> tuple[builtins.list[Any], dict[str, tuple[str, Any] | None]]:
        """Apply ``jobs`` inside the open transaction: one outcome per job, and the rows
        written as (text, value), the value ``_MISSING`` for a ``set``; ``None`` deletes.
        Rows in ``_recent`` are what is stored (see ``_transaction``) and are not read."""
        # (text, value) of rows read or written in this batch, as in ``_recent``, so jobs
        # on one key chain without re-reading; the value is _UNPARSED after a set.
        latest: dict[str, tuple[str | None, Any]] = {}
        written: dict[str, tuple[str, Any] | None] = {}
        outcomes: builtins.list[Any] = []
        for job in jobs:
            key = job.key
            if isinstance(job, _Set):
                latest[key] = (job.text, _UNPARSED)
                written[key] = (job.text, _MISSING)
                outcomes.append(None)
            elif isinstance(job, _Delete):
                latest[key] = (None, None)
                written[key] = None
                outcomes.append(None)
            else:
                try:
                    row = latest.get(key) or self._recent.get(key)
                    if row is None:
                        found = conn.execute(self._sql_get, (key,)).fetchone()
                        stored = current = None
                        if found is not None:
                            current, stored = _decode_row(self.path, key, found[0])
                    else:
                        stored, current = row
                        if current is _UNPARSED and stored is not None:  # a set's text
                            current = _json.loads(stored)
                    latest[key] = (stored, current)
                    value, encoded = job.fn(current, stored)
                    text = encoded.decode()
                except sqlite3.Error:
                    raise  # the database failed, not this job: the whole batch fails
                except Exception as exc:
                    outcomes.append(exc)
                    continue
                latest[key] = written[key] = (text, value)
                outcomes.append(value)
        self._write_rows(conn, jobs, outcomes, written)
        return outcomes, written

    def _write_rows(
        self,
        conn: sqlite3.Connection,
        jobs: Sequence[_Job],
        outcomes: builtins.list[Any],
        written: dict[str, tuple[str, Any] | None],
    ) -> None:
        """Write each key's final row. A statement SQLite refuses for that row alone (a
        trigger, a constraint) leaves the transaction open: then only the jobs of that key
        fail, and the row is dropped from ``written``. Anything else fails the batch."""
        now = time.time()
        for key, final in builtins.list(written.items()):
            try:
                if final is None:
                    conn.execute(self._sql_delete, (key,))
                else:
                    conn.execute(self._sql_upsert, (key, final[0], now))
            except sqlite3.Error as exc:
                if not conn.in_transaction:
                    raise
                error = self._database_error(exc, f"write the key {key!r}")
                for index, job in enumerate(jobs):
                    if job.key == key and not isinstance(outcomes[index], Exception):
                        outcomes[index] = error
                del written[key]

    def _database_error(self, exc: sqlite3.Error, action: str) -> StorageError:
        if _error_code(exc) == _SQLITE_BUSY:
            attempts = self.options.busy_retries + 1
            return StorageBusyError(
                f"the SQLite database {self.path} stayed locked by another connection "
                f"(another process holds a write transaction) through {attempts} attempt(s) "
                f"of busy_timeout={self.options.busy_timeout} ms; nothing was written. Find "
                "the process that keeps a transaction open, or raise the wait, for example "
                "sqlite:///...?busy_timeout=30000"
            )
        error = StorageError(
            f"could not {action} in the SQLite database {self.path} ({exc}); nothing was "
            "written. Check free disk space, permissions and the file's integrity"
        )
        error.__cause__ = exc
        return error

    # -- closing ----------------------------------------------------------------------------

    async def aclose(self) -> None:
        """Wait for queued writes to commit, then close both connections. Idempotent."""
        if self._closed:
            return
        self._closed = True
        with anyio.CancelScope(shield=True):
            await self._batcher.wait_idle()
            await self._writer.close()
            await self._reader.close()

    def _closed_error(self) -> StorageError:
        return StorageError(
            f"the SQLite storage {self.path} is closed; open it again with open_storage()"
        )


# -- helpers -------------------------------------------------------------------------------


def _fetch_all(conn: sqlite3.Connection, sql: str, params: Sequence[Any]) -> builtins.list[Any]:
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


def _decode_row(path: str, key: str, data: bytes) -> tuple[JsonValue, str]:
    """The value of a row read as bytes, and its JSON text; a clear error for a bad row."""
    try:
        text = data.decode()
        return _json.loads(text), text
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise StorageError(
            f"the value stored at {key!r} in {path} is not JSON text ({exc}); it was not "
            "written by this library. Delete or overwrite that key (for a scratchpad: "
            "noetic-scratchpad reset); other keys are unaffected"
        ) from None


def _error_code(exc: sqlite3.Error) -> int:
    code: int | None = getattr(exc, "sqlite_errorcode", None)
    if code is None:  # interpreters whose sqlite3 does not expose the code
        return _SQLITE_BUSY if "locked" in str(exc) or "busy" in str(exc) else -1
    return code & 0xFF


def _prefix_range(prefix: str) -> tuple[str, builtins.list[str]]:
    """A ``WHERE`` clause matching keys that start with ``prefix``, usable by the index.

    Keys compare as UTF-8 bytes (BINARY collation), which is code-point order, so the keys
    with a prefix are those from the prefix up to, not including, its successor.
    """
    if not prefix:
        return "", []
    upper = _successor(prefix)
    if upper is None:
        return " WHERE key >= ?", [prefix]
    return " WHERE key >= ? AND key < ?", [prefix, upper]


def _successor(prefix: str) -> str | None:
    """The least string greater than every string that starts with ``prefix``."""
    stripped = prefix.rstrip("\U0010ffff")
    if not stripped:
        return None
    code = ord(stripped[-1]) + 1
    if 0xD800 <= code <= 0xDFFF:  # surrogates cannot be stored; skip over them
        code = 0xE000
    return stripped[:-1] + chr(code)


def _check_path(path: str) -> str:
    """Resolve ``path`` and fail early, with the fix, where SQLite would fail obscurely."""
    resolved = Path(path).expanduser()
    if not resolved.is_absolute():
        resolved = Path.cwd() / resolved
    directory = resolved.parent
    if not directory.exists():
        raise StorageConfigError(
            f"cannot open the SQLite database {resolved}: the directory {directory} does not "
            f"exist; create it (mkdir -p {directory}) or choose another path"
        )
    if not directory.is_dir():
        raise StorageConfigError(
            f"cannot open the SQLite database {resolved}: {directory} is not a directory; "
            "choose a path inside a directory"
        )
    try:
        mode = resolved.stat().st_mode
    except FileNotFoundError:
        mode = None
    if mode is not None and stat.S_ISDIR(mode):
        raise StorageConfigError(
            f"cannot open the SQLite database {resolved}: it is a directory; give the path "
            f"of a file, for example sqlite:///{resolved / 'scratchpad.db'}"
        )
    # WAL keeps two companion files (-wal, -shm) beside the database.
    if not os.access(directory, os.W_OK | os.X_OK):
        raise StorageConfigError(
            f"cannot open the SQLite database {resolved}: the directory {directory} is not "
            "writable, and SQLite must create the database and its -wal and -shm files there; "
            "fix its permissions or choose another path"
        )
    if mode is not None and not os.access(resolved, os.R_OK | os.W_OK):
        raise StorageConfigError(
            f"cannot open the SQLite database {resolved}: the file is not readable and "
            "writable by this process; fix its permissions or choose another path"
        )
    return str(resolved)


async def _connect(options: SqliteOptions) -> aiosqlite.Connection:
    # isolation_level=None: sqlite3 issues no implicit BEGIN; transactions are ours.
    connection = aiosqlite.connect(
        options.path, isolation_level=None, timeout=options.busy_timeout / 1000
    )
    _daemonize(connection)
    return await connection


def _prepare_writer(conn: sqlite3.Connection, options: SqliteOptions) -> None:
    conn.execute(f"PRAGMA busy_timeout = {options.busy_timeout}")
    mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
    if str(mode).lower() != "wal":
        raise sqlite3.OperationalError(
            f"the database stays in journal_mode={mode}, not WAL (is it on a network or "
            "read-only file system?)"
        )
    conn.execute(f"PRAGMA synchronous = {options.synchronous.upper()}")
    # A rowid table, not WITHOUT ROWID: values are kilobytes of JSON, and SQLite's
    # WITHOUT ROWID B-trees suit small rows; measured 2-3x faster here with 100 scopes.
    conn.execute(
        f"CREATE TABLE IF NOT EXISTS {options.table} ("
        "key TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL, updated_at REAL NOT NULL"
        ")"
    )
    _check_table_shape(conn, options)


def _check_table_shape(conn: sqlite3.Connection, options: SqliteOptions) -> None:
    """Refuse, at open, a table of that name that another program made for other rows."""
    columns = {row[1]: row[5] for row in conn.execute(f"PRAGMA table_info({options.table})")}
    if set(columns) >= {"key", "value", "updated_at"} and columns["key"] == 1:
        return
    found = ", ".join(columns) or "none"
    raise StorageConfigError(
        f"the table {options.table!r} in {options.path} is not a scratchpad table: it has "
        f"the columns {found}, not key (the primary key), value and updated_at. Use another "
        "table name (sqlite:///...?table=scratchpad_kv2) or another file"
    )


def _prepare_reader(conn: sqlite3.Connection, options: SqliteOptions) -> None:
    conn.execute(f"PRAGMA busy_timeout = {options.busy_timeout}")
    conn.execute("PRAGMA query_only = ON")


def _open_error(path: str, exc: sqlite3.Error) -> StorageError:
    if _error_code(exc) == _SQLITE_BUSY:
        return StorageBusyError(
            f"the SQLite database {path} is locked by another connection and could not be "
            f"prepared ({exc}); retry when the other process has finished its transaction, "
            "or raise busy_timeout"
        )
    return StorageConfigError(
        f"cannot open the SQLite database {path} ({exc}); check that the path names a SQLite "
        "database file (or a new file) that this process can read and write"
    )
