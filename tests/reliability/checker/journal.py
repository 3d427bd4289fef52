"""After a run: each scope's journal agrees with its state.

Every write of the checker is journaled (the layer's default ``history_limit``), in the
same transaction as the state, also when a worker is killed mid-write. So for each scope:

``journal_head``
    the newest journal row's revision is the state's revision;
``journal_gap``
    the kept rows' revisions are consecutive;
``journal_replay``
    undoing the rows one by one from the final state, each merge entry's update, merged
    into the state before it, gives the state after it (for the keys it wrote).
"""

from __future__ import annotations

from noetic_scratchpad import open_storage
from noetic_scratchpad.keys import state_key
from noetic_scratchpad.layer.journal import undo
from noetic_scratchpad.merge import merge_state
from noetic_scratchpad.storage.base import JournalRow, Revision

from .check import Violation
from .scenario import Scope

#: Rows read per scope: more than the layer keeps.
_ROWS = 10_000
#: Sources whose entry's ``update`` is merged into the state.
_MERGES = frozenset({"tool", "store", "api"})


async def check_journals(url: str, scopes: tuple[Scope, ...]) -> list[Violation]:
    """The journal violations of every scope in the store at ``url``."""
    backend = await open_storage(url)
    violations: list[Violation] = []
    try:
        for scope in scopes:
            key = state_key("scratchpad", scope.kind, scope.id)
            found = await backend.get_revision(key)
            rows = await backend.journal(key, limit=_ROWS)
            violations.extend(_check(str(scope), found, rows))
    finally:
        await backend.aclose()
    return violations


def _check(scope: str, found: Revision | None, rows: list[JournalRow]) -> list[Violation]:
    def violation(kind: str, detail: str) -> Violation:
        return Violation(kind, scope, None, detail)

    if not rows:
        return []
    if found is None:
        return [violation("journal_head", f"{len(rows)} journal rows but no state")]
    state, revision = found.value, found.revision
    if rows[0].revision != revision:
        return [
            violation(
                "journal_head",
                f"the state is at revision {revision}, the newest journal row at "
                f"{rows[0].revision}",
            )
        ]
    after = state
    for newer, row in zip([None, *rows], rows, strict=False):
        if newer is not None and row.revision != newer.revision - 1:
            return [violation("journal_gap", f"revision {newer.revision} follows {row.revision}")]
        before = undo(after, row.entry)
        if row.entry.get("source") in _MERGES:
            merged = merge_state(before if before is not None else {}, row.entry["update"])
            for name in row.entry["keys"]:
                if merged.get(name) != after.get(name):
                    return [
                        violation(
                            "journal_replay",
                            f"revision {row.revision}: replaying its update gives "
                            f"{name}={merged.get(name)!r}, the state after it has "
                            f"{after.get(name)!r}",
                        )
                    ]
        after = before
    return []
