"""``ScratchpadCore``: the one object every host wraps.

It owns what the harness, the framework integrations, the MCP server, the HTTP app and the
CLI would otherwise each own: the storage (a URL opened here once and closed here, or a
backend borrowed from the caller), the event bus, the layers, and the lifecycle of all of
them. A host asks it for a handle on a scope, for the tools of a layer under the names the
host presents, and to apply one tool call, whose result carries the text the model reads.
What is left in a host is its own shape: where it finds the scope, how it offers a tool,
how it hands a result back.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Self

from .. import _json
from .._runtime import GroupHost, TaskOwner
from ..context import ExecutionContext
from ..errors import ScratchpadConfigError, ScratchpadUpdateError, StorageError
from ..events import CLOSE_GRACE, EventBus
from ..layer import (
    ContextLayer,
    HostTool,
    LayerHandle,
    ScratchpadHandle,
    ScratchpadLayer,
    empty_text,
    refusal_text,
    storage_failure_text,
    unreadable_text,
)
from ..render import Tokenizer, check_token_counter
from ..storage import OwnedStorage, ScopedStorage, StorageBackend
from .remote import RemoteEvents
from .scope import ScopeLike, as_scope

__all__ = ("ScratchpadCore", "ToolResult", "format_output")

logger = logging.getLogger("noetic_scratchpad.core")

#: Which layer a call means: its id, the layer itself, or ``None`` for the first one.
LayerRef = str | ContextLayer | None


@dataclass(frozen=True, slots=True)
class ToolResult:
    """The outcome of one tool call: ``text``, what the model reads, and ``error``, the
    refusal (``ScratchpadUpdateError``) or storage failure (``StorageError``) behind a
    failed call (``None``: it ran). A host hands ``text`` back in its own shape, as an
    error where it has one (``ok`` is ``False``)."""

    text: str
    error: ScratchpadUpdateError | StorageError | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


class ScratchpadCore:
    """Storage, bus and layers for the hosts: an async context manager.

    ``layers``: the context layers (default, one ``scratchpad()``; several may share an id
    only when the host chooses between them itself, as the HTTP app does by kind of scope).
    ``storage``: a URL (opened on first use, closed by :meth:`aclose`), an opened backend
    (the caller's: never closed here), or ``None`` (``$NOETIC_SCRATCHPAD_STORAGE``, else
    ``memory://``). ``events``: the bus every write reports on (default, one of the core's
    own, closed by :meth:`aclose`; a bus passed in is only drained). ``count_tokens``: the
    model's token counter, which every block's budget is counted in (default, the
    estimate: about four characters a token); kept at :attr:`tokenize`, the name the
    execution contexts give it. ``remote_events``: while the storage is open, the writes
    and resets other processes make on it (PostgreSQL, Redis, an SQLite file) are events
    on the bus too, with their ``origin`` (see :mod:`.remote`; ``False``: this process's
    own only).
    """

    def __init__(
        self,
        layers: ContextLayer | Sequence[ContextLayer] | None = None,
        *,
        storage: str | StorageBackend | None = None,
        events: EventBus | None = None,
        count_tokens: Tokenizer | None = None,
        remote_events: bool = True,
    ) -> None:
        if layers is None:
            from ..layer import scratchpad

            layers = (scratchpad(),)
        elif isinstance(layers, str):  # a Sequence too, of characters
            raise ScratchpadConfigError(
                f"layers is the text {layers!r}, not a layer; give layers as scratchpad(...) "
                "objects and a storage URL as storage=..."
            )
        elif isinstance(layers, ScratchpadLayer) or not isinstance(layers, Sequence):
            layers = (layers,)  # a single layer
        self.layers: tuple[ContextLayer, ...] = tuple(layers)
        if not self.layers:
            raise ScratchpadConfigError("layers is empty; give at least one layer, or None")
        self._owns_events = events is None
        self._events = events if events is not None else EventBus()
        self.tokenize = check_token_counter(count_tokens)
        """The token counter every block is sized in (``None``: the estimate)."""
        self._storage = OwnedStorage(storage)
        self.storage_url = self._storage.url
        """The storage URL for messages and ``repr``, its secrets hidden."""
        self.remote_events = remote_events
        self._remote = RemoteEvents()
        self._group = GroupHost(CLOSE_GRACE)
        """The core's task group, open from :meth:`open` to :meth:`aclose`: the bus's
        async handlers and the backend's write workers run there."""

    # -- lifecycle -----------------------------------------------------------------------

    @property
    def events(self) -> EventBus:
        """The bus every scope's writes report on: ``core.events.subscribe(handler)``."""
        return self._events

    @property
    def opened(self) -> StorageBackend | None:
        """The backend if it is open now (a borrowed one always is); never opens it."""
        return self._storage.opened

    @property
    def backend(self) -> StorageBackend:
        """The opened backend; ``RuntimeError`` saying how to open it when it is not."""
        backend = self._storage.opened
        if backend is None:
            raise RuntimeError(
                f"the scratchpad's storage ({self.storage_url}) is not open yet; use "
                "`async with` on it or await its open() first"
            )
        return backend

    async def open(self) -> StorageBackend:
        """Open the storage (once; concurrent calls share one open) and the core's task
        group, which runs the bus's async handlers and the backend's write workers until
        :meth:`aclose` (a task of the core's own enters it: any task may open the core and
        any other close it). Every method that needs storage calls it; after :meth:`aclose`
        it opens again, with a new bus of its own."""
        if self._owns_events and self._events.closed:
            self._events = EventBus()  # a restart (an app's lifespan run again)
        backend = await self._storage.backend()
        if not self._group.ready():
            await self._group.start(self._task_owners(backend))
        if self.remote_events and self._remote.backend is not backend:
            self._remote.start(backend, lambda: self._events)
        return backend

    def _task_owners(self, backend: StorageBackend) -> list[TaskOwner]:
        """Whose tasks run in the core's group: the bus's handlers, the watch of other
        processes' writes, the backend's writers."""
        owners = [self._events.tasks, self._remote.tasks]
        tasks = getattr(backend, "tasks", None)  # a backend of the package's has them
        if isinstance(tasks, TaskOwner):
            owners.append(tasks)
        return owners

    async def aclose(self) -> None:
        """Close what the core opened: its own bus (its streams end) and storage opened from a
        URL. A bus or a backend passed in stays the caller's: the bus is drained (async
        handlers get at most its ``handler_timeout``), the backend left open. Then the task
        group ends: what still runs there gets ``CLOSE_GRACE`` seconds, is cancelled, and
        gets as long again; a task that outlasts that has ignored its cancellation (logged)."""
        try:
            await self._remote.stop()
            if self._owns_events:
                await self._events.aclose()
            else:
                await self._events.drain()
        finally:
            try:
                await self._storage.aclose()
            finally:
                await self._group.aclose()

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

    # -- layers and scopes ----------------------------------------------------------------

    def layer(self, ref: LayerRef = None) -> ContextLayer:
        """The layer ``ref`` names (its id, the layer itself) or, for ``None``, the first;
        ``KeyError`` naming the known ids otherwise."""
        if ref is None:
            return self.layers[0]
        if not isinstance(ref, str):
            return ref
        for layer in self.layers:
            if layer.id == ref:
                return layer
        known = ", ".join(repr(layer.id) for layer in self.layers)
        raise KeyError(f"there is no layer {ref!r}; the layers are {known}")

    def scratchpad(self, ref: LayerRef = None) -> ScratchpadLayer:
        """:meth:`layer`, which must be a scratchpad (``TypeError`` otherwise)."""
        layer = self.layer(ref)
        if not isinstance(layer, ScratchpadLayer):
            raise TypeError(f"the layer {layer.id!r} is not a scratchpad layer")
        return layer

    def context(self, scope: ScopeLike, *, execution_id: str | None = None) -> ExecutionContext:
        """An execution context for ``scope``, reporting on the core's bus."""
        thread_id, resource_id = as_scope(scope)
        ctx = ExecutionContext(
            thread_id=thread_id,
            resource_id=resource_id,
            events=self._events,
            tokenize=self.tokenize,
        )
        if execution_id is not None:
            ctx.execution_id = execution_id
        return ctx

    async def scoped(self, layer: ContextLayer, ctx: ExecutionContext) -> ScopedStorage:
        """The storage ``layer`` keeps the scope of ``ctx`` in, opening the backend if need be."""
        return ScopedStorage.for_layer(await self.open(), layer, ctx)

    async def bind(
        self, layer: ContextLayer, ctx: ExecutionContext, *, read: bool = False
    ) -> LayerHandle:
        """A handle of ``layer`` for ``ctx``, attached at ``ctx.context[layer.id]``: its state
        read first with ``read`` (the layer's ``init``), else bound without a read (a write
        merges into the stored state whatever the handle saw: one round trip)."""
        if read:
            state = await self.init(layer, ctx)
            bound: LayerHandle | None = ctx.context.get(layer.id)
            if bound is not None:
                return bound
            return layer.bind(await self.scoped(layer, ctx), ctx, state)
        initial = layer.initial_state() if isinstance(layer, ScratchpadLayer) else None
        return layer.bind(await self.scoped(layer, ctx), ctx, initial)

    async def init(self, layer: ContextLayer, ctx: ExecutionContext) -> Any:
        """Run ``layer``'s ``init`` hook for the scope of ``ctx`` and return the state it
        loaded (a scratchpad also binds its handle at ``ctx.context[layer.id]``): what a
        run does first, and what :meth:`bind` does with ``read=True``."""
        scoped = await self.scoped(layer, ctx)
        loaded = await layer.hooks.init(storage=scoped, scope_key=scoped.scope_key, ctx=ctx)
        return loaded.state

    async def handle(
        self, scope: ScopeLike, *, layer: LayerRef = None, read: bool = True
    ) -> ScratchpadHandle:
        """A handle on the scratchpad of ``scope`` (the ``layer``'s, default the first), its
        state read first unless ``read=False`` (for a write alone: one round trip)."""
        pad = self.scratchpad(layer)
        handle = await self.bind(pad, self.context(scope), read=read)
        assert isinstance(handle, ScratchpadHandle)  # a scratchpad layer binds its own
        return handle

    # -- what the model sees ---------------------------------------------------------------

    def tools(self, names: Mapping[str, str], *, layer: LayerRef = None) -> list[HostTool]:
        """The tools of the scratchpad ``layer`` under the names a host presents them with
        (``names`` maps each function, ``update`` and ``edit``, to its name)."""
        return self.scratchpad(layer).host_tools(names)

    async def block(
        self, scope: ScopeLike, *, layer: LayerRef = None, budget: int | None = None
    ) -> str:
        """The ``<scratchpad>`` block of ``scope`` as stored now (``""`` while empty), in at
        most ``budget`` tokens (default, the layer's)."""
        return (await self.handle(scope, layer=layer)).block(budget)

    async def read(
        self, scope: ScopeLike, *, tool: str, update_tool: str, layer: LayerRef = None
    ) -> ToolResult:
        """A read tool's result (``tool``: its name as the host presents it): the block of
        ``scope``, or a sentence saying it is empty that names ``update_tool``; a storage
        failure as text, its details in the log."""
        pad = self.scratchpad(layer)
        try:
            block = await self.block(scope, layer=pad)
        except StorageError as exc:
            logger.warning("%s failed on storage: %s", tool, exc)
            return ToolResult(unreadable_text(tool, pad.texts.block), exc)
        kind, scope_id = self.context(scope).scope_of(pad.scope)
        return ToolResult(block or empty_text(kind, scope_id, update_tool, pad.texts.block))

    async def call(
        self,
        scope: ScopeLike | LayerHandle,
        function: str,
        args: str | Mapping[str, Any],
        *,
        tool: str,
        call_id: str | None = None,
        layer: LayerRef = None,
        budget: int | None = None,
    ) -> ToolResult:
        """Apply the model's call of the scratchpad's ``function`` (``update``, ``edit``) on
        ``scope`` (or through a handle the host holds: a scratchpad's, or any layer's, whose
        result other than text reads as JSON); ``tool`` is the name the model called it by,
        which the texts use. A refusal or a storage failure becomes the text the model
        reads (:meth:`failure`), never an exception; other exceptions propagate.
        ``budget``: the tokens the host shows the block in, when not the layer's (the
        model's writes are checked against that view: see ``layer/seen.py``).
        """
        try:
            handle = (
                await self.handle(scope, layer=layer, read=False)
                if isinstance(scope, str | tuple)
                else scope
            )
            if budget is not None and isinstance(handle, ScratchpadHandle):
                handle.viewed(budget)
            return ToolResult(format_output(await handle.call(function, args, call_id=call_id)))
        except (ScratchpadUpdateError, StorageError) as exc:
            owner = self.layer(layer) if isinstance(scope, str | tuple) else None
            owner = getattr(scope, "layer", owner)  # a handle knows its layer
            return self.failure(exc, tool=tool, call_id=call_id, function=function, layer=owner)

    def failure(
        self,
        exc: ScratchpadUpdateError | StorageError,
        *,
        tool: str,
        call_id: str | None = None,
        function: str = "call",
        layer: object = None,
    ) -> ToolResult:
        """What the model reads for its call of ``tool`` (as the host presents it) that
        ``exc`` refused or storage failed: the one place a host turns these errors into
        text (for a tool of its own that wrote the scratchpad, too). A storage failure's
        details (paths, hosts, the driver's words) go to the log, never to the model.
        ``layer``: the layer called, whose refusals show an update in its schema's words
        and name its block."""
        texts = layer.texts if isinstance(layer, ScratchpadLayer) else None
        if isinstance(exc, ScratchpadUpdateError):
            logger.debug("%s refused (%s): %s", tool, exc.reason, exc)
            if texts is not None:
                return ToolResult(refusal_text(exc, tool, texts.example, texts.block), exc)
            return ToolResult(refusal_text(exc, tool), exc)
        logger.warning(
            "scratchpad %s not confirmed by storage tool=%s call_id=%s: %s",
            function,
            tool,
            call_id,
            exc,
        )
        block = texts.block if texts is not None else "the scratchpad"
        return ToolResult(storage_failure_text(exc, tool, block), exc)

    def __repr__(self) -> str:
        layers = ", ".join(layer.id for layer in self.layers)
        return f"<ScratchpadCore layers=[{layers}] storage={self.storage_url!r}>"


def format_output(value: Any) -> str:
    """The text a model reads for a tool's result: strings as they are, the rest as JSON."""
    if isinstance(value, str):
        return value
    if value is None:
        return "null"
    try:
        return _json.dumps(value).decode()
    except ValueError:
        return str(value)
