"""A scope's state as one immutable value, with what is known about it.

The pipeline makes a :class:`Snapshot` of every state it produces, the writer gives the
new one (at its stored revision) to the handle, and the handle keeps the latest it saw.
What a snapshot knows spares work on the next write and the next recall:

- ``validated``: the state fits the schema. A write whose backend finds ``revision``
  still stored skips the schema check of the stored state: a key's revisions never
  repeat, so the same revision is the same state.
- ``encoded``: its compact JSON, so a copy for the caller is a decode, not a round trip.
- ``has_floats``: whether the state holds floats (the renderer's fast path needs none).

:class:`LatestSnapshots` keeps, per scope, the snapshot last produced for it in this
process, so that a write which finds another handle's state stored need not check it
again either (see :meth:`LatestSnapshots.known`).
"""

from __future__ import annotations

import weakref
from typing import Any, NamedTuple

from .. import _json
from ..render import contains_float
from .config import ScratchpadState

__all__ = ("MAX_LATEST_SCOPES", "LatestSnapshots", "Snapshot", "latest_snapshots")

#: Scopes whose latest snapshot one storage backend's writes remember (LRU).
MAX_LATEST_SCOPES = 64


class Snapshot(NamedTuple):
    """A state, its stored ``revision`` (0: nothing stored), its compact JSON when known
    (``encoded``), whether it is known to fit the schema (``validated``) and whether it
    holds floats (``has_floats``; ``None``: not known).

    ``validated`` also says that ``state`` is the state stored at ``revision`` (a state
    loaded in place of one that fails the schema is not). ``state`` is shared, not
    copied: treat it as read-only (:meth:`copy_state` gives a copy). A named tuple, not a
    frozen dataclass: as immutable, and made on every write at a third of the cost."""

    state: ScratchpadState
    revision: int = 0
    encoded: bytes | None = None
    validated: bool = False
    has_floats: bool | None = None

    def copy_state(self) -> ScratchpadState:
        """A deep copy of ``state``: from its JSON when at hand, else by a JSON round trip."""
        state = self.state
        if isinstance(state, str):
            return state
        copied: dict[str, Any] = _json.loads(
            self.encoded if self.encoded is not None else _json.dumps(state)
        )
        return copied

    def at(self, revision: int) -> Snapshot:
        """This snapshot stored at ``revision``."""
        if revision == self.revision:
            return self
        return Snapshot(self.state, revision, self.encoded, self.validated, self.has_floats)

    def with_floats(self) -> Snapshot:
        """This snapshot with ``has_floats`` known (looked up now when it is not)."""
        if self.has_floats is not None:
            return self
        state = self.state
        has_floats = isinstance(state, dict) and contains_float(state)
        return Snapshot(state, self.revision, self.encoded, self.validated, has_floats)


class LatestSnapshots:
    """The snapshot produced last for each scope of one storage backend, in this process
    (bounded: the :data:`MAX_LATEST_SCOPES` scopes written most recently).

    Each handle knows the revision it last saw; when another handle wrote since (agent
    runs sharing a scope, or writes batched into one transaction), this is what knows the
    state it left. A write records its snapshot from inside the backend's transition,
    possibly in a database thread: every step is one call on a dict, safe under the GIL.
    """

    __slots__ = ("_max_scopes", "_snapshots")

    def __init__(self, max_scopes: int = MAX_LATEST_SCOPES) -> None:
        self._snapshots: dict[str, tuple[object, Snapshot]] = {}
        self._max_scopes = max_scopes

    def record(self, scope: str, producer: object, snapshot: Snapshot) -> None:
        """``producer`` (the pipeline, whose schema checked it) made ``snapshot`` for
        ``scope``; it holds the revision the state gets if its write commits."""
        snapshots = self._snapshots
        snapshots.pop(scope, None)  # to the end: least recently written go first
        snapshots[scope] = (producer, snapshot)
        if len(snapshots) > self._max_scopes:
            try:  # noqa: SIM105 (not contextlib.suppress: it costs more than the del)
                del snapshots[next(iter(snapshots))]
            except (KeyError, RuntimeError, StopIteration):  # another thread took it first
                pass

    def known(self, scope: str, producer: object, value: Any, revision: int) -> Snapshot | None:
        """What ``producer`` knows of ``value``, stored at ``revision`` in ``scope``: the
        snapshot it made of that state, or ``None``.

        The revision says it cheaply; the state must also be equal, because the snapshot
        is recorded before its write commits: a write that failed after all, and another
        process storing something else at that revision, are told apart. For the very
        object a backend keeps (memory, SQLite's rows, a batch's earlier write), equality
        is a pointer comparison."""
        entry = self._snapshots.get(scope)
        if entry is None:
            return None
        made_by, snapshot = entry
        if made_by is not producer or snapshot.revision != revision or snapshot.state != value:
            return None
        return snapshot

    def __len__(self) -> int:
        return len(self._snapshots)


_by_backend: weakref.WeakKeyDictionary[object, LatestSnapshots] = weakref.WeakKeyDictionary()


def latest_snapshots(owner: object) -> LatestSnapshots:
    """The latest snapshots shared by every handle on ``owner`` (a storage backend; it
    lives as long as the backend does)."""
    latest = _by_backend.get(owner)
    if latest is None:
        latest = _by_backend[owner] = LatestSnapshots()
    return latest
