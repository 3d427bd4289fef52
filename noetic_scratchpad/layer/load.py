"""Reading a scope's state: the other direction of :mod:`.writer`.

:func:`load` reads a scope's state (under ``read_timeout``) as a
:class:`~.snapshot.Snapshot`, and replaces one that no longer fits by the initial state,
with a ``StateDiscarded`` event; :func:`load_with_journal` reads the journal with it, at
the same instant.
"""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from typing import Any, TypeVar

from .. import _runtime, tracing
from ..context import ExecutionContext
from ..errors import StorageCorruptError, StorageError
from ..events import StateDiscarded
from ..storage import ScopedStorage
from ..storage.base import JournalView, Revision
from .config import STATE_KEY
from .pipeline import UpdatePipeline
from .retention import expired_revision, live, live_view
from .snapshot import Snapshot

__all__ = ("load", "load_with_journal")

_T = TypeVar("_T")
# Bound once: None without opentelemetry; whether a write (a read) opens a span.
_TRACER, _untraced = tracing.TRACER, tracing.untraced


async def load(
    pipeline: UpdatePipeline,
    storage: ScopedStorage,
    ctx: ExecutionContext,
    *,
    layer_id: str,
) -> Snapshot:
    """Read the scope's state, waiting at most ``read_timeout``; raises ``StorageError``
    past it. A stored state that cannot be used, or cannot be read back, is reported
    (``StateDiscarded``) and replaced by the initial state (not ``validated``: it is not
    the state stored at its revision).

    With a tracer provider set, one ``search_memory`` span (:mod:`~noetic_scratchpad.tracing`)."""
    if _TRACER is None or _untraced():
        return await _load(pipeline, storage, ctx, layer_id)
    key = storage.scope_key
    with tracing.memory_span("read", layer_id=layer_id, scope_key=key, scope=storage.scope) as span:
        loaded = await _load(pipeline, storage, ctx, layer_id)
        if span is not None:
            tracing.read(span, revision=loaded.revision, state=loaded.state, scope_key=key)
    return loaded


async def _load(
    pipeline: UpdatePipeline, storage: ScopedStorage, ctx: ExecutionContext, layer_id: str
) -> Snapshot:
    try:
        found = await _within_read_timeout(pipeline, storage, storage.get_revision(STATE_KEY))
        if found is not None and pipeline.config.ttl is not None:
            expired = await _within_read_timeout(
                pipeline, storage, expired_revision(pipeline.config, storage)
            )
            found = live(found, expired)
    except StorageCorruptError as exc:
        # Writes to the scope are refused until it is reset: they cannot read it either.
        _discarded(ctx, storage, layer_id, f"stored state cannot be read: {exc}", [])
        return Snapshot(pipeline.initial_state())
    return _loaded(pipeline, storage, ctx, found, layer_id=layer_id)


async def load_with_journal(
    pipeline: UpdatePipeline,
    storage: ScopedStorage,
    ctx: ExecutionContext,
    *,
    layer_id: str,
    limit: int,
) -> tuple[Snapshot, JournalView]:
    """:func:`load`, and the scope's ``limit`` newest journal rows read at the same
            instant (so that they end at the loaded revision), with the stored state as it is (an
        expired one as nothing stored, with no rows), without the rows past
    ``history_max_age``."""
    view = await _within_read_timeout(
        pipeline, storage, storage.journal_view(STATE_KEY, limit=limit)
    )
    if pipeline.config.ttl is not None or pipeline.config.history_max_age is not None:
        view = await _within_read_timeout(
            pipeline, storage, live_view(pipeline.config, storage, STATE_KEY, view)
        )
    return _loaded(pipeline, storage, ctx, view.current, layer_id=layer_id), view


async def _within_read_timeout(
    pipeline: UpdatePipeline, storage: ScopedStorage, read: Awaitable[_T]
) -> _T:
    timeout = pipeline.config.read_timeout
    try:
        return await _runtime.wait_for(timeout, read)
    except _runtime.Expired:
        raise StorageError(
            f"The scratchpad of scope {storage.scope_key!r} could not be loaded within "
            f"{timeout:g} s (read_timeout); nothing was changed. Check that the storage "
            "answers, then retry, or raise read_timeout"
        ) from None


def _loaded(
    pipeline: UpdatePipeline,
    storage: ScopedStorage,
    ctx: ExecutionContext,
    found: Revision | None,
    *,
    layer_id: str,
) -> Snapshot:
    """The state to use for what storage holds (``found``; ``None``: nothing)."""
    if found is None:
        return Snapshot(pipeline.initial_state())
    stored, revision = found.value, found.revision
    problem = pipeline.problem(stored)
    if problem is None:
        return Snapshot(stored, revision, validated=True)
    reason, errors = problem
    _discarded(ctx, storage, layer_id, reason, errors)
    return Snapshot(pipeline.initial_state(), revision)


def _discarded(
    ctx: ExecutionContext,
    storage: ScopedStorage,
    layer_id: str,
    reason: str,
    errors: Sequence[dict[str, Any]],
) -> None:
    ctx.events.emit(
        StateDiscarded(
            layer_id=layer_id,
            scope_key=storage.scope_key,
            scope=storage.scope,
            execution_id=ctx.execution_id,
            reason=reason,
            errors=tuple(errors),
        )
    )
