"""Agents and their tools; a tool's result becomes the text a model reads by the core's
``format_output`` (re-exported here)."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..core import format_output
from ..errors import ScratchpadConfigError
from .model import Model, ToolSpec

if TYPE_CHECKING:
    from ..context import ExecutionContext

__all__ = ("Agent", "Tool", "ToolExecute", "format_output")

ToolExecute = Callable[[dict[str, Any], "ExecutionContext"], Awaitable[Any]]
"""``await execute(args, ctx)``: the parsed arguments and the execution's context in, the
output out (text, or any JSON-serializable value)."""

_NAME = re.compile(r"^[A-Za-z0-9_.:/-]{1,128}$")


@dataclass(frozen=True, slots=True)
class Tool:
    """A tool the agent offers to the model.

    ``parameters`` is the JSON schema of the arguments. ``execute`` may read and write the
    layers through ``ctx.context``, for example ``await ctx.context["scratchpad"].update(...)``.
    An exception raised by ``execute`` goes back to the model as an error output.
    """

    name: str
    description: str
    parameters: Mapping[str, Any]
    execute: ToolExecute
    strict: bool = False

    def __post_init__(self) -> None:
        if not _NAME.match(self.name):
            raise ScratchpadConfigError(
                f"tool name {self.name!r} must be 1-128 characters of letters, digits and "
                "_ . : / - (provider adapters map it to what each provider accepts)"
            )
        if self.parameters.get("type") != "object":
            raise ScratchpadConfigError(
                f"the parameters of tool {self.name!r} must be a JSON schema of type "
                '"object", for example {"type": "object", "properties": {...}}'
            )

    def spec(self) -> ToolSpec:
        return ToolSpec(self.name, self.description, self.parameters, self.strict)


@dataclass(frozen=True, slots=True)
class Agent:
    """A model, the instructions it runs under, and the tools it may call besides the layers'."""

    model: Model
    instructions: str = ""
    tools: Sequence[Tool] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        if not callable(self.model):
            raise ScratchpadConfigError(
                f"Agent.model must be an async callable taking a ModelRequest, not {self.model!r}"
            )
        object.__setattr__(self, "tools", tuple(self.tools))
        names = [tool.name for tool in self.tools]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise ScratchpadConfigError(f"the agent has several tools named {duplicates}")
