"""The scratchpad layer: a notepad the model reads every turn and writes with a tool call."""

from __future__ import annotations

import contextlib
import copy
import json
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, Literal

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
from ..events import StateDiscarded, ViewTruncated
from ..items import FunctionCall, LLMResponse, Message
from ..merge import InvalidValueError, merge_state, to_json_value
from ..render import estimate_tokens, render_view
from ..schema import SchemaGate
from ..storage import ScopedStorage
from .arguments import (
    FIX_HINTS,
    applied_text,
    describe_errors,
    json_kind,
    parse_arguments,
    reject_constant,
)
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
from .config import STATE_KEY, UPDATE_TOOL, ScratchpadConfig, ScratchpadState
from .handle import ScratchpadHandle, copy_state

__all__ = ("ScratchpadLayer", "scratchpad")


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
            "snapshot": LayerData(read=copy_state, description="The current scratchpad state."),
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
        return copy_state(self._initial)

    # -- hooks ---------------------------------------------------------------------------

    async def init(
        self, *, storage: ScopedStorage, scope_key: str, ctx: ExecutionContext
    ) -> InitResult:
        """Load the scope's state (or the template), and bind ``ctx.context["scratchpad"]``."""
        stored, stored_json = await self._read(storage)
        state, checked = self._load(stored, scope_key, ctx)
        handle = self.bind(storage, ctx, state)
        if checked:
            handle.seen(state, stored_json)
        return InitResult(state=state)

    async def _read(self, storage: ScopedStorage) -> tuple[Any, str | None]:
        """What ``storage`` holds for the scope (``None``: nothing) and the JSON text it
        was read from (when storage has it), waiting at most ``read_timeout``; raises
        ``StorageError`` past it."""
        timeout = self.config.read_timeout
        try:
            found = await _deadline.wait_for(timeout, storage.get_encoded(STATE_KEY))
            return (None, None) if found is None else found
        except _deadline.Expired:
            raise StorageError(
                f"The scratchpad of scope {storage.scope_key!r} could not be loaded within "
                f"{timeout:g} s (read_timeout); nothing was changed. Check that the storage "
                "answers, then retry, or raise read_timeout"
            ) from None

    def _load(
        self, stored: Any, scope_key: str, ctx: ExecutionContext
    ) -> tuple[ScratchpadState, bool]:
        """The state to use for what storage holds (``None``: nothing), and whether it is
        that stored state, checked against the schema.

        A stored state that cannot be used (it fails the schema, or is not an object or
        text) is reported with ``StateDiscarded`` and replaced by the initial state.
        """
        if stored is None:
            return self.initial_state(), False
        problem = self._state_problem(stored)
        if problem is None:
            return stored, self._gate is not None
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
        return self.initial_state(), False

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
        return StoreResult(state=copy_state(handle.state)) if applied else None

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
            raise ScratchpadReadOnlyError(FIX_HINTS["read_only"])
        update = self.clean_update(args)
        new_state = self._apply_update(state, update, cleaned=True)[0]
        return FunctionOutcome(result=applied_text(update), state=new_state)

    def clean_update(self, args: str | Mapping[str, Any]) -> dict[str, Any]:
        """Parse and check an update before it meets any state; raises ``ScratchpadUpdateError``."""
        # A plain dict is copied by to_json_value anyway; anything else is parsed first.
        values = args if type(args) is dict else parse_arguments(args)
        try:
            cleaned: dict[str, Any] = to_json_value(values)
        except InvalidValueError as exc:
            raise ScratchpadUpdateError(
                f"The update cannot be stored as JSON: {exc}. Send only objects, lists, "
                "strings, finite numbers, booleans and null. " + FIX_HINTS["malformed"],
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
        self,
        state: Any,
        update: Mapping[str, Any],
        *,
        checked: bool = False,
        passed: Any = None,
        cleaned: bool = False,
    ) -> tuple[dict[str, Any], bytes]:
        """:meth:`apply_update`, also returning the new state's JSON. ``checked``: the
        caller knows ``state`` passes. ``passed``: a state known to pass, so that a decoded
        copy of it need not be checked again. ``cleaned``: ``update`` came from
        :meth:`clean_update` and is the caller's alone, so the new state may hold its
        values instead of copies."""
        known = (
            checked
            or self._known.contains(state)
            or state is passed
            or (passed is not None and self._gate is not None and _json.same_value(state, passed))
        )
        if not known and self._state_problem(state) is not None:
            # Checked before merging: an update that happens to fix the bad field must not
            # bring back the rest of a state that init reported as discarded.
            state = self.initial_state()
        merged = merge_state(state, update, cleaned=cleaned)
        if self._gate is not None:
            # The prior state fits, so only the fields the update writes can fail.
            errors = self._gate.errors_after_update(merged, update.keys())
            if errors:
                raise ScratchpadValidationError(
                    "The update does not fit the scratchpad's schema: "
                    f"{describe_errors(errors)}. {FIX_HINTS['schema']}",
                    errors=errors,
                )
        encoded = _json.dumps(merged)
        size = len(encoded)
        if size > self.config.max_state_bytes:
            raise ScratchpadUpdateError(
                f"The scratchpad would grow to {size:,} bytes, over its limit of "
                f"{self.config.max_state_bytes:,}. {FIX_HINTS['too_large']}",
                reason="too_large",
            )
        self._known.add(merged)
        return merged, encoded

    def _state_problem(self, state: Any) -> tuple[str, list[dict[str, Any]]] | None:
        """Why a stored state cannot be used, or ``None`` when it can."""
        if self._gate is None:
            if isinstance(state, str | dict):
                return None
            return f"stored state is a JSON {json_kind(state)}, not text or an object", []
        if not isinstance(state, dict):
            return f"stored state is a JSON {json_kind(state)}, not an object", []
        errors = self._gate.errors(state)
        if errors:
            return f"stored state does not fit the schema: {describe_errors(errors)}", errors
        return None

    def _check_template(self, template: str | None) -> ScratchpadState:
        if self._gate is None:
            return template or ""
        if not template:
            return {}
        try:
            parsed = json.loads(template, parse_constant=reject_constant)
            if isinstance(parsed, dict):
                parsed = to_json_value(parsed)  # strips forbidden keys; refuses 1e400 (inf)
        except (ValueError, RecursionError) as exc:
            raise ScratchpadConfigError(
                f"with a schema, the template must be a JSON object; it is not JSON: {exc}"
            ) from None
        if not isinstance(parsed, dict):
            raise ScratchpadConfigError(
                f"with a schema, the template must be a JSON object, not a {json_kind(parsed)}"
            )
        errors = self._gate.errors(parsed)
        if errors:
            raise ScratchpadConfigError(
                f"the template does not fit the schema: {describe_errors(errors)}"
            )
        return parsed

    def __repr__(self) -> str:
        return f"scratchpad({self.config!r})"


class _KnownStates:
    """States this layer produced lately, by identity, so a write need not check them again.

    Validation is the costliest step of a write, and the state a write starts from is
    nearly always one the layer just produced: the very object (memory storage, SQLite's
    cache of the rows it committed, or the previous write in a batch). Decoded copies are
    recognized by the handle, which keeps the last state it wrote or checked. Bounded to a
    few objects, and safe without a lock for transitions running in storage threads: each
    step is one call into the C implementation of ``OrderedDict``.
    """

    def __init__(self, max_objects: int = 8) -> None:
        self._objects: OrderedDict[int, Any] = OrderedDict()
        self._max_objects = max_objects

    def add(self, state: Any) -> None:
        self._objects[id(state)] = state
        if len(self._objects) > self._max_objects:
            with contextlib.suppress(KeyError):  # another thread took the oldest first
                self._objects.popitem(last=False)

    def contains(self, state: Any) -> bool:
        return self._objects.get(id(state)) is state


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
