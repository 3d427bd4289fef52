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

__all__ = (
    "MAX_JOURNAL_LIMIT",
    "Commit",
    "CommitFn",
    "JournalCommitFn",
    "JournalRow",
    "JournalView",
    "JsonValue",
    "KeyInfo",
    "Revision",
    "StorageBackend",
    "UpdateFn",
    "journal_limit",
)

JsonValue = Any
"""A value JSON can hold. (Recursive aliases cost mypy more than they catch here.)"""

UpdateFn = Callable[[JsonValue | None], JsonValue]
"""A pure, synchronous transition: the current value (``None`` when the key is missing) in,
the value to store out. It may run in a database thread and may be retried, so it must not
mutate its argument, touch the event loop or have side effects. Raising aborts the write."""


@dataclass(slots=True)  # not frozen: made twice per write, and frozen doubles __init__'s cost
class Revision:
    """A key's value and its revision: how many writes made it (0: never written)."""

    value: JsonValue
    revision: int


@dataclass(slots=True)  # not frozen: a frozen dataclass's __init__ is twice as slow
class Commit:
    """What a :data:`CommitFn` returns: the value to store, the journal entry that records
    this write (``None``: the write is not journaled), and, when the function already
    made it, the value's JSON as ``_json.dumps`` writes it (the backend then stores that
    text instead of encoding the value a second time)."""

    value: JsonValue
    entry: JsonValue | None = None
    encoded: bytes | None = None

    def json(self) -> bytes:
        """The value's JSON text: ``encoded``, else encoded now (``ValueError`` for a
        value JSON cannot hold)."""
        return self.encoded if self.encoded is not None else _json.dumps(self.value)


CommitFn = Callable[[Revision], Commit]
"""A pure, synchronous transition like :data:`UpdateFn`, that also sees the revision and
may journal the write."""


@dataclass(frozen=True, slots=True)
class JournalRow:
    """One journaled write of a key: the revision it made, when, and its entry."""

    revision: int
    written_at: float
    entry: JsonValue


JournalCommitFn = Callable[[Revision, list[JournalRow]], Commit]
"""A :data:`CommitFn` that also sees the key's journal rows (see
:meth:`StorageBackend.commit_with_journal`)."""

#: The largest journal ``limit`` that means something: a 64-bit SQL integer's. No key has
#: that many rows, so a larger limit reads as this one (see :func:`journal_limit`).
MAX_JOURNAL_LIMIT = 2**63 - 1


def journal_limit(limit: int) -> int:
    """``limit`` as a backend can pass it to SQL: 0 for a negative one (nothing), at most
    :data:`MAX_JOURNAL_LIMIT` (everything)."""
    return min(max(limit, 0), MAX_JOURNAL_LIMIT)


@dataclass(frozen=True, slots=True)
class JournalView:
    """A key's value and revision (``None``: missing) and its newest journal rows, newest
    first, as they were at one instant (see :meth:`StorageBackend.journal_view`)."""

    current: Revision | None
    rows: builtins.list[JournalRow]


@dataclass(frozen=True, slots=True)
class KeyInfo:
    """What :meth:`StorageBackend.describe` says about one key."""

    key: str
    size: int
    """Bytes of the stored JSON text."""
    updated_at: float
    """Unix time of the last write."""
    revision: int = 0
    """How many writes made the value (see :meth:`StorageBackend.commit`)."""


class StorageBackend(ABC):
    """An async key-value store of JSON values; also an async context manager."""

    #: The URL scheme(s) a backend registers under, for messages and the CLI.
    url: str = ""

    @abstractmethod
    async def get(self, key: str) -> JsonValue | None:
        """Return the value at ``key``, or ``None`` when the key is missing."""

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

    @abstractmethod
    async def commit(self, key: str, fn: CommitFn, *, keep: int) -> Revision:
        """Atomically replace the value at ``key`` by ``fn(current).value``, as
        :meth:`update` does, and journal the write in the same transaction.

        ``fn`` gets the current value and revision (``Revision(None, 0)`` for a missing
        key). The new value is stored as revision ``current.revision + 1``, which is
        returned with it. When ``fn``'s ``Commit.entry`` is not ``None`` and ``keep`` is
        positive, the entry is journaled under that revision and the key's journal is
        trimmed to its ``keep`` newest rows; state and journal change together or not at
        all. Every write (``set``, ``update``, ``commit``) advances a key's revision;
        ``delete`` removes the key and its journal.

        A key's revisions never repeat, so that ``(key, revision)`` names one value for
        good (``expected_revision`` and the layer, which does not check again a state
        whose revision it checked, rely on it): the write that re-creates a deleted key
        is stored above the last revision the key had (``fn`` still sees
        ``Revision(None, 0)``); a key never written starts at 1.
        """

    @abstractmethod
    async def get_revision(self, key: str) -> Revision | None:
        """The value at ``key`` with its revision, or ``None`` when the key is missing."""

    @abstractmethod
    async def journal(self, key: str, *, limit: int) -> builtins.list[JournalRow]:
        """The ``limit`` newest journal rows of ``key``, newest first (none for a limit of
        0 or below; every row for one of :data:`MAX_JOURNAL_LIMIT` or more)."""

    @abstractmethod
    async def journal_view(self, key: str, *, limit: int) -> JournalView:
        """The value at ``key`` with its revision, and its ``limit`` newest journal rows
        (as :meth:`journal`), read at one instant (one transaction), so that they agree:
        no write comes between the two reads, as one would leave the journal ahead of the
        value (a history would show a gap that is not there)."""

    @abstractmethod
    async def commit_with_journal(
        self, key: str, fn: JournalCommitFn, *, keep: int, after: int
    ) -> Revision:
        """:meth:`commit`, where ``fn`` also gets the key's journal rows above revision
        ``after`` (``0 <= after <= MAX_JOURNAL_LIMIT``), newest first, as the same
        transaction sees them: those the writes before it left (the commits of its own
        batch included, the rows they trim excluded; none for a missing key). From the
        value and revision it gets and those rows, ``fn`` can rebuild the state of any
        revision they reach back to and write it, with no write landing in between (a
        revert does)."""

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
