"""``ctx.context["scratchpad"]``: one execution's view of a scope, and its write path."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .. import _deadline, _json
from ..context import ExecutionContext
from ..errors import (
    ScratchpadReadOnlyError,
    ScratchpadUpdateError,
    StorageError,
    StorageOutcomeUnknownError,
)
from ..events import UpdateApplied, UpdateRejected, WriteSource
from ..render import contains_float
from ..storage import ScopedStorage
from .arguments import FIX_HINTS, applied_text
from .config import STATE_KEY, ScratchpadState

if TYPE_CHECKING:
    from .scratchpad import ScratchpadLayer

__all__ = ("ScratchpadHandle", "copy_state")


class ScratchpadHandle:
    """What code sees as ``ctx.context["scratchpad"]``: ``.snapshot`` and ``await .update()``.

    Every write is a read-modify-write of the latest *stored* state, serialized per scope
    by the backend, so concurrent executions never lose each other's updates.
    """

    def __init__(
        self,
        layer: ScratchpadLayer,
        storage: ScopedStorage | None,
        ctx: ExecutionContext,
        state: ScratchpadState,
    ) -> None:
        self.layer = layer
        self.storage = storage
        self.ctx = ctx
        self.scope_key = storage.scope_key if storage else ctx.scope_key(layer.scope)
        self.state: ScratchpadState = state
        """The latest state this handle knows of. Treat it as read-only; see ``snapshot``."""
        # (state object, whether it holds floats): lets recall pick the fast renderer.
        self._floats: tuple[Any, bool] | None = None
        # (state object, its JSON) after a write: copies of it need no encoding.
        self._encoded: tuple[Any, bytes] | None = None
        # The last state this handle wrote or checked: a decoded copy of it that storage
        # hands back at the next write need not be checked again. With the JSON text it
        # was read from, when storage gave that: the same text read back proves it at once.
        self._passed: Any = None
        self._passed_json: str | None = None

    def _remember(self, state: ScratchpadState, written: _Written | None) -> None:
        """Keep what the write that produced ``state`` learned about it, if it did."""
        self._passed_json = None
        if written is None or written.state is not state:
            self._floats = self._encoded = self._passed = None
            return
        self._floats = None if written.has_floats is None else (state, written.has_floats)
        self._encoded = (state, written.encoded)
        self._passed = state

    def seen(self, state: ScratchpadState, stored_json: str | None = None) -> None:
        """Note ``state``, the current one, as checked (``stored_json``: the text storage
        read it from, if known): a decoded copy storage hands back at the next write is
        then recognized by its text or content and not checked again."""
        if state is self.state and isinstance(state, dict):
            self._passed = state
            self._passed_json = stored_json

    def floats_hint(self, state: Any) -> bool | None:
        """Whether ``state`` holds floats, if this handle knows that object; else ``None``."""
        known = self._floats
        if known is not None and known[0] is state:
            return known[1]
        if state is self.state and isinstance(state, dict):
            has_floats = contains_float(state)
            self._floats = (state, has_floats)
            return has_floats
        return None

    @property
    def snapshot(self) -> ScratchpadState:
        """A copy of the current state: changing it never changes the scratchpad."""
        return self._copy(self.state)

    def _copy(self, state: ScratchpadState) -> ScratchpadState:
        encoded = self._encoded
        if encoded is not None and encoded[0] is state:
            copied: dict[str, Any] = _json.loads(encoded[1])  # its JSON is at hand
            return copied
        return copy_state(state)

    async def update(self, values: Mapping[str, Any]) -> None:
        """Merge ``values`` into the scratchpad and store it; ``snapshot`` shows the result.

        Like ``dict.update`` it returns ``None``: a copy of the state on every write would
        cost as much as the write itself on a large scratchpad.

        Raises ``ScratchpadValidationError`` (schema), ``ScratchpadReadOnlyError``,
        ``ScratchpadUpdateError`` (bad values, too large) or ``StorageError``; on any of
        them the stored state is unchanged.
        """
        await self.apply(values, source="api")

    async def call(
        self, name: str, args: str | Mapping[str, Any], *, call_id: str | None = None
    ) -> str:
        """Run the provided function ``name`` as the model's tool call; returns its output."""
        if name != "update":
            raise KeyError(f"the scratchpad provides no function {name!r}; it has 'update'")
        return applied_text(await self.apply(args, source="tool", call_id=call_id))

    async def apply(
        self,
        args: str | Mapping[str, Any],
        *,
        source: WriteSource,
        call_id: str | None = None,
    ) -> dict[str, Any]:
        """Apply one update through the serialized path, reporting it as an event.

        Returns the update as it was merged (parsed, checked, forbidden keys stripped);
        ``state`` holds the result, and shares the update's values: treat both as read-only.
        """
        layer = self.layer
        try:
            if layer.config.read_only:
                raise ScratchpadReadOnlyError(FIX_HINTS["read_only"])
            update = layer.clean_update(args)
            self.state = await self._write(update)
        except ScratchpadUpdateError as exc:
            self._reject(source, call_id, exc.reason, exc.message, exc.errors)
            raise
        except _WriteTimeout as exc:
            self._reject(source, call_id, "timeout", str(exc), [])
            raise StorageError(str(exc)) from None
        except StorageOutcomeUnknownError as exc:
            message = (
                f"The scratchpad may or may not have been saved ({exc}). Check the "
                "scratchpad and repeat the update if it is missing; repeating an update is "
                "harmless."
            )
            self._reject(source, call_id, "unconfirmed", message, [])
            raise
        except ValueError as exc:  # the backend refused the key or value: retrying won't help
            message = (
                f"The scratchpad could not be saved: storage refused it ({exc}); it is "
                "unchanged, and the same update would be refused again."
            )
            self._reject(source, call_id, "refused", message, [])
            raise StorageError(message) from exc
        except Exception as exc:
            message = (
                f"The scratchpad could not be saved ({type(exc).__name__}: {exc}); it is "
                "unchanged. Try the update again later."
            )
            self._reject(source, call_id, "storage", message, [])
            if isinstance(exc, StorageError):
                raise
            raise StorageError(message) from exc
        if call_id is not None:
            self.ctx.handled_call_ids.add(call_id)
        self.ctx.events.emit(
            UpdateApplied(
                layer_id=layer.id,
                scope_key=self.scope_key,
                execution_id=self.ctx.execution_id,
                source=source,
                keys=tuple(update),
                call_id=call_id,
            )
        )
        return update

    async def refresh(self) -> ScratchpadState:
        """Re-read the stored state (another execution may have written it).

        Raises ``StorageError`` when storage does not answer within ``read_timeout``; the
        state is then left as it was.
        """
        if self.storage is not None:
            stored, stored_json = await self.layer._read(self.storage)
            self.state, checked = self.layer._load(stored, self.scope_key, self.ctx)
            if checked:
                self.seen(self.state, stored_json)
        return self.snapshot

    async def _write(self, update: dict[str, Any]) -> ScratchpadState:
        layer = self.layer
        known = self._floats
        update_floats = contains_float(update)
        written: list[_Written] = []
        in_memory = self.storage is None or _in_memory(self.storage)
        # The last state this handle wrote or checked: storage that hands back decoded
        # copies (PostgreSQL, SQLite after another process wrote) returns the same JSON
        # when no one else wrote since, and then the copy need not be checked again.
        passed = None if in_memory else self._passed
        passed_json = None if in_memory else self._passed_json

        def transition(stored: Any, stored_json: str | None) -> tuple[dict[str, Any], bytes]:
            base = layer.initial_state() if stored is None else stored
            checked = stored_json is not None and stored_json == passed_json
            merged, encoded = layer._apply_update(
                base, update, passed=passed, checked=checked, cleaned=True
            )
            # When storage hands back the object this handle knows (no one else wrote since),
            # whether the result holds floats follows without looking at the whole state.
            same = known is not None and stored is known[0]
            has_floats = (known[1] or update_floats) if known is not None and same else None
            written[:] = [_Written(merged, has_floats, encoded)]
            return merged, encoded  # the backend stores this JSON instead of encoding again

        storage = self.storage
        if storage is None:
            merged, _ = transition(self.state, None)
            self._remember(merged, written[0])
            return merged

        pending = storage.update_encoded(STATE_KEY, transition)
        timeout = layer.config.write_timeout
        try:
            # Memory storage never suspends in update, so no limit could ever fire there.
            new_state: ScratchpadState = await (
                pending if timeout is None or in_memory else _deadline.wait_for(timeout, pending)
            )
        except _deadline.Expired:
            # The backend may have committed just before it was cut off: say so, never "lost".
            raise _WriteTimeout(
                f"The scratchpad did not answer within {timeout:g} s, so the update may have "
                "been saved or not. Check the scratchpad and repeat the update if it is "
                "missing; repeating an update is harmless."
            ) from None
        self._remember(new_state, written[0] if written else None)
        return new_state

    def _reject(
        self,
        source: WriteSource,
        call_id: str | None,
        reason: str,
        message: str,
        errors: Sequence[dict[str, Any]],
    ) -> None:
        self.ctx.events.emit(
            UpdateRejected(
                layer_id=self.layer.id,
                scope_key=self.scope_key,
                execution_id=self.ctx.execution_id,
                hook=source,
                reason=reason,
                message=message,
                errors=tuple(errors),
                call_id=call_id,
            )
        )

    def __repr__(self) -> str:
        return f"<ScratchpadHandle scope_key={self.scope_key!r}>"


class _WriteTimeout(Exception):
    """``write_timeout`` passed before the backend answered; raised as ``StorageError``."""


@dataclass(slots=True)  # not frozen: a frozen dataclass's __init__ is twice as slow
class _Written:
    """What a transition produced: the state, whether it holds floats (if known), its JSON."""

    state: dict[str, Any]
    has_floats: bool | None
    encoded: bytes


def _in_memory(storage: ScopedStorage) -> bool:
    """Whether writes go to plain memory storage, whose ``update`` never suspends (so no
    timeout could fire) and hands ``fn`` the very object it stored last."""
    return type(storage) is ScopedStorage and type(storage.backend).in_process


def copy_state(state: ScratchpadState) -> ScratchpadState:
    """A deep copy, by JSON round trip: several times faster than ``copy.deepcopy``."""
    if isinstance(state, str):
        return state
    copied: dict[str, Any] = _json.loads(_json.dumps(state))
    return copied
