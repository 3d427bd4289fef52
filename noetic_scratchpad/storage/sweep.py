"""Sweeping expired keys: removing from storage what a layer's ``ttl`` already hides.

A layer with a ``ttl`` reads a scope whose state was last written that long ago as empty
(see :mod:`noetic_scratchpad.layer.retention`), with or without a sweep: the sweep is
about the bytes, not what a reader sees. ``sweep_expired(prefix, written_by, limit=)``
deletes, as :meth:`~.base.StorageBackend.delete` does (value and journal go, the last
revision is kept so that the key's revisions never repeat), at most ``limit`` keys under
``prefix`` whose last write is at or before ``written_by`` (Unix seconds; the backend's
own write times, PostgreSQL's ``now()`` included), each only if it is still that old when
it is deleted: a key written meanwhile stays. It is a capability, not one of the
contract's primitives, so a backend of your own need not have it; :func:`sweep_expired`
then says ``None`` and the expired scopes stay hidden but stored.

The built-in backends find candidates by a range scan of the prefix (the key index),
never a scan of the whole store, and delete in one transaction (memory: one step with no
await; SQLite: the writer's thread, between batches; PostgreSQL: one transaction that
skips rows a writer holds; Redis: a script per key that checks the time of its write).
``trim_journals`` is journal retention by age (a layer's ``history_max_age``): it deletes
the journal rows written at or before a time, oldest first, the values untouched. The layer's
:meth:`~noetic_scratchpad.ScratchpadLayer.sweep` runs both for its own keys.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

__all__ = (
    "DEFAULT_SWEEP_LIMIT",
    "SweepsExpired",
    "TrimsJournals",
    "sweep_expired",
    "trim_journals",
)

#: Keys one sweep deletes at most: one step's bounded work; run it again for more.
DEFAULT_SWEEP_LIMIT = 1000


@runtime_checkable
class SweepsExpired(Protocol):
    """A backend that can delete the keys last written at or before a time."""

    async def sweep_expired(self, prefix: str, written_by: float, *, limit: int) -> int | None:
        """Delete at most ``limit`` keys under ``prefix`` last written at or before
        ``written_by`` (see the module); how many went, or ``None`` when this backend
        (a wrapper, for one) cannot."""


async def sweep_expired(
    backend: object, prefix: str, written_by: float, *, limit: int = DEFAULT_SWEEP_LIMIT
) -> int | None:
    """``backend.sweep_expired(...)``, or ``None`` when it has no such capability."""
    if not isinstance(backend, SweepsExpired):
        return None
    return await backend.sweep_expired(prefix, written_by, limit=limit)


@runtime_checkable
class TrimsJournals(Protocol):
    """A backend that can delete the journal rows written at or before a time."""

    async def trim_journals(self, prefix: str, written_by: float, *, limit: int) -> int | None:
        """Delete at most ``limit`` journal rows of the keys under ``prefix`` written
        at or before ``written_by`` (Unix seconds, the backend's write times); the keys'
        values and their newer rows stay. How many went, or ``None`` when this backend
        cannot."""


async def trim_journals(
    backend: object, prefix: str, written_by: float, *, limit: int = DEFAULT_SWEEP_LIMIT
) -> int | None:
    """``backend.trim_journals(...)``, or ``None`` when it has no such capability."""
    if not isinstance(backend, TrimsJournals):
        return None
    return await backend.trim_journals(prefix, written_by, limit=limit)
