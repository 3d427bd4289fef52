"""What a ``sqlite://`` URL says: the file, its options, and whether the file can be used.

Everything here is checked before a connection is opened, so that a bad URL or path fails
with a message that names the fix, where SQLite itself would fail obscurely (``unable to
open database file``) or, worse, create a file somewhere unexpected.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import SplitResult, parse_qsl, unquote, urlsplit

from ...errors import StorageConfigError
from .._options import int_option

__all__ = ("SqliteOptions", "Synchronous", "check_path", "database_exists", "parse_sqlite_url")

Synchronous = Literal["normal", "full", "extra"]
_SYNCHRONOUS: tuple[Synchronous, ...] = ("normal", "full", "extra")
_TABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")
#: The integer options and their least values, in the order they are checked.
_MINIMUMS = {"busy_timeout": 0, "busy_retries": 0, "max_batch": 1}
_KNOWN = frozenset({"synchronous", *_MINIMUMS, "table"})
#: The most characters of a path an error message shows.
_SHOWN_PATH = 160


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
    path = _path_of(url, parts)
    raw: dict[str, Any] = dict(parse_qsl(parts.query, keep_blank_values=True))
    raw.update(options)
    unknown = sorted(set(raw) - _KNOWN)
    if unknown:
        raise StorageConfigError(
            f"unknown SQLite option(s) {', '.join(unknown)} in {url!r}; "
            f"known options: {', '.join(sorted(_KNOWN))}"
        )
    values: dict[str, Any] = {"path": path}
    if "synchronous" in raw:
        values["synchronous"] = _synchronous(raw["synchronous"])
    for name, minimum in _MINIMUMS.items():
        if name in raw:
            values[name] = int_option(name, raw[name], minimum=minimum)
    if "table" in raw:
        values["table"] = _table(raw["table"])
    return SqliteOptions(**values)


def _path_of(url: str, parts: SplitResult) -> str:
    """The file path of a ``sqlite://`` URL, as written (relative paths stay relative)."""
    if parts.scheme.lower() != "sqlite":
        raise StorageConfigError(f"{url!r} is not a sqlite:// URL")
    if not url[len("sqlite:") :].startswith("//"):  # sqlite:/x.db, sqlite:x.db: which file?
        raise StorageConfigError(
            f"sqlite URL {url!r} is malformed: write sqlite:/// and then the file's path, "
            "as in sqlite:///relative/path.db or sqlite:////absolute/path.db"
        )
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
    return path


def _synchronous(value: Any) -> Synchronous:
    synchronous = str(value).lower()
    for level in _SYNCHRONOUS:
        if synchronous == level:
            return level
    raise StorageConfigError(
        f"synchronous={value!r} is not a durability level; use synchronous=normal (the "
        "default: survives a process crash) or synchronous=full (also survives a power loss)"
    )


def _table(value: Any) -> str:
    table = str(value)
    if not _TABLE_NAME.fullmatch(table):
        raise StorageConfigError(
            f"table={table!r} is not a plain SQL identifier; use letters, digits and _"
        )
    return table


def check_path(path: str) -> str:
    """Resolve ``path`` and fail early, with the fix, where SQLite would fail obscurely."""
    resolved = _resolve(path)
    directory = resolved.parent
    directory_mode = _mode_of(directory, resolved)
    if directory_mode is None:
        raise StorageConfigError(
            f"cannot open the SQLite database {resolved}: the directory {directory} does not "
            f"exist; create it (mkdir -p {directory}) or choose another path"
        )
    if not stat.S_ISDIR(directory_mode):
        raise StorageConfigError(
            f"cannot open the SQLite database {resolved}: {directory} is not a directory; "
            "choose a path inside a directory"
        )
    mode = _mode_of(resolved, resolved)
    if mode is not None and stat.S_ISDIR(mode):
        raise StorageConfigError(
            f"cannot open the SQLite database {resolved}: it is a directory; give the path "
            f"of a file, for example sqlite:///{resolved / 'scratchpad.db'}"
        )
    _check_access(resolved, exists=mode is not None)
    return str(resolved)


def database_exists(path: str) -> bool:
    """Whether a file or directory is at ``path``, for a caller that must not create one.

    Unlike ``os.path.exists``, a path the system refuses (too long, say) is not "missing"
    but a :class:`StorageConfigError`, as :func:`check_path` reports it.
    """
    resolved = _resolve(path)
    return _mode_of(resolved, resolved) is not None


def _resolve(path: str) -> Path:
    """``path`` made absolute (from the working directory), ``~`` expanded."""
    resolved = Path(path).expanduser()
    return resolved if resolved.is_absolute() else Path.cwd() / resolved


def _mode_of(path: Path, database: Path) -> int | None:
    """``path``'s mode, ``None`` when nothing is there; a :class:`StorageConfigError` naming
    ``database`` when the system refuses the path itself (too long, a symlink loop)."""
    try:
        return path.stat().st_mode
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise _refused(database, exc) from None


def _refused(database: Path, error: OSError) -> StorageConfigError:
    shown = str(database)
    if len(shown) > _SHOWN_PATH:  # the message must stay readable: the path's two ends
        shown = f"{shown[: _SHOWN_PATH // 2]}...{shown[-_SHOWN_PATH // 4 :]}"
    if error.errno == errno.ENAMETOOLONG:
        longest = max((len(part) for part in database.parts), default=0)
        return StorageConfigError(
            f"cannot open the SQLite database {shown}: the system refuses the path as too "
            f"long ({len(str(database)):,} characters, its longest name {longest:,}); "
            "choose a shorter path"
        )
    return StorageConfigError(
        f"cannot open the SQLite database {shown}: {error.strerror or error}; "
        "fix the path or choose another"
    )


def _check_access(path: Path, *, exists: bool) -> None:
    # WAL keeps two companion files (-wal, -shm) beside the database.
    if not os.access(path.parent, os.W_OK | os.X_OK):
        raise StorageConfigError(
            f"cannot open the SQLite database {path}: the directory {path.parent} is not "
            "writable, and SQLite must create the database and its -wal and -shm files there; "
            "fix its permissions or choose another path"
        )
    if exists and not os.access(path, os.R_OK | os.W_OK):
        raise StorageConfigError(
            f"cannot open the SQLite database {path}: the file is not readable and "
            "writable by this process; fix its permissions or choose another path"
        )
