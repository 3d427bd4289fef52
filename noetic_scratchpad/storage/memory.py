"""``memory://``: a process-local store for tests, demos and single-process apps."""

from __future__ import annotations

import builtins
import time
from bisect import bisect_right
from collections.abc import Iterable
from itertools import takewhile
from operator import itemgetter
from typing import Any

from .. import _json
from .base import (
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

__all__ = ("MemoryStorage",)


class MemoryStorage(StorageBackend):
    """Keeps values in a dict.

    ``update`` never awaits between its read and its write, so it is atomic on its event
    loop without a lock. ``get``/``set`` copy values so callers never share them with the
    store; ``update`` hands ``fn`` the stored value itself (``fn`` must not mutate it), which
    keeps the scratchpad's hot path free of copies; journal entries are encoded when
    written, as a database would, so a later change to one never changes the journal.
    A deleted key's last revision is kept, so that writing the key again continues above it.
    """

    url = "memory://"

    def __init__(self) -> None:
        # Each key's value and revision: the very object the next commit's ``fn`` is
        # handed (``fn`` must not mutate it), so a write makes one record, not three.
        self._values: dict[str, Revision] = {}
        self._written_at: dict[str, float] = {}
        self._journals: dict[str, builtins.list[tuple[int, float, str]]] = {}
        #: The last revision of each deleted key: its revisions never repeat.
        self._retired: dict[str, int] = {}
        self._closed = False

    @classmethod
    async def open(cls, url: str = "memory://") -> MemoryStorage:
        return cls()

    async def get(self, key: str) -> JsonValue | None:
        stored = self._values.get(key)
        return None if stored is None else _copy(stored.value)

    async def get_revision(self, key: str) -> Revision | None:
        stored = self._values.get(key)
        return None if stored is None else Revision(_copy(stored.value), stored.revision)

    async def set(self, key: str, value: JsonValue) -> None:
        self._store(key, _copy(value), self._revision(key) + 1)

    async def delete(self, key: str) -> None:
        stored = self._values.pop(key, None)
        if stored is not None:
            self._retired[key] = stored.revision
            del self._written_at[key]
        self._journals.pop(key, None)

    async def purge_deleted(self, prefix: str) -> int:
        """Forget the last revisions of the deleted keys under ``prefix`` (see
        :mod:`.purge`): written again, such a key starts over at revision 1."""
        gone = [key for key in self._retired if key.startswith(prefix)]
        for key in gone:
            del self._retired[key]
        return len(gone)

    async def sweep_expired(self, prefix: str, written_by: float, *, limit: int) -> int:
        """Delete at most ``limit`` keys under ``prefix`` last written at or before
        ``written_by`` (see :mod:`.sweep`); never awaits, so nothing lands between."""
        gone = [
            key
            for key, at in self._written_at.items()
            if at <= written_by and key.startswith(prefix)
        ][: max(limit, 0)]
        for key in gone:
            await self.delete(key)
        return len(gone)

    async def trim_journals(self, prefix: str, written_by: float, *, limit: int) -> int:
        """Delete at most ``limit`` journal rows under ``prefix`` written at or before
        ``written_by``, oldest first (see :mod:`.sweep`)."""
        removed, budget = 0, max(limit, 0)
        for key, rows in self._journals.items():
            if key.startswith(prefix):
                old = min(budget - removed, sum(1 for row in rows if row[1] <= written_by))
                del rows[:old]
                removed += old
        return removed

    async def list(self, prefix: str = "") -> builtins.list[str]:
        return sorted(key for key in self._values if key.startswith(prefix))

    async def get_many(self, keys: Iterable[str]) -> dict[str, JsonValue]:
        return {key: _copy(stored.value) for key in keys if (stored := self._values.get(key))}

    async def update(self, key: str, fn: UpdateFn) -> JsonValue:
        # Never awaits between the read and the write: atomic on its loop without a lock.
        stored = self._values.get(key)
        value = fn(None if stored is None else stored.value)
        _json.dumps(value)  # refuses, as another backend would, what JSON cannot hold
        self._store(key, value, self._revision(key) + 1)
        return value

    async def commit(self, key: str, fn: CommitFn, *, keep: int) -> Revision:
        current = self._values.get(key)
        if current is None:
            current, revision = Revision(None, 0), self._retired.get(key, 0) + 1
        else:
            revision = current.revision + 1
        commit: Commit = fn(current)
        if commit.encoded is None:  # refuses, as another backend would, what JSON cannot hold
            _json.dumps(commit.value)
        now = time.time()
        if commit.entry is not None and keep > 0:
            # Kept as text: orjson's bytes keep a buffer of 4 KB whatever their length, which
            # was 4 KB of memory for every journaled scope.
            row = (revision, now, _json.dumps(commit.entry).decode())
            # A list, oldest first, trimmed here: a deque's first block alone is 600 bytes,
            # and most scopes keep a few rows. The rows of the last keep revisions stay.
            journal = self._journals.setdefault(key, [])
            journal.append(row)
            floor = revision - keep
            if journal[0][0] <= floor:
                # Mostly a full journal's oldest row alone, found without a search (the
                # row just added is above the floor, so [1] exists).
                above = (
                    1 if journal[1][0] > floor else bisect_right(journal, floor, key=_revision_of)
                )
                del journal[:above]
        stored = self._values[key] = Revision(commit.value, revision)
        self._written_at[key] = now
        return stored

    async def commit_with_journal(
        self, key: str, fn: JournalCommitFn, *, keep: int, after: int
    ) -> Revision:
        # The rows are read inside commit, which never awaits: nothing lands in between.
        return await self.commit(
            key, lambda current: fn(current, self._rows_above(key, after)), keep=keep
        )

    async def journal(self, key: str, *, limit: int) -> builtins.list[JournalRow]:
        return self._newest_rows(key, limit)

    async def journal_view(self, key: str, *, limit: int) -> JournalView:
        stored = self._values.get(key)  # read with the rows, never awaiting in between
        current = None if stored is None else Revision(_copy(stored.value), stored.revision)
        return JournalView(current, self._newest_rows(key, limit))

    def _newest_rows(self, key: str, limit: int) -> builtins.list[JournalRow]:
        rows = self._journals.get(key, ())
        newest = builtins.list(reversed(rows))[: max(limit, 0)]
        return [JournalRow(rev, at, _json.loads(data)) for rev, at, data in newest]

    def _rows_above(self, key: str, after: int) -> builtins.list[JournalRow]:
        above = takewhile(lambda row: row[0] > after, reversed(self._journals.get(key, ())))
        return [JournalRow(rev, at, _json.loads(data)) for rev, at, data in above]

    async def describe(self, prefix: str = "") -> builtins.list[KeyInfo]:
        return [
            KeyInfo(key, len(_json.dumps(stored.value)), self._written_at[key], stored.revision)
            for key, stored in sorted(self._values.items())
            if key.startswith(prefix)
        ]

    def _revision(self, key: str) -> int:
        """The key's revision; for a missing key, the last one it had (0: never written)."""
        stored = self._values.get(key)
        return self._retired.get(key, 0) if stored is None else stored.revision

    def _store(self, key: str, value: Any, revision: int) -> None:
        self._values[key] = Revision(value, revision)
        self._written_at[key] = time.time()

    async def aclose(self) -> None:
        self._closed = True


_revision_of = itemgetter(0)


def _copy(value: Any) -> Any:
    return _json.loads(_json.dumps(value))
