"""Every public error of noetic-scratchpad, sorted by who must act.

::

    ScratchpadError                      base of everything raised here
    ├── ScratchpadConfigError            a developer's mistake, raised at construction
    ├── ScratchpadUpdateError            an update was refused; nothing was written
    │   ├── ScratchpadValidationError    the merged state fails the schema (reason "schema")
    │   └── ScratchpadReadOnlyError      the scratchpad is read-only (reason "read_only")
    ├── StorageError                     the backend failed; the prior state is intact
    │   ├── StorageConfigError           a bad storage URL, path or missing extra
    │   ├── StorageBusyError             the database stayed locked past the busy timeout
    │   └── StorageOutcomeUnknownError   contact was lost during a commit: it may have landed
    ├── MaxStepsExceededError            a run hit its step limit
    └── ScriptExhaustedError             a ScriptedModel was asked for more turns than it has

``ScratchpadUpdateError`` is what a model can fix: on the tool path it goes back to the
model as an error output. Config and storage errors are for the developer or operator.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = (
    "MaxStepsExceededError",
    "ScratchpadConfigError",
    "ScratchpadConflictError",
    "ScratchpadError",
    "ScratchpadHistoryError",
    "ScratchpadReadOnlyError",
    "ScratchpadUpdateError",
    "ScratchpadValidationError",
    "ScriptExhaustedError",
    "StorageBusyError",
    "StorageConfigError",
    "StorageError",
    "StorageOutcomeUnknownError",
)


class ScratchpadError(Exception):
    """Base class of every error raised by noetic-scratchpad."""


class ScratchpadConfigError(ScratchpadError, ValueError):
    """The configuration cannot work (bad scope, template, schema or limit)."""


class ScratchpadUpdateError(ScratchpadError, ValueError):
    """An update was refused and the stored state is unchanged.

    ``reason`` is a short machine-readable word (``"malformed"``, ``"too_large"``,
    ``"schema"``, ``"read_only"``, ...); ``errors`` carries details such as pydantic's
    validation errors.
    """

    reason: str = "malformed"

    def __init__(
        self,
        message: str,
        *,
        reason: str | None = None,
        errors: Sequence[dict[str, Any]] = (),
    ) -> None:
        super().__init__(message)
        self.message = message
        if reason is not None:
            self.reason = reason
        self.errors: list[dict[str, Any]] = list(errors)


class ScratchpadValidationError(ScratchpadUpdateError):
    """The merged state does not validate against the schema."""

    reason = "schema"


class ScratchpadReadOnlyError(ScratchpadUpdateError):
    """A write reached a scratchpad configured with ``read_only=True``."""

    reason = "read_only"


class ScratchpadConflictError(ScratchpadUpdateError):
    """A write said which revision it expected (``expected_revision``, an HTTP
    ``If-Match``) and the stored state had moved on: nothing was written. ``expected``
    and ``actual`` are the two revisions; read the state again and decide anew."""

    reason = "conflict"

    def __init__(self, message: str, *, expected: int, actual: int) -> None:
        super().__init__(message)
        self.expected = expected
        self.actual = actual


class ScratchpadHistoryError(ScratchpadUpdateError):
    """A revert asked for a revision the journal cannot rebuild (never written, or older
    than the kept history); nothing was written."""

    reason = "history"


class StorageError(ScratchpadError):
    """A storage backend failed; the write did not happen and the prior state is intact,
    unless it is a :class:`StorageOutcomeUnknownError`."""


class StorageConfigError(StorageError, ValueError):
    """A storage URL, path or option is wrong, or the backend's extra is not installed."""


class StorageBusyError(StorageError):
    """The database stayed locked by another writer past the busy timeout and retries."""


class StorageOutcomeUnknownError(StorageError):
    """Whether a write landed cannot be known: contact with the backend was lost while it
    committed, or it did not answer within ``write_timeout``. The stored value is either
    the old one or the new one, never a mix. Read it to find out; repeating a scratchpad
    update that is missing is harmless."""


class MaxStepsExceededError(ScratchpadError):
    """A run reached its step limit while the model still asked for tool calls."""


class ScriptExhaustedError(ScratchpadError, RuntimeError):
    """A ``ScriptedModel`` was asked for more turns than its script has."""
