"""Provider formats: tool specs out, function calls back in, tool names mapped both ways.

No SDK is imported here: the adapters build the plain dicts the ``openai`` and
``anthropic`` SDKs accept and read the objects they return.
"""

from .anthropic import AnthropicModel, anthropic_messages, anthropic_tools, parse_message
from .names import PROVIDER_NAME, ToolNameMap
from .openai import (
    OpenAIChatModel,
    OpenAIResponsesModel,
    chat_messages,
    chat_tools,
    parse_chat_completion,
    parse_response,
    responses_input,
    responses_tools,
)
from .tools import PROVIDERS, Provider, default_tool_names, tool_definitions

__all__ = (
    "PROVIDERS",
    "PROVIDER_NAME",
    "AnthropicModel",
    "OpenAIChatModel",
    "OpenAIResponsesModel",
    "Provider",
    "ToolNameMap",
    "anthropic_messages",
    "anthropic_tools",
    "chat_messages",
    "chat_tools",
    "default_tool_names",
    "parse_chat_completion",
    "parse_message",
    "parse_response",
    "responses_input",
    "responses_tools",
    "tool_definitions",
)
