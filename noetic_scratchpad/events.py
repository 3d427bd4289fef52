"""Typed, immutable diagnostic events and the bus that delivers them.

``EventBus.emit`` is synchronous and never raises: sync handlers run inline, async handlers
run in background tasks, and a handler that fails is logged and forgotten. A handler that
hangs holds up only itself, and only until ``handler_timeout``.
"""

from __future__ import annotations

import asyncio
import inspect
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, ClassVar, Literal

import anyio
import structlog
from anyio.streams.memory import MemoryObjectReceiveStream
from pydantic import BaseModel, ConfigDict, Field

__all__ = (
    "EventBus",
    "EventHandler",
    "ScratchpadEvent",
    "StateDiscarded",
    "UpdateApplied",
    "UpdateRejected",
    "ViewTruncated",
)

logger = structlog.get_logger("noetic_scratchpad")

WriteSource = Literal["tool", "store", "api"]


class ScratchpadEvent(BaseModel):
    """Base of every event: which layer, which scope, when (Unix seconds)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    #: The log level the event is logged at; ``None`` means not logged.
    log_level: ClassVar[str | None] = "warning"

    kind: str
    layer_id: str
    scope_key: str
    execution_id: str | None = None
    at: float = Field(default_factory=time.time)


class UpdateApplied(ScratchpadEvent):
    """An update was merged and stored. ``keys`` are the top-level keys it wrote."""

    log_level: ClassVar[str | None] = None  # routine, and on the hot path

    kind: Literal["update_applied"] = "update_applied"
    source: WriteSource
    keys: tuple[str, ...]
    call_id: str | None = None


class UpdateRejected(ScratchpadEvent):
    """An update was dropped. ``reason`` is a short word.

    For every reason but ``"timeout"`` and ``"unconfirmed"`` nothing changed.
    ``"timeout"`` means storage did not answer within ``write_timeout``, ``"unconfirmed"``
    that contact with it was lost while the write committed: the write may have landed,
    and repeating it is harmless.
    """

    kind: Literal["update_rejected"] = "update_rejected"
    hook: WriteSource
    reason: str
    message: str
    errors: tuple[dict[str, Any], ...] = ()
    call_id: str | None = None


class StateDiscarded(ScratchpadEvent):
    """Persisted state failed the schema at init (or a refresh) and was replaced by the
    template or {}."""

    kind: Literal["state_discarded"] = "state_discarded"
    reason: str
    errors: tuple[dict[str, Any], ...] = ()


class ViewTruncated(ScratchpadEvent):
    """A recall was cut to fit its budget; storage still holds everything."""

    kind: Literal["view_truncated"] = "view_truncated"
    budget: int
    total_tokens: int
    omitted_tokens: int


EventHandler = Callable[[ScratchpadEvent], Awaitable[None] | None]


class EventBus:
    """Delivers events to subscribers; every event is also logged through structlog."""

    def __init__(self, *, handler_timeout: float = 5.0) -> None:
        self.handler_timeout = handler_timeout
        self._handlers: list[EventHandler] = []
        self._pending = 0
        self._idle: anyio.Event | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    def subscribe(self, handler: EventHandler) -> Callable[[], None]:
        """Call ``handler`` (sync or async) with every event; returns an unsubscriber."""
        self._handlers.append(handler)

        def unsubscribe() -> None:
            if handler in self._handlers:
                self._handlers.remove(handler)

        return unsubscribe

    def emit(self, event: ScratchpadEvent) -> None:
        """Log ``event`` and hand it to every subscriber. Never raises."""
        if event.log_level is not None:
            logger.log(_LEVELS[event.log_level], event.kind, **event.model_dump(exclude={"kind"}))
        for handler in tuple(self._handlers):
            try:
                outcome = handler(event)
            except Exception:
                logger.exception("event handler failed", handler=repr(handler), kind=event.kind)
                continue
            if outcome is not None and inspect.isawaitable(outcome):
                self._spawn(handler, outcome)

    @asynccontextmanager
    async def stream(
        self, max_buffer: int = 1000
    ) -> AsyncIterator[MemoryObjectReceiveStream[ScratchpadEvent]]:
        """Iterate over events as they come: ``async with bus.stream() as events:``.

        A consumer that falls ``max_buffer`` events behind loses the newest ones (logged);
        the agent never waits for a slow consumer.
        """
        send, receive = anyio.create_memory_object_stream[ScratchpadEvent](max_buffer)

        def forward(event: ScratchpadEvent) -> None:
            try:
                send.send_nowait(event)
            except anyio.WouldBlock:
                logger.warning("event stream full; event dropped", kind=event.kind)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                pass

        unsubscribe = self.subscribe(forward)
        try:
            async with receive:
                yield receive
        finally:
            unsubscribe()
            send.close()

    async def drain(self) -> None:
        """Wait until every async handler started so far has finished."""
        while self._pending:
            if self._idle is None:
                self._idle = anyio.Event()
            await self._idle.wait()

    def _spawn(self, handler: EventHandler, awaitable: Awaitable[None]) -> None:
        self._pending += 1

        async def run() -> None:
            try:
                with anyio.fail_after(self.handler_timeout):
                    await awaitable
            except TimeoutError:
                logger.error(
                    "event handler timed out", handler=repr(handler), timeout=self.handler_timeout
                )
            except Exception:
                logger.exception("event handler failed", handler=repr(handler))
            finally:
                self._finished()

        if not _start_background(run, self._tasks):
            # emit from sync code or another thread: nothing could ever run the handler
            if inspect.iscoroutine(awaitable):
                awaitable.close()
            logger.error(
                "async event handler skipped: no event loop runs in this thread",
                handler=repr(handler),
            )
            self._finished()

    def _finished(self) -> None:
        self._pending -= 1
        if not self._pending and self._idle is not None:
            self._idle.set()
            self._idle = None


def _start_background(fn: Callable[[], Awaitable[None]], tasks: set[asyncio.Task[None]]) -> bool:
    """Run ``fn`` in a task of its own on the running event loop (asyncio or trio).

    Returns ``False`` when no event loop runs in this thread.
    """
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # not asyncio: the only other loop anyio runs on is trio
        trio = sys.modules.get("trio")  # never imported here: it is an optional dependency
        if trio is None:
            return False
        try:
            trio.lowlevel.spawn_system_task(fn)
        except RuntimeError:  # not inside trio either
            return False
        return True
    task: asyncio.Task[None] = loop.create_task(fn())  # type: ignore[arg-type]  # a coroutine
    tasks.add(task)  # asyncio keeps only weak references to tasks
    task.add_done_callback(tasks.discard)
    return True


_LEVELS = {"debug": 10, "info": 20, "warning": 30, "error": 40}
