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
        ``replay`` (how many kept events a new client wants first).
        """
        if self.closed:
            raise Problem(
                503,
                "The server is shutting down",
                "Event streams are closed while the server stops; reconnect once it is back.",
                kind="shutting-down",
                headers={"Retry-After": "1"},
            )
        send, receive = anyio.create_memory_object_stream[Numbered](self.buffer)
        subscriber = _Subscriber(accepts, send)
        self._subscribers.add(subscriber)
        kept = [item for item in self._recent if accepts(item[1])]
        after = self._replay_after(last_event_id)
        if after is not None:
            backlog = [item for item in kept if item[0] > after]
        else:
            backlog = kept[len(kept) - replay :] if replay > 0 else []

        def unsubscribe() -> None:
            self._subscribers.discard(subscriber)
            send.close()

        return backlog, receive, unsubscribe

    def _replay_after(self, last_event_id: str | None) -> int | None:
        """The number after which a reconnecting client needs events; ``0`` (all kept)
        for an id of another epoch; ``None`` without a usable id."""
        if not last_event_id:
            return None
        epoch, _, number = last_event_id.strip().rpartition("-")
        if not number.isdecimal() or not epoch:
            return None
        return int(number) if epoch == self.epoch else 0


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
        self.keepalive = keepalive
        # Subscribed here, when the endpoint builds the response: before any byte is sent.
        self.backlog, self.events, self.unsubscribe = hub.subscribe(
            accepts, last_event_id=last_event_id, replay=replay
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
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
            first = b"retry: 2000\n: stream open\n\n" + b"".join(map(self._frame, self.backlog))
            await _body(send, first)
            async with anyio.create_task_group() as group:
                group.start_soon(_until_disconnect, receive, group.cancel_scope)
                await self._pump(send)
                group.cancel_scope.cancel()
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except OSError:
            pass  # the client went away while we were writing to it
        finally:
            self.unsubscribe()
            self.events.close()

    async def _pump(self, send: Send) -> None:
        events = self.events
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
