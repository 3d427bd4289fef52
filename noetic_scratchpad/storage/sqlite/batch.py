"""What one write transaction does to each key, worked out before anything is written.

The writer (:mod:`.writer`) applies a batch's jobs in order to a :class:`KeyState` per key,
then writes each changed key's final row, its new journal rows and the journal's trim. A
key's revision is known once the writer has read or cached the row; a ``set`` on a row it
never read only counts itself (``bumps``), and the row's revision then advances by that
count in SQL, so a ``set`` never costs a read.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ...errors import StorageError

__all__ = ("Batch", "CommitJob", "DeleteJob", "Job", "KeyState", "SetJob", "Unparsed")


# Plain slotted classes: a frozen dataclass's __init__ costs twice as much, on every write.
@dataclass(slots=True)
class CommitJob:
    """A read-modify-write of ``key``. ``plain``: an ``update`` (``fn`` maps the value to
    the new value, and its outcome is that value); else a ``commit`` (``fn`` maps a
    ``Revision`` to a ``Commit``, whose entry is journaled when ``keep`` is positive).
    ``after``: a ``commit_with_journal``, whose ``fn`` also gets the journal rows above
    that revision."""

    key: str
    fn: Callable[..., Any]
    keep: int = 0
    plain: bool = True
    after: int | None = None


@dataclass(slots=True)
class SetJob:
    key: str
    text: str


@dataclass(slots=True)
class DeleteJob:
    key: str


Job = CommitJob | SetJob | DeleteJob


@dataclass(slots=True)
class Unparsed:
    """The value of a row written in this batch by a ``set``: its text, parsed only if a
    commit of the same key follows in the batch."""

    text: str


class KeyState:
    """One key as the transaction sees it so far, and what it will write for it."""

    __slots__ = (
        "bumps",
        "changed",
        "clear",
        "exists",
        "floor",
        "journal",
        "revision",
        "text",
        "value",
    )

    def __init__(self, value: Any, revision: int | None, exists: bool = True) -> None:
        #: The current value (``None``: missing), or :class:`Unparsed` after a set.
        self.value = value
        #: Whether the key has a value (a commit's ``fn`` sees ``Revision(None, 0)`` if not).
        self.exists = exists
        #: The current revision, or for a missing key its last one (0: never written);
        #: ``None`` when the row was never read (see ``bumps``).
        self.revision = revision
        #: Sets made since the unread row's revision.
        self.bumps = 0
        #: Whether the key's row is to be written; ``text`` ``None``: deleted.
        self.changed = False
        self.text: str | None = None
        #: Journal rows to insert, as (revision, entry text).
        self.journal: list[tuple[int, str]] = []
        #: Journal rows at or below this revision are trimmed (0: none).
        self.floor = 0
        #: Whether every journal row stored for the key is deleted first.
        self.clear = False

    def set(self, text: str) -> None:
        self.value = Unparsed(text)
        self.text = text
        self.changed = self.exists = True
        if self.revision is None:
            self.bumps += 1
        else:
            self.revision += 1

    def delete(self) -> None:
        # The revision stays: the key's next write continues above it.
        self.value, self.bumps, self.exists = None, 0, False
        self.text = None
        self.changed = self.clear = True
        self.journal = []
        self.floor = 0

    def commit(self, value: Any, text: str, entry: str | None, keep: int) -> int:
        """Record a commit on the current (known) revision; return the new revision."""
        assert self.revision is not None
        if not self.exists:
            # A new row: journal rows of an earlier key of that name that a writer without
            # journal left behind must not show as its history.
            self.clear = True
        revision = self.revision = self.revision + 1
        self.value, self.text, self.changed, self.exists = value, text, True, True
        if entry is not None:
            self.journal.append((revision, entry))
            self.floor = max(self.floor, revision - keep)
        return revision


class Batch:
    """What one transaction has done so far: each key's state, and one outcome per job."""

    __slots__ = ("keys", "outcomes")

    def __init__(self) -> None:
        self.keys: dict[str, KeyState] = {}
        #: Per job: its result, or the exception that fails it alone.
        self.outcomes: list[Any] = []

    def fail_key(self, key: str, jobs: Sequence[Job], error: StorageError) -> None:
        """Fail every job of ``key`` that has not failed already, and write nothing for it."""
        for index, job in enumerate(jobs):
            if job.key == key and not isinstance(self.outcomes[index], Exception):
                self.outcomes[index] = error
        self.keys[key].changed = False
