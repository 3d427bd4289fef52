"""One run of an agent: the step loop, and the layers' hooks around it (init, spawn,
recall, store, refresh).

Each step recalls the layers into the request, calls the model, runs the ``store`` hooks
and executes the tool calls, until the model answers without calling a tool.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..context import ExecutionContext
from ..core import ScratchpadCore
from ..errors import MaxStepsExceededError
from ..items import FunctionCall, Item, LLMResponse, Message
from ..layer import ContextLayer, LayerHandle
from ..placement import DEFAULT_PLACEMENT, Placement, arrange
from .model import ModelRequest, ToolSpec, ToolsRenamed, as_response
from .toolcalls import LayerTool, ToolCalls, presented_specs
from .tools import Agent, Tool

__all__ = ("Execution", "LayerStack", "RunResult", "bound_handle")

#: ``toolset(agent)``: the tool specs and the agent tools of a run of ``agent``.
Toolset = Callable[[Agent], tuple[Sequence[ToolSpec], Mapping[str, Tool]]]


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
class LayerStack:
    """The harness's layers as a run drives them, each with its share of the budget; the
    core (``core/``) gives them their storage."""

    layers: Sequence[ContextLayer]
    budgets: Sequence[int]
    core: ScratchpadCore

    async def init(self, ctx: ExecutionContext) -> dict[str, Any]:
        """Run every layer's ``init`` for the scope of ``ctx``; their states by layer id."""
        return {layer.id: await self.core.init(layer, ctx) for layer in self.layers}

    async def apply_spawn(
        self, parent: ExecutionContext, child: ExecutionContext, states: dict[str, Any]
    ) -> None:
        """Let each layer's ``on_spawn`` hand the child a starting state."""
        for layer in self.layers:
            handle = bound_handle(parent, layer)
            if handle is not None:
                parent_state = handle.state
            else:  # a parent that never ran this layer: its stored state
                parent_state = await self.core.init(layer, parent)
            outcome = await layer.hooks.on_spawn(parent_state=parent_state, child_ctx=child)
            if outcome is not None:
                states[layer.id] = outcome.child_state
                layer.bind(await self.core.scoped(layer, child), child, outcome.child_state)

    async def recall(self, ctx: ExecutionContext, states: dict[str, Any], query: str) -> list[Item]:
        items: list[Item] = []
        for layer, budget in zip(self.layers, self.budgets, strict=True):
            result = await layer.hooks.recall(
                state=states[layer.id], budget=budget, ctx=ctx, query=query
            )
            if result is not None:
                items.extend(result.items)
        return items

    async def store(
        self, ctx: ExecutionContext, states: dict[str, Any], response: LLMResponse
    ) -> None:
        for layer in self.layers:
            result = await layer.hooks.store(
                new_items=response.items, state=states[layer.id], ctx=ctx, response=response
            )
            if result is not None:
                states[layer.id] = result.state

    async def refresh(self, ctx: ExecutionContext, states: dict[str, Any]) -> None:
        """Re-read each layer's state after tool calls: tools, child executions and other
        runs on the same scope may have written it, and the next request must show that."""
        for layer in self.layers:
            handle = bound_handle(ctx, layer)
            if handle is not None:
                await handle.refresh()
                states[layer.id] = handle.state


class Execution:
    """One run of ``agent`` in ``ctx`` (``name`` is the harness's, for messages)."""

    def __init__(
        self,
        *,
        name: str,
        agent: Agent,
        ctx: ExecutionContext,
        limit: int,
        stack: LayerStack,
        layer_tools: Mapping[str, LayerTool],
        toolset: Toolset,
        params: dict[str, Any],
        placement: Placement = DEFAULT_PLACEMENT,
    ) -> None:
        self.name = name
        self.agent = agent
        self.ctx = ctx
        self.limit = limit
        self.stack = stack
        self.layer_tools = layer_tools
        self.toolset = toolset
        self.params = params
        self.placement = placement

    async def run(self, input: str | Sequence[Item], parent: ExecutionContext | None) -> RunResult:
        """Init the layers (and apply ``parent``'s spawn), then step until the model answers
        without calling a tool; ``MaxStepsExceededError`` after ``limit`` steps."""
        ctx = self.ctx
        states = await self.stack.init(ctx)
        if parent is not None:
            await self.stack.apply_spawn(parent, ctx, states)
        conversation: list[Item] = (
            [Message(role="user", content=input)] if isinstance(input, str) else list(input)
        )
        query = _last_user_text(conversation)
        specs, tools = self.toolset(self.agent)
        sent_names = self._sent_names(specs)
        specs = presented_specs(specs, self.layer_tools, self.stack.core, sent_names)
        calls: list[FunctionCall] = []
        tool_calls = ToolCalls(ctx, self.stack.core, self.layer_tools, specs, tools, sent_names)
        for step in range(1, self.limit + 1):
            response = await self._ask(step, specs, states, query, conversation)
            conversation.extend(response.items)
            calls = [item for item in response.items if isinstance(item, FunctionCall)]
            self._claim(calls)
            await self.stack.store(ctx, states, response)
            if not calls:
                return self._result(response, conversation, step, states)
            conversation.extend(await tool_calls.run(calls))
            await self.stack.refresh(ctx, states)
        raise self._limit_reached(calls)

    async def _ask(
        self,
        step: int,
        specs: Sequence[ToolSpec],
        states: dict[str, Any],
        query: str,
        conversation: list[Item],
    ) -> LLMResponse:
        """Call the model with the instructions, the conversation and the layers' recall,
        the recall where ``placement`` puts it (after the conversation by default)."""
        blocks = await self.stack.recall(self.ctx, states, query)
        request = ModelRequest(
            items=arrange(_instructions(self.agent), blocks, conversation, self.placement),
            tools=list(specs),
            step=step,
            thread_id=self.ctx.thread_id,
            execution_id=self.ctx.execution_id,
            params=self.params,
        )
        return as_response(await self.agent.model(request))

    def _sent_names(self, specs: Sequence[ToolSpec]) -> Mapping[str, str]:
        """The names a provider adapter sends the tools under (our name -> the model's;
        empty when the model takes ours): what the model reads names the tool it sees."""
        model = self.agent.model
        if not isinstance(model, ToolsRenamed):
            return {}
        return model.sent_tool_names([spec.name for spec in specs])

    def _claim(self, calls: Sequence[FunctionCall]) -> None:
        """Claim this response's calls of the layers' tools before the store hooks see
        them: the tool path applies them (its events say ``tool``). The claims of earlier
        responses go: an id met again is the layer's to tell apart (a retry or a new call)."""
        claimed = self.ctx.handled_call_ids
        claimed.clear()
        claimed.update(call.call_id for call in calls if call.name in self.layer_tools)

    def _result(
        self, response: LLMResponse, conversation: list[Item], step: int, states: dict[str, Any]
    ) -> RunResult:
        return RunResult(
            output=_final_text(response),
            items=conversation,
            steps=step,
            execution_id=self.ctx.execution_id,
            thread_id=self.ctx.thread_id,
            resource_id=self.ctx.resource_id,
            states=dict(states),
            context=self.ctx,
        )

    def _limit_reached(self, calls: Sequence[FunctionCall]) -> MaxStepsExceededError:
        last_calls = sorted({call.name for call in calls})
        return MaxStepsExceededError(
            f"run {self.ctx.execution_id} of {self.name!r} on thread {self.ctx.thread_id!r} "
            f"reached its limit of {self.limit} step(s) while the model still called tools "
            f"({', '.join(last_calls)}); "
            "the writes made so far are stored. Raise max_steps, or check that the model "
            "gets the tool outputs it needs to finish."
        )


def bound_handle(ctx: ExecutionContext, layer: ContextLayer) -> LayerHandle | None:
    """The handle ``layer`` bound in ``ctx``, if its init ran there."""
    handle: LayerHandle | None = ctx.context.get(layer.id)
    return handle


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
