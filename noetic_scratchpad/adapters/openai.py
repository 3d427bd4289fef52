"""OpenAI: the Responses and Chat Completions formats, and models that call them.

The functions here build plain dicts in the shapes of the ``openai`` SDK's ``*Param`` types
and read its response objects (or their dicts); they never import the SDK. Tool names go
through a :class:`ToolNameMap` both ways. Every tool is sent with its ``strict`` flag, and
the scratchpad's tool is never strict: the Responses API defaults to strict, which would
force a model to write every field.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..items import FunctionCall, FunctionCallOutput, Item, LLMResponse, Message
from ..runtime.model import ModelRequest, ToolSpec
from ._common import read_response
from .names import ToolNameMap

__all__ = (
    "OpenAIChatModel",
    "OpenAIResponsesModel",
    "chat_messages",
    "chat_tools",
    "parse_chat_completion",
    "parse_response",
    "responses_input",
    "responses_tools",
)

#: The Responses API has no error flag on tool outputs; this prefix tells the model.
ERROR_PREFIX = "Error: "


def _output_text(output: FunctionCallOutput) -> str:
    return ERROR_PREFIX + output.output if output.is_error else output.output


# -- Responses API -------------------------------------------------------------------------


def responses_tools(tools: Sequence[ToolSpec], names: ToolNameMap) -> list[dict[str, Any]]:
    """``tools=`` for ``client.responses.create`` (``FunctionToolParam`` dicts)."""
    return [
        {
            "type": "function",
            "name": names.to_provider(spec.name),
            "description": spec.description,
            "parameters": dict(spec.parameters),
            "strict": spec.strict,
        }
        for spec in tools
    ]


def responses_input(items: Sequence[Item], names: ToolNameMap) -> list[dict[str, Any]]:
    """``input=`` for ``client.responses.create``: messages, calls and call outputs."""
    converted: list[dict[str, Any]] = []
    for item in items:
        if isinstance(item, Message):
            converted.append({"type": "message", "role": item.role, "content": item.content})
        elif isinstance(item, FunctionCall):
            converted.append(
                {
                    "type": "function_call",
                    "call_id": item.call_id,
                    "name": names.to_provider(item.name),
                    "arguments": item.arguments,
                }
            )
        else:
            converted.append(
                {
                    "type": "function_call_output",
                    "call_id": item.call_id,
                    "output": _output_text(item),
                }
            )
    return converted


def parse_response(response: Any, names: ToolNameMap) -> LLMResponse:
    """An ``openai.types.responses.Response`` (or its dict) as an ``LLMResponse``."""
    data, usage = read_response(response)
    items: list[Item] = []
    for entry in data.get("output") or []:
        kind = entry.get("type")
        if kind == "message":
            text = "".join(
                part.get("text", "")
                for part in entry.get("content") or []
                if part.get("type") == "output_text"
            )
            if text:
                items.append(Message(role="assistant", content=text))
        elif kind == "function_call":
            items.append(
                FunctionCall(
                    call_id=entry["call_id"],
                    name=names.to_internal(entry["name"]),
                    arguments=entry.get("arguments") or "{}",
                )
            )
    return LLMResponse(items=items, usage=usage)


class _OpenAIModel:
    def __init__(self, client: Any, model: str, **options: Any) -> None:
        self.client = client
        self.model = model
        self.options = options

    def sent_tool_names(self, names: Sequence[str]) -> Mapping[str, str]:
        """Our tool name -> the name the model sees (see :class:`ToolNameMap`)."""
        return ToolNameMap(names).mapping

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r})"


class OpenAIResponsesModel(_OpenAIModel):
    """A model backed by ``client.responses.create`` (pass an ``openai.AsyncOpenAI``).

    ``options`` go to every call as they are (``temperature``, ``reasoning``, ...).
    """

    async def __call__(self, request: ModelRequest) -> LLMResponse:
        names = ToolNameMap(spec.name for spec in request.tools)
        kwargs: dict[str, Any] = {
            "model": self.model,
            "input": responses_input(request.items, names),
            **self.options,
        }
        if request.tools:
            kwargs["tools"] = responses_tools(request.tools, names)
        response = await self.client.responses.create(**kwargs)
        return parse_response(response, names)


# -- Chat Completions ----------------------------------------------------------------------


def chat_tools(tools: Sequence[ToolSpec], names: ToolNameMap) -> list[dict[str, Any]]:
    """``tools=`` for ``client.chat.completions.create`` (``ChatCompletionToolParam``)."""
    return [
        {
            "type": "function",
            "function": {
                "name": names.to_provider(spec.name),
                "description": spec.description,
                "parameters": dict(spec.parameters),
                "strict": spec.strict,
            },
        }
        for spec in tools
    ]


def chat_messages(items: Sequence[Item], names: ToolNameMap) -> list[dict[str, Any]]:
    """``messages=`` for Chat Completions: calls join the assistant message before them."""
    messages: list[dict[str, Any]] = []
    for item in items:
        if isinstance(item, Message):
            messages.append({"role": item.role, "content": item.content})
        elif isinstance(item, FunctionCall):
            call = {
                "id": item.call_id,
                "type": "function",
                "function": {"name": names.to_provider(item.name), "arguments": item.arguments},
            }
            last = messages[-1] if messages else None
            if last is not None and last["role"] == "assistant":
                last.setdefault("tool_calls", []).append(call)
            else:
                messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        else:
            messages.append(
                {"role": "tool", "tool_call_id": item.call_id, "content": _output_text(item)}
            )
    return messages


def parse_chat_completion(completion: Any, names: ToolNameMap) -> LLMResponse:
    """A ``ChatCompletion`` (or its dict) as an ``LLMResponse``: the first choice."""
    data, usage = read_response(completion)
    choices = data.get("choices") or []
    if not choices:
        return LLMResponse(items=[], usage=usage)
    message = choices[0].get("message") or {}
    items: list[Item] = []
    if message.get("content"):
        items.append(Message(role="assistant", content=message["content"]))
    for call in message.get("tool_calls") or []:
        function = call.get("function")
        if call.get("type", "function") != "function" or not function:
            continue  # custom (non-function) tools are not ours
        items.append(
            FunctionCall(
                call_id=call["id"],
                name=names.to_internal(function["name"]),
                arguments=function.get("arguments") or "{}",
            )
        )
    return LLMResponse(items=items, usage=usage)


class OpenAIChatModel(_OpenAIModel):
    """A model backed by ``client.chat.completions.create`` (an ``openai.AsyncOpenAI``).

    ``options`` go to every call as they are (``temperature``, ``max_tokens``, ...).
    """

    async def __call__(self, request: ModelRequest) -> LLMResponse:
        names = ToolNameMap(spec.name for spec in request.tools)
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": chat_messages(request.items, names),
            **self.options,
        }
        if request.tools:
            kwargs["tools"] = chat_tools(request.tools, names)
        completion = await self.client.chat.completions.create(**kwargs)
        return parse_chat_completion(completion, names)
