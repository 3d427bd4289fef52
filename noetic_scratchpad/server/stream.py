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
import time
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
#: How often a client too slow for its events is reported, in seconds: once per interval,
#: with the count dropped since the last report, rather than a line per event dropped.
REPORT_INTERVAL = 10.0


@dataclass(eq=False)
class _Subscriber:
    accepts: EventFilter
    send: MemoryObjectSendStream[Numbered]
    client: str
    dropped: int = field(default=0)
    """Events dropped in all."""
    unreported: int = field(default=0)
    """Events dropped since the last report."""
    reported_at: float | None = field(default=None)


class EventHub:
    """Numbers the bus's events, keeps the last ``recent`` of them, and fans them out.

    Event ids are ``{epoch}-{n}``: ``epoch`` changes every time the hub starts, so a client
    reconnecting to a restarted server with an old ``Last-Event-ID`` gets everything kept
    rather than nothing.
    """

    def __init__(
        self,
        *,
        recent: int,
        buffer: int,
        report_interval: float = REPORT_INTERVAL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.buffer = buffer
        self.report_interval = report_interval
        self.clock = clock
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
                # Never make the writer wait for a slow reader: drop, and say so, once per
                # interval (a stalled client would otherwise be a line per event).
                subscriber.dropped += 1
                subscriber.unreported += 1
                now = self.clock()
                last = subscriber.reported_at
                if last is None or now - last >= self.report_interval:
                    subscriber.reported_at = now
                    _report(subscriber, "is too slow")
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                self._subscribers.discard(subscriber)

    def subscribe(
        self,
        accepts: EventFilter,
        *,
        last_event_id: str | None,
        replay: int,
        client: str = "(unnamed)",
    ) -> tuple[list[Numbered], MemoryObjectReceiveStream[Numbered], Callable[[], None]]:
        """Open a stream: (events to replay first, the live events, the unsubscriber).
        ``client`` names it in the log.

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
        after = self._resume_after(last_event_id)
        if after is not None:
            backlog = [item for item in kept if item[0] > after]
        else:
            backlog = kept[len(kept) - replay :] if replay > 0 else []
        send, receive = anyio.create_memory_object_stream[Numbered](self.buffer)
        subscriber = _Subscriber(accepts, send, client)
        self._subscribers.add(subscriber)  # last: nothing below can fail

        def unsubscribe() -> None:
            self._subscribers.discard(subscriber)
            send.close()
            receive.close()
            if subscriber.dropped:
                _report(subscriber, "left")

        return backlog, receive, unsubscribe

    def _resume_after(self, last_event_id: str | None) -> int | None:
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


def _report(subscriber: _Subscriber, what: str) -> None:
    logger.warning(
        "event stream client %s %s: %d event(s) dropped since the last report (%d in all)",
        subscriber.client,
        what,
        subscriber.unreported,
        subscriber.dropped,
    )
    subscriber.unreported = 0


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
        allowed: Callable[[], bool] | None = None,
    ) -> None:
        super().__init__(media_type="text/event-stream")
        self.hub = hub
        self.accepts = accepts
        self.keepalive = keepalive
        self.last_event_id = last_event_id
        self.replay = replay
        self.allowed = allowed
        """Whether the client may still be served, asked before each write (``None``:
        always): a stream opened with a session's cookie ends with the session."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # Subscribed here, before any byte is sent, and unsubscribed by the ``finally``
        # whatever happens after: no path leaves a subscription behind.
        backlog, events, unsubscribe = self.hub.subscribe(
            self.accepts,
            last_event_id=self.last_event_id,
            replay=self.replay,
            client=_client(scope),
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
            item: Numbered | None = None
            try:
                with anyio.fail_after(self.keepalive):
                    item = await events.receive()
            except TimeoutError:
                pass
            except anyio.EndOfStream:
                return
            if self.allowed is not None and not self.allowed():
                return
            if item is None:
                await _body(send, b": keep-alive\n\n")
                continue
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


def _client(scope: Scope) -> str:
    """The client's address and the stream's path, as the log names a stream."""
    client = scope.get("client")
    address = f"{client[0]}:{client[1]}" if client else "(unknown address)"
    path = str(scope.get("path", ""))
    return f"{address} {path if path.isprintable() else ascii(path)}"  # one log line


async def _body(send: Send, chunk: bytes) -> None:
    await send({"type": "http.response.body", "body": chunk, "more_body": True})


async def _until_disconnect(receive: Receive, scope: anyio.CancelScope) -> None:
    while True:
        message: Message = await receive()
        if message["type"] == "http.disconnect":
            scope.cancel()
            return
