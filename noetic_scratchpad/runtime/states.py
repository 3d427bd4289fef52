"""The harness's layers' stored state outside a run: read, update, history, revert.

:class:`LayerStates` is a base of ``AgentHarness`` (``harness.py``); it needs only the
harness's layers and its core (storage, bus, handles), so runs and lifecycle stay out of it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..core import ScratchpadCore
from ..layer import ContextLayer, HistoryEntry, JournaledHandle, LayerHandle

__all__ = ("LayerStates",)


class LayerStates:
    """``AgentHarness``'s methods on its layers' stored state, used without a run."""

    # Set by the harness's __init__.
    layers: list[ContextLayer]
    core: ScratchpadCore

    def layer(self, layer_id: str) -> ContextLayer:
        """The layer with ``layer_id``; ``KeyError`` naming the known ids otherwise."""
        if not self.layers:  # the core's default layer is not the harness's
            raise KeyError(f"the harness has no layer {layer_id!r}; it has no layers")
        return self.core.layer(layer_id)

    async def read_state(
        self, layer_id: str, *, thread_id: str, resource_id: str | None = None
    ) -> Any:
        """The stored state of a layer for a thread (or resource), as a run would see it.

        For a scratchpad: the stored state, else the template, else ``""`` / ``{}``. The
        value is a copy: changing it changes nothing stored.
        """
        layer = self.layer(layer_id)
        handle = await self.core.bind(layer, self.core.context((thread_id, resource_id)), read=True)
        return handle.snapshot

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
        ctx = self.core.context((thread_id, resource_id))
        return await self.core.bind(self.layer(layer_id), ctx)

    @staticmethod
    def _journaled(layer_id: str, handle: LayerHandle) -> JournaledHandle:
        if not isinstance(handle, JournaledHandle):
            raise TypeError(f"the layer {layer_id!r} keeps no journal of its writes")
        return handle
