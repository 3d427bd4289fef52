"""The view of a backend that one layer gets for one scope."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from ..keys import Scope, scope_prefix
from .base import StorageBackend
from .namespace import NamespacedStorage

if TYPE_CHECKING:
    from ..context import ExecutionContext

__all__ = ("ScopedStorage", "scope_prefix")


class ScopedLayer(Protocol):
    """What :meth:`ScopedStorage.for_layer` needs of a layer."""

    @property
    def id(self) -> str: ...

    @property
    def scope(self) -> Scope: ...


class ScopedStorage(NamespacedStorage):
    """A backend seen through one scope's prefix (see :mod:`noetic_scratchpad.keys`): a
    namespace, as :meth:`StorageBackend.with_namespace` makes, named by its scope.

    ``ScopedStorage(backend, "scratchpad", "t1")`` is thread ``t1``'s view, whose state is
    the key ``scopes/scratchpad/thread/t1/state``; ``scope="resource"`` gives a
    resource's (a user's), in a part of the key space of its own. Closing it leaves the
    backend open.
    """

    def __init__(
        self, backend: StorageBackend, layer_id: str, scope_key: str, scope: Scope = "thread"
    ) -> None:
        # ValueError for a bad id
        super().__init__(backend, scope_prefix(layer_id, scope, scope_key))
        self.layer_id = layer_id
        self.scope = scope
        self.scope_key = scope_key

    @classmethod
    def for_layer(
        cls, backend: StorageBackend, layer: ScopedLayer, ctx: ExecutionContext
    ) -> ScopedStorage:
        """The view ``layer`` gets in the execution ``ctx``: its thread's scope, or for a
        ``scope="resource"`` layer the resource's (the thread's when ``ctx`` has none)."""
        kind, scope_id = ctx.scope_of(layer.scope)
        return cls(backend, layer.id, scope_id, kind)

    def __repr__(self) -> str:
        return (
            f"ScopedStorage({self.backend!r}, {self.layer_id!r}, {self.scope_key!r}, "
            f"scope={self.scope!r})"
        )
