"""The view of a backend that one layer gets for one scope."""

from __future__ import annotations

import builtins
from collections.abc import Awaitable, Iterable
from typing import TYPE_CHECKING, Protocol

from ..keys import Scope, scope_prefix
from .base import (
    CommitFn,
    JournalCommitFn,
    JournalRow,
    JournalView,
    JsonValue,
    Revision,
    StorageBackend,
    UpdateFn,
)

if TYPE_CHECKING:
    from ..context import ExecutionContext

__all__ = ("ScopedStorage", "scope_prefix")


class ScopedLayer(Protocol):
    """What :meth:`ScopedStorage.for_layer` needs of a layer."""

    @property
    def id(self) -> str: ...

    @property
    def scope(self) -> Scope: ...


class ScopedStorage:
    """A backend seen through one scope's prefix (see :mod:`noetic_scratchpad.keys`).

    ``ScopedStorage(backend, "scratchpad", "t1")`` is thread ``t1``'s view, whose state is
    the key ``scopes/scratchpad/thread/t1/state``; ``scope="resource"`` gives a
    resource's (a user's), in a part of the key space of its own.
    """

    def __init__(
        self, backend: StorageBackend, layer_id: str, scope_key: str, scope: Scope = "thread"
    ) -> None:
        self.backend = backend
        self.layer_id = layer_id
        self.scope = scope
        self.scope_key = scope_key
        self.prefix = scope_prefix(layer_id, scope, scope_key)  # ValueError for a bad id

    @classmethod
    def for_layer(
        cls, backend: StorageBackend, layer: ScopedLayer, ctx: ExecutionContext
    ) -> ScopedStorage:
        """The view ``layer`` gets in the execution ``ctx``: its thread's scope, or for a
        ``scope="resource"`` layer the resource's (the thread's when ``ctx`` has none)."""
        kind, scope_id = ctx.scope_of(layer.scope)
        return cls(backend, layer.id, scope_id, kind)

    def full_key(self, key: str) -> str:
        return self.prefix + key

    async def get(self, key: str) -> JsonValue | None:
        return await self.backend.get(self.prefix + key)

    async def set(self, key: str, value: JsonValue) -> None:
        await self.backend.set(self.prefix + key, value)

    async def delete(self, key: str) -> None:
        await self.backend.delete(self.prefix + key)

    async def list(self, prefix: str = "") -> list[str]:
        start = len(self.prefix)
        return [key[start:] for key in await self.backend.list(self.prefix + prefix)]

    async def get_many(self, keys: Iterable[str]) -> dict[str, JsonValue]:
        start = len(self.prefix)
        found = await self.backend.get_many(self.prefix + key for key in keys)
        return {key[start:]: value for key, value in found.items()}

    async def update(self, key: str, fn: UpdateFn) -> JsonValue:
        return await self.backend.update(self.prefix + key, fn)

    def commit(self, key: str, fn: CommitFn, *, keep: int) -> Awaitable[Revision]:
        # The backend's own awaitable, not a coroutine around it: one frame less per write.
        return self.backend.commit(self.prefix + key, fn, keep=keep)

    async def get_revision(self, key: str) -> Revision | None:
        return await self.backend.get_revision(self.prefix + key)

    async def journal(self, key: str, *, limit: int) -> builtins.list[JournalRow]:
        return await self.backend.journal(self.prefix + key, limit=limit)

    async def journal_view(self, key: str, *, limit: int) -> JournalView:
        return await self.backend.journal_view(self.prefix + key, limit=limit)

    async def commit_with_journal(
        self, key: str, fn: JournalCommitFn, *, keep: int, after: int
    ) -> Revision:
        return await self.backend.commit_with_journal(self.prefix + key, fn, keep=keep, after=after)

    def __repr__(self) -> str:
        return (
            f"ScopedStorage({self.backend!r}, {self.layer_id!r}, {self.scope_key!r}, "
            f"scope={self.scope!r})"
        )
