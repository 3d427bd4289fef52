"""Storage backends, chosen by URL.

``await open_storage("memory://")``, ``"sqlite:///scratchpad.db"``,
``"postgresql://user@host/db"`` or ``"redis://host:6379/0"``. Backends are imported only
when their URL is opened, so a missing driver is an error that names the extra to install,
not an import failure.

The SQLite, PostgreSQL and Redis backends run on asyncio only (their drivers, aiosqlite,
asyncpg and redis-py's asyncio client, are asyncio libraries); opening one under trio is a
:class:`StorageConfigError` that says so. The layer and ``memory://`` run under trio too.

:class:`OwnedStorage` holds a ``storage=`` argument given as a URL or as an opened backend:
it opens the URL once, on first use, and closes only what it opened.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlsplit

from .._extras import install_hint
from .._runtime import running_async_library
from ..errors import StorageConfigError
from .base import (
    MAX_JOURNAL_LIMIT,
    Commit,
    CommitFn,
    JournalCommitFn,
    JournalRow,
    JournalView,
    JsonValue,
    KeyInfo,
    Revision,
    StorageBackend,
    UpdateFn,
    decode_json,
    encode_json,
    known_value,
)
from .memory import MemoryStorage
from .namespace import NamespacedStorage
from .owned import OwnedStorage
from .redaction import redact_url
from .scoped import ScopedStorage, scope_prefix

__all__ = (
    "ENV_VAR",
    "MAX_JOURNAL_LIMIT",
    "Commit",
    "CommitFn",
    "JournalCommitFn",
    "JournalRow",
    "JournalView",
    "JsonValue",
    "KeyInfo",
    "MemoryStorage",
    "NamespacedStorage",
    "OwnedStorage",
    "Revision",
    "ScopedStorage",
    "StorageBackend",
    "UpdateFn",
    "check_storage_url",
    "decode_json",
    "encode_json",
    "known_value",
    "open_storage",
    "register_backend",
    "resolve_storage_url",
    "scope_prefix",
)

#: Where ``open_storage`` and the harness look for a URL when the application gives none.
ENV_VAR = "NOETIC_SCRATCHPAD_STORAGE"

DEFAULT_URL = "memory://"

Opener = Callable[..., Awaitable[StorageBackend]]

# scheme -> (module, class, the pip extra that brings its driver)
_BUILTIN: dict[str, tuple[str, str, str | None]] = {
    "memory": ("noetic_scratchpad.storage.memory", "MemoryStorage", None),
    "sqlite": ("noetic_scratchpad.storage.sqlite", "SqliteStorage", None),
    "postgresql": ("noetic_scratchpad.storage.postgres", "PostgresStorage", "postgres"),
    "postgres": ("noetic_scratchpad.storage.postgres", "PostgresStorage", "postgres"),
    "redis": ("noetic_scratchpad.storage.redis", "RedisStorage", "redis"),
    "rediss": ("noetic_scratchpad.storage.redis", "RedisStorage", "redis"),
}
_REGISTERED: dict[str, Opener] = {}
# Built-in schemes whose driver runs on asyncio only.
_ASYNCIO_ONLY = frozenset({"sqlite", "postgresql", "postgres", "redis", "rediss"})
_KINDS = {"sqlite": "SQLite", "redis": "Redis", "rediss": "Redis"}


def register_backend(scheme: str, opener: Opener) -> None:
    """Make ``open_storage`` open URLs of ``scheme`` with ``await opener(url, **options)``."""
    _REGISTERED[scheme.lower()] = opener


def resolve_storage_url(url: str | None = None, *, default: str = DEFAULT_URL) -> str:
    """The URL to open: ``url``, else ``$NOETIC_SCRATCHPAD_STORAGE``, else ``default``."""
    return url or os.environ.get(ENV_VAR) or default


async def open_storage(url: str | None = None, **options: Any) -> StorageBackend:
    """Open the backend for ``url`` (see :func:`resolve_storage_url` for the default).

    Raises :class:`StorageConfigError` for an unknown scheme, a bad path or option, a
    driver that is not installed, or an asyncio-only backend (SQLite, PostgreSQL) opened
    under another async library such as trio; the message says how to fix it.
    """
    resolved = resolve_storage_url(url)
    scheme = _scheme_of(resolved)
    if scheme in _REGISTERED:
        return await _REGISTERED[scheme](resolved, **options)
    if scheme in _ASYNCIO_ONLY:
        _require_asyncio(scheme)
    module_name, class_name, extra = _BUILTIN[scheme]
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        hint = install_hint(extra) if extra else "pip install aiosqlite"
        raise StorageConfigError(
            f"the {scheme} backend needs {_distribution(exc)}, which is not installed; run: {hint}"
        ) from exc
    backend: StorageBackend = await getattr(module, class_name).open(resolved, **options)
    return backend


def check_storage_url(url: str) -> str:
    """The scheme of ``url`` once it is one :func:`open_storage` knows; a
    :class:`StorageConfigError` saying why not otherwise (no scheme, an unknown one, a
    ``sqlite://`` URL whose file cannot be opened: a malformed URL, a directory that does
    not exist). Opens nothing and creates nothing: a command line checks its arguments
    with it before it starts. A server's address is only checked by connecting to it."""
    scheme = _scheme_of(url)
    if scheme == "sqlite":
        from .sqlite.options import check_path, parse_sqlite_url

        check_path(parse_sqlite_url(url).path)
    return scheme


def _scheme_of(url: str) -> str:
    """The scheme of ``url``, lower case; a :class:`StorageConfigError` unless one of
    :func:`open_storage`'s."""
    shown = redact_url(url)  # a URL may hold a password: messages show it hidden
    try:
        scheme = urlsplit(url).scheme.lower()
    except ValueError as exc:  # an unbalanced "[" of an IPv6 host, for one
        raise StorageConfigError(f"storage URL {shown!r} cannot be parsed: {exc}") from None
    if not scheme:
        raise StorageConfigError(
            f"storage URL {shown!r} has no scheme; use memory://, "
            "sqlite:///path/to/file.db or postgresql://user@host/db"
        )
    if scheme not in _BUILTIN and scheme not in _REGISTERED:
        known = ", ".join(sorted({*_BUILTIN, *_REGISTERED}))
        raise StorageConfigError(
            f"unknown storage scheme {scheme!r} in {shown!r}; known schemes: {known} "
            "(or register one with noetic_scratchpad.storage.register_backend)"
        )
    return scheme


def _require_asyncio(scheme: str) -> None:
    """Raise :class:`StorageConfigError` when the running async library is not asyncio."""
    library = running_async_library()
    if library is None or library == "asyncio":
        # No library detected (a coroutine driven by hand): let the backend try.
        return
    kind = _KINDS.get(scheme, "PostgreSQL")
    raise StorageConfigError(
        f"the {kind} storage backend ({scheme}://) runs on asyncio only, and this code runs "
        f"under {library}. The scratchpad layer and memory:// storage also run under "
        f"{library}, but {kind} needs asyncio: run the application under asyncio "
        '(asyncio.run(main()), or anyio.run(main, backend="asyncio")), or use memory:// '
        "(kept in memory, not persisted) under " + library
    )


def _distribution(exc: ImportError) -> str:
    """The package a failed import lacks: ``redis`` for ``redis.asyncio``."""
    return exc.name.partition(".")[0] if exc.name else "a driver"
