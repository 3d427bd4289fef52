"""What a model receives and returns, and ``ScriptedModel``, a model that replays turns."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeAlias, runtime_checkable

from ..errors import ScriptExhaustedError
from ..items import FunctionCall, FunctionCallOutput, Item, LLMResponse, Message

__all__ = (
    "Model",
    "ModelRequest",
    "ScriptExhaustedError",
    "ScriptedModel",
    "ToolSpec",
    "ToolsRenamed",
    "Turn",
    "as_response",
)


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool as a model sees it: a name, a description and JSON-schema parameters.

    ``strict`` asks providers that support it to force the arguments into the schema. The
    scratchpad's update tool is never strict: a model that pads unchanged fields with
    ``null`` must not be forced to write them.
    """

    name: str
    description: str
    parameters: Mapping[str, Any]
    strict: bool = False


@runtime_checkable
class ToolsRenamed(Protocol):
    """A model (a provider adapter) that sends tools under other names than ours, as
    providers require (``scratchpad/update`` becomes ``scratchpad__update``)."""

    def sent_tool_names(self, names: Sequence[str]) -> Mapping[str, str]:
        """Our tool name -> the name the model sees, for a request with tools ``names``."""
        ...


@dataclass(frozen=True, slots=True)
class ModelRequest:
    """One call to a model.

    ``items`` is the assembled context, in order: the agent's instructions (a ``system``
    message), each layer's recall items in slot order, then the conversation with the
    model's earlier calls and their outputs. ``tools`` are the tools the model may call.
    """

    items: list[Item]
    tools: list[ToolSpec] = field(default_factory=list)
    step: int = 1
    thread_id: str = ""
    execution_id: str = ""
    params: Mapping[str, Any] = field(default_factory=dict)

    @property
    def last_output(self) -> FunctionCallOutput | None:
        """The most recent tool output in the request, if any (handy in scripted turns)."""
        for item in reversed(self.items):
            if isinstance(item, FunctionCallOutput):
                return item
        return None

    def messages(self, role: str) -> list[str]:
        """The texts of the messages with ``role``, in order."""
        return [
            item.content for item in self.items if isinstance(item, Message) and item.role == role
        ]


Model: TypeAlias = Callable[[ModelRequest], Awaitable[LLMResponse]]
"""Any async callable from a request to a response: a provider adapter, a test double."""

TurnResult: TypeAlias = LLMResponse | Sequence[Item] | str
Turn: TypeAlias = TurnResult | Callable[[ModelRequest], TurnResult | Awaitable[TurnResult]]
"""One scripted answer: items, a response, a plain string (an assistant message) or a
function of the request that returns one of those (sync or async)."""


class ScriptedModel:
    """A model that answers with scripted turns, in order, and keeps every request it saw.

    ``ScriptedModel([[FunctionCall(...)], "Done."])`` first calls a tool, then answers
    ``"Done."``. A turn may also be a function of the :class:`ModelRequest`, which lets a
    script react to what it sees (``request.last_output`` for the latest tool output).
    """

    def __init__(self, turns: Sequence[Turn]) -> None:
        self.turns: list[Turn] = list(turns)
        self.requests: list[ModelRequest] = []

    @property
    def remaining(self) -> int:
        """Turns not played yet."""
        return len(self.turns) - len(self.requests)

    async def __call__(self, request: ModelRequest) -> LLMResponse:
        index = len(self.requests)
        if index >= len(self.turns):
            raise ScriptExhaustedError(
                f"the ScriptedModel has {len(self.turns)} turn(s) and all were played; "
                f"request {index + 1} (step {request.step} of execution "
                f"{request.execution_id or '?'}) has no answer. Add turns to the script, or "
                "end a turn without tool calls so the run stops."
            )
        self.requests.append(request)
        turn = self.turns[index]
        result: Any = turn(request) if callable(turn) else turn
        if inspect.isawaitable(result):
            result = await result
        return as_response(result)


def as_response(value: Any) -> LLMResponse:
    """Turn what a model or a script returned into an ``LLMResponse``."""
    if isinstance(value, LLMResponse):
        return value
    if isinstance(value, str):
        return LLMResponse(items=[Message(role="assistant", content=value)])
    if isinstance(value, Sequence):
        items = [Message(role="assistant", content=v) if isinstance(v, str) else v for v in value]
        if all(isinstance(item, Message | FunctionCall | FunctionCallOutput) for item in items):
            return LLMResponse(items=items)
    raise TypeError(
        "a model must return an LLMResponse (or, in a ScriptedModel turn, a list of items "
        f"or a string), not {type(value).__name__}"
    )
