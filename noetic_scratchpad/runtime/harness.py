"""``AgentHarness``: runs an agent's model with context layers around it.

One run is one execution (``execution.py``): the layers are initialized for its thread (and
resource), then each step recalls the layers into the request, calls the model, runs the
``store`` hooks and executes the tool calls (``toolcalls.py``), until the model answers
without calling a tool.
"""

from __future__ import annotations

import uuid
import warnings
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any, Self

from ..context import ExecutionContext
from ..core import ScratchpadCore
from ..errors import ScratchpadConfigError
from ..events import EventBus
from ..items import Item
from ..layer import ContextLayer
from ..placement import DEFAULT_PLACEMENT, Placement, check_placement
from ..render import Tokenizer
from ..storage import StorageBackend
from .budgets import split_budget
from .execution import Execution, LayerStack, RunResult
from .model import ToolSpec
from .states import LayerStates
from .toolcalls import agent_toolset, collect_layer_tools
from .tools import Agent, Tool

__all__ = ("AgentHarness", "RunResult")

DEFAULT_CONTEXT_BUDGET = 8000
DEFAULT_MAX_STEPS = 20


class AgentHarness(LayerStates):
    """Runs ``agent`` with ``context_layers`` on a storage backend.

    ``storage`` is a URL (``"sqlite:///scratchpad.db"``) or an opened backend; ``None``
    means ``$NOETIC_SCRATCHPAD_STORAGE``, else ``"memory://"``. A backend the harness opened
    from a URL is closed by ``aclose()`` (or by leaving ``async with harness:``); a backend
    passed in stays open, it belongs to the caller. The state methods (``read_state``,
    ``update_state``, ``history``, ``revert``) are in :class:`LayerStates`.

    The storage, the bus and the layers are the harness's :class:`ScratchpadCore`
    (``harness.core``), which every host wraps; ``storage``, ``events``, ``open`` and
    ``aclose`` are the core's.

    ``context_budget`` is the number of tokens all layers' recall may use together; it is
    split across the layers by their budgets (see :func:`split_budget`). ``max_steps`` is
    the default step limit of a run. ``placement`` is where the layers' blocks go in each
    request: ``"end"`` (default), after the conversation, so a provider's prompt cache
    survives a change of the notes; ``"start"``, between the instructions and the
    conversation (see :mod:`noetic_scratchpad.placement`). ``count_tokens``: the model's
    token counter (``lambda text: len(encoding.encode(text))`` with tiktoken, or the
    provider's), which every layer's budget is counted in; default, about four characters
    a token (``tokenize`` is its deprecated old name).
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
        count_tokens: Tokenizer | None = None,
        tokenize: Tokenizer | None = None,
        placement: Placement = DEFAULT_PLACEMENT,
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
        self.placement = check_placement(placement)
        if tokenize is not None:
            if count_tokens is not None:
                raise ScratchpadConfigError("give count_tokens only (tokenize is its old name)")
            warnings.warn(
                "AgentHarness(tokenize=...) is now count_tokens=...; tokenize goes in a "
                "later release",
                DeprecationWarning,
                stacklevel=2,
            )
            count_tokens = tokenize
        self._budgets = split_budget(context_budget, [layer.budget for layer in self.layers])
        self._layer_tools, self._layer_specs = collect_layer_tools(self.layers)
        self._specs, self._agent_tools = self._toolset(agent)
        # A harness without layers still has storage and a bus: the core's default layer
        # is then never run.
        self.core = ScratchpadCore(
            self.layers or None, storage=storage, events=events, count_tokens=count_tokens
        )
        self.storage_url = self.core.storage_url  # secrets hidden: it is shown in repr

    # -- lifecycle -----------------------------------------------------------------------

    @property
    def events(self) -> EventBus:
        """The bus every execution emits on (the core's: a new one after ``aclose`` and
        a later open, when it is the harness's own)."""
        return self.core.events

    @property
    def tokenize(self) -> Tokenizer | None:
        """The token counter every layer's budget is counted in (``None``: the estimate)."""
        return self.core.tokenize

    @property
    def storage(self) -> StorageBackend:
        """The opened backend (``async with harness:`` or ``await harness.open()`` first)."""
        backend = self.core.opened
        if backend is None:
            raise RuntimeError(
                f"the harness {self.name!r} has not opened its storage ({self.storage_url}) "
                "yet; use `async with harness:` or `await harness.open()` first"
            )
        return backend

    async def open(self) -> Self:
        """Open the storage backend (once). ``run`` and the state methods call it for you."""
        await self.core.open()
        return self

    async def aclose(self) -> None:
        """Close the backend if the harness opened it; a backend passed in stays open.

        Async event handlers still running get at most the bus's ``handler_timeout``: the
        harness's own bus is closed (its streams end, later async handlers do not start); a
        bus passed in is only drained, it belongs to the caller. Either way this never hangs
        on a handler that ignores its cancellation.
        """
        await self.core.aclose()

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
        await self.open()  # first: a reopened harness's context gets the new bus
        ctx = self.core.context((thread_id, resource_id), execution_id=execution_id)
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
        await self.open()
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
        execution = Execution(
            name=self.name,
            agent=agent,
            ctx=ctx,
            limit=limit,
            stack=LayerStack(self.layers, self._budgets, self.core),
            layer_tools=self._layer_tools,
            toolset=self._tools_for,
            params=self.params,
            placement=self.placement,
        )
        return await execution.run(input, parent)

    def _toolset(self, agent: Agent) -> tuple[list[ToolSpec], dict[str, Tool]]:
        """The tool specs and the agent tools of a run of ``agent`` (a spawn may differ)."""
        return agent_toolset(agent, self._layer_tools, self._layer_specs)

    def _tools_for(self, agent: Agent) -> tuple[list[ToolSpec], dict[str, Tool]]:
        """The tool specs and the agent tools of a run of ``agent``; those of the harness's
        own agent were computed at construction."""
        return (self._specs, self._agent_tools) if agent is self.agent else self._toolset(agent)

    def __repr__(self) -> str:
        layers = ", ".join(layer.id for layer in self.layers)
        return f"<AgentHarness {self.name!r} layers=[{layers}] storage={self.storage_url!r}>"
