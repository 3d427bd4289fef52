"""Anthropic: the Messages API's tool format, and a model that calls it.

Builds plain dicts in the shapes of the ``anthropic`` SDK's ``ToolParam`` and
``MessageParam`` and reads its ``Message`` objects (or their dicts); never imports the SDK.
The Messages API has no developer role and one system prompt, before the messages: the
system and developer messages that open a request (the instructions, and the layers' recall
with ``placement="start"``) go to ``system``, in order; one that comes after the
conversation has begun (the ``<scratchpad>`` block with ``placement="end"``) goes where it
is, as a text block of the user's turn, so the cached prefix before it stays unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .. import _json
from ..items import FunctionCall, Item, LLMResponse, Message
from ..runtime.model import ModelRequest, ToolSpec
from ._common import read_response
from .names import ToolNameMap

__all__ = ("AnthropicModel", "anthropic_messages", "anthropic_tools", "parse_message")


def anthropic_tools(tools: Sequence[ToolSpec], names: ToolNameMap) -> list[dict[str, Any]]:
    """``tools=`` for ``client.messages.create``. Only strict tools carry ``strict``;
    the API's default is non-strict, which is what the scratchpad's tool needs."""
    converted: list[dict[str, Any]] = []
    for spec in tools:
        tool: dict[str, Any] = {
            "name": names.to_provider(spec.name),
            "description": spec.description,
            "input_schema": dict(spec.parameters),
        }
        if spec.strict:
            tool["strict"] = True
        converted.append(tool)
    return converted


def anthropic_messages(
    items: Sequence[Item], names: ToolNameMap
) -> tuple[str, list[dict[str, Any]]]:
    """``(system, messages)`` for ``client.messages.create``.

    Consecutive blocks of one role share a message, tool calls become ``tool_use`` blocks
    of the assistant and their outputs ``tool_result`` blocks of the user. System and
    developer messages go to ``system`` until the conversation begins; later ones are text
    of the user's turn where they stand.
    """
    system: list[str] = []
    messages: list[dict[str, Any]] = []

    def add(role: str, block: dict[str, Any]) -> None:
        if messages and messages[-1]["role"] == role:
            messages[-1]["content"].append(block)
        else:
            messages.append({"role": role, "content": [block]})

    for item in items:
        if isinstance(item, Message):
            if item.role in ("system", "developer") and not messages:
                system.append(item.content)
            elif item.role in ("system", "developer"):
                if item.content:
                    add("user", {"type": "text", "text": item.content})
            elif item.content:  # the API refuses empty text blocks
                add(item.role, {"type": "text", "text": item.content})
        elif isinstance(item, FunctionCall):
            add(
                "assistant",
                {
                    "type": "tool_use",
                    "id": item.call_id,
                    "name": names.to_provider(item.name),
                    "input": _input_object(item.arguments),
                },
            )
        else:
            add(
                "user",
                {
                    "type": "tool_result",
                    "tool_use_id": item.call_id,
                    "content": item.output,
                    "is_error": item.is_error,
                },
            )
    return "\n\n".join(system), messages


def parse_message(message: Any, names: ToolNameMap) -> LLMResponse:
    """An ``anthropic.types.Message`` (or its dict) as an ``LLMResponse``."""
    data, usage = read_response(message)
    items: list[Item] = []
    for block in data.get("content") or []:
        kind = block.get("type")
        if kind == "text" and block.get("text"):
            items.append(Message(role="assistant", content=block["text"]))
        elif kind == "tool_use":
            items.append(
                FunctionCall(
                    call_id=block["id"],
                    name=names.to_internal(block["name"]),
                    arguments=_json.dumps(block.get("input") or {}).decode(),
                )
            )
    return LLMResponse(items=items, usage=usage)


class AnthropicModel:
    """A model backed by ``client.messages.create`` (pass an ``anthropic.AsyncAnthropic``).

    ``options`` go to every call as they are (``temperature``, ``thinking``, ...).
    """

    def __init__(self, client: Any, model: str, *, max_tokens: int = 1024, **options: Any):
        self.client = client
        self.model = model
        self.max_tokens = max_tokens
        self.options = options

    def sent_tool_names(self, names: Sequence[str]) -> Mapping[str, str]:
        """Our tool name -> the name the model sees (see :class:`ToolNameMap`)."""
        return ToolNameMap(names).mapping

    async def __call__(self, request: ModelRequest) -> LLMResponse:
        names = ToolNameMap(spec.name for spec in request.tools)
        system, messages = anthropic_messages(request.items, names)
        kwargs: dict[str, Any] = {
            "model": self.model,
            "max_tokens": self.max_tokens,
            "messages": messages,
            **self.options,
        }
        if system:
            kwargs["system"] = system
        if request.tools:
            kwargs["tools"] = anthropic_tools(request.tools, names)
        message = await self.client.messages.create(**kwargs)
        return parse_message(message, names)


def _input_object(arguments: str) -> dict[str, Any]:
    """A call's arguments as the object ``tool_use.input`` must be; a model's malformed
    JSON from an earlier turn is kept as text rather than dropped."""
    try:
        return _json.loads_arguments(arguments)
    except _json.ArgumentsError:
        return {"_raw_arguments": arguments}
