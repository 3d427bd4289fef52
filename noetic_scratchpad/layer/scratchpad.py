"""The scratchpad layer: a notepad the model reads every turn and writes with a tool call."""

from __future__ import annotations

import copy
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal, NamedTuple

from ..context import ExecutionContext
from ..edits import EDIT_PARAMETERS
from ..errors import ScratchpadConfigError, ScratchpadUpdateError, StorageError
from ..events import EventBus
from ..items import FunctionCall, LLMResponse, developer_message
from ..keys import layer_prefix
from ..render import Tokenizer, check_token_counter
from ..storage import ScopedStorage, StorageBackend
from ..storage.sweep import DEFAULT_SWEEP_LIMIT, sweep_expired, trim_journals
from .arguments import applied_text, edited_text
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
from .config import ScratchpadConfig, ScratchpadState
from .handle import ScratchpadHandle, copy_state
from .load import load
from .pipeline import Rewrite, UpdatePipeline
from .reading import READ_DESCRIPTION, READ_PARAMETERS, cut_advice, read_part
from .texts import TEXT_PARAMETERS, texts_for
from .view import view_of

__all__ = ("HostTool", "ScratchpadLayer", "Swept", "scratchpad")


class Swept(NamedTuple):
    """What :meth:`ScratchpadLayer.sweep` removed: expired ``scopes`` and journal
    ``entries`` past ``history_max_age`` (``None``: the backend cannot)."""

    scopes: int | None
    entries: int | None


@dataclass(frozen=True, slots=True)
class HostTool:
    """One of the layer's tools as a host presents it: the layer's ``function``
    (``update``, ``edit``) under the host's ``name``, with the layer's description and
    parameters (a copy the host may change). ``exposed=False``: the scratchpad is read-only,
    and the model must not be offered it."""

    function: str
    name: str
    description: str
    parameters: dict[str, Any]
    strict: bool
    exposed: bool


class ScratchpadLayer:
    """The scratchpad context layer. Build it with :func:`scratchpad`.

    Its ``id`` is the config's ``name`` (``scratchpad`` without one): the key of its
    handle in ``ctx.context``, of its state in storage, and the first part of its tools'
    names (``profile/update``).
    """

    name = "Scratchpad"
    slot = Slot.SCRATCHPAD
    budget = Budget(min=200, max=1500)

    def __init__(self, config: ScratchpadConfig) -> None:
        self.config = config
        self.id = config.layer_id
        self.pipeline = UpdatePipeline(config)
        gate = self.pipeline.gate
        parameters: dict[str, Any]
        if gate is not None:
            parameters = gate.tool_parameters()
        elif config.text_notes:
            parameters = TEXT_PARAMETERS
        else:
            parameters = {"type": "object", "additionalProperties": True}
        self.texts = texts_for(
            gate.json_schema if gate else None,
            text_notes=config.text_notes,
            description=config.description,
            instructions=config.instructions,
            name=config.name,
        )
        """What the model is told about this scratchpad, in its schema's words."""
        self.provides: dict[str, LayerData | LayerFunction] = {
            "snapshot": LayerData(read=copy_state, description="The current scratchpad state."),
            "update": LayerFunction(
                description=self.texts.description,
                parameters=parameters,
                transition=self._transition,
                exposed=not config.read_only,
            ),
        }
        if config.edit_tool:
            # Strict: every field is required (nullable) and values travel as JSON text,
            # so providers can force the arguments into the schema (see ..edits).
            self.provides["edit"] = LayerFunction(
                description=self.texts.edit_description(f"{self.id}/update"),
                parameters=EDIT_PARAMETERS,
                transition=self._edit_transition,
                exposed=not config.read_only,
                strict=True,
            )
        # The read tool, for the parts of a cut view: offered when the state may be larger
        # than the block's budget (a token takes at least a byte of the stored JSON).
        self.read_tool = config.max_state_bytes > self.budget.max
        if self.read_tool:
            self.provides["read"] = LayerFunction(
                description=READ_DESCRIPTION,
                parameters=READ_PARAMETERS,
                transition=self._read_transition,
                exposed=not config.read_only,
                strict=True,
            )
        self.cut_advice = cut_advice(
            writable=not config.read_only,
            edit_tool=config.edit_tool,
            read_tool=self.read_tool and not config.read_only,
        )
        """What a cut view's notice tells the model to do about the parts it cannot see."""
        self._tools = tuple(f"{self.id}/{function}" for function in self.functions)
        self.hooks = LayerHooks(
            init=self.init, recall=self.recall, store=self.store, on_spawn=self.on_spawn
        )

    @property
    def functions(self) -> tuple[str, ...]:
        """The functions a model may call (``update``, and ``edit`` with ``edit_tool=True``),
        as tools named ``{id}/{function}`` (``scratchpad/update``, ``profile/update``)."""
        return ("update", "edit") if self.config.edit_tool else ("update",)

    def tool_names(self, separator: str = "_") -> dict[str, str]:
        """Each function's tool name for a host that joins the id and the function with
        ``separator`` (``profile_update``; the harness's own names use ``/``)."""
        return {
            function: f"{self.id}{separator}{function}" for function in ("update", "edit", "read")
        }

    @property
    def scope(self) -> Literal["thread", "resource"]:
        return self.config.scope

    def initial_state(self) -> ScratchpadState:
        """The state of a scope nothing has been written to: the template, else empty."""
        return self.pipeline.initial_state()

    async def open(
        self,
        storage: StorageBackend,
        *,
        thread_id: str | None = None,
        resource_id: str | None = None,
        events: EventBus | None = None,
        count_tokens: Tokenizer | None = None,
    ) -> ScratchpadHandle:
        """A handle bound to one scope of ``storage``, its state loaded: the one call a host
        needs (a framework integration, a server, an own loop).

        The scope is the thread's, or for ``scope="resource"`` the resource's (the thread's
        when ``resource_id`` is ``None``). A resource-scoped scratchpad needs only
        ``resource_id`` (``open(backend, resource_id="alice")``; its events then name the
        resource as their thread); any other needs ``thread_id``, else
        ``ScratchpadConfigError``. ``events``: the bus to report on (share the app's
        to see every scope's events; default, a bus of the handle's own, at
        ``handle.ctx.events``). ``count_tokens``: the model's token counter, which sizes
        ``handle.block()`` to its budget (default, about four characters a token). What
        the model reads of a refusal is its host's to render (``refusal_text``), with the
        tool's name as that host presents it.

        Raises ``StorageError`` when storage does not answer within ``read_timeout``.
        """
        if thread_id is None:
            if self.config.scope != "resource" or resource_id is None:
                needs = (
                    "resource_id or thread_id" if self.config.scope == "resource" else "thread_id"
                )
                raise ScratchpadConfigError(
                    f"open() of a {self.config.scope}-scoped scratchpad needs {needs}"
                )
            thread_id = resource_id  # no thread: the scope is the resource's alone
        ctx = ExecutionContext(
            thread_id=thread_id,
            resource_id=resource_id,
            events=events or EventBus(),
            tokenize=check_token_counter(count_tokens),
        )
        scoped = ScopedStorage.for_layer(storage, self, ctx)
        loaded = await load(self.pipeline, scoped, ctx, layer_id=self.id)
        handle = self.bind(scoped, ctx, loaded.state)
        handle.adopt(loaded)
        return handle

    def host_tools(self, names: Mapping[str, str]) -> list[HostTool]:
        """The tools this scratchpad has (``update``, ``edit`` with ``edit_tool=True``, and
        ``read`` when the state may outgrow the block's budget) under the names a host
        presents them with: ``names`` maps each function to its name (a function it does
        not name is left out). Texts that name another tool name it as the host does. A
        host offers the model those that are ``exposed``."""
        tools = []
        for function in ("update", "edit", "read"):
            provided = self.provides.get(function)
            if not isinstance(provided, LayerFunction) or function not in names:
                continue
            description = provided.description
            if function == "edit":
                description = self.texts.edit_description(names["update"])
            tools.append(
                HostTool(
                    function,
                    names[function],
                    description,
                    copy.deepcopy(dict(provided.parameters)),
                    provided.strict,
                    provided.exposed,
                )
            )
        return tools

    # -- hooks ---------------------------------------------------------------------------

    async def init(
        self, *, storage: ScopedStorage, scope_key: str, ctx: ExecutionContext
    ) -> InitResult:
        """Load the scope's state (or the template), and bind ``ctx.context[self.id]``."""
        loaded = await load(self.pipeline, storage, ctx, layer_id=self.id)
        self.bind(storage, ctx, loaded.state).adopt(loaded)
        return InitResult(state=loaded.state)

    async def recall(
        self,
        *,
        state: ScratchpadState,
        budget: int | Budget,
        ctx: ExecutionContext,
        log: Any = None,
        query: str = "",
    ) -> RecallResult | None:
        """The ``<scratchpad>`` block (``<scratchpad name="...">`` for a named one) for
        ``state`` in at most ``budget`` tokens, or ``None``."""
        if not state:
            return None
        limit = budget.max if isinstance(budget, Budget) else budget
        handle = ctx.context.get(self.id)
        hint = None
        if isinstance(handle, ScratchpadHandle):
            hint = handle.floats_hint(state)
            handle.viewed(limit)  # the model's writes are checked against this view
        view = view_of(
            state,
            limit,
            ctx,
            layer_id=self.id,
            scope=self.config.scope,
            has_floats=hint,
            advice=self.cut_advice,
            name=self.config.name,
        )
        if view.text is None:
            return None
        return RecallResult(items=[developer_message(view.text)], token_count=view.tokens)

    async def store(
        self,
        *,
        new_items: Sequence[Any],
        state: ScratchpadState,
        ctx: ExecutionContext,
        log: Any = None,
        response: LLMResponse | None = None,
    ) -> StoreResult | None:
        """Apply the calls of this layer's tools (``{id}/update``, ``{id}/edit``) in
        ``new_items``, in order, but those the
        runtime's tool path runs itself (their ids are in ``ctx.handled_call_ids``).

        A call applied before (the same id and arguments) is a retry: it writes nothing
        and is reported as an ``UpdateRetried``; an id met again with other arguments is
        a new call, applied. Bad calls are dropped with an ``UpdateRejected`` event; this
        hook never raises for them. Returns the new state, or ``None`` when nothing was
        written.
        """
        if self.config.read_only:
            return None
        calls = [
            item
            for item in new_items
            if isinstance(item, FunctionCall)
            and item.name in self._tools
            and item.call_id not in ctx.handled_call_ids
        ]
        if not calls:
            return None
        handle = self._handle(ctx, state)
        applied = False
        for call in calls:
            try:
                _, wrote = await handle.run_call(call.name, call.arguments, "store", call.call_id)
            except (ScratchpadUpdateError, StorageError):
                continue  # reported as an UpdateRejected event
            applied = applied or wrote
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
        kind, scope_key = (
            (storage.scope, storage.scope_key) if storage else ctx.scope_of(self.scope)
        )
        handle = ScratchpadHandle(
            self,
            self.pipeline,
            storage,
            ctx,
            state,
            layer_id=self.id,
            scope_key=scope_key,
            budget=self.budget.max,
            scope=kind,
        )
        ctx.context[self.id] = handle
        return handle

    def _handle(self, ctx: ExecutionContext, state: ScratchpadState) -> ScratchpadHandle:
        handle = ctx.context.get(self.id)
        if isinstance(handle, ScratchpadHandle) and handle.layer is self:
            return handle
        return self.bind(None, ctx, state)  # a host calling store without init: no storage

    def _transition(self, args: Any, state: Any) -> FunctionOutcome:
        """The provided ``update`` as a pure function of a state (``LayerFunction``)."""
        update = self.pipeline.prepare(args)
        new_state = self.pipeline.transition(state, update, cleaned=True).state
        applied = update.applied if isinstance(update, Rewrite) else update
        return FunctionOutcome(result=applied_text(applied), state=new_state)

    def _edit_transition(self, args: Any, state: Any) -> FunctionOutcome:
        """The provided ``edit`` as a pure function of a state (``LayerFunction``)."""
        change = self.pipeline.prepare_edit(args)
        result = self.pipeline.transition(state, change)
        return FunctionOutcome(result=edited_text(result.keys), state=result.state)

    def _read_transition(self, args: Any, state: Any) -> FunctionOutcome:
        """The provided ``read`` as a pure function of a state: the part ``args`` ask for,
        in the layer's budget (estimated); the state unchanged."""
        return FunctionOutcome(result=read_part(state, args, self.budget.max), state=state)

    def clean_update(self, args: Any) -> dict[str, Any] | Rewrite:
        """Parse and check an update before it meets any state; raises ``ScratchpadUpdateError``."""
        return self.pipeline.prepare(args)

    def apply_update(self, state: Any, update: Any) -> dict[str, Any]:
        """Merge a cleaned update into ``state`` and check the result. Pure.

        A state that no longer fits the schema (written before the schema changed) is
        replaced by the initial state first, as at init, so it cannot block later updates.
        """
        return self.pipeline.transition(state, update).state

    async def sweep(self, storage: StorageBackend, *, limit: int = DEFAULT_SWEEP_LIMIT) -> Swept:
        """Remove from ``storage`` what this layer's retention already hides: at most
        ``limit`` of its scopes (threads and resources) last written ``ttl`` or more ago,
        deleted with their journals as ``reset`` does (their revisions are kept, so a
        scope written again goes on above them), and at most ``limit`` journal entries
        ``history_max_age`` old or older. A bounded step: run it periodically, and again
        while a count it returns is ``limit``. A count is ``None`` when the backend cannot
        (see :mod:`~noetic_scratchpad.storage.sweep`; what it keeps still reads as gone),
        0 when the layer has no such limit. Raises ``ScratchpadConfigError`` for a layer
        with neither ``ttl`` nor ``history_max_age``."""
        config = self.config
        ttl, age = config.ttl_seconds, config.history_max_age_seconds
        if ttl is None and age is None:
            raise ScratchpadConfigError(
                f"the layer {self.id!r} has no ttl and no history_max_age, so nothing of it "
                "expires: give scratchpad(ttl=...) or history_max_age=... to sweep"
            )
        now, prefix = (config.clock or time.time)(), layer_prefix(self.id)
        scopes = 0 if ttl is None else await sweep_expired(storage, prefix, now - ttl, limit=limit)
        entries = 0 if age is None else await trim_journals(storage, prefix, now - age, limit=limit)
        return Swept(scopes, entries)

    def __repr__(self) -> str:
        return f"scratchpad({self.config!r})"


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
