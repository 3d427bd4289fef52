"""The writer: runs the update pipeline against storage and reports the outcome, once.

Every write of a scope goes through :meth:`ScopeWriter.write` (the model's tool call, the
store hook, ``handle.update`` from code, ``harness.update_state``):

1. ``pipeline.prepare`` checks the arguments before storage is touched;
2. ``storage.commit(STATE_KEY, transition, keep=history_limit)`` runs
   ``pipeline.transition`` on the latest stored state, serialized per scope by the
   backend, under ``write_timeout``; it checks ``expected_revision``, and the journal
   entry (:mod:`.journal`) is written in the same transaction as the state;
3. an error becomes one ``UpdateRejected`` (:func:`_refusal` maps every error, once), a
   success one ``UpdateApplied`` with the new revision, and the new
   :class:`~.snapshot.Snapshot` goes back to the caller.

A write starts from the caller's *base* snapshot (what it last saw): when the backend
still holds that revision, the stored state is not checked against the schema again;
when another handle wrote since, :class:`~.snapshot.LatestSnapshots` may know it.

A write with a call id first claims it in the memory of the calls its backend's scopes
applied lately (:class:`RecentCalls`), so that a call id met again is told apart, by one
rule on every path that carries a call id (the harness's tool path, the store hook,
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

Reading a scope's state is :mod:`.load`.
"""

from __future__ import annotations

import hashlib
import json
import time
import weakref
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, NamedTuple

import orjson

from .. import _runtime
from .._models import unvalidated
from .._runtime import Event, new_event
from ..context import ExecutionContext
from ..errors import (
    ScratchpadConflictError,
    ScratchpadCorruptStateError,
    ScratchpadUpdateError,
    StorageCorruptError,
    StorageError,
    StorageOutcomeUnknownError,
)
from ..events import UpdateApplied, UpdateRejected, UpdateRetried, WriteSource
from ..events.models import APPLIED_GIVEN
from ..keys import Scope
from ..storage import ScopedStorage
from ..storage.base import Commit, Revision
from .config import STATE_KEY
from .journal import Revert, entry_of
from .pipeline import Rewrite, Transition, UpdatePipeline
from .retention import expired_revision, journal_cutoff
from .seen import ViewLimit
from .snapshot import LatestSnapshots, Snapshot, latest_snapshots

__all__ = (
    "MAX_REMEMBERED_CALLS",
    "CallClaim",
    "Change",
    "RecentCalls",
    "ScopeWriter",
    "Written",
    "change_digest",
    "conflict",
    "recent_calls",
)

#: A write's change: an update to merge, or a :class:`~.pipeline.Rewrite`.
Change = Mapping[str, Any] | Rewrite
#: ``prepare(args)``: the change ``args`` ask for, checked before storage is touched.
Prepare = Callable[[Any], Change]


class Written(NamedTuple):
    """What :meth:`ScopeWriter.write` did: the change as ``applied`` (an update as merged,
    a rewrite's ``applied``), the scope's ``snapshot`` after it, and whether it ``wrote``
    (``False``: a retry, or an update with no key; ``snapshot`` is then the base)."""

    applied: Any
    snapshot: Snapshot
    wrote: bool


class ScopeWriter:
    """One execution's writes to one scope: each runs the pipeline through storage and
    emits exactly one ``UpdateApplied`` or ``UpdateRejected``."""

    def __init__(
        self,
        pipeline: UpdatePipeline,
        storage: ScopedStorage | None,
        ctx: ExecutionContext,
        *,
        layer_id: str,
        scope_key: str,
        scope: Scope = "thread",
        view_budget: int | None = None,
    ) -> None:
        self.pipeline = pipeline
        self.scope = scope
        self.storage = storage
        self.ctx = ctx
        self._advice = ""
        self._limit: ViewLimit | None = None  # the view the model's writes are checked against
        self.view_budget = view_budget
        self.layer_id = layer_id
        self.scope_key = scope_key
        # The calls applied lately: the backend's, shared by every handle on the scope
        # (without storage, this writer's own); the scope is known by its storage prefix.
        self._calls = RecentCalls() if storage is None else recent_calls(storage.backend)
        self._scope_id = scope_key if storage is None else storage.prefix
        # What other handles on the scope left (none without storage: only this one writes).
        self._latest = None if storage is None else latest_snapshots(storage.backend)
        # The deadline of the loop this writer is made on (handles are made by the layer's
        # hooks, on the loop that runs them), resolved once.
        self._wait_for = _runtime.implementation().wait_for
        # ``storage.commit(STATE_KEY, ...)``, its key resolved once.
        self._commit = None if storage is None else storage.committer(STATE_KEY)
        # Whether a write must first ask whether the stored state expired (see .retention).
        self._expires = pipeline.config.ttl is not None
        # (revision, clock before its commit) of this writer's last write, with a ttl.
        self._fresh: tuple[int, float] | None = None

    async def write(
        self,
        args: Any,
        base: Snapshot,
        *,
        source: WriteSource,
        call_id: str | None = None,
        expected_revision: int | None = None,
        prepare: Prepare | None = None,
    ) -> Written:
        """Apply the change ``args`` ask for to the scope, whose state the caller last saw
        as ``base``; returns the new snapshot (see :class:`Written`).

        Nothing is written for a retry, the repeat of the applied call ``call_id`` (see
        :mod:`.calls`), or an update with no key, which would only make a revision equal
        to the last. ``prepare(args)`` turns ``args`` into the change (default: an update
        to merge). ``expected_revision``: refuse with ``ScratchpadConflictError`` unless
        the stored revision is this one.

        Raises ``ScratchpadUpdateError`` (refused) or ``StorageError`` (not saved, or not
        known to be saved), after its ``UpdateRejected``.
        """
        claim: CallClaim | None = None
        try:
            change = (prepare or self.pipeline.prepare)(args)
            if not change and not isinstance(change, Rewrite):
                return Written(change, base, False)
            if call_id is not None:
                claim = await self._calls.claim(self._scope_id, call_id, change)
                if claim.retry:
                    self._emit_retried(source, call_id, claim)
                    applied = change.applied if isinstance(change, Rewrite) else change
                    return Written(applied, base, False)
            attempt = _Attempt(
                self.pipeline,
                self._latest,
                self._scope_id,
                change,
                source,
                call_id,
                expected_revision,
                base,
                self._view_limit(source),
            )
            if self._commit is None:  # a host calling store without init: nothing to persist
                attempt(Revision(base.state, base.revision))
                revision, stored_at = None, base.revision  # its snapshots stay at the base's
            else:
                committed = await self._wait_for(
                    self.pipeline.config.write_timeout,
                    self._commit(attempt, keep=attempt.keep)
                    if not self._expires and not isinstance(change, Revert)
                    else self._expiring(self._commit, attempt, change, base.revision),
                )
                revision = stored_at = committed.revision
        except BaseException as exc:
            if claim is not None:
                claim.fail()  # not applied: a repeat of it must apply it
            error = self._failure(exc, source, call_id)
            if error is None:
                raise
            raise error from (None if isinstance(exc, _runtime.Expired) else exc)
        # The transition's last run is the one committed: its state is what is stored.
        written = attempt.produced
        assert written is not None  # a commit ran the transition
        snapshot = written.snapshot
        if stored_at != snapshot.revision:  # a recreated key goes on above its old revisions
            snapshot = snapshot.at(stored_at)
            if self._latest is not None:
                self._latest.record(self._scope_id, self.pipeline, snapshot)
        applied = change.applied if isinstance(change, Rewrite) else change
        if claim is not None:
            claim.finish(written.keys, revision)
        self._emit_applied(
            source, call_id, written.keys, revision, claim is not None and claim.reused
        )
        return Written(applied, snapshot, True)

    @property
    def view_budget(self) -> int | None:
        """The token budget of the model's view, which its writes are checked against
        (:mod:`.seen`); ``None``: not checked."""
        return self._limit.budget if self._limit is not None else None

    @view_budget.setter
    def view_budget(self, budget: int | None) -> None:
        self._view(budget, self.view_advice)

    @property
    def view_advice(self) -> str:
        """The advice in that view's cut notice (the layer's ``cut_advice``)."""
        return self._advice

    @view_advice.setter
    def view_advice(self, advice: str) -> None:
        self._view(self.view_budget, advice)

    def viewed(self, budget: int) -> None:
        """``view_budget = budget``, at every recall: the view it is checked against is made
        again only when it changed (the budget, or the host's token counter)."""
        limit = self._limit
        if limit is None or limit.budget != budget or limit.tokenize is not self.ctx.tokenize:
            self._view(budget, self._advice)

    def _view(self, budget: int | None, advice: str) -> None:
        # Made when the view changes (at a recall), not on every write.
        self._advice = advice
        self._limit = None
        if budget is not None:
            edit_tool = self.pipeline.config.edit_tool
            self._limit = ViewLimit(budget, self.ctx.tokenize, edit_tool, advice)

    def _view_limit(self, source: WriteSource) -> ViewLimit | None:
        """What the model's write (``tool``, ``store``) is checked against; code's: nothing."""
        return self._limit if source in ("tool", "store") else None

    async def _expiring(
        self,
        commit: Callable[..., Awaitable[Revision]],
        attempt: _Attempt,
        change: Change,
        base: int,
    ) -> Revision:
        """The commit of a layer with a ``ttl``, and of a revert: a stored revision found
        expired when the write starts is written on as nothing stored, and a revert
        rebuilds from the journal rows within ``history_max_age`` (see :mod:`.retention`).

        Whether it expired is asked of storage (``describe``) unless this writer's own
        last write is the ``base`` and began less than ``ttl`` ago: what is stored now
        is that write or a later one, so it cannot have expired."""
        config = self.pipeline.config
        ttl = config.ttl_seconds
        started = (config.clock or time.time)()
        fresh = self._fresh
        expired = None
        if ttl is not None and (fresh is None or fresh[0] != base or started >= fresh[1] + ttl):
            storage = self.storage
            assert storage is not None  # a writer with a commit has storage
            expired = await expired_revision(config, storage)
        attempt.expired = expired
        if isinstance(change, Revert):
            change.expired = expired
            change.journal_cutoff = journal_cutoff(config)
        committed = await commit(attempt, keep=attempt.keep)
        if ttl is not None:
            self._fresh = (committed.revision, started)
        return committed

    def _emit_applied(
        self,
        source: WriteSource,
        call_id: str | None,
        keys: tuple[str, ...],
        revision: int | None,
        reused_call_id: bool,
    ) -> None:
        events = self.ctx.events
        if events.listened:  # the event is never logged: unbuilt when nothing receives it
            # Made of values this write checked: not validated again (see .._models).
            event = unvalidated(
                UpdateApplied,
                {
                    "kind": "update_applied",
                    "layer_id": self.layer_id,
                    "scope_key": self.scope_key,
                    "scope": self.scope,
                    "execution_id": self.ctx.execution_id,
                    "at": time.time(),
                    "origin": None,
                    "source": source,
                    "keys": keys,
                    "call_id": call_id,
                    "revision": revision,
                    "reused_call_id": reused_call_id,
                },
                APPLIED_GIVEN,
            )
            events.emit(event)

    def _emit_retried(self, source: WriteSource, call_id: str, first: CallClaim) -> None:
        self.ctx.events.emit(
            UpdateRetried(
                layer_id=self.layer_id,
                scope_key=self.scope_key,
                scope=self.scope,
                execution_id=self.ctx.execution_id,
                source=source,
                keys=first.keys,
                call_id=call_id,
                revision=first.revision,
            )
        )

    def _failure(
        self, exc: BaseException, source: WriteSource, call_id: str | None
    ) -> BaseException | None:
        """Report a failed write (``UpdateRejected``); the error its caller gets instead of
        ``exc``, or ``None`` to let ``exc`` through (a refusal, a storage error, or a
        cancellation, which is the caller's own doing and reports nothing)."""
        refusal = _refusal(exc, self.pipeline.config.write_timeout)
        if refusal is None:
            return None
        reason, message, errors = refusal
        refused = exc if isinstance(exc, ScratchpadUpdateError) else None
        self._emit_rejected(source, call_id, reason, message, errors, refused)
        if isinstance(exc, StorageCorruptError) and not isinstance(exc, ScratchpadUpdateError):
            # A refusal too, so that every host tells the model (not to retry).
            return ScratchpadCorruptStateError(message)
        if isinstance(exc, ScratchpadUpdateError | StorageError):
            return None
        if isinstance(exc, _runtime.Expired):  # cut off: it may have landed or not
            return StorageOutcomeUnknownError(message)
        return StorageError(message)

    def reject(self, source: WriteSource, call_id: str | None, exc: ScratchpadUpdateError) -> None:
        """Report a change refused before it reached :meth:`write` (``UpdateRejected``)."""
        self._emit_rejected(source, call_id, exc.reason, exc.message, exc.errors, exc)

    def _emit_rejected(
        self,
        source: WriteSource,
        call_id: str | None,
        reason: str,
        message: str,
        errors: Sequence[dict[str, Any]],
        refused: ScratchpadUpdateError | None = None,
    ) -> None:
        self.ctx.events.emit(
            UpdateRejected(
                layer_id=self.layer_id,
                scope_key=self.scope_key,
                scope=self.scope,
                execution_id=self.ctx.execution_id,
                hook=source,
                reason=reason,
                message=message,
                errors=tuple(errors),
                call_id=call_id,
                refused=refused.refused if refused is not None else None,
                limit=refused.limit if refused is not None else None,
                size=refused.size if refused is not None else None,
            )
        )


class _Attempt:
    """A write's transition, which the backend runs on the latest stored state (again, if
    it retries). An object, not a closure: one allocation a write instead of a function
    and a cell for each name it would capture, which under many writers made the cyclic
    collector run more often."""

    __slots__ = (
        "about",
        "base",
        "call_id",
        "change",
        "expected",
        "expired",
        "keep",
        "known",
        "latest",
        "pipeline",
        "produced",
        "scope",
        "seen",
        "source",
    )

    def __init__(
        self,
        pipeline: UpdatePipeline,
        latest: LatestSnapshots | None,
        scope: str,
        change: Change,
        source: WriteSource,
        call_id: str | None,
        expected: int | None,
        base: Snapshot,
        seen: ViewLimit | None = None,
    ) -> None:
        self.pipeline = pipeline
        self.seen = seen
        self.latest = latest
        self.scope = scope
        self.change = change
        self.source = source
        self.call_id = call_id
        self.expected = expected
        self.base = base
        # The state the caller saw, when it is the one stored at its revision: a backend
        # may hand it back instead of parsing the stored row (storage.base.known_value).
        self.known = (base.state, base.revision) if base.validated else None
        self.keep = self.pipeline.config.history_limit
        self.about = (source, call_id)  # announced to other processes with the write
        self.produced: Transition | None = None  # the last run's
        self.expired: int | None = None  # the stored revision the ttl expired, if any

    def __call__(self, stored: Revision) -> Commit:
        expected, change, latest = self.expected, self.change, self.latest
        if stored.revision == self.expired:  # as a deleted key: nothing stored
            stored = Revision(None, 0)
        revision = stored.revision
        if expected is not None and revision != expected:
            raise conflict(expected, revision)
        value = stored.value
        # What is known of the stored state: the base's, when no one wrote since (a
        # key's revisions never repeat); else what this process's last write of the
        # scope made, when that is what is stored.
        known: Snapshot | None = self.base
        if revision != self.base.revision:
            known = (
                None if latest is None else latest.known(self.scope, self.pipeline, value, revision)
            )
        keep = self.keep
        result = self.pipeline.transition(
            value,
            change,
            known=known,
            revision=revision + 1,
            cleaned=True,
            seen=self.seen,
            journal=keep != 0,
        )
        self.produced = result
        snapshot = result.snapshot
        if latest is not None:
            latest.record(self.scope, self.pipeline, snapshot)
        if keep == 0:
            return Commit(snapshot.state, None, snapshot.encoded, self.about)
        entry = entry_of(
            source=self.source,
            call_id=self.call_id,
            keys=result.keys,
            applied=change.applied if isinstance(change, Rewrite) else change,
            stored=value,
            base=result.base,
            merged=not isinstance(change, Rewrite),
            undo=result.undo,
        )
        return Commit(snapshot.state, entry, snapshot.encoded, self.about)


def conflict(expected: int, actual: int) -> ScratchpadConflictError:
    """The refusal of a write that expected revision ``expected`` and found ``actual``."""
    return ScratchpadConflictError(
        f"The scratchpad changed since revision {expected}: it is at revision {actual} "
        "now, so nothing was written. Read it again and decide on the new state.",
        expected=expected,
        actual=actual,
    )


def _refusal(
    exc: BaseException, timeout: float | None
) -> tuple[str, str, Sequence[dict[str, Any]]] | None:
    """The one mapping of a failed write to (reason, message, errors); ``None`` for a
    cancellation or anything else that is not a failure of the write. ``timeout``: the
    write deadline, which :class:`~.._runtime.Expired` says passed. The messages say what
    happened, to no reader in particular (the model's text is rendered by its host)."""
    if isinstance(exc, ScratchpadUpdateError):
        return exc.reason, exc.message, exc.errors
    if isinstance(exc, StorageCorruptError):  # permanent: before the retryable failures
        return (
            "corrupt",
            "The scratchpad's stored state is damaged and cannot be read, so the update "
            "was not saved, and a retry would not be either.",
            [],
        )
    if isinstance(exc, _runtime.Expired):
        return (
            "timeout",
            f"The scratchpad did not answer within {timeout or 0:g} s, so the update may "
            "have been saved or not. Check the scratchpad and repeat the update if it is "
            "missing; repeating an update is harmless.",
            [],
        )
    if isinstance(exc, StorageOutcomeUnknownError):
        return (
            "unconfirmed",
            f"The scratchpad may or may not have been saved ({exc}). Check the scratchpad "
            "and repeat the update if it is missing; repeating an update is harmless.",
            [],
        )
    if isinstance(exc, ValueError):  # the backend refused the key or value: no retry helps
        return (
            "refused",
            f"The scratchpad could not be saved: storage refused it ({exc}); it is "
            "unchanged, and the same update would be refused again.",
            [],
        )
    if isinstance(exc, Exception):
        return (
            "storage",
            f"The scratchpad could not be saved ({type(exc).__name__}: {exc}); it is "
            "unchanged. Try the update again later.",
            [],
        )
    return None


# -- the calls applied lately ------------------------------------------------------------

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
