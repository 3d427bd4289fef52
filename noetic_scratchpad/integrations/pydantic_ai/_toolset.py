"""The scratchpad as a plain pydantic-ai toolset: the update tool and the block."""

from __future__ import annotations

import copy
from types import EllipsisType
from typing import Any

from pydantic_ai import RunContext
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets import AbstractToolset, ToolsetTool
from pydantic_core import SchemaValidator, core_schema

from ...core import ScratchpadCore
from ...events import EventBus
from ...layer import ScratchpadHandle, ScratchpadLayer
from ...render import Tokenizer
from ...storage import StorageBackend
from ._notes import (
    Notes,
    RunNotes,
    ScopeResolver,
    scope_from_run,
)

__all__ = ("ScratchpadToolset",)

# The arguments go to the layer as they came: its gate checks them and says what to fix.
_ANY_ARGS = SchemaValidator(core_schema.any_schema())


class ScratchpadToolset(AbstractToolset[Any]):
    """The scratchpad's tools (update, and edit with ``edit_tool=True``), and its
    ``<scratchpad>`` block as the toolset's instructions: ``Agent(model, toolsets=[ScratchpadToolset(storage="sqlite:///notes.db")])``.

    Prefer :class:`ScratchpadCapability` where pydantic-ai has capabilities; this toolset is
    for versions without them. It opens one handle per run where pydantic-ai gives toolsets
    a per-run copy (``for_run``), and one per call otherwise. Where toolsets cannot add
    instructions, pass ``instructions=[toolset.instructions]`` to the ``Agent`` as well.

    Arguments are those of :class:`ScratchpadCapability`; ``id`` names the toolset
    (default, the layer's id: ``scratchpad``, or the scratchpad's ``name``).
    """

    def __init__(
        self,
        layer: ScratchpadLayer | None = None,
        /,
        *,
        storage: str | StorageBackend | None = None,
        scope_from: ScopeResolver = scope_from_run,
        events: EventBus | None = None,
        tool_name: str | None = None,
        edit_tool_name: str | None = None,
        max_retries: int = 3,
        budget: int | None = None,
        count_tokens: Tokenizer | None = None,
        id: str | EllipsisType | None = ...,
        **options: Any,
    ) -> None:
        notes = Notes(
            layer,
            storage=storage,
            scope_from=scope_from,
            events=events,
            tool_name=tool_name,
            edit_tool_name=edit_tool_name,
            max_retries=max_retries,
            budget=budget,
            count_tokens=count_tokens,
            options=options,
        )
        self.notes = notes
        self.run_notes: RunNotes | None = None
        """This run's notes, in the copy a run works with (``for_run``)."""
        self.adds_instructions = True
        """Whether ``get_instructions`` adds the block (a capability adds it itself)."""
        self._id = notes.layer.id if id is ... else id

    def bound(self, run: RunNotes | None, *, adds_instructions: bool) -> ScratchpadToolset:
        """A copy working with the notes ``run`` (storage and settings are shared)."""
        toolset = copy.copy(self)
        toolset.run_notes = run
        toolset.adds_instructions = adds_instructions
        return toolset

    @property
    def id(self) -> str | None:
        return self._id

    @property
    def core(self) -> ScratchpadCore:
        """The core every run calls: it owns the storage and the bus."""
        return self.notes.core

    @property
    def layer(self) -> ScratchpadLayer:
        return self.notes.layer

    @property
    def events(self) -> EventBus:
        """The bus every run's updates and refusals are reported on."""
        return self.notes.events

    async def for_run(self, ctx: RunContext[Any]) -> ScratchpadToolset:
        if self.run_notes is not None:
            return self
        return self.bound(RunNotes(self.notes), adds_instructions=self.adds_instructions)

    def _notes_now(self) -> RunNotes:
        """This run's notes; without a per-run copy (an old pydantic-ai), fresh notes for
        this one call: a handle opened for it alone."""
        return self.run_notes if self.run_notes is not None else RunNotes(self.notes)

    async def get_instructions(self, ctx: RunContext[Any]) -> str | None:
        if not self.adds_instructions:
            return None  # a capability adds the block itself
        return await self.instructions(ctx)

    async def instructions(self, ctx: RunContext[Any]) -> str | None:
        """The block for this request (``None`` while it is empty); an
        instructions function: ``Agent(..., instructions=[toolset.instructions])``."""
        return await self._notes_now().block(ctx)

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        # Read-only: none is exposed, and the model gets the block, not the tools.
        return {
            tool.name: ToolsetTool(
                toolset=self,
                tool_def=ToolDefinition(
                    name=tool.name,
                    description=tool.description,
                    parameters_json_schema=tool.parameters,
                    strict=tool.strict or None,
                ),
                max_retries=self.notes.max_retries,
                args_validator=_ANY_ARGS,
            )
            for tool in self.notes.core.tools(self.notes.names)
            if tool.exposed
        }

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> str:
        functions = {tool: function for function, tool in self.notes.names.items()}
        function = functions.get(name, "update")
        return await self._notes_now().call(function, tool_args, ctx)

    async def open(self, *, thread_id: str, resource_id: str | None = None) -> ScratchpadHandle:
        """A handle on one scope's scratchpad, to read or write it outside a run."""
        return await self.notes.open(thread_id=thread_id, resource_id=resource_id)

    async def aclose(self) -> None:
        """Close the storage opened from a URL and the toolset's own bus (the agent's
        ``async with`` on toolsets, once per run, leaves them open: a ``memory://``
        scratchpad must outlive the run); a backend or a bus passed in stays yours."""
        await self.notes.aclose()
