"""The scratchpad as a pydantic-ai capability, the framework's extension point for memory."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Awaitable, Callable, Sequence
from types import EllipsisType, TracebackType
from typing import Any

from pydantic_ai import RunContext
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import ModelMessage, ModelRequest, UserPromptPart
from pydantic_ai.models import ModelRequestContext

from ...core import ScratchpadCore
from ...events import EventBus
from ...layer import ScratchpadHandle, ScratchpadLayer
from ...placement import DEFAULT_PLACEMENT, Placement, check_placement
from ...render import Tokenizer
from ...storage import StorageBackend
from ._notes import (
    RunNotes,
    ScopeResolver,
    scope_from_run,
)
from ._toolset import ScratchpadToolset

__all__ = ("ScratchpadCapability",)


class ScratchpadCapability(AbstractCapability[Any]):
    """An agent's scratchpad: its ``<scratchpad>`` block in every model request, and the
    tool ``scratchpad_update`` to write it (and ``scratchpad_edit`` with ``edit_tool=True``);
    a named scratchpad's ``<scratchpad name="profile">`` block and ``profile_update``::

        notes = ScratchpadCapability(storage="sqlite:///notes.db", schema=TaskNotes)
        agent = Agent(model, capabilities=[notes])

    - ``layer`` or ``**options``: a :func:`~noetic_scratchpad.scratchpad` layer, or the
      options to build one (``schema``, ``scope``, ``template``, ``read_only``, ...).
    - ``storage``: a URL (opened on the first run, closed by :meth:`aclose`), an opened
      backend (yours to close), or ``None`` for ``$NOETIC_SCRATCHPAD_STORAGE``, else
      ``memory://``.
    - ``scope_from``: ``scope_from(ctx)`` gives a run's thread id, or ``(thread_id,
      resource_id)``, sync or async; default :func:`scope_from_run` (``ctx.deps.thread_id``,
      else the run's ``conversation_id``).
    - ``tool_name``: the update tool's name (default ``scratchpad_update``, a named
      scratchpad's ``{name}_update``); refusals name the tool as the model called it.
    - ``edit_tool_name``: the edit tool's name, offered with ``edit_tool=True`` (default
      ``scratchpad_edit``, a named scratchpad's ``{name}_edit``).
    - ``id``: the capability's id in the run (default, the layer's: ``scratchpad``, or
      the scratchpad's ``name``). Two scratchpads on one agent need two names
      (``scratchpad(name="task")``, ``scratchpad(name="profile")``): pydantic-ai refuses
      an agent given two capabilities with one id when it is built.
    - ``max_retries``: refused updates sent back as retry prompts, in a row, before a
      refusal becomes the tool's failed result instead (the run goes on either way).
    - ``budget``: the most tokens the block may take (default, the layer's).
    - ``count_tokens``: the model's token counter the budget is counted in
      (``lambda text: len(encoding.encode(text))``); default, about four characters a token.
    - ``events``: the bus to report updates and refusals on (default, one of its own).
    - ``placement``: ``"end"`` (default), the block as the last part of each request, after
      the conversation, so a provider's prompt cache survives a change of the notes (it is
      not kept in the message history); ``"start"``, the block in the instructions.
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
        placement: Placement = DEFAULT_PLACEMENT,
        **options: Any,
    ) -> None:
        self.placement = check_placement(placement)
        self.description = "The agent's scratchpad: notes it reads every turn and updates."
        self.defer_loading = False
        self.toolset = ScratchpadToolset(
            layer,
            storage=storage,
            scope_from=scope_from,
            events=events,
            tool_name=tool_name,
            edit_tool_name=edit_tool_name,
            max_retries=max_retries,
            budget=budget,
            count_tokens=count_tokens,
            id=id,
            **options,
        )
        self._notes = self.toolset.notes
        self.id = self.toolset.id
        self.per_run: RunNotes | None = None
        """This run's notes, in the copy a run works with (``for_run``)."""

    @property
    def core(self) -> ScratchpadCore:
        """The core every run calls: it owns the storage and the bus."""
        return self._notes.core

    @property
    def layer(self) -> ScratchpadLayer:
        return self._notes.layer

    @property
    def events(self) -> EventBus:
        """The bus every run's updates and refusals go to: ``notes.events.subscribe(...)``."""
        return self._notes.events

    @classmethod
    def get_serialization_name(cls) -> str | None:
        return None  # takes a backend and a function: not for agent spec files

    async def for_run(self, ctx: RunContext[Any]) -> ScratchpadCapability:
        """A copy for this run, with its own handle; storage and settings are shared."""
        run = copy.copy(self)
        run.per_run = RunNotes(self._notes)
        return run

    async def before_run(self, ctx: RunContext[Any]) -> None:
        """Open the run's handle now, so a storage or scope error stops the run at once."""
        await self._run_notes().open(ctx)

    def get_instructions(self) -> Callable[[RunContext[Any]], Awaitable[str | None]]:
        return self._instructions

    async def _instructions(self, ctx: RunContext[Any]) -> str | None:
        """The block in the instructions with ``placement="start"``; nothing with ``"end"``."""
        return await self.block(ctx) if self.placement == "start" else None

    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        """With ``placement="end"``, the block as the request's last part. Only this request
        carries it: the message history keeps none, so the next request's prefix is this
        one's conversation, unchanged, whatever the notes say by then."""
        if self.placement != "end":
            return request_context
        block = await self.block(ctx)
        if block is None:
            return request_context
        messages = _with_block(request_context.messages, block)
        return dataclasses.replace(request_context, messages=messages)

    def get_toolset(self) -> ScratchpadToolset:
        return self.toolset.bound(self.per_run, adds_instructions=False)

    async def block(self, ctx: RunContext[Any]) -> str | None:
        """The ``<scratchpad>`` block for the run's next model request (``None`` while the
        scratchpad is empty), after re-reading the stored state."""
        return await self._run_notes(ctx).block(ctx)

    async def handle(self, ctx: RunContext[Any]) -> ScratchpadHandle:
        """The handle of the run ``ctx`` belongs to, for your own tools:
        ``(await notes.handle(ctx)).snapshot``, ``await (await notes.handle(ctx)).update(...)``."""
        return await self._run_notes(ctx).open(ctx)

    def _run_notes(self, ctx: RunContext[Any] | None = None) -> RunNotes:
        """This run's notes: this copy's, else (called on the agent's instance) those of the
        run's copy in ``ctx``, else fresh notes for this one call."""
        if self.per_run is not None:
            return self.per_run
        run = ctx.capabilities.get(self.id or "") if ctx is not None else None
        if isinstance(run, ScratchpadCapability) and run.per_run is not None:
            return run.per_run
        return RunNotes(self._notes)

    async def open(self, *, thread_id: str, resource_id: str | None = None) -> ScratchpadHandle:
        """A handle on one scope's scratchpad, to read or write it outside a run:
        ``(await notes.open(thread_id="t1")).snapshot``."""
        return await self._notes.open(thread_id=thread_id, resource_id=resource_id)

    async def aclose(self) -> None:
        """Close the storage opened from a URL and the capability's own bus (a later run
        opens both again); a backend or a bus passed in stays yours."""
        await self._notes.aclose()

    async def __aenter__(self) -> ScratchpadCapability:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"ScratchpadCapability({self.layer!r}, id={self.id!r})"


def _with_block(messages: Sequence[ModelMessage], block: str) -> list[ModelMessage]:
    """``messages`` with ``block`` as a user part at the end of the last request: a copy of
    it, so the run's history is untouched. A user part reaches every provider where it
    stands (a system part would be lifted into Anthropic's system prompt, before the cache)."""
    part = UserPromptPart(block)
    *earlier, last = messages
    if isinstance(last, ModelRequest):
        return [*earlier, dataclasses.replace(last, parts=[*last.parts, part])]
    return [*messages, ModelRequest(parts=[part])]
