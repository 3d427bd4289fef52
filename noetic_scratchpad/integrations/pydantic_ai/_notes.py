"""What the capability and the toolset share: the scope of a run, the core that owns the
storage, and one run's handle (its block, its refresh, and the tools' refusals as retry
prompts)."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeAlias

import anyio
from pydantic_ai import ModelRetry, RunContext
from pydantic_ai.messages import ModelResponse, ToolCallPart

from ...adapters.names import check_tool_names
from ...core import RunScope, ScratchpadCore, as_scope
from ...errors import ScratchpadConfigError
from ...events import EventBus
from ...layer import ScratchpadHandle, ScratchpadLayer, read_tool_name, scratchpad
from ...render import Tokenizer
from ...storage import StorageBackend

try:  # ToolFailed: a failure the model reads without retrying (newer pydantic-ai only)
    from pydantic_ai.exceptions import ToolFailed as _ToolFailed
except ImportError:  # pragma: no cover - depends on the installed pydantic-ai
    _ToolFailed = None  # type: ignore[assignment,misc]

__all__ = (
    "DEFAULT_EDIT_TOOL_NAME",
    "DEFAULT_TOOL_NAME",
    "Notes",
    "RunNotes",
    "RunScope",
    "ScopeResolver",
    "scope_from_run",
)

#: The tools' names as the model sees them, for a scratchpad without a name: providers
#: accept them as they are. A named one's are ``{name}_update`` and ``{name}_edit``.
DEFAULT_TOOL_NAME = "scratchpad_update"
DEFAULT_EDIT_TOOL_NAME = "scratchpad_edit"

ScopeResult: TypeAlias = "str | tuple[str, str | None] | RunScope"
ScopeResolver: TypeAlias = Callable[[RunContext[Any]], "ScopeResult | Awaitable[ScopeResult]"]
"""``scope_from(ctx)``: a run's thread id, or ``(thread_id, resource_id)``; may be async."""


def _dep(deps: Any, name: str) -> Any:
    """``deps.<name>``, or ``deps[name]`` for a mapping; ``None`` when it has neither."""
    if isinstance(deps, Mapping):
        return deps.get(name)
    return getattr(deps, name, None)


def scope_from_run(ctx: RunContext[Any]) -> RunScope:
    """The default ``scope_from``: ``ctx.deps.thread_id`` (attribute or mapping key), else the run's
    ``conversation_id``; the resource is ``ctx.deps.resource_id`` if set.

    pydantic-ai gives a run the ``conversation_id`` passed to ``agent.run``, or the one of
    the ``message_history`` it continues, or a fresh id: a new conversation starts with an
    empty scratchpad, and one carried on keeps its notes.
    """
    thread = _dep(ctx.deps, "thread_id") or getattr(ctx, "conversation_id", None)
    if not thread:  # a pydantic-ai without conversation ids, and deps without a thread
        raise ScratchpadConfigError(
            "no thread id for the scratchpad: give the agent deps with a thread_id "
            "(attribute or key), or pass scope_from=lambda ctx: ... returning one"
        )
    resource = _dep(ctx.deps, "resource_id")
    return RunScope(str(thread), None if resource is None else str(resource))


async def resolve_scope(scope: ScopeResolver, ctx: RunContext[Any]) -> RunScope:
    """Call ``scope`` and check what it gave; raises ``ScratchpadConfigError`` if unusable."""
    found: Any = scope(ctx)
    if inspect.isawaitable(found):
        found = await found
    return as_scope(found, source="scope_from(ctx)")


class Notes:
    """The configuration shared by every run: the core (which owns the layer, the storage
    and the event bus), the scope function, the tools' names and retry budget, and the
    block's budget."""

    def __init__(
        self,
        layer: ScratchpadLayer | None,
        *,
        storage: str | StorageBackend | None,
        scope_from: ScopeResolver,
        events: EventBus | None,
        tool_name: str | None,
        max_retries: int,
        budget: int | None,
        options: Mapping[str, Any],
        edit_tool_name: str | None = None,
        count_tokens: Tokenizer | None = None,
    ) -> None:
        if layer is not None and not isinstance(layer, ScratchpadLayer):
            raise ScratchpadConfigError(
                f"the first argument is a layer (scratchpad(...)), not {layer!r}; pass a "
                "storage URL as storage=..."
            )
        if layer is not None and options:
            raise ScratchpadConfigError(
                f"give either a layer or scratchpad() options, not both (got {sorted(options)})"
            )
        if not callable(scope_from):
            raise ScratchpadConfigError(
                f"scope_from must be a function of the RunContext returning the thread id, "
                f"not {scope_from!r}"
            )
        if max_retries < 0:
            raise ScratchpadConfigError(f"max_retries must be 0 or more, not {max_retries}")
        layer = layer if layer is not None else scratchpad(**options)
        # Default: the layer's names (``scratchpad_update``, a named one's ``profile_update``).
        names = layer.tool_names()
        tool_name = names["update"] if tool_name is None else tool_name
        edit_tool_name = names["edit"] if edit_tool_name is None else edit_tool_name
        check_tool_names(tool_name, edit_tool_name)
        # A URL (or None: $NOETIC_SCRATCHPAD_STORAGE, else memory://) is opened, and closed,
        # by the core; a backend passed in stays the caller's.
        self.core = ScratchpadCore(layer, storage=storage, events=events, count_tokens=count_tokens)
        self.layer = layer
        self.scope_from = scope_from
        self.tool_name = tool_name
        self.edit_tool_name = edit_tool_name
        self.max_retries = max_retries
        self.budget = budget

    @property
    def events(self) -> EventBus:
        """The bus every run's updates and refusals go to."""
        return self.core.events

    @property
    def names(self) -> dict[str, str]:
        """The tools' names as the model sees them, by the layer's function."""
        return {
            "update": self.tool_name,
            "edit": self.edit_tool_name,
            "read": read_tool_name(self.tool_name),
        }

    async def open(self, *, thread_id: str, resource_id: str | None = None) -> ScratchpadHandle:
        """A handle on one scope's scratchpad, to read or write it outside a run."""
        return await self.core.handle(RunScope(thread_id, resource_id))

    async def aclose(self) -> None:
        """Close what the core opened (storage from a URL, its own bus; a backend or a bus
        passed in stays the caller's, the bus drained); a later run opens it again."""
        await self.core.aclose()


class RunNotes:
    """One run's scratchpad: what is the run's own (its scope; its handle, opened on first
    use; the lock that applies a response's concurrent tool calls in the model's order;
    whether the next block may skip the re-read). The rest is the core's."""

    def __init__(self, notes: Notes) -> None:
        self.notes = notes
        self.scope: RunScope | None = None
        self.handle: ScratchpadHandle | None = None
        self._lock = anyio.Lock()
        self._fresh = False  # loaded and nothing has run since: no refresh needed

    async def scope_of(self, ctx: RunContext[Any]) -> RunScope:
        """The run's scope, from ``notes.scope_from`` on first call."""
        if self.scope is None:
            self.scope = await resolve_scope(self.notes.scope_from, ctx)
        return self.scope

    async def open(self, ctx: RunContext[Any]) -> ScratchpadHandle:
        """The run's handle, opened (its state read) on first call."""
        if self.handle is None:
            scope = await self.scope_of(ctx)
            async with self._lock:
                if self.handle is None:
                    self.handle = await self.notes.core.handle(scope)
                    self._fresh = True
        return self.handle

    async def block(self, ctx: RunContext[Any]) -> str | None:
        """The ``<scratchpad>`` block (a named one's ``<scratchpad name="...">``) for the next
        model request, or ``None`` while empty.

        Every request but the run's first follows a tool step (or a retry), so the state is
        re-read first: this run's tools and other runs on the scope may have written it.
        """
        handle = await self.open(ctx)
        async with self._lock:
            if not self._fresh:
                await handle.refresh()
            self._fresh = False
            return handle.block(self.notes.budget) or None

    async def call(self, function: str, args: Any, ctx: RunContext[Any]) -> str:
        """Run the model's call of the layer's ``function`` (``update``, ``edit``) through
        the core, on the run's handle (or, before the run has one, on its scope, without a
        read); a refusal or a storage failure becomes a retry prompt (see ``refuse``)."""
        target = self.handle if self.handle is not None else await self.scope_of(ctx)
        # One at a time, in the order the model made them: pydantic-ai runs a response's
        # tool calls concurrently, and later calls must merge over earlier ones.
        async with self._lock:
            result = await self.notes.core.call(
                target,
                function,
                args,
                tool=called_name(ctx, self.notes.names, function),
                call_id=ctx.tool_call_id,
            )
        return result.text if result.ok else refuse(result.text, ctx)


def called_name(ctx: RunContext[Any], names: Mapping[str, str], function: str) -> str:
    """The name the model called the tool of ``function`` by (``names``: the configured
    ones, by function): a wrapper such as ``PrefixedToolset`` renames the tools, and
    ``ctx.tool_name`` keeps the inner name, so read the call in the latest response."""
    for message in reversed(ctx.messages):
        if isinstance(message, ModelResponse):
            for part in message.parts:
                if isinstance(part, ToolCallPart) and part.tool_call_id == ctx.tool_call_id:
                    return part.tool_name
            break
    return names[function]


def refuse(message: str, ctx: RunContext[Any]) -> str:
    """Send a refused update back to the model: a retry prompt (``ModelRetry``) while the
    tool's retry budget lasts; after that a failure the model reads (``ToolFailed``, or the
    text as the tool's result), so a stubborn model cannot fail the whole run."""
    if ctx.retry < ctx.max_retries:
        raise ModelRetry(message)
    if _ToolFailed is not None:
        raise _ToolFailed(f"Not saved: {message}")
    return f"Not saved: {message}"  # pragma: no cover - pydantic-ai without ToolFailed
