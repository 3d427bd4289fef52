"""The journal of a scope's writes: what each entry holds, how states are rebuilt, and the
change that reverts to one.

Each applied write is journaled by the backend in the same transaction as the state (see
``StorageBackend.commit``), as one entry::

    {"source": "tool", "call_id": "c1", "keys": ["blockers"],
     "update": {"blockers": []},                  # the change as applied
     "undo": {"restore": [[["blockers"], ["no logs"]]]}}  # what restores the prior state

``undo`` holds only what the write replaced. For an update merged into the state, the prior
value at each path the merge wrote (``{"restore": [[path, value], ...], "remove": [path,
...]}``, a path being a list of keys), so a write deep inside a large object records only
the values it changed. For an edit or a revert, the prior values of the top-level keys it
touched (``{"set": {...}, "delete": [...]}``). ``{"state": ...}`` when the whole state was
replaced (a text state, a state that no longer fitted the schema, the first write). So an
entry costs about what its update costs, and the state after any kept revision is rebuilt
by undoing the newer entries from the current state, newest first.

A revert rebuilds its target that way *inside its own write* (:class:`Revert`): from the
state and journal rows the backend hands it in the write's transaction
(``commit_with_journal``), so that no write can land between the rebuild and the write.

Pure and synchronous: entries are built, and reverts rebuilt, inside the backend's
transaction.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .._time import iso_time
from ..errors import ScratchpadHistoryError
from ..merge import MAX_DEPTH, merge_noting
from ..storage.base import (
    MAX_JOURNAL_LIMIT,
    Commit,
    CommitFn,
    JournalCommitFn,
    JournalRow,
    Revision,
)
from .config import ScratchpadState
from .pipeline import Rewrite, copy_state

__all__ = (
    "MISSING",
    "HistoryEntry",
    "Revert",
    "caller_of",
    "entry_json",
    "entry_of",
    "history_of",
    "recent_rows",
    "state_at",
    "undo",
)

#: A key whose value a write touched: (before, after); ``MISSING`` where it had none.
MISSING: Any = type("Missing", (), {"__repr__": lambda self: "MISSING"})()


def entry_of(
    *,
    source: str,
    call_id: str | None,
    keys: Sequence[str],
    applied: Any,
    stored: Any,
    base: ScratchpadState,
    merged: bool = True,
    undo: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The journal entry of a write of ``keys`` that turned ``stored`` (what storage
    held; ``None``: nothing) into a new state, starting from ``base`` (``stored`` itself,
    or the initial state that replaced it). ``merged``: ``applied`` is an update that
    was deep-merged (else an edit's or a revert's change). ``undo``: what restores
    ``stored``, when the merge noted it as it went (see :func:`~..merge.merge_noting`)."""
    if undo is None:
        undo = _undo_of(keys, applied, stored, base, merged)
    entry: dict[str, Any] = {"source": source, "keys": list(keys), "update": applied}
    if call_id is not None:
        entry["call_id"] = call_id
    entry["undo"] = undo
    return entry


def _undo_of(
    keys: Sequence[str], applied: Any, stored: Any, base: ScratchpadState, merged: bool
) -> dict[str, Any]:
    """What restores ``stored`` after the write (see :func:`entry_of`)."""
    if base is not stored or not isinstance(stored, dict):
        return {"state": stored}
    if merged:
        restore: list[list[Any]] = []
        remove: list[list[str]] = []
        merge_noting(stored, applied, MAX_DEPTH, [], restore, remove)  # the notes alone
        return {"restore": restore, "remove": remove} if remove else {"restore": restore}
    prior: dict[str, Any] = {}
    absent: list[str] = []
    for key in keys:  # a loop, not two comprehensions: each is a call, on every write
        if key in stored:
            prior[key] = stored[key]
        else:
            absent.append(key)
    return {"set": prior, "delete": absent} if absent else {"set": prior}


def undo(state: Any, entry: Mapping[str, Any]) -> Any:
    """The state before ``entry``'s write, from the state right after it (not mutated)."""
    reverse = entry["undo"]
    if "state" in reverse:
        return reverse["state"]
    before = dict(state) if isinstance(state, dict) else {}
    for path, value in reverse.get("restore", ()):
        _put(before, path, value)
    for path in reverse.get("remove", ()):
        _drop(before, path)
    before.update(reverse.get("set", {}))
    for key in reverse.get("delete", ()):
        before.pop(key, None)
    return before


def _put(root: dict[str, Any], path: Sequence[str], value: Any) -> None:
    """Set ``path`` in ``root`` to ``value``, copying the objects on the way (never
    changing one the state after the write shares)."""
    node = root
    for key in path[:-1]:
        child = node.get(key)
        node[key] = child = dict(child) if isinstance(child, dict) else {}
        node = child
    node[path[-1]] = value


def _drop(root: dict[str, Any], path: Sequence[str]) -> None:
    """Remove ``path`` from ``root`` if it is there, copying the objects on the way."""
    node = root
    for key in path[:-1]:
        child = node.get(key)
        if not isinstance(child, dict):
            return
        node[key] = child = dict(child)
        node = child
    node.pop(path[-1], None)


@dataclass(frozen=True, slots=True)
class HistoryEntry:
    """One journaled write: the revision it made, when (Unix seconds), who made it, the
    keys it wrote and the change as applied. ``changes`` maps each key it wrote to its
    value before and after (``MISSING`` where there was none); it is ``None`` when the
    states around it cannot be rebuilt (a newer entry could not be read)."""

    revision: int
    written_at: float
    source: str
    call_id: str | None
    keys: tuple[str, ...]
    update: Any
    changes: dict[str, tuple[Any, Any]] | None
    replaced: bool
    """The write replaced the whole state (``changes`` then compares the two states)."""


def history_of(
    current: Any, revision: int, rows: Iterable[tuple[int, float, Mapping[str, Any]]]
) -> list[HistoryEntry]:
    """The entries of ``rows`` (newest first, as read), each with what it changed, given
    the ``current`` state at ``revision``. A gap in the revisions (an entry that could not
    be read) leaves the entries older than it without ``changes``; the entries stop at
    the write that found nothing stored (a first write, or one after a reset or expiry)."""
    entries: list[HistoryEntry] = []
    after: Any = current
    expected = revision
    for number, written_at, entry in rows:
        chained = after is not MISSING and number == expected
        before = undo(after, entry) if chained else MISSING
        replaced = "state" in entry["undo"]
        keys = tuple(entry.get("keys", ()))
        changes = None
        if chained:
            changes = _changes(before, after, None if replaced else keys)
        entries.append(
            HistoryEntry(
                revision=number,
                written_at=written_at,
                source=str(entry.get("source", "")),
                call_id=entry.get("call_id"),
                keys=keys,
                update=entry.get("update"),
                changes=changes,
                replaced=replaced,
            )
        )
        if entry["undo"].get("state", MISSING) is None:
            # Nothing was stored before this write: older rows (a scope that expired and
            # was written again keeps them until trimmed) belong to a state that is gone.
            break
        after, expected = before, number - 1
    return entries


def state_at(
    target: int, current: Any, revision: int, rows: Iterable[tuple[int, Mapping[str, Any]]]
) -> Any:
    """The state right after revision ``target``, rebuilt from the ``current`` state at
    ``revision`` and the journal ``rows`` (newest first). ``None`` means nothing was
    stored then. Raises ``ScratchpadHistoryError`` when the journal does not reach back
    to ``target``."""
    if not 0 <= target <= revision:
        raise ScratchpadHistoryError(
            f"There is no revision {target} to revert to: the scratchpad is at revision "
            f"{revision}. Pick one from its history."
        )
    state, expected = current, revision
    for number, entry in rows:
        if expected == target:
            break
        if number != expected:
            break  # a gap: an entry that was trimmed or could not be read
        state, expected = undo(state, entry), expected - 1
        if state is None and expected > 0:
            # Nothing was stored before that write, which was not the key's first: the
            # scope was reset, and the states of the revisions below went with it.
            if target == 0:
                return None  # revision 0 is "nothing stored": the initial state
            raise ScratchpadHistoryError(
                f"Revision {target} was made before the scratchpad was reset (the kept "
                f"history starts again at revision {expected + 1}); it cannot be restored. "
                "Pick a revision from its history."
            )
    if expected != target:
        raise ScratchpadHistoryError(
            f"Revision {target} is older than the kept history (it reaches back to revision "
            f"{expected}); it cannot be restored. Raise history_limit to keep more."
        )
    return state


def recent_rows(rows: list[JournalRow], cutoff: float | None) -> list[JournalRow]:
    """``rows`` (newest first) down to the first one written at or before ``cutoff``."""
    if cutoff is None:
        return rows
    kept = 0
    for row in rows:
        if row.written_at <= cutoff:
            break
        kept += 1
    return rows[:kept]


class Revert(Rewrite):
    """The change that makes the state right after ``revision`` the current state again,
    rebuilt inside the write: the backend hands :meth:`reading_journal`'s function the
    stored state, its revision and the journal rows above ``revision`` (in the write's
    transaction), and the rewrite rebuilds the target from exactly those. A write that
    landed since the caller last looked is then one more entry to undo, never a gap.

    Raises ``ScratchpadHistoryError`` (inside the write, which then writes nothing) when
    the kept journal does not reach back to ``revision`` at that moment."""

    __slots__ = ("_initial", "_seen", "expired", "journal_cutoff", "revision")

    def __init__(self, revision: int, initial: Callable[[], ScratchpadState]) -> None:
        super().__init__(self._replace, {"revert": revision}, "revert")
        self.revision = revision
        self._initial = initial
        self._seen: tuple[Revision, list[JournalRow]] | None = None
        #: The stored revision a layer's ``ttl`` expired (the writer sets it): the
        #: rebuild then sees nothing stored and no journal, as after a reset.
        self.expired: int | None = None
        #: Rows written at or before it are past ``history_max_age``: not rebuilt from.
        self.journal_cutoff: float | None = None

    @property
    def after(self) -> int:
        """The revision whose newer journal rows the rebuild needs, as a backend can take
        it (a revision out of any range still fails, as there is no such revision)."""
        return min(max(self.revision, 0), MAX_JOURNAL_LIMIT)

    def reading_journal(self, fn: CommitFn) -> JournalCommitFn:
        """``fn`` (the write's commit function) as a ``commit_with_journal`` function:
        it keeps what the backend hands over for the rebuild, then runs ``fn``."""

        def commit(current: Revision, rows: list[JournalRow]) -> Commit:
            if current.revision == self.expired:
                current, rows = Revision(None, 0), []
            rows = recent_rows(rows, self.journal_cutoff)
            self._seen = (current, rows)
            return fn(current)

        return commit

    def _replace(self, state: ScratchpadState) -> tuple[Any, tuple[str, ...]]:
        if self._seen is None:
            raise RuntimeError("a revert runs only through commit_with_journal")
        stored, rows = self._seen
        target = state_at(
            self.revision, stored.value, stored.revision, ((r.revision, r.entry) for r in rows)
        )
        return _restoring(self._initial() if target is None else target, state)


def _restoring(target: ScratchpadState, current: ScratchpadState) -> tuple[Any, tuple[str, ...]]:
    """A copy of ``target`` to write over ``current``, and the top-level keys that differ."""
    if isinstance(current, dict) and isinstance(target, dict):
        keys = sorted(
            key
            for key in current.keys() | target.keys()
            if current.get(key, _GONE) != target.get(key, _GONE)
        )
        return copy_state(target), tuple(keys)
    return copy_state(target), ()


_GONE = object()


def _changes(before: Any, after: Any, keys: Sequence[str] | None) -> dict[str, tuple[Any, Any]]:
    """Each key's (before, after) among ``keys``; every key of both when ``None``. Nothing
    stored (``None``) compares as an empty object."""
    if before is None and isinstance(after, dict):
        before = {}
    if not isinstance(before, dict) or not isinstance(after, dict):
        return {"": (before, after)}
    names = keys if keys is not None else sorted(set(before) | set(after))
    return {
        key: (before.get(key, MISSING), after.get(key, MISSING))
        for key in names
        if before.get(key, MISSING) != after.get(key, MISSING) or keys is not None
    }


def entry_json(entry: HistoryEntry, caller: dict[str, Any] | None = None) -> dict[str, Any]:
    """A history entry as JSON, the one shape of the HTTP API and the command line: its time
    in ISO 8601 (:func:`~noetic_scratchpad._time.iso_time`), and in its diff a value that
    was not there left out. ``caller``: who sent the HTTP request that made it, if one did
    (:func:`caller_of`)."""
    changes: dict[str, dict[str, Any]] | None = None
    if entry.changes is not None:
        changes = {}
        for key, (before, after) in entry.changes.items():
            change = changes[key] = {}
            if before is not MISSING:
                change["before"] = before
            if after is not MISSING:
                change["after"] = after
    return {
        "revision": entry.revision,
        "written_at": iso_time(entry.written_at),
        "source": entry.source,
        "call_id": entry.call_id,
        "caller": caller,
        "keys": list(entry.keys),
        "update": entry.update,
        "replaced": entry.replaced,
        "changes": changes,
    }


def caller_of(row: JournalRow) -> dict[str, Any] | None:
    """Who sent the HTTP request that made a journal row (``None``: not a request)."""
    caller = row.entry.get("caller") if isinstance(row.entry, dict) else None
    return caller if isinstance(caller, dict) else None
