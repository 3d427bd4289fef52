"""``AgentHarness``: runs an agent's model with context layers around it.

One run is one execution: the layers are initialized for its thread (and resource), then
each step recalls the layers into the request, calls the model, runs the ``store`` hooks
and executes the tool calls, until the model answers without calling a tool.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Self

import anyio

from .. import _json
from ..context import ExecutionContext
from ..errors import (
    MaxStepsExceededError,
    ScratchpadConfigError,
    ScratchpadUpdateError,
    StorageError,
)
from ..events import EventBus
from ..items import FunctionCall, FunctionCallOutput, Item, LLMResponse, Message
from ..layer import ContextLayer, LayerFunction, LayerHandle
from ..render import Tokenizer
from ..storage import ScopedStorage, StorageBackend, open_storage, resolve_storage_url
from .budgets import split_budget
from .model import ModelRequest, ToolSpec, as_response
from .tools import Agent, Tool, format_output

__all__ = ("AgentHarness", "RunResult")

logger = logging.getLogger("noetic_scratchpad.runtime")

DEFAULT_CONTEXT_BUDGET = 8000
DEFAULT_MAX_STEPS = 20


@dataclass(frozen=True, slots=True)
class RunResult:
    """What a run produced.

    ``output`` is the text of the model's final answer; ``items`` is the conversation of
    this run (the input, every model item and every tool output, in order); ``states``
    holds each layer's state at the end, by layer id; ``context`` is the execution's
    context (pass it to :meth:`AgentHarness.spawn` to start a child execution).
    """

    output: str
    items: list[Item]
    steps: int
    execution_id: str
    thread_id: str
    resource_id: str | None
    states: dict[str, Any]
    context: ExecutionContext = field(repr=False)


@dataclass(frozen=True, slots=True)
class _LayerTool:
    layer_id: str
    function: str


class AgentHarness:
    """Runs ``agent`` with ``context_layers`` on a storage backend.

    ``storage`` is a URL (``"sqlite:///scratchpad.db"``) or an opened backend; ``None``
    means ``$NOETIC_SCRATCHPAD_STORAGE``, else ``"memory://"``. A backend the harness opened
    from a URL is closed by ``aclose()`` (or by leaving ``async with harness:``); a backend
    passed in stays open, it belongs to the caller.

    ``context_budget`` is the number of tokens all layers' recall may use together; it is
    split across the layers by their budgets (see :func:`split_budget`). ``max_steps`` is
    the default step limit of a run.
    """

    def __init__(
        self,
        name: str,
        agent: Agent,
        params: Mapping[str, Any] | None = None,
        context_layers: Sequence[ContextLayer] = (),
        storage: str | StorageBackend | None = None,
        *,
        context_budget: int = DEFAULT_CONTEXT_BUDGET,
        max_steps: int = DEFAULT_MAX_STEPS,
        events: EventBus | None = None,
        tokenize: Tokenizer | None = None,
    ) -> None:
        if context_budget < 0:
            raise ScratchpadConfigError(f"context_budget must be >= 0, not {context_budget}")
        if max_steps < 1:
            raise ScratchpadConfigError(f"max_steps must be at least 1, not {max_steps}")
        self.name = name
        self.agent = agent
        self.params: dict[str, Any] = dict(params or {})
        self.layers: list[ContextLayer] = sorted(context_layers, key=lambda layer: layer.slot)
        self.context_budget = context_budget
        self.max_steps = max_steps
        self.events = events or EventBus()
        self._owns_events = events is None  # its own bus is closed by aclose()
        self.tokenize = tokenize
        self._budgets = split_budget(context_budget, [layer.budget for layer in self.layers])
        self._layer_tools, self._layer_specs = self._collect_layer_tools()
        self._specs, self._agent_tools = self._toolset(agent)
        if isinstance(storage, StorageBackend):
            self._backend: StorageBackend | None = storage
            self._owns_backend = False
            self.storage_url = storage.url
        else:
            self._backend = None
            self._owns_backend = True
            self.storage_url = resolve_storage_url(storage)
        self._open_lock = anyio.Lock()

    def _collect_layer_tools(self) -> tuple[dict[str, _LayerTool], list[ToolSpec]]:
        ids = [layer.id for layer in self.layers]
        duplicates = sorted({layer_id for layer_id in ids if ids.count(layer_id) > 1})
        if duplicates:
            raise ScratchpadConfigError(
                f"several context layers have the id {duplicates}; each layer id must be unique"
            )
        layer_tools: dict[str, _LayerTool] = {}
        specs: list[ToolSpec] = []
        for layer in self.layers:
            for function, provided in layer.provides.items():
                if isinstance(provided, LayerFunction) and provided.exposed:
                    name = f"{layer.id}/{function}"
                    layer_tools[name] = _LayerTool(layer.id, function)
                    specs.append(ToolSpec(name, provided.description, provided.parameters))
        return layer_tools, specs

    # -- lifecycle -----------------------------------------------------------------------

    @property
    def storage(self) -> StorageBackend:
        """The opened backend (``async with harness:`` or ``await harness.open()`` first)."""
        if self._backend is None:
            raise RuntimeError(
                f"the harness {self.name!r} has not opened its storage ({self.storage_url}) "
                "yet; use `async with harness:` or `await harness.open()` first"
            )
        return self._backend

    async def open(self) -> Self:
        """Open the storage backend (once). ``run`` and the state methods call it for you."""
        if self._backend is None:
            async with self._open_lock:
                if self._backend is None:
                    self._backend = await open_storage(self.storage_url)
        return self

    async def aclose(self) -> None:
        """Close the backend if the harness opened it; a backend passed in stays open.

        Async event handlers still running get at most the bus's ``handler_timeout``: the
        harness's own bus is closed (its streams end, later async handlers do not start); a
        bus passed in is only drained, it belongs to the caller. Either way this never hangs
        on a handler that ignores its cancellation.
        """
        try:
            if self._owns_events:
                await self.events.aclose()
            else:
                await self.events.drain()
        finally:
            backend, self._backend = self._backend, None
            if not self._owns_backend:
                self._backend = backend
            elif backend is not None:
                await backend.aclose()

    async def __aenter__(self) -> Self:
        return await self.open()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    @property
    def tools(self) -> list[ToolSpec]:
        """The tool specs every request carries: the layers' functions, then the agent's tools."""
        return list(self._specs)

    # -- runs ----------------------------------------------------------------------------

    async def run(
        self,
        input: str | Sequence[Item],
        *,
        thread_id: str,
        resource_id: str | None = None,
        max_steps: int | None = None,
        execution_id: str | None = None,
    ) -> RunResult:
        """Run the agent on ``input`` (a user message, or items such as earlier history).

        Raises ``MaxStepsExceededError`` when the model still calls tools after
        ``max_steps`` steps; every write made until then stays stored.
        """
        ctx = ExecutionContext(
            thread_id=thread_id,
            resource_id=resource_id,
            execution_id=execution_id or uuid.uuid4().hex,
            events=self.events,
            tokenize=self.tokenize,
        )
        return await self._execute(input, ctx, self.agent, max_steps, parent=None)

    async def spawn(
        self,
        parent: ExecutionContext | RunResult,
        input: str | Sequence[Item],
        *,
        agent: Agent | None = None,
        thread_id: str | None = None,
        resource_id: str | None = None,
        max_steps: int | None = None,
    ) -> RunResult:
        """Run a child execution of ``parent`` (a run's result, or the ``ctx`` a tool got).

        The child runs ``agent`` (default: this harness's agent) with the same layers. It
        gets its own thread (``thread_id``, default ``"{parent thread}:spawn-{id}"``) and the
        parent's resource unless ``resource_id`` is given. After the layers' ``init``, each
        layer's ``on_spawn`` may hand the child a starting state: a resource-scoped
        scratchpad starts from a copy of the parent's state; a thread-scoped one inherits
        nothing.
        """
        parent_ctx = parent.context if isinstance(parent, RunResult) else parent
        execution_id = uuid.uuid4().hex
        ctx = parent_ctx.child(
            thread_id=thread_id or f"{parent_ctx.thread_id}:spawn-{execution_id[:12]}",
            resource_id=resource_id if resource_id is not None else parent_ctx.resource_id,
            execution_id=execution_id,
            events=self.events,
            tokenize=self.tokenize,
        )
        return await self._execute(input, ctx, agent or self.agent, max_steps, parent=parent_ctx)

    async def _execute(
        self,
        input: str | Sequence[Item],
        ctx: ExecutionContext,
        agent: Agent,
        max_steps: int | None,
        parent: ExecutionContext | None,
    ) -> RunResult:
        limit = self.max_steps if max_steps is None else max_steps
        if limit < 1:
            raise ValueError(f"max_steps must be at least 1, not {limit}")
        await self.open()
        states = await self._init_layers(ctx)
        if parent is not None:
            await self._apply_spawn(parent, ctx, states)
        conversation: list[Item] = (
            [Message(role="user", content=input)] if isinstance(input, str) else list(input)
        )
        query = _last_user_text(conversation)
        specs, tools = (
            (self._specs, self._agent_tools) if agent is self.agent else self._toolset(agent)
        )
        for step in range(1, limit + 1):
            request = ModelRequest(
                items=[
                    *_instructions(agent),
                    *await self._recall(ctx, states, query),
                    *conversation,
                ],
                tools=list(specs),
                step=step,
                thread_id=ctx.thread_id,
                execution_id=ctx.execution_id,
                params=self.params,
            )
            response = as_response(await agent.model(request))
            conversation.extend(response.items)
            calls = [item for item in response.items if isinstance(item, FunctionCall)]
            # Claim the calls the tool path will apply before the store hooks see them,
            # so each is applied exactly once.
            ctx.handled_call_ids.update(
                call.call_id for call in calls if call.name in self._layer_tools
            )
            await self._store(ctx, states, response)
            if not calls:
                return RunResult(
                    output=_final_text(response),
                    items=conversation,
                    steps=step,
                    execution_id=ctx.execution_id,
                    thread_id=ctx.thread_id,
                    resource_id=ctx.resource_id,
                    states=dict(states),
                    context=ctx,
                )
            executed: set[str] = set()
            for call in calls:
                output = await self._call_tool(call, ctx, specs, tools, executed)
                conversation.append(output)
            await self._refresh(ctx, states)
        last_calls = sorted({call.name for call in calls})
        raise MaxStepsExceededError(
            f"run {ctx.execution_id} of {self.name!r} on thread {ctx.thread_id!r} reached its "
            f"limit of {limit} step(s) while the model still called tools "
            f"({', '.join(last_calls)}); "
            "the writes made so far are stored. Raise max_steps, or check that the model "
            "gets the tool outputs it needs to finish."
        )

    def _toolset(self, agent: Agent) -> tuple[list[ToolSpec], dict[str, Tool]]:
        """The tool specs and the agent tools of a run of ``agent`` (a spawn may differ)."""
        for tool in agent.tools:
            if tool.name in self._layer_tools:
                raise ScratchpadConfigError(
                    f"the agent's tool {tool.name!r} has the name of a layer's tool; rename it"
                )
        specs = [*self._layer_specs, *(tool.spec() for tool in agent.tools)]
        return specs, {tool.name: tool for tool in agent.tools}

    # -- the layer hooks -------------------------------------------------------------------

    def _scoped(self, layer: ContextLayer, ctx: ExecutionContext) -> ScopedStorage:
        return ScopedStorage.for_layer(self.storage, layer, ctx)

    async def _init_layers(self, ctx: ExecutionContext) -> dict[str, Any]:
        states: dict[str, Any] = {}
        for layer in self.layers:
            scoped = self._scoped(layer, ctx)
            result = await layer.hooks.init(storage=scoped, scope_key=scoped.scope_key, ctx=ctx)
            states[layer.id] = result.state
        return states

    async def _apply_spawn(
        self, parent: ExecutionContext, child: ExecutionContext, states: dict[str, Any]
    ) -> None:
        for layer in self.layers:
            handle = _handle(parent, layer)
            if handle is not None:
                parent_state = handle.state
            else:  # a parent that never ran this layer: its stored state
                parent_state = await self._load(layer, parent)
            outcome = await layer.hooks.on_spawn(parent_state=parent_state, child_ctx=child)
            if outcome is not None:
                states[layer.id] = outcome.child_state
                layer.bind(self._scoped(layer, child), child, outcome.child_state)

    async def _recall(
        self, ctx: ExecutionContext, states: dict[str, Any], query: str
    ) -> list[Item]:
        items: list[Item] = []
        for layer, budget in zip(self.layers, self._budgets, strict=True):
            result = await layer.hooks.recall(
                state=states[layer.id], budget=budget, ctx=ctx, query=query
            )
            if result is not None:
                items.extend(result.items)
        return items

    async def _store(
        self, ctx: ExecutionContext, states: dict[str, Any], response: LLMResponse
    ) -> None:
        for layer in self.layers:
            result = await layer.hooks.store(
                new_items=response.items, state=states[layer.id], ctx=ctx, response=response
            )
            if result is not None:
                states[layer.id] = result.state

    async def _refresh(self, ctx: ExecutionContext, states: dict[str, Any]) -> None:
        """Re-read each layer's state after tool calls: tools, child executions and other
        runs on the same scope may have written it, and the next request must show that."""
        for layer in self.layers:
            handle = _handle(ctx, layer)
            if handle is not None:
                await handle.refresh()
                states[layer.id] = handle.state

    # -- tools ---------------------------------------------------------------------------

    async def _call_tool(
        self,
        call: FunctionCall,
        ctx: ExecutionContext,
        specs: Sequence[ToolSpec],
        tools: Mapping[str, Tool],
        executed: set[str],
    ) -> FunctionCallOutput:
        def error(message: str) -> FunctionCallOutput:
            return FunctionCallOutput(call_id=call.call_id, output=message, is_error=True)

        if call.call_id in executed:
            return error(
                f"Call id {call.call_id!r} was used twice in one response; it ran once. "
                "Give every call its own id."
            )
        executed.add(call.call_id)
        layer_tool = self._layer_tools.get(call.name)
        tool = tools.get(call.name)
        try:
            if layer_tool is not None:
                handle = ctx.context[layer_tool.layer_id]
                result = await handle.call(
                    layer_tool.function, call.arguments, call_id=call.call_id
                )
            elif tool is not None:
                args = _parse_tool_arguments(call)
                if isinstance(args, str):
                    return error(args)
                result = await tool.execute(args, ctx)
            else:
                available = ", ".join(spec.name for spec in specs) or "none"
                return error(f"There is no tool named {call.name!r}. Available tools: {available}.")
            return FunctionCallOutput(call_id=call.call_id, output=format_output(result))
        except ScratchpadUpdateError as exc:
            return error(exc.message)  # already says how to fix the call
        except StorageError as exc:
            # The details (paths, hosts, timeouts) are for the operator, not the model.
            logger.warning(
                "tool could not save tool=%s call_id=%s error=%r", call.name, call.call_id, str(exc)
            )
            return error(
                f"The tool {call.name!r} could not save: storage failed or did not answer "
                "in time (the operator can see why in the logs). Try the call again later; "
                "repeating the same update is harmless."
            )
        except Exception as exc:
            logger.warning(
                "tool failed tool=%s call_id=%s execution_id=%s error=%r",
                call.name,
                call.call_id,
                ctx.execution_id,
                f"{type(exc).__name__}: {exc}",
            )
            return error(f"The tool {call.name!r} failed: {type(exc).__name__}: {exc}")

    # -- state outside a run -------------------------------------------------------------

    def layer(self, layer_id: str) -> ContextLayer:
        """The layer with ``layer_id``; ``KeyError`` naming the known ids otherwise."""
        for layer in self.layers:
            if layer.id == layer_id:
                return layer
        known = ", ".join(repr(layer.id) for layer in self.layers) or "none"
        raise KeyError(f"the harness has no layer {layer_id!r}; its layers: {known}")

    async def _load(self, layer: ContextLayer, ctx: ExecutionContext) -> Any:
        await self.open()
        scoped = self._scoped(layer, ctx)
        result = await layer.hooks.init(storage=scoped, scope_key=scoped.scope_key, ctx=ctx)
        return result.state

    async def read_state(
        self, layer_id: str, *, thread_id: str, resource_id: str | None = None
    ) -> Any:
        """The stored state of a layer for a thread (or resource), as a run would see it.

        For a scratchpad: the stored state, else the template, else ``""`` / ``{}``. The
        value is a copy: changing it changes nothing stored.
        """
        layer = self.layer(layer_id)
        ctx = ExecutionContext(
            thread_id=thread_id, resource_id=resource_id, events=self.events, tokenize=self.tokenize
        )
        state = await self._load(layer, ctx)
        handle = _handle(ctx, layer)
        return state if handle is None else handle.snapshot

    async def update_state(
        self,
        layer_id: str,
        values: Mapping[str, Any],
        *,
        thread_id: str,
        resource_id: str | None = None,
    ) -> Any:
        """Merge ``values`` into a layer's stored state, as ``ctx.context[id].update`` does.

        Goes through the same serialized write as the model's tool calls (events say
        ``"api"``); raises ``ScratchpadValidationError`` and the other update errors, with
        the stored state unchanged. Returns a copy of the new state (the handle's ``snapshot``).
        One storage round trip: the write merges into the stored state, nothing is read
        before it.
        """
        layer = self.layer(layer_id)
        await self.open()
        ctx = ExecutionContext(
            thread_id=thread_id, resource_id=resource_id, events=self.events, tokenize=self.tokenize
        )
        handle = layer.bind(self._scoped(layer, ctx), ctx, None)
        await handle.update(values)
        return handle.snapshot

    def __repr__(self) -> str:
        layers = ", ".join(layer.id for layer in self.layers)
        return f"<AgentHarness {self.name!r} layers=[{layers}] storage={self.storage_url!r}>"


def _instructions(agent: Agent) -> list[Item]:
    return [Message(role="system", content=agent.instructions)] if agent.instructions else []


def _last_user_text(items: Sequence[Item]) -> str:
    for item in reversed(items):
        if isinstance(item, Message) and item.role == "user":
            return item.content
    return ""


def _final_text(response: LLMResponse) -> str:
    return "\n".join(
        item.content
        for item in response.items
        if isinstance(item, Message) and item.role == "assistant"
    )


def _parse_tool_arguments(call: FunctionCall) -> dict[str, Any] | str:
    """The arguments as a dict, or the error text a model can act on."""
    try:
        return _json.loads_arguments(call.arguments)
    except _json.ArgumentsError as exc:
        if exc.kind == "type":
            return f"The arguments of {call.name!r} must be a JSON object; call it again with one."
        return (
            f"The arguments of {call.name!r} are not valid JSON ({exc}). "
            "Call it again with a JSON object."
        )


def _handle(ctx: ExecutionContext, layer: ContextLayer) -> LayerHandle | None:
    """The handle ``layer`` bound in ``ctx``, if its init ran there."""
    handle: LayerHandle | None = ctx.context.get(layer.id)
    return handle
