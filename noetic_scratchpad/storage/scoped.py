"""The view of a backend that one layer gets for one scope."""

from __future__ import annotations

from collections.abc import Iterable

from .base import EncodedUpdateFn, JsonValue, StorageBackend, UpdateFn

__all__ = ("ScopedStorage", "scope_prefix")


def scope_prefix(layer_id: str, scope_key: str) -> str:
    """Where a layer's keys for one scope live: ``layers/{layer_id}/{scope_key}/``."""
    return f"layers/{layer_id}/{scope_key}/"


class ScopedStorage:
    """A backend seen through the prefix ``layers/{layer_id}/{scope_key}/``.

    The scratchpad's state is the key ``state`` here, so its full key is
    ``layers/scratchpad/{scope_key}/state``.
    """

    def __init__(self, backend: StorageBackend, layer_id: str, scope_key: str) -> None:
        if not scope_key:
            raise ValueError("scope_key must be a non-empty string (a thread or resource id)")
        self.backend = backend
        self.layer_id = layer_id
        self.scope_key = scope_key
        self.prefix = scope_prefix(layer_id, scope_key)

    def full_key(self, key: str) -> str:
        return self.prefix + key

    async def get(self, key: str) -> JsonValue | None:
        return await self.backend.get(self.prefix + key)

    async def get_encoded(self, key: str) -> tuple[JsonValue, str | None] | None:
        return await self.backend.get_encoded(self.prefix + key)

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

    async def update_encoded(self, key: str, fn: EncodedUpdateFn) -> JsonValue:
        return await self.backend.update_encoded(self.prefix + key, fn)

    def __repr__(self) -> str:
        return f"ScopedStorage({self.backend!r}, {self.layer_id!r}, {self.scope_key!r})"
