"""The event stream: the bus's events as server-sent events, numbered and replayable.

:class:`EventHub` subscribes once to the app's bus. It numbers every event, keeps the
latest few for replay (``Last-Event-ID``, ``?replay=N``) and hands each to the open
streams whose filter it passes. :class:`EventStream` is the ASGI response of one client.

Written by hand rather than with sse-starlette: the subscription must be in place before
the first byte goes out (a client that sees the headers and then writes must see its own
event), and the stream must end when the *app* says so. sse-starlette learns of a
shutdown by patching uvicorn's signal handling at import time, process-wide; here the
app decides, from its lifespan (see ``app.py``), and nothing global is touched.
"""

from __future__ import annotations

import logging
import secrets
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

from ..events import EventBus, ScratchpadEvent
from .problems import Problem

__all__ = ("EventFilter", "EventHub", "EventStream")

logger = logging.getLogger("noetic_scratchpad.server")

EventFilter = Callable[[ScratchpadEvent], bool]
Numbered = tuple[int, ScratchpadEvent]

#: The longest ``Last-Event-ID`` read: ids are ``{8 hex digits}-{n}``; longer ones are ignored.
MAX_EVENT_ID = 64


@dataclass(eq=False)
class _Subscriber:
    accepts: EventFilter
    send: MemoryObjectSendStream[Numbered]
    dropped: int = field(default=0)


class EventHub:
    """Numbers the bus's events, keeps the last ``recent`` of them, and fans them out.

    Event ids are ``{epoch}-{n}``: ``epoch`` changes every time the hub starts, so a client
    reconnecting to a restarted server with an old ``Last-Event-ID`` gets everything kept
    rather than nothing.
    """

    def __init__(self, *, recent: int, buffer: int) -> None:
        self.buffer = buffer
        self._recent: deque[Numbered] = deque(maxlen=recent)
        self._subscribers: set[_Subscriber] = set()
        self._unsubscribe: Callable[[], None] | None = None
        self._count = 0
        self.epoch = ""
        self.closed = True

    def start(self, bus: EventBus) -> None:
        """Subscribe to ``bus`` and accept streams."""
        self.stop()
        self.epoch = secrets.token_hex(4)
        self._count = 0
        self._recent.clear()
        self._unsubscribe = bus.subscribe(self._on_event)
        self.closed = False

    def stop(self) -> None:
        """End every open stream (each finishes the events it holds), refuse new ones."""
        self.closed = True
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        subscribers, self._subscribers = self._subscribers, set()
        for subscriber in subscribers:
            subscriber.send.close()

    @property
    def open_streams(self) -> int:
        """How many streams are subscribed now."""
        return len(self._subscribers)

    def event_id(self, number: int) -> str:
        return f"{self.epoch}-{number}"

    def _on_event(self, event: ScratchpadEvent) -> None:
        self._count += 1
        numbered = (self._count, event)
        self._recent.append(numbered)
        for subscriber in tuple(self._subscribers):
            if not subscriber.accepts(event):
                continue
            try:
                subscriber.send.send_nowait(numbered)
            except anyio.WouldBlock:
                # Never make the writer wait for a slow reader: drop, and say so.
                subscriber.dropped += 1
                logger.warning(
                    "event stream client too slow; event dropped kind=%s dropped=%d",
                    event.kind,
                    subscriber.dropped,
                )
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                self._subscribers.discard(subscriber)

    def subscribe(
        self, accepts: EventFilter, *, last_event_id: str | None, replay: int
    ) -> tuple[list[Numbered], MemoryObjectReceiveStream[Numbered], Callable[[], None]]:
        """Open a stream: (events to replay first, the live events, the unsubscriber).

        Subscribing and taking the replay happen with no await between them, so no event
        is missed or sent twice. ``last_event_id`` (a reconnecting client's) wins over
        ``replay`` (how many kept events a new client wants first). Everything that can
        fail is done before the subscriber is registered, so a failure leaves none behind;
        the caller calls the unsubscriber in a ``finally``.
        """
        if self.closed:
            raise Problem(
                503,
                "The server is shutting down",
                "Event streams are closed while the server stops; reconnect once it is back.",
                kind="shutting-down",
                headers={"Retry-After": "1"},
            )
        kept = [item for item in self._recent if accepts(item[1])]
        after = self.resume_after(last_event_id)
        if after is not None:
            backlog = [item for item in kept if item[0] > after]
        else:
            backlog = kept[len(kept) - replay :] if replay > 0 else []
        send, receive = anyio.create_memory_object_stream[Numbered](self.buffer)
        subscriber = _Subscriber(accepts, send)
        self._subscribers.add(subscriber)  # last: nothing below can fail

        def unsubscribe() -> None:
            self._subscribers.discard(subscriber)
            send.close()
            receive.close()

        return backlog, receive, unsubscribe

    def resume_after(self, last_event_id: str | None) -> int | None:
        """The number after which a reconnecting client needs events: an id of this run,
        its number; an id of another run, ``0`` (all kept); ``None`` (as if none was sent)
        for no id or one no run issues: malformed, too long, or past this run's last event.
        """
        if not last_event_id or len(last_event_id) > MAX_EVENT_ID:
            return None
        epoch, _, number = last_event_id.strip().rpartition("-")
        # ASCII digits only: int() also reads other scripts' digits, and a long run of
        # them costs time (and raises past 4,300); the length is bounded above.
        if not epoch or not number.isascii() or not number.isdigit():
            return None
        if epoch != self.epoch:
            return 0
        after = int(number)
        return after if after <= self._count else None


class EventStream(Response):
    """The response of one ``GET .../events``: subscribe, then headers, then events.

    Ends when the client goes away, or when the hub stops (the app is shutting down), in
    which case the response is finished properly: the client sees a clean end of stream,
    and the server has no open response to wait for.
    """

    def __init__(
        self,
        hub: EventHub,
        accepts: EventFilter,
        *,
        keepalive: float,
        last_event_id: str | None,
        replay: int,
    ) -> None:
        super().__init__(media_type="text/event-stream")
        self.hub = hub
        self.accepts = accepts
        self.keepalive = keepalive
        self.last_event_id = last_event_id
        self.replay = replay

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # Subscribed here, before any byte is sent, and unsubscribed by the ``finally``
        # whatever happens after: no path leaves a subscription behind.
        backlog, events, unsubscribe = self.hub.subscribe(
            self.accepts, last_event_id=self.last_event_id, replay=self.replay
        )
        try:
            await send(
                {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": [
                        (b"content-type", b"text/event-stream; charset=utf-8"),
                        (b"cache-control", b"no-store"),
                        (b"x-accel-buffering", b"no"),  # nginx: do not buffer the stream
                    ],
                }
            )
            # A reconnect delay for EventSource, and a first byte for proxies to pass on.
            first = b"retry: 2000\n: stream open\n\n" + b"".join(map(self._frame, backlog))
            await _body(send, first)
            async with anyio.create_task_group() as group:
                group.start_soon(_until_disconnect, receive, group.cancel_scope)
                await self._pump(send, events)
                group.cancel_scope.cancel()
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except OSError:
            pass  # the client went away while we were writing to it
        finally:
            unsubscribe()

    async def _pump(self, send: Send, events: MemoryObjectReceiveStream[Numbered]) -> None:
        while True:
            try:
                with anyio.fail_after(self.keepalive):
                    item = await events.receive()
            except TimeoutError:
                await _body(send, b": keep-alive\n\n")
                continue
            except anyio.EndOfStream:
                return
            batch = [item]
            while len(batch) < 64:  # what else is waiting goes out in the same write
                try:
                    batch.append(events.receive_nowait())
                except (anyio.WouldBlock, anyio.EndOfStream):
                    break
            await _body(send, b"".join(map(self._frame, batch)))

    def _frame(self, item: Numbered) -> bytes:
        number, event = item
        return (
            f"id: {self.hub.event_id(number)}\nevent: {event.kind}\ndata: ".encode()
            + event.model_dump_json().encode()
            + b"\n\n"
        )


async def _body(send: Send, chunk: bytes) -> None:
    await send({"type": "http.response.body", "body": chunk, "more_body": True})


async def _until_disconnect(receive: Receive, scope: anyio.CancelScope) -> None:
    while True:
        message: Message = await receive()
        if message["type"] == "http.disconnect":
            scope.cancel()
            return
