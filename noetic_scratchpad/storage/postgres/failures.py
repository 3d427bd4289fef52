"""What a failed call means for the stored data, and the error that says so.

Every error this backend raises for a failure of the driver, the network or the server
ends with its outcome for the stored data:

- ``nothing was changed``: a read, or creating or dropping the table;
- ``nothing was sent to the server``: no pool connection could be had;
- ``the transaction was rolled back``: an update failed before its commit, so the stored
  value is intact and a retry is safe;
- ``PostgreSQL may or may not have applied it``: a ``set`` or ``delete`` failed after it was
  sent, or the connection was lost during an update's ``COMMIT`` (then the error is a
  :class:`StorageOutcomeUnknownError`): read the key to find out before retrying.

A connection the driver can no longer use (asyncpg's ``InternalClientError``, as when the
server ends a session between two of the driver's messages) is a lost connection: the same
outcomes, in words of this module, never the driver's (:func:`storage_error`), and the
connection is discarded (see :mod:`.connection`).

A lock or statement timeout is a :class:`StorageBusyError` (another writer held the row);
a key or value past one of PostgreSQL's fixed limits is a ``ValueError``, as retrying can
never help. :func:`storage_error` scrubs the URL's passwords from the driver's text.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

import asyncpg  # type: ignore[import-untyped, unused-ignore]

from ...errors import StorageBusyError, StorageError
from .options import PostgresSettings

__all__ = (
    "CONNECTION_LOST",
    "DRIVER_ERRORS",
    "NOT_SENT",
    "ROLLED_BACK",
    "UNCHANGED",
    "UNCONFIRMED",
    "UNUSABLE_CONNECTION",
    "action_text",
    "storage_error",
    "translated_errors",
)

UNCHANGED = "nothing was changed"
NOT_SENT = "nothing was sent to the server"
ROLLED_BACK = "the transaction was rolled back: nothing was written, the stored value is intact"
UNCONFIRMED = (
    "PostgreSQL may or may not have applied it before the connection failed; "
    "read the key to find out"
)
# A connection the driver found in a state it cannot work from: never lend it again.
UNUSABLE_CONNECTION = asyncpg.InternalClientError
# Failures of the driver, the network or the server, as a whole.
DRIVER_ERRORS = (
    OSError,
    TimeoutError,
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
    UNUSABLE_CONNECTION,
)
# Failures after which a sent COMMIT may or may not have taken effect.
CONNECTION_LOST = (
    OSError,
    TimeoutError,
    asyncpg.PostgresConnectionError,
    asyncpg.InterfaceError,
    asyncpg.OperatorInterventionError,
    UNUSABLE_CONNECTION,
)
# PostgreSQL's largest btree index row (PostgreSQL 12+, 8 KB pages), for messages.
_MAX_INDEX_ROW = 2704
_INDEX_ROW_LIMIT = re.compile(r"index row (?:size \d+ exceeds .*?maximum (\d+)|requires)")
_SHOWN_KEY_CHARS = 60


def action_text(action: str, key: str | None) -> str:
    """``action``, and the key it is on, for a message (``update of 'k'``)."""
    return action if key is None else f"{action} of {_shown_key(key)}"


def storage_error(
    settings: PostgresSettings,
    what: str,
    exc: BaseException,
    outcome: str,
    kind: type[StorageError] = StorageError,
) -> StorageError:
    """The error for a failure of ``what`` (the driver's ``exc``), ending with ``outcome``."""
    return kind(
        f"PostgreSQL {what} in {settings.table!r} at {settings.display!r} "
        f"failed ({_cause(settings, exc)}); {outcome}. "
        "Check that the server is reachable; the pool reconnects on the next call"
    )


def _cause(settings: PostgresSettings, exc: BaseException) -> str:
    """What went wrong, for a message: the driver's error, but for the internals of a
    connection it can no longer use, which say nothing a caller can act on."""
    if isinstance(exc, UNUSABLE_CONNECTION):
        return "the connection was unusable, as when the server ends its session"
    return f"{type(exc).__name__}: {settings.scrub(str(exc))}"


@contextmanager
def translated_errors(
    settings: PostgresSettings, action: str, key: str | None, outcome: str
) -> Iterator[None]:
    """Driver and network failures inside the block become :class:`StorageError` (or
    :class:`StorageBusyError`, or ``ValueError``) whose message ends with ``outcome``."""
    what = action_text(action, key)
    try:
        yield
    except (asyncpg.LockNotAvailableError, asyncpg.QueryCanceledError) as exc:
        raise StorageBusyError(
            f"PostgreSQL {what} in {settings.table!r} timed out waiting "
            f"({type(exc).__name__}: {exc}); {outcome}. Another writer held the row "
            "lock past lock_timeout or statement_timeout: retry, or raise them"
        ) from exc
    except asyncpg.DataError as exc:  # SQLSTATE class 22, e.g. a NUL in a key
        raise ValueError(f"PostgreSQL refused the key or value of {what}: {exc}") from exc
    except asyncpg.ProgramLimitExceededError as exc:  # SQLSTATE class 54: never retry
        raise _too_big(settings, action, key, exc) from exc
    except asyncpg.InterfaceError as exc:
        if isinstance(exc, ValueError):  # asyncpg could not encode an argument
            raise ValueError(f"cannot send the arguments of {what}: {exc}") from exc
        raise storage_error(settings, what, exc, outcome) from exc
    except (OSError, TimeoutError, asyncpg.PostgresError, UNUSABLE_CONNECTION) as exc:
        raise storage_error(settings, what, exc, outcome) from exc


def _too_big(
    settings: PostgresSettings, action: str, key: str | None, exc: BaseException
) -> ValueError:
    """A key or value past a fixed limit of PostgreSQL: retrying can never help."""
    what = action_text(action, key)
    text = str(exc).split("\n", 1)[0]
    limit = _INDEX_ROW_LIMIT.search(text)
    if limit is None or key is None:
        return ValueError(
            f"PostgreSQL refused the key or value of {what} in {settings.table!r} as "
            f"past one of its limits ({type(exc).__name__}: {text}); nothing was written. "
            "Use a smaller key or value"
        )
    maximum = int(limit[1]) if limit[1] else _MAX_INDEX_ROW
    size = len(key.encode(errors="replace"))
    return ValueError(
        f"the key {_shown_key(key)} is too long for PostgreSQL's index on the key column "
        f"of {settings.table!r}: an index row holds at most {maximum:,} bytes, so a "
        f"key can have at most about {maximum - 8:,} bytes of UTF-8 text (more only if it "
        f"compresses well), and this one has {size:,}; nothing was written. Use a shorter "
        f"key, such as a hash of the long one (PostgreSQL said: {text})"
    )


def _shown_key(key: str) -> str:
    """``key`` for a message: its ``repr``, cut short when the key is long."""
    if len(key) <= _SHOWN_KEY_CHARS:
        return repr(key)
    return f"{key[:_SHOWN_KEY_CHARS]!r}... ({len(key):,} characters)"
