"""The model calls a scope applied lately, so that a call id met again is told apart.

One rule on every path that carries a call id (the harness's tool path, the store hook,
``handle.call``, the framework integrations):

- the same id with the same arguments is a **retry**: nothing is written, the caller gets
  the first call's result, and an ``UpdateRetried`` event says so;
- the same id with other arguments is a **new call** (some runtimes number their calls
  ``call_0`` in every turn): it is applied, and its ``UpdateApplied`` says
  ``reused_call_id=True``.

"The same arguments" is the same change once parsed and cleaned (whitespace and key order
do not count) to the same tool (an update and an edit are two calls).

What is remembered: applied calls only (a refused call is refused again, with its event),
per scope, for every handle on one storage backend object in this process, the last
:data:`MAX_REMEMBERED_CALLS` call ids across its scopes (the least recently used go
first). Calls racing with one id and the same arguments: the first applies, the others wait
for it and are its retries; if it fails or is cancelled, the next one applies.
"""

from __future__ import annotations

import hashlib
import json
import weakref
from collections import OrderedDict
from typing import Any

import orjson

from .._runtime import Event, new_event
from .pipeline import Rewrite

__all__ = ("MAX_REMEMBERED_CALLS", "CallClaim", "RecentCalls", "change_digest", "recent_calls")

#: Call ids remembered per storage backend, over all its scopes.
MAX_REMEMBERED_CALLS = 4096
#: Calls (distinct arguments) remembered under one id of one scope.
_CALLS_PER_ID = 4
#: Longer call ids are remembered by their digest: an id costs its length in memory.
_MAX_ID_LENGTH = 128


def change_digest(change: Any) -> bytes:
    """What makes two calls the same: the tool (update or edit) and the change, cleaned."""
    if isinstance(change, Rewrite):
        kind, value = b"edit:", change.applied
    else:
        kind, value = b"update:", change
    try:
        text = orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except TypeError:  # integers past 64 bits: the standard library writes them
        text = json.dumps(value, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.blake2b(kind + text, digest_size=16).digest()


class _Call:
    """One call: in flight until :meth:`finish` (applied) or :meth:`fail`."""

    __slots__ = ("_event", "digest", "done", "keys", "revision")

    def __init__(self, digest: bytes) -> None:
        self.digest = digest
        self.done = False
        self.keys: tuple[str, ...] = ()
        self.revision: int | None = None
        self._event: Event | None = None  # made only when another call waits for this one

    async def settled(self) -> None:
        if self._event is None:
            self._event = new_event()
        await self._event.wait()

    def wake(self) -> None:
        if self._event is not None:
            self._event.set()


class CallClaim:
    """What :meth:`RecentCalls.claim` found: a retry of an applied call (``retry``; its
    ``keys`` and ``revision``), or a call to apply (``reused``: the id had other calls),
    which its writer must :meth:`finish` or :meth:`fail`."""

    __slots__ = ("_call", "_calls", "_key", "retry", "reused")

    def __init__(
        self, calls: RecentCalls, key: tuple[str, str], call: _Call, *, retry: bool, reused: bool
    ) -> None:
        self._calls = calls
        self._key = key
        self._call = call
        self.retry = retry
        self.reused = reused

    @property
    def keys(self) -> tuple[str, ...]:
        return self._call.keys

    @property
    def revision(self) -> int | None:
        return self._call.revision

    def finish(self, keys: tuple[str, ...], revision: int | None) -> None:
        """The call was applied: its repeats are retries from now on."""
        call = self._call
        call.keys, call.revision, call.done = keys, revision, True
        call.wake()

    def fail(self) -> None:
        """The call was not applied (refused, failed, cancelled): forget it, and let a call
        waiting for it apply itself."""
        if not self.retry and not self._call.done:
            self._calls.forget(self._key, self._call)
            self._call.wake()


class RecentCalls:
    """The calls applied lately to the scopes of one storage backend (bounded, LRU)."""

    def __init__(self, max_calls: int = MAX_REMEMBERED_CALLS) -> None:
        self._max_calls = max_calls
        self._calls: OrderedDict[tuple[str, str], list[_Call]] = OrderedDict()

    async def claim(self, scope: str, call_id: str, change: Any) -> CallClaim:
        """The call ``call_id`` asking for ``change`` (see :func:`change_digest`) on
        ``scope``: a retry, or a call for the caller to apply. Waits while the same call is
        in flight elsewhere."""
        digest = change_digest(change)
        if len(call_id) > _MAX_ID_LENGTH:
            call_id = "#" + hashlib.blake2b(call_id.encode(), digest_size=16).hexdigest()
        key = (scope, call_id)
        while True:
            calls = self._calls.get(key)
            if calls is None:
                calls = self._calls[key] = []
                if len(self._calls) > self._max_calls:
                    self._calls.popitem(last=False)
            else:
                self._calls.move_to_end(key)
            same = next((call for call in calls if call.digest == digest), None)
            if same is None:
                call = _Call(digest)
                reused = bool(calls)
                calls.append(call)
                del calls[:-_CALLS_PER_ID]
                return CallClaim(self, key, call, retry=False, reused=reused)
            if same.done:
                return CallClaim(self, key, same, retry=True, reused=True)
            await same.settled()  # then: a retry of it, or (it failed) apply it here

    def forget(self, key: tuple[str, str], call: _Call) -> None:
        calls = self._calls.get(key)
        if calls is not None and call in calls:
            calls.remove(call)
            if not calls:
                del self._calls[key]

    def __len__(self) -> int:
        return len(self._calls)


_by_backend: weakref.WeakKeyDictionary[object, RecentCalls] = weakref.WeakKeyDictionary()


def recent_calls(owner: object) -> RecentCalls:
    """The memory of applied calls shared by every handle on ``owner`` (a storage backend;
    it lives as long as the backend does)."""
    calls = _by_backend.get(owner)
    if calls is None:
        calls = _by_backend[owner] = RecentCalls()
    return calls
