"""The scratchpad for the OpenAI Agents SDK: an update tool and dynamic instructions.

::

    notes = Scratchpad(storage="sqlite:///scratchpad.db", schema=TaskNotes)
    agent = Agent(name="Engineer", instructions=notes.instructions("You are ..."),
                  tools=notes.tools)
    result = await Runner.run(agent, "Fix the login bug", context={"thread_id": "ticket-42"},
                              run_config=RunConfig(call_model_input_filter=notes.input_filter))

The instructions function appends the ``<scratchpad>`` block, re-read from storage, to the
agent's instructions on every model call; with ``placement="end"`` (the default) the input
filter moves it to the end of the model's input, after the conversation, so a provider's
prompt cache survives a change of the notes. The tool merges the model's update into it.
The scope (thread, optional resource) comes from the run's context. Needs the extra:
``pip install "noetic-scratchpad[openai-agents]"``.
"""

from __future__ import annotations

import dataclasses
import inspect
import logging
import warnings
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from types import TracebackType
from typing import Any, Self

from .._extras import needs_extra

with needs_extra(
    "noetic_scratchpad.integrations.openai_agents",
    "openai-agents",
    "the OpenAI Agents SDK",
    ("agents",),
):
    from agents import Agent, FunctionTool, RunContextWrapper
    from agents.items import TResponseInputItem
    from agents.run_config import CallModelData, ModelInputData
    from agents.tool_context import ToolContext

from ..adapters.names import check_tool_names
from ..core import RunScope, ScratchpadCore, as_scope
from ..errors import ScratchpadConfigError
from ..events import EventBus
from ..layer import HostTool, ScratchpadHandle, ScratchpadLayer, read_tool_name, scratchpad
from ..placement import DEFAULT_PLACEMENT, Placement, check_placement, without_block
from ..render import Tokenizer
from ..storage import StorageBackend

__all__ = (
    "DEFAULT_EDIT_TOOL_NAME",
    "DEFAULT_TOOL_NAME",
    "RunScope",
    "Scratchpad",
    "chain_filters",
    "scope_from_context",
)

#: The update tool's default name: the SDK sends tool names to the provider as they are,
#: and OpenAI accepts only ``^[a-zA-Z0-9_-]{1,64}$`` (so not ``scratchpad/update``). A
#: named scratchpad's tools are ``{name}_update`` and ``{name}_edit``.
DEFAULT_TOOL_NAME = "scratchpad_update"
#: The edit tool's default name (offered with ``edit_tool=True``).
DEFAULT_EDIT_TOOL_NAME = "scratchpad_edit"

logger = logging.getLogger("noetic_scratchpad.integrations.openai_agents")

#: Instructions remembered with their block, for :meth:`Scratchpad.input_filter` to move
#: it; the least recently built go first.
_MAX_PLACED = 256

InstructionsFn = Callable[[RunContextWrapper[Any], Agent[Any]], Awaitable[str] | str]

ScopeResolver = Callable[[RunContextWrapper[Any]], RunScope | str]


def scope_from_context(run_context: RunContextWrapper[Any]) -> RunScope:
    """The default scope: ``thread_id`` (required) and ``resource_id`` (optional) of the
    context passed to ``Runner.run(..., context=...)``, as mapping keys or attributes."""
    context = run_context.context

    def lookup(name: str) -> Any:
        if isinstance(context, Mapping):
            return context.get(name)
        return getattr(context, name, None)

    thread_id, resource_id = lookup("thread_id"), lookup("resource_id")
    if not isinstance(thread_id, str) or not thread_id:
        raise ScratchpadConfigError(
            "the scratchpad needs a thread id from the run context, and found "
            f"{thread_id!r}: pass context={{'thread_id': '...'}} to Runner.run (or an object "
            "with a thread_id attribute), or give Scratchpad(scope_from=...) a function of "
            "the RunContextWrapper that returns the thread id or a RunScope"
        )
    return RunScope(thread_id, resource_id if isinstance(resource_id, str) else None)


class Scratchpad:
    """A scratchpad for Agents SDK agents: :attr:`tools` and :meth:`instructions`.

    ``Scratchpad(storage=URL_OR_BACKEND, schema=TaskNotes)``; any ``scratchpad()`` option
    (``schema``, ``scope``, ``template``, ``read_only``, ...) may be given, or a built layer
    as the first argument. ``storage``: a URL (opened on first use, closed by
    :meth:`aclose`) or an opened backend (left open); ``None`` reads
    ``$NOETIC_SCRATCHPAD_STORAGE``, else ``memory://``. ``scope_from``: the run's scope
    from its ``RunContextWrapper`` (default :func:`scope_from_context`). ``events``: a bus
    to report on (default, one of its own at :attr:`events`). ``budget``: the block's
    token budget (default, the layer's), counted by ``count_tokens`` (the model's token
    counter, such as ``lambda text: len(encoding.encode(text))``; default, about four
    characters a token). ``tool_name``, ``edit_tool_name``: the tools'
    names (the edit tool is offered with ``edit_tool=True``; default ``scratchpad_update``
    and ``scratchpad_edit``, a named scratchpad's ``{name}_update`` and ``{name}_edit``).
    Two scratchpads on one agent need names of their own (``scratchpad(name="task")``,
    ``scratchpad(name="profile")``): chain their instructions
    (``profile.instructions(task.instructions("..."))``), give the agent both sets of
    tools, and the run both input filters (:func:`chain_filters`). ``placement``: ``"end"``
    (default), the block moved by :meth:`input_filter` to the end of the model's input;
    ``"start"``, the block left in the instructions. ``max_scopes`` is deprecated and does
    nothing: no handle is kept between calls.

    A thin adapter over a :class:`~noetic_scratchpad.core.ScratchpadCore` (at
    :attr:`core`), which owns the storage and the bus, applies the tool calls and writes
    the text the model reads. A tool call binds to its scope without reading it (one
    round trip: the write); the instructions read the block (one read).
    """

    def __init__(
        self,
        layer: ScratchpadLayer | None = None,
        /,
        *,
        storage: str | StorageBackend | None = None,
        scope_from: ScopeResolver = scope_from_context,
        events: EventBus | None = None,
        tool_name: str | None = None,
        edit_tool_name: str | None = None,
        budget: int | None = None,
        count_tokens: Tokenizer | None = None,
        max_scopes: int | None = None,
        placement: Placement = DEFAULT_PLACEMENT,
        **options: Any,
    ) -> None:
        if layer is not None and options:
            raise ScratchpadConfigError(
                f"give either a layer or scratchpad() options, not both (got {sorted(options)})"
            )
        layer = layer if layer is not None else scratchpad(**options)
        names = layer.tool_names()  # scratchpad_update, a named one's profile_update
        tool_name = names["update"] if tool_name is None else tool_name
        edit_tool_name = names["edit"] if edit_tool_name is None else edit_tool_name
        check_tool_names(tool_name, edit_tool_name)
        if max_scopes is not None:
            warnings.warn(
                "Scratchpad(max_scopes=...) is deprecated and does nothing: no handle is "
                "kept between calls any more (a tool call writes without reading first, and "
                "the instructions read the block once), so there is nothing to bound; "
                "drop the argument",
                DeprecationWarning,
                stacklevel=2,
            )
        self.core = ScratchpadCore(layer, storage=storage, events=events, count_tokens=count_tokens)
        """What owns the storage and the bus and applies the calls."""
        self.layer = layer
        self.scope_from = scope_from
        self.placement = check_placement(placement)
        self.budget = budget
        self.storage_url = self.core.storage_url  # secrets hidden: it is shown in repr
        # The instructions last built with a block, and that block: what input_filter moves.
        self._placed: OrderedDict[str, str] = OrderedDict()
        self._filtered = False  # input_filter has run: the block can be moved
        self._unfiltered_calls = 0
        self._names = {
            "update": tool_name,
            "edit": edit_tool_name,
            "read": read_tool_name(tool_name),
        }
        self.tools: list[FunctionTool] = [
            self._build_tool(tool) for tool in self.core.tools(self._names)
        ]
        """The tools: ``Agent(tools=notes.tools)`` (the update tool, the edit tool with
        ``edit_tool=True``, and the read tool, for the parts of a view cut to its budget,
        when the state may outgrow it)."""
        self.tool = self.tools[0]
        """The update tool alone."""

    @property
    def events(self) -> EventBus:
        """The bus every scope's events go to: ``notes.events.subscribe(handler)``."""
        return self.core.events

    def _build_tool(self, tool: HostTool) -> FunctionTool:
        """One of the layer's tools as a ``FunctionTool``, strict only where the layer's is.

        Why the update is not strict: the SDK's strict mode (its default) rewrites a schema
        so that every property is required and drops the defaults. With a schema, the model
        would then have to send every field on every update, and a partial update (the
        point of the merge) would be refused or padded with made-up values; without a
        schema (a free object) strict mode refuses the tool outright. The schema the model
        sees here is the layer's own: the schema's fields, all optional. The edit tool's
        schema is made for strict mode. Read-only scratchpads keep the tools disabled, so
        the model never sees them.
        """

        async def invoke(tool_context: ToolContext[Any], arguments: str) -> str:
            return await self._invoke(tool.function, tool_context, arguments)

        return FunctionTool(
            name=tool.name,
            description=tool.description,
            params_json_schema=tool.parameters,
            on_invoke_tool=invoke,
            strict_json_schema=tool.strict,
            is_enabled=tool.exposed,
        )

    # -- what the SDK calls ----------------------------------------------------------------

    def instructions(self, base: str | InstructionsFn | None = None) -> InstructionsFn:
        """Dynamic instructions for ``Agent(instructions=...)``: ``base`` (text, or the
        SDK's instructions function) followed by the current ``<scratchpad>`` block, re-read
        from storage on every model call. Nothing is added while the scratchpad is empty.

        Raises ``StorageError`` (the run fails) when the state cannot be read in time.
        """

        async def instructions(run_context: RunContextWrapper[Any], agent: Agent[Any]) -> str:
            self._check_tools(agent)
            text = base(run_context, agent) if callable(base) else base
            if inspect.isawaitable(text):
                text = await text
            block = await self.block(run_context)
            built = "\n\n".join(part for part in (text, block) if part)
            if block and self.placement == "end":
                self._remember_placed(built, block)
            return built

        return instructions

    def input_filter(self, data: CallModelData[Any]) -> ModelInputData:
        """``RunConfig(call_model_input_filter=notes.input_filter)``: with ``placement="end"``,
        moves the block from the end of the instructions to the end of the model's input (a
        developer message after the conversation). Only the request carries it: the run's
        items keep none. Instructions it did not build pass unchanged, and so does all of it
        with ``placement="start"``. To chain another filter, call it on what this returns.
        """
        self._filtered = True
        model_data = data.model_data
        instructions = model_data.instructions
        block = self._placed.get(instructions) if instructions else None
        rest = without_block(instructions, block) if instructions and block else None
        if block is None or rest is None:
            return model_data
        message: TResponseInputItem = {"role": "developer", "content": block}
        return ModelInputData(input=[*model_data.input, message], instructions=rest or None)

    def _remember_placed(self, instructions: str, block: str) -> None:
        self._placed[instructions] = block
        self._placed.move_to_end(instructions)
        while len(self._placed) > _MAX_PLACED:
            self._placed.popitem(last=False)
        if not self._filtered:
            self._unfiltered_calls += 1
            if self._unfiltered_calls == 2:  # once: the first call of a run cannot know yet
                logger.warning(
                    "the scratchpad's block stays in the instructions, before the "
                    "conversation: run with RunConfig(call_model_input_filter=notes."
                    "input_filter) to move it after the conversation (placement='end'), or "
                    "build Scratchpad(placement='start') to keep it there"
                )

    def _check_tools(self, agent: Agent[Any]) -> None:
        """Refuse an agent that was given some of the scratchpad's tools but not all (with
        ``edit_tool=True`` and ``tools=[notes.tool]``, the edit tool would be missing), or
        another tool of the same name (two scratchpads without names of their own): the
        SDK would offer the model one name for two tools."""
        given = {id(tool) for tool in agent.tools}
        ours = {id(tool) for tool in self.tools}
        names = {tool.name for tool in self.tools}
        clash = next(
            (
                tool.name
                for tool in agent.tools
                if id(tool) not in ours and getattr(tool, "name", None) in names
            ),
            None,
        )
        if clash is not None:
            raise ScratchpadConfigError(
                f"the agent {agent.name!r} has two tools named {clash!r}: this scratchpad's "
                "and another (a second scratchpad with the same name?); give each scratchpad "
                'a name of its own, such as Scratchpad(scratchpad(name="task")) and '
                'Scratchpad(scratchpad(name="profile"))'
            )
        # The read tool may be left out: the model then sees only what the block shows.
        needed = [tool for tool in self.tools if tool.name != self._names["read"]]
        mine = [tool for tool in needed if id(tool) in given]
        if mine and len(mine) < len(needed):
            missing = ", ".join(tool.name for tool in needed if id(tool) not in given)
            raise ScratchpadConfigError(
                f"the agent {agent.name!r} has the scratchpad's tool {mine[0].name!r} but not "
                f"{missing}, which this scratchpad offers (edit_tool=True); pass "
                "Agent(tools=[*notes.tools, ...]), or build the scratchpad without edit_tool"
            )

    async def _invoke(self, function: str, tool_context: ToolContext[Any], arguments: str) -> str:
        """A tool's body. A refusal or a storage failure comes back as the output the model
        reads (the core's text, marked as an error), never an exception: an exception would
        fail the whole run. The SDK refuses a reused call id within a run; across runs on a
        thread the core tells a retry (same id and arguments) from a new call under an old
        id."""
        result = await self.core.call(
            self.scope(tool_context),
            function,
            arguments,
            tool=tool_context.tool_name or self._names[function],  # as the model called it
            call_id=tool_context.tool_call_id,
            budget=self.budget,  # the view the model is shown
        )
        return result.text if result.ok else f"Error: {result.text}"

    # -- for application code --------------------------------------------------------------

    def scope(self, run_context: RunContextWrapper[Any]) -> RunScope:
        """The scope of the run: ``scope_from(run_context)``, checked."""
        return as_scope(self.scope_from(run_context), source="scope_from(run_context)")

    async def block(self, run_context: RunContextWrapper[Any]) -> str:
        """The ``<scratchpad>`` block of the run's scope as stored now; ``""`` when empty."""
        return await self.core.block(self.scope(run_context), budget=self.budget)

    async def handle(self, run_context: RunContextWrapper[Any]) -> ScratchpadHandle:
        """A handle on the run's scope, its state read now, for code: ``.snapshot``,
        ``await .update({...})``."""
        return await self.core.handle(self.scope(run_context))

    # -- lifecycle -------------------------------------------------------------------------

    @property
    def storage(self) -> StorageBackend:
        """The opened backend (opened on first use, or by ``async with`` / :meth:`open`)."""
        return self.core.backend

    async def open(self) -> StorageBackend:
        """Open the storage (once); the first model call or tool call does it for you."""
        return await self.core.open()

    async def aclose(self) -> None:
        """Close the storage if this object opened it (a backend passed in stays open),
        and its own event bus (a bus passed in is only drained)."""
        await self.core.aclose()

    async def __aenter__(self) -> Self:
        await self.open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"<Scratchpad {self.layer!r} tool={self.tool.name!r} storage={self.storage_url!r}>"


def chain_filters(
    *filters: Callable[[CallModelData[Any]], ModelInputData],
) -> Callable[[CallModelData[Any]], ModelInputData]:
    """One ``call_model_input_filter`` of several (``RunConfig`` takes one): each is given
    what the others made of the input, so two scratchpads' filters both move their
    blocks, whichever order their instructions were chained in::

        RunConfig(call_model_input_filter=chain_filters(task.input_filter, profile.input_filter))
    """

    def chained(data: CallModelData[Any]) -> ModelInputData:
        model_data = data.model_data
        # A filter moves its block only from the end of the instructions: until the ones
        # chained after it have moved theirs, it waits for a later pass.
        for _ in filters:
            for each in filters:
                model_data = each(dataclasses.replace(data, model_data=model_data))
        return model_data

    return chained
