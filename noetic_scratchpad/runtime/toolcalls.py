"""Executing a model's tool calls: the layers' functions and the agent's tools, and the
error outputs the model reads when a call cannot run."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .. import _json
from ..context import ExecutionContext
from ..core import ScratchpadCore, format_output
from ..errors import ScratchpadConfigError, ScratchpadUpdateError, StorageError
from ..items import FunctionCall, FunctionCallOutput
from ..layer import ContextLayer, LayerFunction, ScratchpadLayer
from .model import ToolSpec
from .tools import Agent, Tool

__all__ = ("LayerTool", "ToolCalls", "agent_toolset", "collect_layer_tools", "presented_specs")

logger = logging.getLogger("noetic_scratchpad.runtime")


@dataclass(frozen=True, slots=True)
class LayerTool:
    """A layer's exposed function, as a tool named ``{layer_id}/{function}``."""

    layer_id: str
    function: str


def collect_layer_tools(
    layers: Sequence[ContextLayer],
) -> tuple[dict[str, LayerTool], list[ToolSpec]]:
    """The layers' exposed functions by tool name, and their specs; the layer ids must be
    unique."""
    ids = [layer.id for layer in layers]
    duplicates = sorted({layer_id for layer_id in ids if ids.count(layer_id) > 1})
    if duplicates:
        raise ScratchpadConfigError(
            f"several context layers have the id {duplicates}; each layer id must be unique"
        )
    layer_tools: dict[str, LayerTool] = {}
    specs: list[ToolSpec] = []
    for layer in layers:
        for function, provided in layer.provides.items():
            if isinstance(provided, LayerFunction) and provided.exposed:
                name = f"{layer.id}/{function}"
                layer_tools[name] = LayerTool(layer.id, function)
                specs.append(
                    ToolSpec(name, provided.description, provided.parameters, provided.strict)
                )
    return layer_tools, specs


def presented_specs(
    specs: Sequence[ToolSpec],
    layer_tools: Mapping[str, LayerTool],
    core: ScratchpadCore,
    sent_names: Mapping[str, str],
) -> list[ToolSpec]:
    """``specs`` as a provider adapter sends them (``sent_names``: our name -> the model's):
    a scratchpad's tool descriptions that name another of its tools (the edit tool names
    the update tool) name it as the model sees it, ``profile__update``."""
    if not sent_names:
        return list(specs)
    presented = []
    for spec in specs:
        tool = layer_tools.get(spec.name)
        layer = core.layer(tool.layer_id) if tool is not None else None
        if tool is not None and isinstance(layer, ScratchpadLayer):
            ours = layer.tool_names("/")
            names = {function: sent_names.get(name, name) for function, name in ours.items()}
            described = {each.function: each.description for each in layer.host_tools(names)}
            spec = dataclasses.replace(spec, description=described[tool.function])
        presented.append(spec)
    return presented


def agent_toolset(
    agent: Agent, layer_tools: Mapping[str, LayerTool], layer_specs: Sequence[ToolSpec]
) -> tuple[list[ToolSpec], dict[str, Tool]]:
    """The tool specs and the agent tools of a run of ``agent`` (a spawn may differ)."""
    for tool in agent.tools:
        if tool.name in layer_tools:
            raise ScratchpadConfigError(
                f"the agent's tool {tool.name!r} has the name of a layer's tool; rename it"
            )
    specs = [*layer_specs, *(tool.spec() for tool in agent.tools)]
    return specs, {tool.name: tool for tool in agent.tools}


class ToolCalls:
    """Executes the tool calls of a run's model responses, each response's in order.

    A call id met again: the layers' tools tell a retry from a new call themselves (see
    :mod:`noetic_scratchpad.layer.writer`); for the agent's tools, a call repeated in the
    response with the same arguments is not run again and gets the first output, and with
    other arguments it is a new call and runs.

    A call that cannot run becomes an error output the model can act on, never an
    exception: a refusal says how to fix the call, a storage failure says to try again
    later (its details go to the log), both written by the core (``core.call`` for a
    layer's tool, ``core.failure`` for an agent's tool that wrote a layer); any other
    failure names the exception.
    """

    def __init__(
        self,
        ctx: ExecutionContext,
        core: ScratchpadCore,
        layer_tools: Mapping[str, LayerTool],
        specs: Sequence[ToolSpec],
        tools: Mapping[str, Tool],
        sent_names: Mapping[str, str] | None = None,
    ) -> None:
        self._ctx = ctx
        self._core = core
        # Our tool name -> the name the model sees (a provider adapter renames tools).
        self._sent_names = sent_names or {}
        self._layer_tools = layer_tools
        self._specs = specs
        self._tools = tools
        # The agent tools' calls run so far in this response: id -> (arguments, output).
        self._ran: dict[str, tuple[Any, FunctionCallOutput]] = {}

    async def run(self, calls: Sequence[FunctionCall]) -> list[FunctionCallOutput]:
        """Execute the ``calls`` of one response, in order; their outputs, or the error
        outputs the model reads."""
        self._ran.clear()
        return [await self._one(call) for call in calls]

    async def _one(self, call: FunctionCall) -> FunctionCallOutput:
        """Execute ``call``; its output, or the error output the model reads."""
        if call.name in self._layer_tools:
            return await self._run(call)
        arguments = _comparable_arguments(call)
        first = self._ran.get(call.call_id)
        if first is not None and first[0] == arguments:
            logger.info(
                "tool call repeated; not run again, its first output returned tool=%s call_id=%s",
                call.name,
                call.call_id,
            )
            return first[1]
        output = await self._run(call)
        self._ran[call.call_id] = (arguments, output)
        return output

    async def _run(self, call: FunctionCall) -> FunctionCallOutput:
        shown = self._sent_names.get(call.name, call.name)  # the tool as the model sees it
        try:
            layer_tool = self._layer_tools.get(call.name)
            if layer_tool is not None:
                handle = self._ctx.context[layer_tool.layer_id]
                result = await self._core.call(
                    handle, layer_tool.function, call.arguments, tool=shown, call_id=call.call_id
                )
                return _output(call, result.text, is_error=not result.ok)
            return await self._run_agent_tool(call)
        except (ScratchpadUpdateError, StorageError) as exc:  # an agent tool's write
            return _error(call, self._core.failure(exc, tool=shown, call_id=call.call_id).text)
        except Exception as exc:
            return _failed(call, self._ctx, exc)

    async def _run_agent_tool(self, call: FunctionCall) -> FunctionCallOutput:
        """Send ``call`` to the agent tool of its name."""
        tool = self._tools.get(call.name)
        if tool is None:
            available = ", ".join(spec.name for spec in self._specs) or "none"
            return _error(
                call, f"There is no tool named {call.name!r}. Available tools: {available}."
            )
        args = _parse_tool_arguments(call)
        if isinstance(args, str):
            return _error(call, args)
        return _output(call, format_output(await tool.execute(args, self._ctx)))


def _output(call: FunctionCall, text: str, *, is_error: bool = False) -> FunctionCallOutput:
    return FunctionCallOutput(call_id=call.call_id, output=text, is_error=is_error)


def _error(call: FunctionCall, message: str) -> FunctionCallOutput:
    return _output(call, message, is_error=True)


def _failed(call: FunctionCall, ctx: ExecutionContext, exc: Exception) -> FunctionCallOutput:
    logger.warning(
        "tool failed tool=%s call_id=%s execution_id=%s error=%r",
        call.name,
        call.call_id,
        ctx.execution_id,
        f"{type(exc).__name__}: {exc}",
    )
    return _error(call, f"The tool {call.name!r} failed: {type(exc).__name__}: {exc}")


def _comparable_arguments(call: FunctionCall) -> Any:
    """What makes two calls of one tool the same: the tool and its arguments as parsed
    (whitespace does not count), or as sent when they do not parse."""
    try:
        return call.name, _json.loads_arguments(call.arguments)
    except _json.ArgumentsError:
        return call.name, call.arguments


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
