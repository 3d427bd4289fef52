"""The items exchanged with a model: messages, function calls and their outputs."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ._models import unvalidated

__all__ = ("FunctionCall", "FunctionCallOutput", "Item", "LLMResponse", "Message")


class _Item(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Message(_Item):
    """A message from the system, developer, user or assistant."""

    type: Literal["message"] = "message"
    role: Literal["system", "developer", "user", "assistant"]
    content: str


#: The fields :func:`developer_message` names.
_MESSAGE_GIVEN = frozenset({"role", "content"})


def developer_message(content: str) -> Message:
    """``Message(role="developer", content=content)`` for a text the library made (a
    recall's block), without validating it again: built on every recall (see
    :mod:`._models`)."""
    return unvalidated(
        Message, {"type": "message", "role": "developer", "content": content}, _MESSAGE_GIVEN
    )


class FunctionCall(_Item):
    """A model's request to call a tool; ``arguments`` is the JSON text the model wrote."""

    type: Literal["function_call"] = "function_call"
    call_id: str
    name: str
    arguments: str = "{}"


class FunctionCallOutput(_Item):
    """The result of a tool call, fed back to the model. ``is_error`` marks a refusal."""

    type: Literal["function_call_output"] = "function_call_output"
    call_id: str
    output: str
    is_error: bool = False


Item = Annotated[Message | FunctionCall | FunctionCallOutput, Field(discriminator="type")]


class LLMResponse(BaseModel):
    """What a model returns for one request."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    items: list[Item] = Field(default_factory=list)
    usage: dict[str, Any] = Field(default_factory=dict)
