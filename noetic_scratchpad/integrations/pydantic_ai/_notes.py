"""What the capability and the toolset share: the scope of a run, the storage, and one
run's handle (its block, its refresh, and the update tool's refusals as retry prompts)."""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, NamedTuple, TypeAlias

import anyio
from pydantic_ai import ModelRetry, RunContext
from pydantic_ai.messages import ModelResponse, ToolCallPart

from ...adapters.names import check_tool_names
from ...errors import ScratchpadConfigError, ScratchpadUpdateError, StorageError
from ...events import EventBus
from ...layer import (
    ScratchpadHandle,
    ScratchpadLayer,
    refusal_text,
    scratchpad,
    storage_failure_text,
)
from ...storage import OwnedStorage, StorageBackend

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

logger = logging.getLogger("noetic_scratchpad.integrations.pydantic_ai")

#: The tools' names as the model sees them: providers accept them as they are.
DEFAULT_TOOL_NAME = "scratchpad_update"
DEFAULT_EDIT_TOOL_NAME = "scratchpad_edit"


class RunScope(NamedTuple):
    """Whose scratchpad a run reads and writes: a thread, and optionally a resource (a user)."""

    thread_id: str
    resource_id: str | None = None


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
    if isinstance(found, str):
        found = RunScope(found)
    elif isinstance(found, tuple) and len(found) == 2:
        found = RunScope(*found)
    if not (
        isinstance(found, RunScope)
        and isinstance(found.thread_id, str)
        and found.thread_id
        and (found.resource_id is None or isinstance(found.resource_id, str))
    ):
        raise ScratchpadConfigError(
            f"the scratchpad's scope function returned {found!r}; it must return a non-empty "
            "thread id string, or a (thread_id, resource_id) pair of strings (resource_id may "
            "be None)"
        )
    return found


class Notes:
    """The configuration shared by every run: the layer, the storage, the scope function,
    the tool's name and retry budget, the block's budget, and the event bus."""

    def __init__(
        self,
        layer: ScratchpadLayer | None,
        *,
        storage: str | StorageBackend | None,
        scope_from: ScopeResolver,
        events: EventBus | None,
        tool_name: str,
        max_retries: int,
        budget: int | None,
        options: Mapping[str, Any],
        edit_tool_name: str = DEFAULT_EDIT_TOOL_NAME,
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
        check_tool_names(tool_name, edit_tool_name)
        if max_retries < 0:
            raise ScratchpadConfigError(f"max_retries must be 0 or more, not {max_retries}")
        self.layer = layer if layer is not None else scratchpad(**options)
        self.scope_from = scope_from
        self.tool_name = tool_name
        self.edit_tool_name = edit_tool_name
        self.max_retries = max_retries
        self.budget = budget
        self.events = events if events is not None else EventBus()
        # A URL (or None: $NOETIC_SCRATCHPAD_STORAGE, else memory://) is opened, and closed,
        # here; a backend passed in stays the caller's.
        self.storage = OwnedStorage(storage)

    @property
    def names(self) -> dict[str, str]:
        """The tools' names as the model sees them, by the layer's function."""
        return {"update": self.tool_name, "edit": self.edit_tool_name}

    async def open(self, *, thread_id: str, resource_id: str | None = None) -> ScratchpadHandle:
        """A handle on one scope's scratchpad, to read or write it outside a run."""
        return await self.layer.open(
            await self.storage.backend(),  # opened on first use, shared by every run
            thread_id=thread_id,
            resource_id=resource_id,
            events=self.events,
        )

    async def aclose(self) -> None:
        """Close the backend if it was opened from a URL here (a backend passed in is the
        caller's to close), and wait for async event handlers."""
        await self.storage.aclose()  # a later run opens it again
        await self.events.drain()


class RunNotes:
    """One run's scratchpad: a handle opened for the run's scope on first use."""

    def __init__(self, notes: Notes) -> None:
        self.notes = notes
        self.handle: ScratchpadHandle | None = None
        self._lock = anyio.Lock()
        self._fresh = False  # loaded and nothing has run since: no refresh needed

    async def open(self, ctx: RunContext[Any]) -> ScratchpadHandle:
        """The run's handle, opened on first call for the scope ``notes.scope_from`` gives."""
        if self.handle is None:
            scope = await resolve_scope(self.notes.scope_from, ctx)
            async with self._lock:
                if self.handle is None:
                    self.handle = await self.notes.open(
                        thread_id=scope.thread_id, resource_id=scope.resource_id
                    )
                    self._fresh = True
        return self.handle

    async def block(self, ctx: RunContext[Any]) -> str | None:
        """The ``<scratchpad>`` block for the next model request, or ``None`` while empty.

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
        """Run the model's call of the layer's ``function`` (``update``, ``edit``); a
        refusal becomes a retry prompt (see ``refuse``)."""
        handle = await self.open(ctx)
        # One at a time, in the order the model made them: pydantic-ai runs a response's
        # tool calls concurrently, and later calls must merge over earlier ones.
        async with self._lock:
            names = called_names(ctx, self.notes.names, function)
            try:
                return await handle.call(function, args, call_id=ctx.tool_call_id)
            except ScratchpadUpdateError as exc:
                return refuse(refusal_text(exc, names[function]), ctx)
            except StorageError as exc:
                logger.warning(
                    "scratchpad %s could not be saved tool=%s call_id=%s error=%r",
                    function,
                    names[function],
                    ctx.tool_call_id,
                    str(exc),
                )
                return refuse(storage_failure_text(exc, names[function]), ctx)


def called_names(ctx: RunContext[Any], names: Mapping[str, str], function: str) -> dict[str, str]:
    """The tools' names as the model sees them (``names``: the configured ones, by
    function), from the name the model called ``function`` by: a wrapper such as
    ``PrefixedToolset`` renames the tools, and ``ctx.tool_name`` keeps the inner name, so
    read the call in the latest response; the other tools carry the same prefix."""
    for message in reversed(ctx.messages):
        if isinstance(message, ModelResponse):
            for part in message.parts:
                if isinstance(part, ToolCallPart) and part.tool_call_id == ctx.tool_call_id:
                    called = part.tool_name
                    own = names[function]
                    prefix = called[: -len(own)] if called.endswith(own) else ""
                    return {f: prefix + name for f, name in names.items()} | {function: called}
            break
    return dict(names)


def refuse(message: str, ctx: RunContext[Any]) -> str:
    """Send a refused update back to the model: a retry prompt (``ModelRetry``) while the
    tool's retry budget lasts; after that a failure the model reads (``ToolFailed``, or the
    text as the tool's result), so a stubborn model cannot fail the whole run."""
    if ctx.retry < ctx.max_retries:
        raise ModelRetry(message)
    if _ToolFailed is not None:
        raise _ToolFailed(f"Not saved: {message}")
    return f"Not saved: {message}"  # pragma: no cover - pydantic-ai without ToolFailed
