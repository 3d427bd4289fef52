"""The diagnostic events: typed, immutable pydantic models, one class per kind."""

from __future__ import annotations

import time
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = (
    "ScopeReset",
    "ScratchpadEvent",
    "StateDiscarded",
    "UpdateApplied",
    "UpdateRejected",
    "UpdateRetried",
    "ViewTruncated",
    "WriteSource",
)

#: Who wrote: the model's tool call (``tool``; ``store`` when the store hook applied it),
#: code or an HTTP client (``api``), or a revert to an earlier revision (``revert``).
WriteSource = Literal["tool", "store", "api", "revert"]


class ScratchpadEvent(BaseModel):
    """Base of every event: which layer, which scope, when (Unix seconds)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    #: The log level the event is logged at (``"debug"``, ``"info"``, ``"warning"``,
    #: ``"error"``); ``None`` means not logged.
    log_level: ClassVar[str | None] = "warning"

    kind: str
    layer_id: str
    scope_key: str
    #: The kind of scope ``scope_key`` names (a thread and a resource may share an id);
    #: ``None`` from code that does not say.
    scope: Literal["thread", "resource"] | None = None
    execution_id: str | None = None
    at: float = Field(default_factory=time.time)
    #: The process that made the change, for an event another process's write or reset
    #: caused (see docs/events.md, "Events across processes"); ``None`` for this
    #: process's own events.
    origin: str | None = None


class UpdateApplied(ScratchpadEvent):
    """An update was merged and stored. ``keys`` are the top-level keys it wrote;
    ``revision`` is the scope's revision it made (``None``: not stored, a host that
    calls ``store`` without ``init``). ``reused_call_id``: ``call_id`` had already been
    used on this scope for a call with other arguments, so this is a new call under an old
    id (some runtimes number their calls ``call_0`` in every turn)."""

    log_level: ClassVar[str | None] = None  # routine, and on the hot path

    kind: Literal["update_applied"] = "update_applied"
    source: WriteSource
    keys: tuple[str, ...]
    call_id: str | None = None
    revision: int | None = None
    reused_call_id: bool = False


#: The fields a write names when it reports itself (the rest keep their defaults): the
#: ``model_fields_set`` of the ``UpdateApplied`` it builds unvalidated (see .._models).
APPLIED_GIVEN = frozenset(
    {
        "layer_id",
        "scope_key",
        "scope",
        "execution_id",
        "source",
        "keys",
        "call_id",
        "revision",
        "reused_call_id",
    }
)


class ScopeReset(ScratchpadEvent):
    """A scope's state was deleted (an HTTP ``DELETE``, the CLI's ``reset``, an erasure):
    its next write starts from the initial state. ``revision``: the last revision it had,
    when known (a reset seen from another process does not know it)."""

    log_level: ClassVar[str | None] = "info"

    kind: Literal["scope_reset"] = "scope_reset"
    revision: int | None = None


class UpdateRetried(ScratchpadEvent):
    """A call came again with the id and the arguments of one already applied to this
    scope: a retry. Nothing was written; the caller got the first call's result.
    ``revision`` is the revision the first call made, ``keys`` the keys it wrote."""

    log_level: ClassVar[str | None] = "info"  # a runtime's retry: worth seeing, no fault

    kind: Literal["update_retried"] = "update_retried"
    source: WriteSource
    keys: tuple[str, ...]
    call_id: str
    revision: int | None = None


class UpdateRejected(ScratchpadEvent):
    """An update was dropped. ``reason`` is a short word; ``message`` says what happened,
    to no reader in particular (the model is told what to do by its host, not here).
    ``refused`` is what was refused (``"update"``, ``"edit"``, ``"revert"``; ``None``
    when storage failed); ``limit`` and ``size``, for ``"too_large"``, the layer's
    ``max_state_bytes`` and the size the state would have had.

    For every reason but ``"timeout"`` and ``"unconfirmed"`` nothing changed.
    ``"timeout"`` means storage did not answer within ``write_timeout``, ``"unconfirmed"``
    that contact with it was lost while the write committed: the write may have landed,
    and repeating it is harmless.
    """

    kind: Literal["update_rejected"] = "update_rejected"
    hook: WriteSource
    reason: str
    message: str
    errors: tuple[dict[str, Any], ...] = ()
    call_id: str | None = None
    refused: str | None = None
    limit: int | None = None
    size: int | None = None


class StateDiscarded(ScratchpadEvent):
    """Persisted state failed the schema at init (or a refresh) and was replaced by the
    template or {}."""

    kind: Literal["state_discarded"] = "state_discarded"
    reason: str
    errors: tuple[dict[str, Any], ...] = ()


class ViewTruncated(ScratchpadEvent):
    """A recall was cut to fit its budget; storage still holds everything."""

    log_level: ClassVar[str | None] = "info"  # routine: a view cut to its budget, every turn

    kind: Literal["view_truncated"] = "view_truncated"
    budget: int
    total_tokens: int
    omitted_tokens: int
