"""The writer: runs the update pipeline against storage and reports the outcome, once.

Every write of a scope goes through :meth:`ScopeWriter.write` (the model's tool call, the
store hook, ``handle.update`` from code, ``harness.update_state``):

1. ``pipeline.prepare`` checks the arguments before storage is touched;
2. ``storage.update(STATE_KEY, transition)`` runs ``pipeline.transition`` on the
   latest stored state, serialized per scope by the backend, under ``write_timeout``;
3. an error becomes one ``UpdateRejected`` (:func:`_refusal` maps every error, once), a
   success one ``UpdateApplied``; the call id is recorded as handled.

:func:`load` is the other direction: read a scope's state (under ``read_timeout``) and
replace one that no longer fits by the initial state, with a ``StateDiscarded`` event.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .. import _deadline
from ..context import ExecutionContext
from ..errors import ScratchpadUpdateError, StorageError, StorageOutcomeUnknownError
from ..events import StateDiscarded, UpdateApplied, UpdateRejected, WriteSource
from ..render import contains_float
from ..storage import ScopedStorage
from ..storage.base import UpdateFn
from .config import STATE_KEY, UPDATE_TOOL, ScratchpadState
from .pipeline import UpdatePipeline

__all__ = ("Loaded", "ScopeWriter", "Written", "load")


@dataclass(slots=True)  # not frozen: a frozen dataclass's __init__ is twice as slow
class Written:
    """What a transition produced: the state, its JSON, whether it holds floats (``None``:
    not known)."""

    state: dict[str, Any]
    encoded: bytes
    has_floats: bool | None


@dataclass(frozen=True, slots=True)
class Loaded:
    """A scope's state as :func:`load` found it; ``checked``: it is the stored state and
    it passed the schema."""

    state: ScratchpadState
    checked: bool


async def load(
    pipeline: UpdatePipeline,
    storage: ScopedStorage,
    ctx: ExecutionContext,
    *,
    layer_id: str,
) -> Loaded:
    """Read the scope's state, waiting at most ``read_timeout``; raises ``StorageError``
    past it. A stored state that cannot be used is reported (``StateDiscarded``) and
    replaced by the initial state."""
    timeout = pipeline.config.read_timeout
    try:
        stored = await _deadline.wait_for(timeout, storage.get(STATE_KEY))
    except _deadline.Expired:
        raise StorageError(
            f"The scratchpad of scope {storage.scope_key!r} could not be loaded within "
            f"{timeout:g} s (read_timeout); nothing was changed. Check that the storage "
            "answers, then retry, or raise read_timeout"
        ) from None
    if stored is None:
        return Loaded(pipeline.initial_state(), False)
    problem = pipeline.problem(stored)
    if problem is None:
        return Loaded(stored, pipeline.gate is not None)
    reason, errors = problem
    ctx.events.emit(
        StateDiscarded(
            layer_id=layer_id,
            scope_key=storage.scope_key,
            execution_id=ctx.execution_id,
            reason=reason,
            errors=tuple(errors),
        )
    )
    return Loaded(pipeline.initial_state(), False)


class ScopeWriter:
    """One execution's writes to one scope: each runs the pipeline through storage and
    emits exactly one ``UpdateApplied`` or ``UpdateRejected``."""

    def __init__(
        self,
        pipeline: UpdatePipeline,
        storage: ScopedStorage | None,
        ctx: ExecutionContext,
        *,
        layer_id: str,
        scope_key: str,
    ) -> None:
        self.pipeline = pipeline
        self.storage = storage
        self.ctx = ctx
        self.layer_id = layer_id
        self.scope_key = scope_key
        self.tool_name = UPDATE_TOOL
        """The update tool's name as the model sees it: refusals tell the model to call it."""

    async def write(
        self,
        args: str | Mapping[str, Any],
        *,
        source: WriteSource,
        call_id: str | None,
        current: ScratchpadState,
        passed: Any = None,
        floats: tuple[Any, bool] | None = None,
    ) -> tuple[dict[str, Any], ScratchpadState, Written | None]:
        """Apply one update. Returns it as merged, the new state, and what the transition
        learned about that state (``None`` when storage handed back another object).

        What the caller knows spares work: ``passed``, a state known to fit the schema
        (a decoded copy of it is not validated again); ``floats``, a state object and
        whether it holds floats.

        Raises ``ScratchpadUpdateError`` (refused) or ``StorageError`` (not saved, or not
        known to be saved), after its ``UpdateRejected``.
        """
        try:
            update = self.pipeline.prepare(args, tool=self.tool_name)
            new_state, written = await self._store(update, current, passed, floats)
        except BaseException as exc:
            refusal = _refusal(exc)
            if refusal is None:
                raise  # a cancellation: the caller's own doing
            reason, message, errors = refusal
            self._emit_rejected(source, call_id, reason, message, errors)
            if isinstance(exc, ScratchpadUpdateError | StorageError):
                raise
            raise StorageError(message) from (None if isinstance(exc, _WriteTimeout) else exc)
        if call_id is not None:
            self.ctx.handled_call_ids.add(call_id)
        self.ctx.events.emit(
            UpdateApplied(
                layer_id=self.layer_id,
                scope_key=self.scope_key,
                execution_id=self.ctx.execution_id,
                source=source,
                keys=tuple(update),
                call_id=call_id,
            )
        )
        return update, new_state, written

    async def _store(
        self,
        update: dict[str, Any],
        current: ScratchpadState,
        passed: Any,
        floats: tuple[Any, bool] | None,
    ) -> tuple[ScratchpadState, Written | None]:
        pipeline = self.pipeline
        update_floats = contains_float(update)
        # ``passed``: storage that hands back decoded copies (PostgreSQL, SQLite after
        # another process wrote) returns a value equal to it when no one else wrote since,
        # and then the copy need not be checked again.
        produced: list[Written] = []
        tool = self.tool_name

        def transition(stored: Any) -> dict[str, Any]:
            result = pipeline.transition(stored, update, passed=passed, cleaned=True, tool=tool)
            # From the state object the caller knows (no one else wrote since), whether the
            # result holds floats follows without looking at the whole state.
            same = floats is not None and stored is floats[0]
            has_floats = (floats[1] or update_floats) if floats is not None and same else None
            produced[:] = [Written(result.state, result.encoded, has_floats)]
            return result.state

        if self.storage is None:  # a host calling store without init: nothing to persist
            transition(current)
            return produced[0].state, produced[0]
        new_state = await self._update(transition)
        written = produced[0] if produced and produced[0].state is new_state else None
        return new_state, written

    async def _update(self, transition: UpdateFn) -> ScratchpadState:
        assert self.storage is not None  # checked by the caller
        pending = self.storage.update(STATE_KEY, transition)
        try:
            new_state: ScratchpadState = await _deadline.wait_for(
                self.pipeline.config.write_timeout, pending
            )
        except _deadline.Expired:
            raise _WriteTimeout(self.pipeline.config.write_timeout or 0) from None
        return new_state

    def _emit_rejected(
        self,
        source: WriteSource,
        call_id: str | None,
        reason: str,
        message: str,
        errors: Sequence[dict[str, Any]],
    ) -> None:
        self.ctx.events.emit(
            UpdateRejected(
                layer_id=self.layer_id,
                scope_key=self.scope_key,
                execution_id=self.ctx.execution_id,
                hook=source,
                reason=reason,
                message=message,
                errors=tuple(errors),
                call_id=call_id,
            )
        )


class _WriteTimeout(Exception):
    """``write_timeout`` passed before the backend answered."""

    def __init__(self, seconds: float) -> None:
        super().__init__(
            f"The scratchpad did not answer within {seconds:g} s, so the update may have "
            "been saved or not. Check the scratchpad and repeat the update if it is "
            "missing; repeating an update is harmless."
        )


def _refusal(exc: BaseException) -> tuple[str, str, Sequence[dict[str, Any]]] | None:
    """The one mapping of a failed write to (reason, message, errors); ``None`` for a
    cancellation or anything else that is not a failure of the write."""
    if isinstance(exc, ScratchpadUpdateError):
        return exc.reason, exc.message, exc.errors
    if isinstance(exc, _WriteTimeout):
        return "timeout", str(exc), []
    if isinstance(exc, StorageOutcomeUnknownError):
        return (
            "unconfirmed",
            f"The scratchpad may or may not have been saved ({exc}). Check the scratchpad "
            "and repeat the update if it is missing; repeating an update is harmless.",
            [],
        )
    if isinstance(exc, ValueError):  # the backend refused the key or value: no retry helps
        return (
            "refused",
            f"The scratchpad could not be saved: storage refused it ({exc}); it is "
            "unchanged, and the same update would be refused again.",
            [],
        )
    if isinstance(exc, Exception):
        return (
            "storage",
            f"The scratchpad could not be saved ({type(exc).__name__}: {exc}); it is "
            "unchanged. Try the update again later.",
            [],
        )
    return None
