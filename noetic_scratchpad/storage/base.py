"""The storage contract: an async key-value store of JSON values.

Every backend implements :class:`StorageBackend`. Keys are ``/``-separated strings; values
are anything JSON can hold (dicts with string keys, lists, strings, numbers, booleans,
``None``). Values read from a backend belong to the caller: mutating them never changes
what is stored.
"""

from __future__ import annotations

import builtins
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Self

from .. import _json

__all__ = ("EncodedUpdateFn", "JsonValue", "KeyInfo", "StorageBackend", "UpdateFn", "with_json")

JsonValue = Any
"""A value JSON can hold. (Recursive aliases cost mypy more than they catch here.)"""

UpdateFn = Callable[[JsonValue | None], JsonValue]
"""A pure, synchronous transition: the current value (``None`` when the key is missing) in,
the value to store out. It may run in a database thread and may be retried, so it must not
mutate its argument, touch the event loop or have side effects. Raising aborts the write."""

EncodedUpdateFn = Callable[[JsonValue | None, str | None], tuple[JsonValue, bytes]]
"""An :data:`UpdateFn` that deals in JSON too: ``fn(current, stored_json)`` returns
``(value, its compact JSON as _json.dumps writes it)``. ``stored_json`` is the text the
backend decoded ``current`` from, when it has it at hand (else ``None``): equal texts mean
equal values, so a caller can recognize a value it has seen without comparing it. The
returned JSON is for a caller that encodes its result anyway (the scratchpad checks its
size), so that the backend need not encode it again."""


def with_json(fn: UpdateFn) -> EncodedUpdateFn:
    """``fn`` as an :data:`EncodedUpdateFn`; ``ValueError`` when its result is not JSON."""

    def encoded(current: JsonValue | None, stored_json: str | None) -> tuple[JsonValue, bytes]:
        value = fn(current)
        return value, _json.dumps(value)

    return encoded


@dataclass(frozen=True, slots=True)
class KeyInfo:
    """What :meth:`StorageBackend.describe` says about one key."""

    key: str
    size: int
    """Bytes of the stored JSON text."""
    updated_at: float
    """Unix time of the last write."""


class StorageBackend(ABC):
    """An async key-value store of JSON values; also an async context manager."""

    #: The URL scheme(s) a backend registers under, for messages and the CLI.
    url: str = ""

    #: ``True`` when ``update`` never suspends and hands ``fn`` the very object it stored
    #: last (no copy, no decoding): callers may then skip timeouts and re-checks. Wrappers
    #: and backends that do I/O leave it ``False``.
    in_process: bool = False

    @abstractmethod
    async def get(self, key: str) -> JsonValue | None:
        """Return the value at ``key``, or ``None`` when the key is missing."""

    async def get_encoded(self, key: str) -> tuple[JsonValue, str | None] | None:
        """:meth:`get`, with the JSON text the value was decoded from when the backend has
        it at hand (else ``None``); ``None`` when the key is missing. This default has no
        text."""
        value = await self.get(key)
        return None if value is None else (value, None)

    @abstractmethod
    async def set(self, key: str, value: JsonValue) -> None:
        """Store ``value`` at ``key``, replacing any value there.

        Raises ``ValueError`` (and stores nothing) when ``value`` is not JSON.
        """

    @abstractmethod
    async def delete(self, key: str) -> None:
        """Remove ``key``. Deleting a missing key does nothing."""

    @abstractmethod
    async def list(self, prefix: str = "") -> builtins.list[str]:
        """Return the keys that start with ``prefix``, sorted. ``""`` lists everything."""

    @abstractmethod
    async def get_many(self, keys: Iterable[str]) -> dict[str, JsonValue]:
        """Return the values of the keys that exist; missing keys are absent, not ``None``."""

    @abstractmethod
    async def update(self, key: str, fn: UpdateFn) -> JsonValue:
        """Atomically replace the value at ``key`` by ``fn(current)`` and return it.

        ``fn`` sees the latest stored value, and no other write to ``key`` (from this
        process or another one sharing the store) happens between its read and the write
        of its result. If ``fn`` raises, nothing is written and the exception propagates.
        The call returns only after the new value is durable to the backend's setting.

        The value returned (and the value ``fn`` is handed) may be the very object the
        backend keeps for the next update, to spare decoding it again: treat it as
        read-only.
        """

    async def update_encoded(self, key: str, fn: EncodedUpdateFn) -> JsonValue:
        """:meth:`update` with a transition that returns ``(value, its JSON)``.

        Backends that keep JSON text override this to store that JSON as it is (and to
        hand ``fn`` the stored text); this default drops it and calls :meth:`update`.
        """
        return await self.update(key, lambda current: fn(current, None)[0])

    @abstractmethod
    async def describe(self, prefix: str = "") -> builtins.list[KeyInfo]:
        """Return size and last-write time of the keys that start with ``prefix``, sorted."""

    @abstractmethod
    async def aclose(self) -> None:
        """Release connections and threads. Closing twice does nothing."""

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
