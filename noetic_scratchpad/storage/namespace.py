"""A backend seen under a key prefix, as litestar's ``Store.with_namespace``."""

from __future__ import annotations

import builtins
import functools
from collections.abc import Callable, Coroutine, Iterable
from typing import Any

from .base import (
    CommitFn,
    JournalCommitFn,
    JournalRow,
    JournalView,
    JsonValue,
    KeyInfo,
    Revision,
    StorageBackend,
    UpdateFn,
)
from .purge import purge_deleted
from .sweep import sweep_expired, trim_journals

__all__ = ("NamespacedStorage",)


class NamespacedStorage(StorageBackend):
    """``backend`` with every key under ``prefix``: key ``k`` here is ``prefix + k`` there,
    and :meth:`describe` and :meth:`list` give keys with the prefix removed. It keeps the
    whole contract, so anything that takes a backend takes a namespace.

    The backend is borrowed: closing the namespace leaves it open. Every method goes to the
    backend's own (its fast paths included), not through the helpers.
    """

    def __init__(self, backend: StorageBackend, prefix: str) -> None:
        self.backend = backend
        self.prefix = prefix
        self.url = backend.url

    def with_namespace(self, prefix: str) -> NamespacedStorage:
        return NamespacedStorage(self.backend, self.prefix + prefix)

    def full_key(self, key: str) -> str:
        """``key``'s name in the backend."""
        return self.prefix + key

    async def journal_view(self, key: str, *, limit: int) -> JournalView:
        return await self.backend.journal_view(self.prefix + key, limit=limit)

    async def commit_with_journal(
        self, key: str, fn: JournalCommitFn, *, keep: int, after: int
    ) -> Revision:
        return await self.backend.commit_with_journal(self.prefix + key, fn, keep=keep, after=after)

    async def describe(self, prefix: str = "") -> builtins.list[KeyInfo]:
        start = len(self.prefix)
        return [
            KeyInfo(info.key[start:], info.size, info.updated_at, info.revision)
            for info in await self.backend.describe(self.prefix + prefix)
        ]

    async def delete(self, key: str) -> None:
        await self.backend.delete(self.prefix + key)

    async def aclose(self) -> None:
        """Nothing to release: the backend is borrowed, and stays open."""

    async def purge_deleted(self, prefix: str) -> int | None:
        """The backend's :meth:`~.purge.PurgesDeleted.purge_deleted` under this prefix
        (``None`` when it has none)."""
        return await purge_deleted(self.backend, self.prefix + prefix)

    def committer(self, key: str) -> Callable[..., Coroutine[Any, Any, Revision]]:
        """:meth:`commit` of ``key``, bound once for a caller that commits that key again
        and again (a scope's writer): ``await committer(fn, keep=keep)``. The backend's own
        ``commit`` under the full key, unless a subclass changed :meth:`commit`."""
        if getattr(self.commit, "__func__", None) is not NamespacedStorage.commit:
            return functools.partial(self.commit, key)
        return functools.partial(self.backend.commit, self.prefix + key)

    async def sweep_expired(self, prefix: str, written_by: float, *, limit: int) -> int | None:
        """The backend's :meth:`~.sweep.SweepsExpired.sweep_expired` under this prefix
        (``None`` when it has none)."""
        return await sweep_expired(self.backend, self.prefix + prefix, written_by, limit=limit)

    async def trim_journals(self, prefix: str, written_by: float, *, limit: int) -> int | None:
        """The backend's journal trim by age (see :mod:`.sweep`)."""
        return await trim_journals(self.backend, self.prefix + prefix, written_by, limit=limit)

    # The hot paths hand back the backend's own coroutine: one frame less per call.
    def commit(self, key: str, fn: CommitFn, *, keep: int) -> Coroutine[Any, Any, Revision]:
        return self.backend.commit(self.prefix + key, fn, keep=keep)

    def get_revision(self, key: str) -> Coroutine[Any, Any, Revision | None]:
        return self.backend.get_revision(self.prefix + key)

    async def get(self, key: str) -> JsonValue | None:
        return await self.backend.get(self.prefix + key)

    async def journal(self, key: str, *, limit: int) -> builtins.list[JournalRow]:
        return await self.backend.journal(self.prefix + key, limit=limit)

    async def list(self, prefix: str = "") -> builtins.list[str]:
        start = len(self.prefix)
        return [key[start:] for key in await self.backend.list(self.prefix + prefix)]

    async def get_many(self, keys: Iterable[str]) -> dict[str, JsonValue]:
        start = len(self.prefix)
        found = await self.backend.get_many(self.prefix + key for key in keys)
        return {key[start:]: value for key, value in found.items()}

    async def update(self, key: str, fn: UpdateFn) -> JsonValue:
        return await self.backend.update(self.prefix + key, fn)

    async def set(self, key: str, value: JsonValue) -> None:
        await self.backend.set(self.prefix + key, value)

    def __repr__(self) -> str:
        return f"NamespacedStorage({self.backend!r}, {self.prefix!r})"
