"""What a failed call means for the stored data, and the error that says so.

Every error this backend raises for a failure of the client, the network or the server
ends with its outcome for the stored data, as the PostgreSQL backend's do:

- ``nothing was changed``: a read (or a listing);
- ``nothing was written``: a write failed while reading the current value, before its
  compare-and-set was sent;
- ``Redis may or may not have applied it``: the connection failed while the
  compare-and-set (or a delete) was in flight; a write's is then a
  :class:`StorageOutcomeUnknownError`: read the key to find out before retrying.

The URL's password never reaches a message: the client's texts are scrubbed with
:meth:`~.options.RedisSettings.scrub`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import redis.exceptions

from ...errors import StorageConfigError, StorageError
from .options import RedisSettings

__all__ = (
    "CLIENT_ERRORS",
    "NOT_WRITTEN",
    "UNCHANGED",
    "UNCONFIRMED",
    "storage_error",
    "translated_errors",
)

UNCHANGED = "nothing was changed"
NOT_WRITTEN = "nothing was written: the stored value is intact and a retry is safe"
UNCONFIRMED = (
    "Redis may or may not have applied it before the connection failed; read the key to find out"
)
# Failures of the client, the network or the server, as a whole.
CLIENT_ERRORS = (OSError, TimeoutError, redis.exceptions.RedisError)


def storage_error(
    settings: RedisSettings,
    what: str,
    exc: BaseException,
    outcome: str,
    kind: type[StorageError] = StorageError,
) -> StorageError:
    """The error for a failure of ``what`` (the client's ``exc``), ending with ``outcome``."""
    if isinstance(exc, redis.exceptions.AuthenticationError):
        kind = StorageConfigError
    return kind(
        f"Redis {what} at {settings.display!r} (prefix {settings.prefix!r}) failed "
        f"({type(exc).__name__}: {settings.scrub(str(exc))}); {outcome}. Check that the "
        "server is reachable and the URL's password is right; the client reconnects on "
        "the next call"
    )


@contextmanager
def translated_errors(
    settings: RedisSettings,
    what: str,
    outcome: str,
    kind: type[StorageError] = StorageError,
) -> Iterator[None]:
    """Client failures inside the block become :func:`storage_error`'s errors."""
    try:
        yield
    except CLIENT_ERRORS as exc:
        raise storage_error(settings, what, exc, outcome, kind) from exc
