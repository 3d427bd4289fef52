"""Test doubles that ship with the package: capture the events a piece of code emits, and a
storage wrapper that injects faults (:class:`FaultyStorage`).

``ScriptedModel`` (a model that replays turns) lives in the runtime and is exported from
the package's top level.
"""

from __future__ import annotations

import builtins
import math
from collections import Counter
from collections.abc import Awaitable, Callable, Collection, Iterable, Iterator
from contextlib import contextmanager
from typing import Literal, TypeVar

import anyio

from .events import EventBus, ScratchpadEvent
from .storage.base import (
    Commit,
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
from .storage.purge import purge_deleted
from .storage.sweep import sweep_expired, trim_journals

__all__ = ("CapturedEvents", "FaultyStorage", "InjectedFault", "capture_events")

E = TypeVar("E", bound=ScratchpadEvent)
T = TypeVar("T")


class CapturedEvents(list[ScratchpadEvent]):
    """The events seen so far, in order, with a filter by type."""

    def of(self, kind: type[E]) -> list[E]:
        """The captured events of one type, in order."""
        return [event for event in self if isinstance(event, kind)]


@contextmanager
def capture_events(bus: EventBus) -> Iterator[CapturedEvents]:
    """Collect every event emitted on ``bus`` inside the ``with`` block."""
    captured = CapturedEvents()
    unsubscribe = bus.subscribe(captured.append)
    try:
        yield captured
    finally:
        unsubscribe()


class InjectedFault(OSError):
    """What :class:`FaultyStorage` raises unless told otherwise: an I/O error, as a disk's."""


Operation = Literal[
    "get",
    "set",
    "delete",
    "list",
    "get_many",
    "update",
    "commit",
    "get_revision",
    "journal",
    "describe",
]
StallPoint = Literal["before", "after"]


class FaultyStorage(StorageBackend):
    """A backend wrapper that makes chosen operations fail or hang, for fault-injection tests.

    A failing ``update`` or ``commit`` fails in the *middle* of the write: the inner backend
    runs the transition inside its atomic section (it has read the current value and
    computed the new one), then the transition raises, so the inner backend must abort the
    write, journal included. Other failing operations raise before they reach the inner
    backend.

    A stalled operation hangs until :meth:`release` is called or ``stall_for`` seconds pass,
    either before it reaches the inner backend (``stall_at="before"``: a lost connection or an
    exhausted pool) or after the inner backend has finished (``"after"``: the write is durable
    but its acknowledgement is late).

    ``faults`` bounds how many faults are injected (``None``: every matching call); ``fail_on``
    and ``stall_on`` may be reassigned at any time. ``calls`` counts calls per operation.

    It forwards the contract's primitives, as every wrapper must, and its helpers too, each
    to the inner backend's own: a fault is named by the operation the caller made, and a
    healthy call takes the inner backend's fast path. ``journal_view`` counts as
    ``"journal"``, ``commit_with_journal`` as ``"commit"``.
    """

    def __init__(
        self,
        inner: StorageBackend,
        *,
        fail_on: Collection[Operation] = (),
        stall_on: Collection[Operation] = (),
        error: Exception | None = None,
        stall_at: StallPoint = "before",
        stall_for: float = math.inf,
        faults: int | None = None,
    ) -> None:
        self.inner = inner
        self.url = inner.url
        self.fail_on: Collection[Operation] = frozenset(fail_on)
        self.stall_on: Collection[Operation] = frozenset(stall_on)
        self.error = error if error is not None else InjectedFault(5, "injected I/O error")
        self.stall_at = stall_at
        self.stall_for = stall_for
        self.faults_left = faults
        self.calls: Counter[str] = Counter()
        self.injected = 0
        self._released: anyio.Event | None = None

    async def purge_deleted(self, prefix: str) -> int | None:
        """The wrapped backend's (see :mod:`.storage.purge`); never faulted."""
        return await purge_deleted(self.inner, prefix)

    async def sweep_expired(self, prefix: str, written_by: float, *, limit: int) -> int | None:
        """The inner backend's sweep (see :mod:`.storage.sweep`), not fault-injected."""
        return await sweep_expired(self.inner, prefix, written_by, limit=limit)

    async def trim_journals(self, prefix: str, written_by: float, *, limit: int) -> int | None:
        """The inner backend's journal trim by age (see :mod:`.storage.sweep`)."""
        return await trim_journals(self.inner, prefix, written_by, limit=limit)

    def heal(self) -> None:
        """Stop injecting faults; calls stalled so far stay stalled until :meth:`release`."""
        self.fail_on = frozenset()
        self.stall_on = frozenset()

    def release(self) -> None:
        """Let every stalled call go on, and stop stalling new ones."""
        self.stall_on = frozenset()
        if self._released is not None:
            self._released.set()

    def _inject(self, operation: Operation, kinds: Collection[Operation]) -> bool:
        if operation not in kinds or self.faults_left == 0:
            return False
        if self.faults_left is not None:
            self.faults_left -= 1
        self.injected += 1
        return True

    async def _stall(self) -> None:
        if self._released is None:
            self._released = anyio.Event()
        with anyio.move_on_after(self.stall_for):
            await self._released.wait()

    async def _call(self, operation: Operation, call: Callable[[], Awaitable[T]]) -> T:
        self.calls[operation] += 1
        stall = self._inject(operation, self.stall_on)
        if not stall and self._inject(operation, self.fail_on):
            raise self.error
        return await self._around(stall, call)

    async def _around(self, stall: bool, call: Callable[[], Awaitable[T]]) -> T:
        if stall and self.stall_at == "before":
            await self._stall()
        result = await call()
        if stall and self.stall_at == "after":
            await self._stall()
        return result

    async def get(self, key: str) -> JsonValue | None:
        return await self._call("get", lambda: self.inner.get(key))

    async def set(self, key: str, value: JsonValue) -> None:
        await self._call("set", lambda: self.inner.set(key, value))

    async def delete(self, key: str) -> None:
        await self._call("delete", lambda: self.inner.delete(key))

    async def list(self, prefix: str = "") -> builtins.list[str]:
        return await self._call("list", lambda: self.inner.list(prefix))

    async def get_many(self, keys: Iterable[str]) -> dict[str, JsonValue]:
        return await self._call("get_many", lambda: self.inner.get_many(keys))

    async def describe(self, prefix: str = "") -> builtins.list[KeyInfo]:
        return await self._call("describe", lambda: self.inner.describe(prefix))

    async def get_revision(self, key: str) -> Revision | None:
        return await self._call("get_revision", lambda: self.inner.get_revision(key))

    async def journal(self, key: str, *, limit: int) -> builtins.list[JournalRow]:
        return await self._call("journal", lambda: self.inner.journal(key, limit=limit))

    async def journal_view(self, key: str, *, limit: int) -> JournalView:
        # A read of the journal: faults of "journal" apply.
        return await self._call("journal", lambda: self.inner.journal_view(key, limit=limit))

    async def update(self, key: str, fn: UpdateFn) -> JsonValue:
        stall, fail = self._write_faults("update")

        def failing(current: JsonValue | None) -> JsonValue:
            fn(current)  # the new value is computed, then the write breaks before it lands
            raise self.error

        transition = failing if fail else fn
        return await self._around(stall, lambda: self.inner.update(key, transition))

    async def commit(self, key: str, fn: CommitFn, *, keep: int) -> Revision:
        stall, fail = self._write_faults("commit")

        def failing(current: Revision) -> Commit:
            fn(current)  # value and entry are computed, then the write breaks before it lands
            raise self.error

        transition = failing if fail else fn
        return await self._around(stall, lambda: self.inner.commit(key, transition, keep=keep))

    async def commit_with_journal(
        self, key: str, fn: JournalCommitFn, *, keep: int, after: int
    ) -> Revision:
        # A commit: faults of "commit" apply, in the middle of the write as there.
        stall, fail = self._write_faults("commit")

        def failing(current: Revision, rows: builtins.list[JournalRow]) -> Commit:
            fn(current, rows)
            raise self.error

        transition = failing if fail else fn
        return await self._around(
            stall,
            lambda: self.inner.commit_with_journal(key, transition, keep=keep, after=after),
        )

    def _write_faults(self, operation: Operation) -> tuple[bool, bool]:
        """Whether this call of a read-modify-write stalls, and whether it fails."""
        self.calls[operation] += 1
        stall = self._inject(operation, self.stall_on)
        return stall, not stall and self._inject(operation, self.fail_on)

    async def aclose(self) -> None:
        await self.inner.aclose()

    def __repr__(self) -> str:
        return f"FaultyStorage({self.inner!r})"
