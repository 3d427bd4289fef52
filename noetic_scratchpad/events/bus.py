"""``EventBus``: delivers events to subscribers and streams; every event is also logged.

``EventBus.emit`` is synchronous and never raises: sync handlers run inline, async handlers
run in the bus's own tasks (its :class:`~.._runtime.TaskOwner`: an object owning the bus may
host them in its task group with ``bus.tasks.hosted_by(group)``), each in a cancel scope of
its own, and a handler that fails is logged and forgotten. A handler that hangs holds up
only itself, and only until ``handler_timeout``; ``drain`` and ``aclose`` never wait longer
than that for it, even if it ignores its cancellation.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from .._runtime import TaskOwner
from .log import handler_name, handler_names, log_event, logger
from .models import ScratchpadEvent

__all__ = ("CLOSE_GRACE", "EventBus", "EventHandler")

#: How long past ``handler_timeout`` ``drain`` and ``aclose`` wait for a cancelled handler
#: to finish its cleanup before they stop waiting for it.
CLOSE_GRACE = 0.5

EventHandler = Callable[[ScratchpadEvent], Awaitable[None] | None]


@dataclass(eq=False, slots=True)
class _Run:
    """One async handler call in flight."""

    handler: EventHandler
    #: ``time.monotonic()`` after which ``drain`` and ``aclose`` stop waiting for it.
    deadline: float
    scope: anyio.CancelScope | None = None
    cancelled: bool = False
    reported: bool = False

    def cancel(self) -> None:
        """Cancel the call; one whose task has not started yet never starts."""
        self.cancelled = True
        if self.scope is not None:
            self.scope.cancel()


class EventBus:
    """Delivers events to subscribers; every event is also logged through ``logging``.

    ``handler_timeout`` bounds each async handler call: it is cancelled after that many
    seconds, and ``drain`` and ``aclose`` never wait longer for it (plus ``CLOSE_GRACE``),
    even if it ignores the cancellation.
    """

    def __init__(self, *, handler_timeout: float = 5.0) -> None:
        self.handler_timeout = handler_timeout
        self._handlers: list[EventHandler] = []
        self.listened = False
        """Whether anything receives events (a handler or a stream): an event that is not
        logged need not even be built when nothing does. An attribute, kept by
        ``subscribe``: read on every write."""
        self._running: set[_Run] = set()
        self.tasks = TaskOwner()
        """Where async handlers run."""
        self._changed: anyio.Event | None = None
        self._streams: set[MemoryObjectSendStream[ScratchpadEvent]] = set()
        self._closed = False

    @property
    def closed(self) -> bool:
        """``True`` once ``aclose`` was called: streams have ended, async handlers no longer
        start."""
        return self._closed

    def subscribe(self, handler: EventHandler) -> Callable[[], None]:
        """Call ``handler`` (sync or async) with every event; returns an unsubscriber."""
        self._handlers.append(handler)
        self.listened = True

        def unsubscribe() -> None:
            if handler in self._handlers:
                self._handlers.remove(handler)
                self.listened = bool(self._handlers)

        return unsubscribe

    def emit(self, event: ScratchpadEvent) -> None:
        """Log ``event`` and hand it to every subscriber. Never raises.

        After ``aclose`` the event is still logged and sync handlers still run (inline, in
        the caller's time), but async handlers are not started: their coroutine is closed
        unawaited (logged at debug level), since nothing would wait for or bound them.
        """
        if event.log_level is not None:  # log_event's first test, a call less when routine
            log_event(event)
        for handler in tuple(self._handlers):
            try:
                outcome = handler(event)
            except Exception:
                logger.exception(
                    "event handler failed handler=%s kind=%s", handler_name(handler), event.kind
                )
                continue
            if outcome is None or not inspect.isawaitable(outcome):
                continue
            if self._closed:
                _discard(outcome)
                logger.debug(
                    "async event handler skipped: the bus is closed handler=%s kind=%s",
                    handler_name(handler),
                    event.kind,
                )
            else:
                self._spawn(handler, outcome)

    @asynccontextmanager
    async def stream(
        self, max_buffer: int = 1000
    ) -> AsyncIterator[MemoryObjectReceiveStream[ScratchpadEvent]]:
        """Iterate over events as they come: ``async with bus.stream() as events:``.

        A consumer that falls ``max_buffer`` events behind loses the newest ones (logged);
        the agent never waits for a slow consumer. The iteration ends when the bus closes
        (at once for a stream opened on a closed bus).
        """
        send, receive = anyio.create_memory_object_stream[ScratchpadEvent](max_buffer)

        def forward(event: ScratchpadEvent) -> None:
            try:
                send.send_nowait(event)
            except anyio.WouldBlock:
                logger.warning("event stream full; event dropped kind=%s", event.kind)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                pass

        if self._closed:
            send.close()
            unsubscribe: Callable[[], None] | None = None
        else:
            self._streams.add(send)
            unsubscribe = self.subscribe(forward)
        try:
            async with receive:
                yield receive
        finally:
            if unsubscribe is not None:
                unsubscribe()
            self._streams.discard(send)
            send.close()

    async def drain(self) -> None:
        """Wait until every async handler started so far has finished.

        Bounded: a handler still running ``handler_timeout`` + ``CLOSE_GRACE`` seconds after
        it started has ignored its cancellation; it is logged as an error and no longer
        waited for.
        """
        stuck = [run for run in await self._wait() if not run.reported]
        for run in stuck:
            run.reported = True
        if stuck:
            logger.error(
                "event handler ignored its cancellation after %gs; no longer waited for "
                "handlers=%s",
                self.handler_timeout,
                handler_names(run.handler for run in stuck),
            )

    async def aclose(self) -> None:
        """Close the bus: end every ``stream()``, wait for the async handlers still running
        (at most ``handler_timeout`` + ``CLOSE_GRACE`` seconds), then cancel and abandon
        those left (logged as an error). Later async handler calls are not started.

        Idempotent; never waits longer than that, even for handlers that ignore their
        cancellation.
        """
        if self._closed:
            await self._wait()
            return
        self._closed = True
        streams, self._streams = self._streams, set()
        for send in streams:
            send.close()
        left = await self._wait()
        if not left:
            return
        for run in left:
            run.cancel()
            self._running.discard(run)
        logger.error(
            "event bus closed; abandoned event handlers that ignored their cancellation "
            "handlers=%s",
            handler_names(run.handler for run in left),
        )
        self._notify()

    async def _wait(self) -> list[_Run]:
        """Wait until no handler runs or every one left is past its deadline; returns
        those left."""
        while self._running:
            now = time.monotonic()
            remaining = max(run.deadline for run in self._running) - now
            if remaining <= 0:
                break
            if self._changed is None:
                self._changed = anyio.Event()
            with anyio.move_on_after(remaining):
                await self._changed.wait()
        return list(self._running)

    def _spawn(self, handler: EventHandler, awaitable: Awaitable[None]) -> None:
        run = _Run(handler, time.monotonic() + self.handler_timeout + CLOSE_GRACE)
        # The task runs no sooner than the next checkpoint, so it is registered in time.
        if self.tasks.start_soon(self._run, run, awaitable):
            self._running.add(run)
        else:
            # emit from sync code or another thread: nothing could ever run the handler
            _discard(awaitable)
            logger.error(
                "async event handler skipped: no event loop runs in this thread handler=%s",
                handler_name(handler),
            )

    async def _run(self, run: _Run, awaitable: Awaitable[None]) -> None:
        try:
            if not run.cancelled:
                with anyio.CancelScope() as run.scope, anyio.fail_after(self.handler_timeout):
                    await awaitable
        except TimeoutError:
            logger.error(
                "event handler timed out handler=%s timeout=%g",
                handler_name(run.handler),
                self.handler_timeout,
            )
        except Exception:
            logger.exception("event handler failed handler=%s", handler_name(run.handler))
        finally:
            _discard(awaitable)  # if it never started
            self._finished(run)

    def _finished(self, run: _Run) -> None:
        if run in self._running:
            self._running.discard(run)
            self._notify()

    def _notify(self) -> None:
        if self._changed is not None:
            self._changed.set()
            self._changed = None


def _discard(awaitable: Awaitable[None]) -> None:
    """Close a coroutine that will never run (no "never awaited" warning)."""
    if inspect.iscoroutine(awaitable):
        awaitable.close()
