"""Other processes' writes and resets, fed into the core's bus as events.

A backend that can watch the changes other processes commit (the capability of
:mod:`..storage.notices`) hands them to :class:`RemoteEvents`, which the core starts when
it opens its storage and stops when it closes. Each change of a scope's state becomes one
event with the writing process's ``origin``: a write an :class:`~..events.UpdateApplied`
(its ``keys`` empty: the notice does not carry them; read the scope's journal at
``revision`` for them), a delete a :class:`~..events.ScopeReset`. Changes of other keys
are no scope's and make no event. This process's own changes are not among them: they
were reported when they were made.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, Callable
from contextlib import aclosing
from typing import get_args

import anyio

from .._runtime import TaskOwner
from ..events import EventBus, ScopeReset, ScratchpadEvent, UpdateApplied, WriteSource
from ..keys import parse_state_key
from ..storage.notices import ChangeNotice, watch_changes

__all__ = ("RemoteEvents", "event_of")

logger = logging.getLogger("noetic_scratchpad.core")

_SOURCES: tuple[str, ...] = get_args(WriteSource)
#: How long closing waits for the watch to let go of its connection.
STOP_TIMEOUT = 5.0


def event_of(notice: ChangeNotice) -> ScratchpadEvent | None:
    """The event a change of another process makes: ``None`` for a key that is no
    scope's state. A write no caller named (``Commit.about``: an import, a migration)
    reads as ``"api"``, code's."""
    ref = parse_state_key(notice.key)
    if ref is None:
        return None
    if notice.deleted:
        return ScopeReset(
            layer_id=ref.layer_id,
            scope_key=ref.scope_id,
            scope=ref.kind,
            revision=notice.revision,
            origin=notice.origin,
        )
    source = notice.source if notice.source in _SOURCES else "api"
    return UpdateApplied.model_validate(
        {
            "layer_id": ref.layer_id,
            "scope_key": ref.scope_id,
            "scope": ref.kind,
            "source": source,
            "keys": (),
            "call_id": notice.call_id,
            "revision": notice.revision,
            "origin": notice.origin,
        }
    )


class RemoteEvents:
    """The core's watch of its backend: one background task, in the core's own
    :class:`~.._runtime.TaskOwner`, from :meth:`start` to :meth:`stop`."""

    def __init__(self) -> None:
        self.tasks = TaskOwner()
        self._watched: object | None = None
        self._scope: anyio.CancelScope | None = None
        self._done: anyio.Event | None = None

    @property
    def backend(self) -> object | None:
        """The backend :meth:`start` was last given (``None`` after :meth:`stop`)."""
        return self._watched

    def start(self, backend: object, bus: Callable[[], EventBus]) -> bool:
        """Watch ``backend``, each event emitted on ``bus()`` (the core's bus at that
        time); the watch of another backend before it ends. ``False`` when the backend
        cannot watch or no loop runs to do it."""
        if self._scope is not None:
            self._scope.cancel()
        self._watched, self._scope, self._done = backend, None, None
        notices = watch_changes(backend)
        if notices is None:
            return False
        scope, done = anyio.CancelScope(), anyio.Event()
        if not self.tasks.start_soon(self._run, notices, bus, scope, done):
            return False
        self._scope, self._done = scope, done
        return True

    async def stop(self) -> None:
        """End the watch and wait (at most :data:`STOP_TIMEOUT` seconds) for it to close
        its connection."""
        scope, done = self._scope, self._done
        self._watched = self._scope = self._done = None
        if scope is None or done is None:
            return
        scope.cancel()
        with anyio.move_on_after(STOP_TIMEOUT, shield=True):
            await done.wait()

    @staticmethod
    async def _run(
        notices: AsyncGenerator[ChangeNotice, None],
        bus: Callable[[], EventBus],
        scope: anyio.CancelScope,
        done: anyio.Event,
    ) -> None:
        try:
            with scope:
                async with aclosing(notices):
                    async for notice in notices:
                        event = event_of(notice)
                        if event is not None:
                            bus().emit(event)
        finally:
            done.set()
