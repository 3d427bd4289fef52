"""The harness's layers' stored state outside a run: read, update, history, revert.

:class:`LayerStates` is a base of ``AgentHarness`` (``harness.py``); it needs only the
harness's layers, bus, tokenizer and storage, so runs and lifecycle stay out of it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..context import ExecutionContext
from ..events import EventBus
from ..layer import ContextLayer, HistoryEntry, JournaledHandle, LayerHandle
from ..render import Tokenizer
from ..storage import OwnedStorage, ScopedStorage
from .execution import bound_handle

__all__ = ("LayerStates",)


class LayerStates:
    """``AgentHarness``'s methods on its layers' stored state, used without a run."""

    # Set by the harness's __init__.
    layers: list[ContextLayer]
    events: EventBus
    tokenize: Tokenizer | None
    _storage: OwnedStorage

    def layer(self, layer_id: str) -> ContextLayer:
        """The layer with ``layer_id``; ``KeyError`` naming the known ids otherwise."""
        for layer in self.layers:
            if layer.id == layer_id:
                return layer
        known = ", ".join(repr(layer.id) for layer in self.layers) or "none"
        raise KeyError(f"the harness has no layer {layer_id!r}; its layers: {known}")

    async def _open_scope(self, layer: ContextLayer, ctx: ExecutionContext) -> ScopedStorage:
        """The layer's storage for the scope of ``ctx``, opening the backend if need be."""
        return ScopedStorage.for_layer(await self._storage.backend(), layer, ctx)

    async def _load(self, layer: ContextLayer, ctx: ExecutionContext) -> Any:
        scoped = await self._open_scope(layer, ctx)
        result = await layer.hooks.init(storage=scoped, scope_key=scoped.scope_key, ctx=ctx)
        return result.state

    def _context(self, thread_id: str, resource_id: str | None) -> ExecutionContext:
        return ExecutionContext(
            thread_id=thread_id, resource_id=resource_id, events=self.events, tokenize=self.tokenize
        )

    async def read_state(
        self, layer_id: str, *, thread_id: str, resource_id: str | None = None
    ) -> Any:
        """The stored state of a layer for a thread (or resource), as a run would see it.

        For a scratchpad: the stored state, else the template, else ``""`` / ``{}``. The
        value is a copy: changing it changes nothing stored.
        """
        layer = self.layer(layer_id)
        ctx = self._context(thread_id, resource_id)
        state = await self._load(layer, ctx)
        handle = bound_handle(ctx, layer)
        return state if handle is None else handle.snapshot

    async def update_state(
        self,
        layer_id: str,
        values: Mapping[str, Any],
        *,
        thread_id: str,
        resource_id: str | None = None,
        expected_revision: int | None = None,
    ) -> Any:
        """Merge ``values`` into a layer's stored state, as ``ctx.context[id].update`` does.

        Goes through the same serialized write as the model's tool calls (events say
        ``"api"``); raises ``ScratchpadValidationError`` and the other update errors, with
        the stored state unchanged. Returns a copy of the new state (the handle's ``snapshot``).
        One storage round trip: the write merges into the stored state, nothing is read
        before it. ``expected_revision``: refuse with ``ScratchpadConflictError`` unless
        the stored revision is this one (journaled layers only).
        """
        handle = await self._handle(layer_id, thread_id, resource_id)
        if expected_revision is None:
            await handle.update(values)
        else:
            await self._journaled(layer_id, handle).update(
                values, expected_revision=expected_revision
            )
        return handle.snapshot

    async def history(
        self,
        layer_id: str,
        *,
        thread_id: str,
        resource_id: str | None = None,
        limit: int = 20,
    ) -> list[HistoryEntry]:
        """The ``limit`` newest journaled writes of a layer's scope, newest first."""
        handle = await self._handle(layer_id, thread_id, resource_id)
        entries: list[HistoryEntry] = await self._journaled(layer_id, handle).history(limit)
        return entries

    async def revert(
        self,
        layer_id: str,
        revision: int,
        *,
        thread_id: str,
        resource_id: str | None = None,
    ) -> Any:
        """Make the state right after ``revision`` the scope's new revision (journaled as
        ``revert``, checked by the schema); returns a copy of the new state. Raises
        ``ScratchpadHistoryError`` when the journal does not reach back that far."""
        handle = await self._handle(layer_id, thread_id, resource_id)
        await self._journaled(layer_id, handle).revert(revision)
        return handle.snapshot

    async def _handle(self, layer_id: str, thread_id: str, resource_id: str | None) -> LayerHandle:
        """A handle of the layer on the scope, bound without reading it (writes read)."""
        layer = self.layer(layer_id)
        ctx = self._context(thread_id, resource_id)
        return layer.bind(await self._open_scope(layer, ctx), ctx, None)

    @staticmethod
    def _journaled(layer_id: str, handle: LayerHandle) -> JournaledHandle:
        if not isinstance(handle, JournaledHandle):
            raise TypeError(f"the layer {layer_id!r} keeps no journal of its writes")
        return handle
