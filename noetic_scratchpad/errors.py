"""Every public error of noetic-scratchpad, sorted by who must act.

::

    ScratchpadError                      base of everything raised here
    ├── ScratchpadConfigError            a developer's mistake, raised at construction
    ├── ScratchpadUpdateError            an update was refused; nothing was written
    │   ├── ScratchpadValidationError    the merged state fails the schema (reason "schema")
    │   ├── ScratchpadReadOnlyError      the scratchpad is read-only (reason "read_only")
    │   ├── ScratchpadPartlySeenError    the model's update would replace a list or text
    │   │                                its view shows in part (reason "shown_in_part")
    │   └── ScratchpadCorruptStateError  the stored state cannot be read (reason "corrupt";
    │                                    also a StorageCorruptError)
    ├── StorageError                     the backend failed; the prior state is intact
    │   ├── StorageConfigError           a bad storage URL, path or missing extra
    │   ├── StorageBusyError             the database stayed locked past the busy timeout
    │   ├── StorageCorruptError          a stored value cannot be read back: reset its key
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
    "ScratchpadCorruptStateError",
    "ScratchpadError",
    "ScratchpadHistoryError",
    "ScratchpadPartlySeenError",
    "ScratchpadReadOnlyError",
    "ScratchpadUpdateError",
    "ScratchpadValidationError",
    "ScriptExhaustedError",
    "StorageBusyError",
    "StorageConfigError",
    "StorageCorruptError",
    "StorageError",
    "StorageOutcomeUnknownError",
)


class ScratchpadError(Exception):
    """Base class of every error raised by noetic-scratchpad."""


class ScratchpadConfigError(ScratchpadError, ValueError):
    """The configuration cannot work (bad scope, template, schema or limit)."""


class ScratchpadUpdateError(ScratchpadError, ValueError):
    """An update was refused and the stored state is unchanged.

    The error carries data, and a ``message`` that says what happened to no reader in
    particular; each host renders it for its reader (the model's text, with what to do
    and the tool's name as that host presents it: ``layer.refusal_text``; an HTTP
    problem; a CLI line). ``reason`` is a short machine-readable word (``"malformed"``,
    ``"too_large"``, ``"schema"``, ``"read_only"``, ``"edit_path"``, ...); ``errors``
    carries details such as pydantic's validation errors; ``refused``, what was refused
    (``"update"``, ``"edit"``, ``"revert"``); ``limit`` and ``size``, for a state that
    would grow too large, the byte limit and the size it would have had.
    """

    reason: str = "malformed"
    refused: str = "update"

    def __init__(
        self,
        message: str,
        *,
        reason: str | None = None,
        errors: Sequence[dict[str, Any]] = (),
        refused: str | None = None,
        limit: int | None = None,
        size: int | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        if reason is not None:
            self.reason = reason
        self.errors: list[dict[str, Any]] = list(errors)
        if refused is not None:
            self.refused = refused
        self.limit = limit
        self.size = size


class ScratchpadValidationError(ScratchpadUpdateError):
    """The merged state does not validate against the schema."""

    reason = "schema"


class ScratchpadReadOnlyError(ScratchpadUpdateError):
    """A write reached a scratchpad configured with ``read_only=True``."""

    reason = "read_only"


class ScratchpadPartlySeenError(ScratchpadUpdateError):
    """A model's update would replace a list (or a text) that its view of the scratchpad,
    cut to the token budget, shows only in part, and drop what it does not show: nothing
    was written. ``errors`` holds one entry per such part (``type`` ``"shown_in_part"``,
    ``msg`` what the view shows of it): ``loc`` (its path of object keys; ``[]`` for a
    text state), ``kind`` (``"list"`` or ``"text"``), ``total`` (items
    or characters), ``shown`` and ``hidden``, and ``fixes``: what works instead
    (``"append"``, through the edit tool, when the layer has one; ``"read"``, the read
    tool, then the whole value). Only the model's writes are checked; code's are not."""

    reason = "shown_in_part"


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
    refused = "revert"


class StorageError(ScratchpadError):
    """A storage backend failed; the write did not happen and the prior state is intact,
    unless it is a :class:`StorageOutcomeUnknownError`."""


class StorageConfigError(StorageError, ValueError):
    """A storage URL, path or option is wrong, or the backend's extra is not installed."""


class StorageBusyError(StorageError):
    """The database stayed locked by another writer past the busy timeout and retries."""


class StorageCorruptError(StorageError):
    """A stored value cannot be read back: it is not UTF-8, not JSON, or nested deeper
    than the parser goes, so another program wrote it or it was damaged. Unlike the other
    storage errors this is permanent: retrying cannot help. Only that key is affected;
    deleting it (for a scratchpad: resetting its scope) clears it, which needs no read of
    the value."""

    @classmethod
    def unreadable(cls, where: str, cause: BaseException) -> StorageCorruptError:
        """The error for the value ``where`` names, which failed to parse with ``cause``."""
        return cls(
            f"{where} cannot be read: it is not JSON text this library can parse "
            f"({type(cause).__name__}: {cause}), so another program wrote it or it was "
            "damaged; retrying will not help. Delete or overwrite that key (for a scratchpad: "
            "reset its scope); other keys are unaffected"
        )


class ScratchpadCorruptStateError(ScratchpadUpdateError, StorageCorruptError):
    """An update was refused because the scope's stored state cannot be read (the
    :class:`StorageCorruptError` is its cause): nothing was written, and no retry will be,
    until the scope is reset. Both a refused update, so a model is told (not to retry), and
    a storage error, so code catching either gets it."""

    reason = "corrupt"


class StorageOutcomeUnknownError(StorageError):
    """Whether a write landed cannot be known: contact with the backend was lost while it
    committed, or it did not answer within ``write_timeout``. The stored value is either
    the old one or the new one, never a mix. Read it to find out; repeating a scratchpad
    update that is missing is harmless."""


class MaxStepsExceededError(ScratchpadError):
    """A run reached its step limit while the model still asked for tool calls."""


class ScriptExhaustedError(ScratchpadError, RuntimeError):
    """A ``ScriptedModel`` was asked for more turns than its script has."""
