"""The storage contract: an async key-value store of JSON values.

Every backend implements :class:`StorageBackend`: five primitives (read a value with its
journal, commit, scan, delete, close); every other method is a helper built on them. Keys
are ``/``-separated strings; values are anything JSON can hold (dicts with string keys,
lists, strings, numbers, booleans, ``None``). Values read from a backend belong to the
caller: mutating them never changes what is stored.
"""

from __future__ import annotations

import builtins
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

from .. import _json

if TYPE_CHECKING:
    from .namespace import NamespacedStorage

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
    "decode_json",
    "encode_json",
    "journal_limit",
    "known_value",
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
    text instead of encoding the value a second time). ``about``: the write's source and
    call id, which a backend that announces its changes to other processes sends with
    the key and revision (see :mod:`.notices`)."""

    value: JsonValue
    entry: JsonValue | None = None
    encoded: bytes | None = None
    about: tuple[str, str | None] | None = None

    def json(self) -> bytes:
        """The value's JSON text: ``encoded``, else encoded now (``ValueError`` for a
        value JSON cannot hold)."""
        return self.encoded if self.encoded is not None else _json.dumps(self.value)


CommitFn = Callable[[Revision], Commit]
"""A pure, synchronous transition like :data:`UpdateFn`, that also sees the revision and
may journal the write. It may say what its caller already holds: see :func:`known_value`."""


def known_value(fn: object) -> tuple[JsonValue, int] | None:
    """The value and revision a commit's ``fn`` says its caller already holds as stored
    (its ``known`` attribute, a ``(value, revision)`` pair; ``None``: nothing said).

    A backend about to decode the stored value for ``fn`` may hand it this value instead,
    when the stored revision is that revision and the stored text is ``encode_json(value)``
    byte for byte: the same value, without a parse (a 5.5 KB state parses in 6 µs and
    makes a hundred objects for the cyclic collector). The bytes are compared, not the
    revision trusted alone: that a revision names one value holds for the layer's
    writes, not for every program that may write the store. The value is then shared
    with the caller, as a value handed to ``fn`` may be (read-only)."""
    return getattr(fn, "known", None)


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


def encode_json(value: JsonValue) -> bytes:
    """The JSON text the contract stores: compact UTF-8, integers past 64 bits exact.
    Raises ``ValueError`` for what JSON cannot hold (a set, bytes, a non-string key, NaN).
    A backend that stores text may use it, and :func:`decode_json` to read it back."""
    return _json.dumps(value)


def decode_json(data: bytes | str) -> JsonValue:
    """The value :func:`encode_json` wrote, the same types all the way down."""
    return _json.loads(data)


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
    """An async key-value store of JSON values; also an async context manager.

    A backend implements five primitives, the abstract methods: :meth:`journal_view`
    (read), :meth:`commit_with_journal` (the one atomic write), :meth:`describe` (scan),
    :meth:`delete` and :meth:`aclose`. Every other method is a helper built on them
    (:meth:`get`, :meth:`get_revision`, :meth:`journal`, :meth:`list`, :meth:`get_many`,
    :meth:`commit`, :meth:`update`, :meth:`set`), which a backend may override with a
    faster path that keeps its contract; the built-in backends do. A wrapper (metrics,
    fault injection) forwards the primitives: a helper it does not override reaches the
    wrapped backend through them, never around the wrapper.
    """

    #: The URL scheme(s) a backend registers under, for messages and the CLI.
    url: str = ""

    # -- the primitives --------------------------------------------------------------------

    @abstractmethod
    async def journal_view(self, key: str, *, limit: int) -> JournalView:
        """The value at ``key`` with its revision (``None``: missing), and its ``limit``
        newest journal rows, newest first (none for a limit of 0 or below, every row for
        one of :data:`MAX_JOURNAL_LIMIT` or more), read at one instant (one transaction),
        so that they agree: no write comes between the two reads, as one would leave the
        journal ahead of the value (a history would show a gap that is not there).

        ``limit=0`` is a plain read of the value and revision: a backend should skip the
        journal then, as :meth:`get_revision` (a hot path) reads that way.
        """

    @abstractmethod
    async def commit_with_journal(
        self, key: str, fn: JournalCommitFn, *, keep: int, after: int
    ) -> Revision:
        """Atomically replace the value at ``key`` by ``fn(current, rows).value``, and
        journal the write in the same transaction.

        ``fn`` gets the current value and revision (``Revision(None, 0)`` for a missing
        key) and the key's journal rows above revision ``after``
        (``0 <= after <= MAX_JOURNAL_LIMIT``), newest first, as the same transaction sees
        them: those the writes before it left (the commits of its own batch included, the
        rows they trim excluded; none for a missing key). From those, ``fn`` can rebuild
        the state of any revision they reach back to and write it, with no write landing
        in between (a revert does).

        ``fn`` sees the latest stored value, and no other write to ``key`` (from this
        process or another one sharing the store) happens between its read and the write
        of its result. If ``fn`` raises, nothing is written and the exception propagates;
        if its value or entry is not JSON, ``ValueError`` and nothing is written. The call
        returns only after the write is durable to the backend's setting. The value
        returned (and the value ``fn`` is handed) may be the very object the backend keeps
        for the next write, to spare decoding it again: treat it as read-only.

        The new value is stored as revision ``current.revision + 1``, which is returned
        with it. When ``fn``'s ``Commit.entry`` is not ``None`` and ``keep`` is positive,
        the entry is journaled under that revision and the key's journal is trimmed to the
        rows of its last ``keep`` revisions (those above the new revision less ``keep``: a
        revision written without an entry takes a place there without a row); state and
        journal change together or not at all.

        A key's revisions never repeat, so that ``(key, revision)`` names one value for
        good (``expected_revision`` and the layer, which does not check again a state
        whose revision it checked, rely on it): the write that re-creates a deleted key
        is stored above the last revision the key had (``fn`` still sees
        ``Revision(None, 0)``); a key never written starts at 1.
        """

    @abstractmethod
    async def describe(self, prefix: str = "") -> builtins.list[KeyInfo]:
        """The keys that start with ``prefix`` (exactly: no wildcards; ``""``: every key),
        sorted by code point, each with the size of its JSON text, its last write's time
        and its revision."""

    @abstractmethod
    async def delete(self, key: str) -> None:
        """Remove ``key`` and its journal. Deleting a missing key does nothing. The key's
        next write continues above its last revision (revisions never repeat)."""

    @abstractmethod
    async def aclose(self) -> None:
        """Release connections and threads. Closing twice does nothing."""

    # -- helpers, built on the primitives --------------------------------------------------

    async def get_revision(self, key: str) -> Revision | None:
        """The value at ``key`` with its revision, or ``None`` when the key is missing."""
        return (await self.journal_view(key, limit=0)).current

    async def get(self, key: str) -> JsonValue | None:
        """Return the value at ``key``, or ``None`` when the key is missing."""
        found = await self.get_revision(key)
        return None if found is None else found.value

    async def journal(self, key: str, *, limit: int) -> builtins.list[JournalRow]:
        """The ``limit`` newest journal rows of ``key``, newest first (none for a limit of
        0 or below; every row for one of :data:`MAX_JOURNAL_LIMIT` or more)."""
        return (await self.journal_view(key, limit=limit)).rows

    async def list(self, prefix: str = "") -> builtins.list[str]:
        """Return the keys that start with ``prefix``, sorted. ``""`` lists everything."""
        return [info.key for info in await self.describe(prefix)]

    async def get_many(self, keys: Iterable[str]) -> dict[str, JsonValue]:
        """Return the values of the keys that exist; missing keys are absent, not ``None``."""
        found: dict[str, JsonValue] = {}
        for key in dict.fromkeys(keys):
            stored = await self.get_revision(key)
            if stored is not None:
                found[key] = stored.value
        return found

    async def commit(self, key: str, fn: CommitFn, *, keep: int) -> Revision:
        """:meth:`commit_with_journal` for a ``fn`` that needs no journal rows: it gets
        the current value and revision only."""
        return await self.commit_with_journal(
            key, lambda current, _rows: fn(current), keep=keep, after=MAX_JOURNAL_LIMIT
        )

    async def update(self, key: str, fn: UpdateFn) -> JsonValue:
        """Atomically replace the value at ``key`` by ``fn(current)`` and return it, as
        :meth:`commit_with_journal` writes (``current`` is ``None`` for a missing key;
        nothing is journaled). Treat the value returned as read-only."""
        return (await self.commit(key, lambda current: Commit(fn(current.value)), keep=0)).value

    async def set(self, key: str, value: JsonValue) -> None:
        """Store ``value`` at ``key``, replacing any value there.

        Raises ``ValueError`` (and stores nothing) when ``value`` is not JSON.
        """
        encoded = encode_json(value)  # a ValueError here: nothing is written
        await self.commit(key, lambda _current: Commit(value, None, encoded), keep=0)

    def with_namespace(self, prefix: str) -> NamespacedStorage:
        """This backend with every key under ``prefix`` (a :class:`~.namespace.
        NamespacedStorage`: it keeps the contract, and closing it leaves this one open)."""
        from .namespace import NamespacedStorage  # it subclasses this class

        return NamespacedStorage(self, prefix)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
