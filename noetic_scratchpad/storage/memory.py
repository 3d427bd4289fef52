"""``memory://``: a process-local store for tests, demos and single-process apps."""

from __future__ import annotations

import builtins
import time
from collections.abc import Iterable
from typing import Any

from .. import _json
from .base import JsonValue, KeyInfo, StorageBackend, UpdateFn

__all__ = ("MemoryStorage",)


class MemoryStorage(StorageBackend):
    """Keeps values in a dict.

    ``update`` never awaits between its read and its write, so it is atomic on its event
    loop without a lock. ``get``/``set`` copy values so callers never share them with the
    store; ``update`` hands ``fn`` the stored value itself (``fn`` must not mutate it), which
    keeps the scratchpad's hot path free of copies.
    """

    url = "memory://"

    def __init__(self) -> None:
        self._values: dict[str, tuple[Any, float]] = {}
        self._closed = False

    @classmethod
    async def open(cls, url: str = "memory://") -> MemoryStorage:
        return cls()

    async def get(self, key: str) -> JsonValue | None:
        entry = self._values.get(key)
        return None if entry is None else _copy(entry[0])

    async def set(self, key: str, value: JsonValue) -> None:
        self._values[key] = (_copy(value), time.time())

    async def delete(self, key: str) -> None:
        self._values.pop(key, None)

    async def list(self, prefix: str = "") -> builtins.list[str]:
        return sorted(key for key in self._values if key.startswith(prefix))

    async def get_many(self, keys: Iterable[str]) -> dict[str, JsonValue]:
        return {key: _copy(entry[0]) for key in keys if (entry := self._values.get(key))}

    async def update(self, key: str, fn: UpdateFn) -> JsonValue:
        # Never awaits between the read and the write: atomic on its loop without a lock.
        entry = self._values.get(key)
        value = fn(None if entry is None else entry[0])
        _json.dumps(value)  # refuses, as another backend would, what JSON cannot hold
        self._values[key] = (value, time.time())
        return value

    async def describe(self, prefix: str = "") -> builtins.list[KeyInfo]:
        return [
            KeyInfo(key, len(_json.dumps(value)), updated_at)
            for key, (value, updated_at) in sorted(self._values.items())
            if key.startswith(prefix)
        ]

    async def aclose(self) -> None:
        self._closed = True


def _copy(value: Any) -> Any:
    return _json.loads(_json.dumps(value))
