"""The scratchpad for pydantic-ai agents, in three lines::

    from noetic_scratchpad.integrations.pydantic_ai import ScratchpadCapability

    notes = ScratchpadCapability(storage="sqlite:///notes.db", schema=TaskNotes)
    agent = Agent("openai:gpt-5", capabilities=[notes])
    result = await agent.run("Fix the login bug.", conversation_id="ticket-42")

Needs the extra: ``pip install "noetic-scratchpad[pydantic-ai]"``. See
``docs/integrations/pydantic-ai.md``.
"""

from __future__ import annotations

from typing import Any

from ..._extras import needs_extra

with needs_extra(
    "noetic_scratchpad.integrations.pydantic_ai", "pydantic-ai", "pydantic-ai", ("pydantic_ai",)
):
    import pydantic_ai  # noqa: F401

from ._notes import (
    DEFAULT_EDIT_TOOL_NAME,
    DEFAULT_TOOL_NAME,
    RunScope,
    ScopeResolver,
    scope_from_run,
)
from ._toolset import ScratchpadToolset

_no_capabilities: ImportError | None = None
try:
    from ._capability import ScratchpadCapability
except ImportError as exc:
    if not (exc.name or "").startswith("pydantic_ai"):
        raise
    _no_capabilities = exc  # a pydantic-ai from before capabilities: the toolset still works

__all__ = (
    "DEFAULT_EDIT_TOOL_NAME",
    "DEFAULT_TOOL_NAME",
    "RunScope",
    "ScopeResolver",
    "ScratchpadCapability",
    "ScratchpadToolset",
    "scope_from_run",
)


def __getattr__(name: str) -> Any:
    if name == "ScratchpadCapability" and _no_capabilities is not None:
        raise ImportError(
            "ScratchpadCapability needs pydantic-ai's capabilities API "
            f"(pydantic_ai.capabilities), which this pydantic-ai lacks ({_no_capabilities}). "
            'Upgrade it (pip install -U "noetic-scratchpad[pydantic-ai]"), or use the '
            "toolset: Agent(model, toolsets=[ScratchpadToolset(...)])"
        ) from _no_capabilities
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
