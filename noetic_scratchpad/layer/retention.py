"""A layer's ``ttl``: when a scope's state has expired, and what an expired state reads as.

A scope expires ``ttl`` after its last write: the ``updated_at`` that the backend's
``describe`` reports with the state's revision (one read, so the two agree), compared
with the layer's ``clock`` (the backend's clock wrote it: PostgreSQL's ``now()``, the
others the writing process's). Expiry names a *revision*: "revision 7 has expired" stays
true for good, as no later write can change when revision 7 was written. So expiry needs
nothing of a backend beyond the contract, and keeps revisions sound:

- a read of an expired revision gets what a deleted key gives: nothing stored (the
  initial state, revision 0, no journal rows);
- a write that finds the expired revision still stored is handed ``Revision(None, 0)``
  too, as for a deleted key, and the backend stores it above that revision (a key's
  revisions never repeat), so no reader ever sees one revision number with two states.
  An ``expected_revision`` taken before the expiry no longer matches (revision 0 does).

A write decides expiry when it starts (one ``describe`` before the commit, only for a
layer with a ``ttl``): a scope that expires between that read and the commit, a few
milliseconds later, is written on as it stood. :func:`~noetic_scratchpad.storage.sweep.
sweep_expired` removes expired states from storage.
"""

from __future__ import annotations

import time

from ..storage.base import JournalView, Revision, StorageBackend
from .config import STATE_KEY, ScratchpadConfig
from .journal import recent_rows

__all__ = ("expired_revision", "journal_cutoff", "live", "live_view")


async def expired_revision(
    config: ScratchpadConfig, storage: StorageBackend, key: str = STATE_KEY
) -> int | None:
    """The revision of the scope's state at ``key`` (of a scope's storage, its own;
    of a backend, the full key) when it has expired (``ttl`` or more since its last
    write), else ``None`` (no ``ttl``, nothing stored, or still live)."""
    ttl = config.ttl_seconds
    if ttl is None:
        return None
    now = (config.clock or time.time)()
    for info in await storage.describe(key):
        if info.key == key:
            return info.revision if now >= info.updated_at + ttl else None
    return None


async def live_view(
    config: ScratchpadConfig, storage: StorageBackend, key: str, view: JournalView
) -> JournalView:
    """``view`` of ``key`` as a reader of a layer with ``config`` sees it: nothing
    stored and no rows for an expired state, no row past ``history_max_age``."""
    expired = None
    if view.current is not None and config.ttl is not None:
        expired = await expired_revision(config, storage, key)
    if expired is not None and live(view.current, expired) is None:
        return JournalView(None, [])
    cutoff = journal_cutoff(config)
    if cutoff is not None:  # rows past history_max_age, not swept yet
        view = JournalView(view.current, recent_rows(view.rows, cutoff))
    return view


def live(found: Revision | None, expired: int | None) -> Revision | None:
    """``found`` as a reader sees it: ``None`` (nothing stored) when it is the expired
    revision."""
    if found is not None and expired is not None and found.revision == expired:
        return None
    return found


def journal_cutoff(config: ScratchpadConfig) -> float | None:
    """The write time at or before which a journal row is past ``history_max_age``
    (``None``: rows are kept by count only)."""
    age = config.history_max_age_seconds
    return None if age is None else (config.clock or time.time)() - age
