"""The scratchpad layer: a notepad the model reads every turn and writes with a tool call."""

from __future__ import annotations

import asyncio
import copy
import json
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

import anyio
from pydantic import PydanticUserError

from .. import _deadline, _json
from ..context import ExecutionContext
from ..errors import (
    ScratchpadConfigError,
    ScratchpadReadOnlyError,
    ScratchpadUpdateError,
    ScratchpadValidationError,
    StorageError,
)
from ..events import StateDiscarded, UpdateApplied, UpdateRejected, ViewTruncated, WriteSource
from ..items import FunctionCall, LLMResponse, Message
from ..merge import MAX_DEPTH, InvalidValueError, merge_state, to_json_value
from ..render import contains_float, estimate_tokens, render_view
from ..schema import SchemaGate
from ..storage import ScopedStorage
from .base import (
    Budget,
    FunctionOutcome,
    InitResult,
    LayerData,
    LayerFunction,
    LayerHooks,
    RecallResult,
    Slot,
    SpawnResult,
    StoreResult,
)

__all__ = (
    "UPDATE_TOOL",
    "ScratchpadConfig",
    "ScratchpadHandle",
    "ScratchpadLayer",
    "ScratchpadState",
    "parse_arguments",
    "scratchpad",
)

ScratchpadState = str | dict[str, Any]

#: The tool name a model calls: ``{layer_id}/{function}``.
UPDATE_TOOL = "scratchpad/update"

_STATE_KEY = "state"

_FIX_HINTS = {
    "malformed": "Call scratchpad/update with a JSON object of the fields to change, "
    'for example {"currentGoal": "..."}.',
    "schema": "Fix these fields and call scratchpad/update again with only the fields to change.",
    "too_large": "Condense the scratchpad: replace long lists or notes with a short summary "
    "(writing a key replaces its value) and try again.",
    "read_only": "This scratchpad is read-only; do not try to update it.",
}


@dataclass(frozen=True, slots=True)
class ScratchpadConfig:
    """How a scratchpad behaves. Every limit has a safe default."""

    scope: Literal["thread", "resource"] = "thread"
    schema: Any = None
    """A pydantic model (or any type ``TypeAdapter`` accepts) the state must fit."""
    template: str | None = None
    """Initial content when nothing is stored: text, or a JSON object when there is a schema."""
    read_only: bool = False
    max_state_bytes: int = 128 * 1024
    """An update that would make the stored JSON bigger than this is rejected (``too_large``)."""
    write_timeout: float | None = 30.0
    """Seconds a write may wait for storage before it is reported as failed."""

    def __post_init__(self) -> None:
        if self.scope not in ("thread", "resource"):
            raise ScratchpadConfigError(f"scope must be 'thread' or 'resource', not {self.scope!r}")
        if self.template is not None and not isinstance(self.template, str):
            raise ScratchpadConfigError(
                "template must be text (with a schema, a JSON object as text: json.dumps(...)), "
                f"not a {type(self.template).__name__}"
            )
        if not isinstance(self.read_only, bool):
            raise ScratchpadConfigError(f"read_only must be True or False, not {self.read_only!r}")
        if isinstance(self.max_state_bytes, bool) or not isinstance(self.max_state_bytes, int):
            raise ScratchpadConfigError(
                f"max_state_bytes must be an int, not {self.max_state_bytes!r}"
            )
        if self.write_timeout is not None and (
            isinstance(self.write_timeout, bool) or not isinstance(self.write_timeout, int | float)
        ):
            raise ScratchpadConfigError(
                f"write_timeout must be a number of seconds or None, not {self.write_timeout!r}"
            )
        if self.max_state_bytes < 2:
            raise ScratchpadConfigError(
                f"max_state_bytes must be at least 2, not {self.max_state_bytes}"
            )
        if self.write_timeout is not None and self.write_timeout <= 0:
            raise ScratchpadConfigError(
                f"write_timeout must be positive or None, not {self.write_timeout}"
            )


def parse_arguments(arguments: str | Mapping[str, Any]) -> dict[str, Any]:
    """Turn a model's tool-call arguments into an update, or raise ``ScratchpadUpdateError``."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments or "{}", parse_constant=_reject_constant)
        except ValueError as exc:
            raise ScratchpadUpdateError(
                f"The arguments are not valid JSON ({exc}). {_FIX_HINTS['malformed']}",
                reason="malformed",
            ) from None
        except RecursionError:  # the stdlib parser recurses once per nesting level
            raise ScratchpadUpdateError(
                f"The arguments are nested far too deeply (more than {MAX_DEPTH} levels "
                f"are never stored). {_FIX_HINTS['malformed']}",
                reason="malformed",
            ) from None
    if not isinstance(arguments, Mapping):
        raise ScratchpadUpdateError(
            f"The arguments are a JSON {_json_kind(arguments)}, not an object. "
            + _FIX_HINTS["malformed"],
            reason="malformed",
        )
    return dict(arguments)


class ScratchpadLayer:
    """The scratchpad context layer. Build it with :func:`scratchpad`."""

    id = "scratchpad"
    name = "Scratchpad"
    slot = Slot.SCRATCHPAD
    budget = Budget(min=200, max=1500)

    def __init__(self, config: ScratchpadConfig) -> None:
        self.config = config
        try:
            self._gate = None if config.schema is None else SchemaGate(config.schema)
        except (TypeError, ValueError, PydanticUserError) as exc:  # types pydantic cannot handle
            raise ScratchpadConfigError(f"unusable scratchpad schema: {exc}") from exc
        self._initial: ScratchpadState = self._check_template(config.template)
        self._known = _KnownStates()
        parameters: dict[str, Any] = (
            self._gate.tool_parameters()
            if self._gate
            else {"type": "object", "additionalProperties": True}
        )
        self.provides: dict[str, LayerData | LayerFunction] = {
            "snapshot": LayerData(read=_copy_state, description="The current scratchpad state."),
            "update": LayerFunction(
                description=(
                    "Update your scratchpad: your notes for this task (goal, steps done, "
                    "blockers). Pass only the fields to change; objects merge into what is "
                    "there, lists and other values replace it."
                ),
                parameters=parameters,
                transition=self._transition,
                exposed=not config.read_only,
            ),
        }
        self.hooks = LayerHooks(
            init=self.init, recall=self.recall, store=self.store, on_spawn=self.on_spawn
        )

    @property
    def scope(self) -> Literal["thread", "resource"]:
        return self.config.scope

    def initial_state(self) -> ScratchpadState:
        """The state of a scope nothing has been written to: the template, else empty."""
        return _copy_state(self._initial)

    # -- hooks ---------------------------------------------------------------------------

    async def init(
        self, *, storage: ScopedStorage, scope_key: str, ctx: ExecutionContext
    ) -> InitResult:
        """Load the scope's state (or the template), and bind ``ctx.context["scratchpad"]``."""
        stored = await storage.get(_STATE_KEY)
        state = self.initial_state() if stored is None else stored
        problem = None if stored is None else self._state_problem(stored)
        if problem is not None:
            reason, errors = problem
            ctx.events.emit(
                StateDiscarded(
                    layer_id=self.id,
                    scope_key=scope_key,
                    execution_id=ctx.execution_id,
                    reason=reason,
                    errors=tuple(errors),
                )
            )
            state = self.initial_state()
        handle = self.bind(storage, ctx, state)
        if problem is None and stored is not None and self._gate is not None:
            # Just checked: the first write, which reads a copy of it back, need not.
            handle.seen(stored)
        return InitResult(state=state)

    async def recall(
        self,
        *,
        state: ScratchpadState,
        budget: int | Budget,
        ctx: ExecutionContext,
        log: Any = None,
        query: str = "",
    ) -> RecallResult | None:
        """The ``<scratchpad>`` block for ``state`` in at most ``budget`` tokens, or ``None``."""
        if not state:
            return None
        limit = budget.max if isinstance(budget, Budget) else budget
        handle = ctx.context.get(self.id)
        hint = handle.floats_hint(state) if isinstance(handle, ScratchpadHandle) else None
        view = render_view(state, limit, ctx.tokenize or estimate_tokens, has_floats=hint)
        if view.truncated:
            ctx.events.emit(
                ViewTruncated(
                    layer_id=self.id,
                    scope_key=ctx.scope_key(self.scope),
                    execution_id=ctx.execution_id,
                    budget=limit,
                    total_tokens=view.total_tokens,
                    omitted_tokens=view.omitted_tokens,
                )
            )
        if view.text is None:
            return None
        return RecallResult(
            items=[Message(role="developer", content=view.text)], token_count=view.tokens
        )

    async def store(
        self,
        *,
        new_items: Sequence[Any],
        state: ScratchpadState,
        ctx: ExecutionContext,
        log: Any = None,
        response: LLMResponse | None = None,
    ) -> StoreResult | None:
        """Apply the ``scratchpad/update`` calls no one has applied yet, in order.

        Bad calls are dropped with an ``UpdateRejected`` event; this hook never raises for
        them. Returns the new state, or ``None`` when nothing was applied.
        """
        if self.config.read_only:
            return None
        calls = [
            item
            for item in new_items
            if isinstance(item, FunctionCall)
            and item.name == UPDATE_TOOL
            and item.call_id not in ctx.handled_call_ids
        ]
        if not calls:
            return None
        handle = self._handle(ctx, state)
        applied = False
        for call in calls:
            # Checked per call, not up front: the same id may appear twice in one batch.
            if call.call_id in ctx.handled_call_ids:
                continue
            ctx.handled_call_ids.add(call.call_id)
            try:
                await handle.apply(call.arguments, source="store", call_id=call.call_id)
            except (ScratchpadUpdateError, StorageError):
                continue  # reported as an UpdateRejected event
            applied = True
        # A copy: the host owns what it gets back, and the handle's state may be the very
        # object a backend stores (the memory backend keeps it without copying).
        return StoreResult(state=_copy_state(handle.state)) if applied else None

    async def on_spawn(
        self, *, parent_state: ScratchpadState, child_ctx: ExecutionContext
    ) -> SpawnResult | None:
        """Resource scope: the child starts from a copy of the parent's state. Thread: nothing."""
        if self.scope != "resource":
            return None
        return SpawnResult(child_state=copy.deepcopy(parent_state))

    # -- binding and writes --------------------------------------------------------------

    def bind(
        self, storage: ScopedStorage | None, ctx: ExecutionContext, state: ScratchpadState
    ) -> ScratchpadHandle:
        """Attach a handle to ``ctx.context[self.id]`` and return it."""
        handle = ScratchpadHandle(self, storage, ctx, state)
        ctx.context[self.id] = handle
        return handle

    def _handle(self, ctx: ExecutionContext, state: ScratchpadState) -> ScratchpadHandle:
        handle = ctx.context.get(self.id)
        if isinstance(handle, ScratchpadHandle) and handle.layer is self:
            return handle
        return self.bind(None, ctx, state)  # a host calling store without init: no storage

    def _transition(self, args: Mapping[str, Any], state: Any) -> FunctionOutcome:
        if self.config.read_only:
            raise ScratchpadReadOnlyError(_FIX_HINTS["read_only"])
        update = self.clean_update(args)
        new_state = self.apply_update(state, update)
        return FunctionOutcome(result=_applied_text(update), state=new_state)

    def clean_update(self, args: str | Mapping[str, Any]) -> dict[str, Any]:
        """Parse and check an update before it meets any state; raises ``ScratchpadUpdateError``."""
        # A plain dict is copied by to_json_value anyway; anything else is parsed first.
        values = args if type(args) is dict else parse_arguments(args)
        try:
            cleaned: dict[str, Any] = to_json_value(values)
        except InvalidValueError as exc:
            raise ScratchpadUpdateError(
                f"The update cannot be stored as JSON: {exc}. Send only objects, lists, "
                "strings, finite numbers, booleans and null. " + _FIX_HINTS["malformed"],
                reason="malformed",
            ) from None
        return cleaned

    def apply_update(self, state: Any, update: Mapping[str, Any]) -> dict[str, Any]:
        """Merge a cleaned update into ``state`` and check the result. Pure.

        A state that no longer fits the schema (written before the schema changed) is
        replaced by the initial state first, as at init, so it cannot block later updates.
        """
        return self._apply_update(state, update)[0]

    def _apply_update(
        self, state: Any, update: Mapping[str, Any], *, passed_json: bytes | None = None
    ) -> tuple[dict[str, Any], bytes]:
        """:meth:`apply_update`, also returning the new state's JSON. ``passed_json``: the
        JSON of a state known to pass, so that a decoded copy of it need not be checked."""
        known = self._known.contains(state) or (
            passed_json is not None and self._gate is not None and _json_is(state, passed_json)
        )
        if not known and self._state_problem(state) is not None:
            # Checked before merging: an update that happens to fix the bad field must not
            # bring back the rest of a state that init reported as discarded.
            state = self.initial_state()
        merged = merge_state(state, update)
        if self._gate is not None:
            # The prior state fits, so only the fields the update writes can fail.
            errors = self._gate.errors_after_update(merged, update.keys())
            if errors:
                raise ScratchpadValidationError(
                    "The update does not fit the scratchpad's schema: "
                    f"{_describe_errors(errors)}. {_FIX_HINTS['schema']}",
                    errors=errors,
                )
        encoded = _json.dumps(merged)
        size = len(encoded)
        if size > self.config.max_state_bytes:
            raise ScratchpadUpdateError(
                f"The scratchpad would grow to {size:,} bytes, over its limit of "
                f"{self.config.max_state_bytes:,}. {_FIX_HINTS['too_large']}",
                reason="too_large",
            )
        self._known.add(merged)
        return merged, encoded

    def _state_problem(self, state: Any) -> tuple[str, list[dict[str, Any]]] | None:
        """Why a stored state cannot be used, or ``None`` when it can."""
        if self._gate is None:
            if isinstance(state, str | dict):
                return None
            return f"stored state is a JSON {_json_kind(state)}, not text or an object", []
        if not isinstance(state, dict):
            return f"stored state is a JSON {_json_kind(state)}, not an object", []
        errors = self._gate.errors(state)
        if errors:
            return f"stored state does not fit the schema: {_describe_errors(errors)}", errors
        return None

    def _check_template(self, template: str | None) -> ScratchpadState:
        if self._gate is None:
            return template or ""
        if not template:
            return {}
        try:
            parsed = json.loads(template, parse_constant=_reject_constant)
            if isinstance(parsed, dict):
                parsed = to_json_value(parsed)  # strips forbidden keys; refuses 1e400 (inf)
        except (ValueError, RecursionError) as exc:
            raise ScratchpadConfigError(
                f"with a schema, the template must be a JSON object; it is not JSON: {exc}"
            ) from None
        if not isinstance(parsed, dict):
            raise ScratchpadConfigError(
                f"with a schema, the template must be a JSON object, not a {_json_kind(parsed)}"
            )
        errors = self._gate.errors(parsed)
        if errors:
            raise ScratchpadConfigError(
                f"the template does not fit the schema: {_describe_errors(errors)}"
            )
        return parsed

    def __repr__(self) -> str:
        return f"scratchpad({self.config!r})"


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

    def _remember(self, state: ScratchpadState, written: _Written | None) -> None:
        """Keep what the write that produced ``state`` learned about it, if it did."""
        if written is None or written.state is not state:
            self._floats = self._encoded = None
            return
        self._floats = None if written.has_floats is None else (state, written.has_floats)
        self._encoded = (state, written.encoded)

    def seen(self, state: ScratchpadState) -> None:
        """Note ``state``, the current one, as checked: a decoded copy storage hands back
        at the next write is then recognized by its JSON and not checked again."""
        if state is self.state and isinstance(state, dict):
            self._encoded = (state, _json.dumps(state))

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
        return _copy_state(state)

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
        return _applied_text(await self.apply(args, source="tool", call_id=call_id))

    async def apply(
        self,
        args: str | Mapping[str, Any],
        *,
        source: WriteSource,
        call_id: str | None = None,
    ) -> dict[str, Any]:
        """Apply one update through the serialized path, reporting it as an event.

        Returns the update as it was merged (parsed, checked, forbidden keys stripped);
        ``state`` holds the result.
        """
        layer = self.layer
        try:
            if layer.config.read_only:
                raise ScratchpadReadOnlyError(_FIX_HINTS["read_only"])
            update = layer.clean_update(args)
            self.state = await self._write(update)
        except ScratchpadUpdateError as exc:
            self._reject(source, call_id, exc.reason, exc.message, exc.errors)
            raise
        except _WriteTimeout as exc:
            self._reject(source, call_id, "timeout", str(exc), [])
            raise StorageError(str(exc)) from None
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
        """Re-read the stored state (another execution may have written it)."""
        if self.storage is not None:
            stored = await self.storage.get(_STATE_KEY)
            problem = None if stored is None else self.layer._state_problem(stored)
            self.state = self.layer.initial_state() if stored is None or problem else stored
        return self.snapshot

    async def _write(self, update: dict[str, Any]) -> ScratchpadState:
        layer = self.layer
        known = self._floats
        update_floats = contains_float(update)
        written: list[_Written] = []
        in_memory = self.storage is None or _in_memory(self.storage)
        # The JSON of the last state this handle wrote or checked: storage that hands back
        # decoded copies (PostgreSQL, SQLite after another process wrote) returns that JSON
        # when no one else wrote since, and then the copy need not be checked again.
        passed_json = None if in_memory or self._encoded is None else self._encoded[1]

        def transition(stored: Any) -> tuple[dict[str, Any], bytes]:
            base = layer.initial_state() if stored is None else stored
            merged, encoded = layer._apply_update(base, update, passed_json=passed_json)
            # When storage hands back the object this handle knows (no one else wrote since),
            # whether the result holds floats follows without looking at the whole state.
            same = known is not None and stored is known[0]
            has_floats = (known[1] or update_floats) if known is not None and same else None
            written[:] = [_Written(merged, has_floats, encoded)]
            return merged, encoded  # the backend stores this JSON instead of encoding again

        if self.storage is None:
            merged, _ = transition(self.state)
            self._remember(merged, written[0])
            return merged

        timeout = layer.config.write_timeout
        if timeout is None or in_memory:
            # No await point inside, so no timeout could fire: skip the cancel scope, which
            # costs more than the whole write to memory.
            new_state: ScratchpadState = await self.storage.update_encoded(_STATE_KEY, transition)
            self._remember(new_state, written[0] if written else None)
            return new_state
        if _on_asyncio():
            # One loop timer for all writes in flight: an anyio cancel scope or
            # asyncio.timeout() per write costs a sizeable part of the write.
            limit = _deadline.limit(timeout)
            try:
                with limit:
                    new_state = await self.storage.update_encoded(_STATE_KEY, transition)
            except TimeoutError:
                if not limit.expired:
                    raise  # the backend's own timeout, not ours
            expired = limit.expired
        else:
            with anyio.move_on_after(timeout) as scope:
                new_state = await self.storage.update_encoded(_STATE_KEY, transition)
            expired = scope.cancelled_caught
        if not expired:
            self._remember(new_state, written[0] if written else None)
            return new_state
        # The backend may have committed just before it was cut off: say so, never "lost".
        raise _WriteTimeout(
            f"The scratchpad did not answer within {timeout:g} s, so the update may have been "
            "saved or not. Check the scratchpad and repeat the update if it is missing; "
            "repeating an update is harmless."
        )

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


def _on_asyncio() -> bool:
    """Whether the running loop is asyncio's (the alternative anyio supports is trio)."""
    return asyncio._get_running_loop() is not None


class _WriteTimeout(Exception):
    """``write_timeout`` passed before the backend answered; raised as ``StorageError``."""


@dataclass(frozen=True, slots=True)
class _Written:
    """What a transition produced: the state, whether it holds floats (if known), its JSON."""

    state: dict[str, Any]
    has_floats: bool | None
    encoded: bytes


def _in_memory(storage: ScopedStorage) -> bool:
    """Whether writes go to plain memory storage, whose ``update`` never suspends (so no
    timeout could fire) and hands ``fn`` the very object it stored last."""
    return type(storage) is ScopedStorage and type(storage.backend).in_process


class _KnownStates:
    """States this layer produced lately, by identity, so a write need not check them again.

    Validation is the costliest step of a write, and the state a write starts from is
    nearly always one the layer just produced: the very object (memory storage, SQLite's
    cache of the rows it committed, or the previous write in a batch). Decoded copies are
    recognized by the handle, which keeps the JSON of the last state it wrote. Thread-safe
    (storage may run transitions in its own thread) and bounded to a few objects.
    """

    def __init__(self, max_objects: int = 8) -> None:
        self._lock = threading.Lock()
        self._objects: dict[int, Any] = {}
        self._max_objects = max_objects

    def add(self, state: Any) -> None:
        with self._lock:
            self._objects[id(state)] = state
            if len(self._objects) > self._max_objects:
                del self._objects[next(iter(self._objects))]

    def contains(self, state: Any) -> bool:
        with self._lock:
            return self._objects.get(id(state)) is state


def _json_is(state: Any, expected: bytes) -> bool:
    """Whether ``state`` encodes to exactly ``expected``."""
    try:
        return _json.dumps(state) == expected
    except ValueError:
        return False


def scratchpad(config: ScratchpadConfig | None = None, /, **options: Any) -> ScratchpadLayer:
    """Build a scratchpad layer: ``scratchpad()``, ``scratchpad(scope="resource")``,
    ``scratchpad(ScratchpadConfig(...))`` or ``scratchpad(schema=TaskNotes)``.

    Raises ``ScratchpadConfigError`` (a ``ValueError``) at once for a bad scope, schema,
    template or limit.
    """
    if config is None:
        try:
            config = ScratchpadConfig(**options)
        except TypeError as exc:
            raise ScratchpadConfigError(f"{exc}; see ScratchpadConfig for the options") from None
    elif options:
        try:
            config = replace(config, **options)
        except TypeError as exc:
            raise ScratchpadConfigError(f"{exc}; see ScratchpadConfig for the options") from None
    return ScratchpadLayer(config)


def _copy_state(state: ScratchpadState) -> ScratchpadState:
    """A deep copy, by JSON round trip: several times faster than ``copy.deepcopy``."""
    if isinstance(state, str):
        return state
    copied: dict[str, Any] = _json.loads(_json.dumps(state))
    return copied


def _applied_text(update: Mapping[str, Any]) -> str:
    keys = ", ".join(update) or "nothing"
    return f"Scratchpad updated ({keys})."


def _describe_errors(errors: Sequence[dict[str, Any]], limit: int = 5) -> str:
    parts = [
        f"{'.'.join(str(part) for part in error['loc']) or 'the state'}: {error['msg']}"
        for error in errors[:limit]
    ]
    if len(errors) > limit:
        parts.append(f"and {len(errors) - limit} more")
    return "; ".join(parts)


def _json_kind(value: Any) -> str:
    kinds = {str: "string", bool: "boolean", int: "number", float: "number", list: "array"}
    return "null" if value is None else kinds.get(type(value), type(value).__name__)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")
