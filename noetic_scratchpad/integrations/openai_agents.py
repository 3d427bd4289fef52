"""The scratchpad for the OpenAI Agents SDK: an update tool and dynamic instructions.

::

    notes = Scratchpad(storage="sqlite:///scratchpad.db", schema=TaskNotes)
    agent = Agent(name="Engineer", instructions=notes.instructions("You are ..."),
                  tools=[notes.tool])
    result = await Runner.run(agent, "Fix the login bug", context={"thread_id": "ticket-42"})

The instructions function appends the ``<scratchpad>`` block, re-read from storage, to the
agent's instructions on every model call; the tool merges the model's update into it.
The scope (thread, optional resource) comes from the run's context. Needs the extra:
``pip install "noetic-scratchpad[openai-agents]"``.
"""

from __future__ import annotations

import copy
import inspect
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Self

try:
    from agents import Agent, FunctionTool, RunContextWrapper
    from agents.tool_context import ToolContext
except ImportError as exc:  # the extra is not installed, or the SDK cannot load
    raise ImportError(
        "noetic_scratchpad.integrations.openai_agents needs the OpenAI Agents SDK; install "
        'it with: pip install "noetic-scratchpad[openai-agents]"'
    ) from exc

from ..adapters.names import PROVIDER_NAME
from ..errors import ScratchpadConfigError, ScratchpadUpdateError, StorageError
from ..events import EventBus
from ..layer import LayerFunction, ScratchpadHandle, ScratchpadLayer, scratchpad
from ..storage import OwnedStorage, StorageBackend

__all__ = ("DEFAULT_TOOL_NAME", "RunScope", "Scratchpad", "scope_from_context")

logger = logging.getLogger("noetic_scratchpad.integrations.openai_agents")

#: The update tool's default name: the SDK sends tool names to the provider as they are,
#: and OpenAI accepts only ``^[a-zA-Z0-9_-]{1,64}$`` (so not ``scratchpad/update``).
DEFAULT_TOOL_NAME = "scratchpad_update"

#: Scopes whose handles are kept between calls; the least recently used goes first.
DEFAULT_MAX_SCOPES = 256

InstructionsFn = Callable[[RunContextWrapper[Any], Agent[Any]], Awaitable[str] | str]


@dataclass(frozen=True, slots=True)
class RunScope:
    """Whose scratchpad a run uses: its thread, and optionally a resource such as a user
    (used by ``scope="resource"`` scratchpads)."""

    thread_id: str
    resource_id: str | None = None


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


def _storage_failure_text(tool: str) -> str:
    """What the model reads when storage failed under its update."""
    return (
        "Error: the scratchpad is unavailable right now (a storage failure), so this update "
        f"may not have been saved. Carry on with the task and call {tool} again later with "
        "the same fields; repeating an update is harmless."
    )


class Scratchpad:
    """A scratchpad for Agents SDK agents: :attr:`tool` and :meth:`instructions`.

    ``Scratchpad(storage=URL_OR_BACKEND, schema=TaskNotes)``; any ``scratchpad()`` option
    (``schema``, ``scope``, ``template``, ``read_only``, ...) may be given, or a built layer
    as the first argument. ``storage``: a URL (opened on first use, closed by
    :meth:`aclose`) or an opened backend (left open); ``None`` reads
    ``$NOETIC_SCRATCHPAD_STORAGE``, else ``memory://``. ``scope_from``: the run's scope
    from its ``RunContextWrapper`` (default :func:`scope_from_context`). ``events``: a bus
    to report on (default, one of its own at :attr:`events`). ``budget``: the block's
    token budget (default, the layer's).
    """

    def __init__(
        self,
        layer: ScratchpadLayer | None = None,
        /,
        *,
        storage: str | StorageBackend | None = None,
        scope_from: ScopeResolver = scope_from_context,
        events: EventBus | None = None,
        tool_name: str = DEFAULT_TOOL_NAME,
        budget: int | None = None,
        max_scopes: int = DEFAULT_MAX_SCOPES,
        **options: Any,
    ) -> None:
        if layer is not None and options:
            raise ScratchpadConfigError(
                f"give either a layer or scratchpad() options, not both (got {sorted(options)})"
            )
        if not PROVIDER_NAME.match(tool_name):
            raise ScratchpadConfigError(
                f"tool_name {tool_name!r} is not a name providers accept: use 1 to 64 "
                "letters, digits, '_' or '-'"
            )
        if max_scopes < 1:
            raise ScratchpadConfigError(f"max_scopes must be at least 1, not {max_scopes}")
        self.layer = layer if layer is not None else scratchpad(**options)
        self.scope_from = scope_from
        self.budget = budget
        self.max_scopes = max_scopes
        self._owns_events = events is None
        self.events = events if events is not None else EventBus()
        """The bus every scope's events go to: ``notes.events.subscribe(handler)``."""
        self._storage = OwnedStorage(storage)
        self.storage_url = self._storage.url  # secrets hidden: it is shown in repr
        self._handles: OrderedDict[RunScope, ScratchpadHandle] = OrderedDict()
        self.tool = self._build_tool(tool_name)
        """The update tool: put it in ``Agent(tools=[...])``."""

    def _build_tool(self, name: str) -> FunctionTool:
        """The update as a ``FunctionTool`` with a non-strict schema.

        Why not strict: the SDK's strict mode (its default) rewrites a schema so that every
        property is required and drops the defaults. With a schema, the model would then
        have to send every field on every update, and a partial update (the point of the
        merge) would be refused or padded with made-up values; without a schema (a free
        object) strict mode refuses the tool outright. The schema the model sees here is
        the layer's own: the schema's fields, all optional. Read-only scratchpads keep the
        tool disabled, so the model never sees it.
        """
        update = self.layer.provides["update"]
        assert isinstance(update, LayerFunction)  # "snapshot" is the data, "update" this
        return FunctionTool(
            name=name,
            description=update.description,
            params_json_schema=copy.deepcopy(dict(update.parameters)),
            on_invoke_tool=self._invoke,
            strict_json_schema=False,
            is_enabled=not self.layer.config.read_only,
        )

    # -- what the SDK calls ----------------------------------------------------------------

    def instructions(self, base: str | InstructionsFn | None = None) -> InstructionsFn:
        """Dynamic instructions for ``Agent(instructions=...)``: ``base`` (text, or the
        SDK's instructions function) followed by the current ``<scratchpad>`` block, re-read
        from storage on every model call. Nothing is added while the scratchpad is empty.

        Raises ``StorageError`` (the run fails) when the state cannot be read in time.
        """

        async def instructions(run_context: RunContextWrapper[Any], agent: Agent[Any]) -> str:
            text = base(run_context, agent) if callable(base) else base
            if inspect.isawaitable(text):
                text = await text
            block = await self.block(run_context)
            return "\n\n".join(part for part in (text, block) if part)

        return instructions

    async def _invoke(self, tool_context: ToolContext[Any], arguments: str) -> str:
        """The tool's body. A refusal or a storage failure becomes the output the model
        reads, never an exception: an exception would fail the whole run."""
        tool = tool_context.tool_name or self.tool.name  # the name the model called
        call_id = tool_context.tool_call_id
        try:
            handle, _ = await self._handle_for(tool_context)
            handle.tool_name = tool
            # The SDK refuses a reused id within a run; across runs on a thread the handle
            # tells a retry (same id and arguments) from a new call under an old id.
            return await handle.call("update", arguments, call_id=call_id)
        except ScratchpadUpdateError as exc:
            return f"Error: {exc.message}"
        except StorageError as exc:
            logger.warning("scratchpad update %s not confirmed by storage: %s", call_id, exc)
            return _storage_failure_text(tool)

    # -- for application code --------------------------------------------------------------

    async def block(self, run_context: RunContextWrapper[Any]) -> str:
        """The ``<scratchpad>`` block of the run's scope as stored now; ``""`` when empty."""
        handle, fresh = await self._handle_for(run_context)
        if not fresh:
            await handle.refresh()  # another run or process may have written since
        return handle.block(self.budget)

    async def handle(self, run_context: RunContextWrapper[Any]) -> ScratchpadHandle:
        """The handle of the run's scope, for code: ``.snapshot``, ``await .update({...})``."""
        handle, _ = await self._handle_for(run_context)
        return handle

    async def _handle_for(
        self, run_context: RunContextWrapper[Any]
    ) -> tuple[ScratchpadHandle, bool]:
        """The cached handle of the run's scope, or a new one; ``True``: just loaded."""
        scope = self.scope_from(run_context)
        if isinstance(scope, str):
            scope = RunScope(scope)
        cached = self._handles.get(scope)
        if cached is not None:
            self._handles.move_to_end(scope)
            return cached, False
        backend = await self.open()
        handle = await self.layer.open(
            backend,
            thread_id=scope.thread_id,
            resource_id=scope.resource_id,
            events=self.events,
            tool_name=self.tool.name,
        )
        self._handles[scope] = handle
        while len(self._handles) > self.max_scopes:
            self._handles.popitem(last=False)
        return handle, True

    # -- lifecycle -------------------------------------------------------------------------

    @property
    def storage(self) -> StorageBackend:
        """The opened backend (opened on first use, or by ``async with`` / :meth:`open`)."""
        backend = self._storage.opened
        if backend is None:
            raise RuntimeError(
                f"the scratchpad's storage ({self.storage_url}) is not open yet; use "
                "`async with notes:` or `await notes.open()` first"
            )
        return backend

    async def open(self) -> StorageBackend:
        """Open the storage (once); the first model call or tool call does it for you."""
        return await self._storage.backend()

    async def aclose(self) -> None:
        """Close the storage if this object opened it (a backend passed in stays open),
        and its own event bus (a bus passed in is only drained)."""
        self._handles.clear()
        try:
            if self._owns_events:
                await self.events.aclose()
            else:
                await self.events.drain()
        finally:
            await self._storage.aclose()

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
