"""The scratchpad's tools in a provider's format, for a loop of your own.

::

    handle = await scratchpad().open(backend, thread_id="t1")
    tools = tool_definitions(handle, "openai")  # client.responses.create(tools=tools, ...)

The definitions are the ones the harness sends: the layer's description and parameters,
under provider-safe names (``scratchpad__update``, ``scratchpad__edit``, or the ``names``
given), only those the model may call (none for a read-only scratchpad).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

from ..errors import ScratchpadConfigError
from ..layer import ScratchpadHandle, ScratchpadLayer
from ..runtime.model import ToolSpec
from .anthropic import anthropic_tools
from .names import PROVIDER_NAME, ToolNameMap
from .openai import chat_tools, responses_tools

__all__ = ("PROVIDERS", "Provider", "default_tool_names", "tool_definitions")

Provider = Literal["openai", "openai-chat", "anthropic"]

_FORMATS: dict[str, Callable[[Sequence[ToolSpec], ToolNameMap], list[dict[str, Any]]]] = {
    "openai": responses_tools,  # the Responses API
    "openai-chat": chat_tools,  # Chat Completions
    "anthropic": anthropic_tools,  # the Messages API
}
PROVIDERS: tuple[str, ...] = tuple(_FORMATS)
_FUNCTIONS = ("update", "edit", "read")


def default_tool_names(layer: ScratchpadLayer | ScratchpadHandle) -> dict[str, str]:
    """``{"update": "scratchpad__update", "edit": "scratchpad__edit", "read": ...}``: the names the
    harness's provider adapters give the layer's tools (``{layer.id}/{function}``, made
    provider-safe)."""
    layer_id = _layer(layer).id
    internal = {function: f"{layer_id}/{function}" for function in _FUNCTIONS}
    mapped = ToolNameMap(internal.values())
    return {function: mapped.to_provider(name) for function, name in internal.items()}


def tool_definitions(
    layer: ScratchpadLayer | ScratchpadHandle,
    provider: Provider,
    *,
    names: Mapping[str, str] | None = None,
) -> list[dict[str, Any]]:
    """The scratchpad's tools as ``provider`` takes them in ``tools=``: ``"openai"``
    (Responses), ``"openai-chat"`` (Chat Completions) or ``"anthropic"`` (Messages).

    ``layer``: the layer, or a handle of it. ``names`` maps a function (``update``,
    ``edit``, ``read``) to the name the model calls it by (default
    :func:`default_tool_names`); when the model calls that name, run ``await
    handle.call(function, arguments)``. A list: ``edit_tool=True`` adds the edit tool, a
    state that may outgrow the block's budget (the default) the read tool, and a read-only
    scratchpad offers none.

    Raises ``ScratchpadConfigError`` for an unknown provider or a name a provider refuses.
    """
    if provider not in _FORMATS:
        raise ScratchpadConfigError(f"unknown provider {provider!r}; known: {', '.join(PROVIDERS)}")
    pad = _layer(layer)
    chosen = {**default_tool_names(pad), **(names or {})}
    for function, name in chosen.items():
        if not isinstance(name, str) or not PROVIDER_NAME.match(name):
            raise ScratchpadConfigError(
                f"the name {name!r} for {function} is not one providers accept: use 1 to 64 "
                "letters, digits, '_' or '-'"
            )
    specs = [
        ToolSpec(tool.name, tool.description, tool.parameters, tool.strict)
        for tool in pad.host_tools(chosen)
        if tool.exposed
    ]
    return _FORMATS[provider](specs, ToolNameMap(spec.name for spec in specs))


def _layer(layer: ScratchpadLayer | ScratchpadHandle) -> ScratchpadLayer:
    found = layer.layer if isinstance(layer, ScratchpadHandle) else layer
    if not isinstance(found, ScratchpadLayer):
        raise ScratchpadConfigError(f"expected a scratchpad layer or its handle, not {layer!r}")
    return found
