"""Forgetting deleted keys: the one thing an erasure needs that the contract does not do.

``delete`` removes a key's value and journal but keeps its last revision (the built-in
backends in a ``<table>_retired`` table, Redis in the key's hash), so that the key's
revisions never repeat. That record still names the key, and a key names its scope's id:
after a data subject's erasure nothing may. A backend that keeps such records can forget
them by prefix with ``purge_deleted``; it is a capability, not one of the contract's
primitives, so a backend of your own need not have it (an erasure then says what it
could not remove).

Forgetting a key's last revision gives up one promise for that key alone: written again,
it starts over at revision 1, so an ``expected_revision`` (an HTTP ``If-Match``) taken
before the erasure could match a new state. Erase a subject when no run is using it.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

__all__ = ("PurgesDeleted", "purge_deleted")


@runtime_checkable
class PurgesDeleted(Protocol):
    """A backend that can forget what it keeps of deleted keys."""

    async def purge_deleted(self, prefix: str) -> int | None:
        """Forget every record kept of the *deleted* keys that start with ``prefix``
        (their last revisions, any journal rows left without a value); the keys that hold
        a value are left alone. Returns how many records went, or ``None`` when this
        backend (a wrapper, for one) cannot do it."""


async def purge_deleted(backend: object, prefix: str) -> int | None:
    """``backend.purge_deleted(prefix)``, or ``None`` when it has no such capability."""
    if not isinstance(backend, PurgesDeleted):
        return None
    return await backend.purge_deleted(prefix)
