"""``GET .../events``: server-sent events of the app's bus, subscribed before the first
byte, kept alive, replayable, and ended cleanly and quickly when the server shuts down."""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.routing import Mount
from starlette.types import Message

from noetic_scratchpad import UpdateApplied, scratchpad
from noetic_scratchpad import storage as storage_registry
from noetic_scratchpad.events import EventBus
from noetic_scratchpad.server import ScratchpadApp, create_app
from noetic_scratchpad.server.stream import EventHub, EventStream
from noetic_scratchpad.storage import MemoryStorage

from .helpers import FakeClock, SseReader, TaskNotes, served, sse


class RecordingStorage(MemoryStorage):
    """``recording://``: memory storage that remembers being closed."""

    opened: list[RecordingStorage] = []  # noqa: RUF012 - shared on purpose

    def __init__(self) -> None:
        super().__init__()
        self.closed = False
        RecordingStorage.opened.append(self)

    async def aclose(self) -> None:
        self.closed = True
        await super().aclose()


async def _open_recording(url: str, **options: Any) -> RecordingStorage:
    return RecordingStorage()


@pytest.fixture
def recording_scheme(monkeypatch: pytest.MonkeyPatch) -> None:
    """``recording://`` for this test only: a scheme left registered would show up in every
    later test's list of known schemes."""
    monkeypatch.setitem(storage_registry._REGISTERED, "recording", _open_recording)
    RecordingStorage.opened.clear()


@asynccontextmanager
async def client_of(url: str) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=url, timeout=10) as client:
        yield client


def applied(scope_key: str) -> UpdateApplied:
    return UpdateApplied(layer_id="scratchpad", scope_key=scope_key, source="api", keys=("a",))


@pytest.mark.asyncio
async def test_the_stream_is_subscribed_before_the_headers_go_out() -> None:
    """An event emitted the instant the response starts (as a client would cause on seeing
    the headers) is in the stream: the subscription came first."""
    bus = EventBus()
    hub = EventHub(recent=10, buffer=10)
    hub.start(bus)
    stream = EventStream(hub, lambda event: True, keepalive=30, last_event_id=None, replay=0)
    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)
        if message["type"] == "http.response.start":
            bus.emit(applied("t1"))
        elif message.get("body", b"").count(b"event: update_applied") and len(sent) < 4:
            hub.stop()  # got it: end the stream

    async def receive() -> Message:
        await asyncio.sleep(3600)
        raise AssertionError("unreachable")

    await asyncio.wait_for(stream({"type": "http"}, receive, send), 5)
    body = b"".join(message.get("body", b"") for message in sent)
    assert b"event: update_applied" in body
    assert b'"scope_key":"t1"' in body
    assert sent[-1] == {"type": "http.response.body", "body": b"", "more_body": False}


@pytest.mark.asyncio
async def test_events_reach_every_stream_and_a_scope_stream_only_its_own() -> None:
    pad = create_app("memory://", layers=[scratchpad(schema=TaskNotes)], keepalive=0.2)
    async with served(pad) as server, client_of(server.url) as client:
        async with (
            sse(client, "/api/events") as everything,
            sse(client, "/api/scopes/thread/t1/events") as only_t1,
        ):
            await client.patch("/api/scopes/thread/t2", json={"currentGoal": "other"})
            await client.patch("/api/scopes/thread/t1", json={"currentGoal": "mine"})
            await client.patch("/api/scopes/thread/t1", json={"blockers": "not a list"})
            await everything.wait_for(lambda r: len(r.events) == 3)
            await only_t1.wait_for(lambda r: len(r.events) == 2)
            # Quiet now: the keep-alive comments keep proxies from closing the stream.
            await only_t1.wait_for(lambda r: "keep-alive" in r.comments, 2)
        kinds = [(e.event, e.data["scope_key"]) for e in everything.events]
        assert kinds == [
            ("update_applied", "t2"),
            ("update_applied", "t1"),
            ("update_rejected", "t1"),
        ]
        assert [e.event for e in only_t1.events] == ["update_applied", "update_rejected"]
        rejected = only_t1.events[1].data
        assert (rejected["hook"], rejected["reason"]) == ("api", "schema")
        assert rejected["errors"][0]["loc"] == ["blockers"]
        assert only_t1.events[0].data["source"] == "api"


@pytest.mark.asyncio
async def test_a_reset_is_an_event_of_its_scope() -> None:
    pad = create_app("memory://", layers=[scratchpad(schema=TaskNotes)], keepalive=0.2)
    async with served(pad) as server, client_of(server.url) as client:
        async with sse(client, "/api/scopes/thread/t1/events") as only_t1:
            await client.patch("/api/scopes/thread/t1", json={"currentGoal": "mine"})
            assert (await client.delete("/api/scopes/thread/t1")).status_code == 204
            assert (await client.delete("/api/scopes/thread/t1")).status_code == 404
            await only_t1.wait_for(lambda r: len(r.events) == 2)
        assert [e.event for e in only_t1.events] == ["update_applied", "scope_reset"]
        reset = only_t1.events[1].data
        assert (reset["layer_id"], reset["scope_key"], reset["scope"]) == (
            "scratchpad",
            "t1",
            "thread",
        )
        assert reset.get("origin") is None  # this process's own


@pytest.mark.asyncio
async def test_a_thread_and_a_resource_of_one_id_have_streams_of_their_own() -> None:
    """The filter takes the kind of scope too; an event that does not say its kind (from
    code that does not) goes to both."""
    pad = create_app("memory://", keepalive=0.2)
    async with served(pad) as server, client_of(server.url) as client:
        async with (
            sse(client, "/api/scopes/thread/u1/events") as thread,
            sse(client, "/api/scopes/resource/u1/events") as resource,
        ):
            await client.patch("/api/scopes/resource/u1", json={"by": "resource"})
            await client.patch("/api/scopes/thread/u1", json={"by": "thread"})
            pad.events.emit(applied("u1"))  # no kind of scope
            await thread.wait_for(lambda r: len(r.events) == 2)
            await resource.wait_for(lambda r: len(r.events) == 2)
        assert [e.data["scope"] for e in thread.events] == ["thread", None]
        assert [e.data["scope"] for e in resource.events] == ["resource", None]
        assert thread.events[0].data["revision"] == 1


@pytest.mark.asyncio
async def test_replay_and_last_event_id_resume_without_gaps() -> None:
    pad = create_app("memory://", recent_events=50)
    async with served(pad) as server, client_of(server.url) as client:
        for n in range(4):
            await client.patch(f"/api/scopes/thread/t{n}", json={"n": n})
        async with sse(client, "/api/events?replay=2") as replayed:
            await replayed.wait_for(lambda r: len(r.events) == 2)
        assert [e.data["scope_key"] for e in replayed.events] == ["t2", "t3"]
        first_id = replayed.events[0].id
        assert first_id is not None
        headers = {"Last-Event-ID": first_id}
        async with sse(client, "/api/events", headers) as resumed:
            await client.patch("/api/scopes/thread/t4", json={"n": 4})
            await resumed.wait_for(lambda r: len(r.events) == 2)
        assert [e.data["scope_key"] for e in resumed.events] == ["t3", "t4"]
        stale = {"Last-Event-ID": "another-epoch-3"}  # a restarted server: all it kept
        async with sse(client, "/api/events", stale) as restarted:
            await restarted.wait_for(lambda r: len(r.events) == 5)


async def _until_no_stream_is_open(pad: ScratchpadApp, seconds: float = 5) -> int:
    """Wait for the server to notice the clients are gone; the streams still open then."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while pad.open_streams and loop.time() < deadline:  # noqa: ASYNC110 - a count, no event
        await asyncio.sleep(0.01)
    return pad.open_streams


@pytest.mark.asyncio
async def test_an_unusable_last_event_id_is_ignored_and_leaks_no_subscription() -> None:
    """An id of this run with 5,000 digits once failed int() (a 500) after the stream had
    subscribed, and the subscription stayed for ever. An id this run never issued (too
    long, past the last event, not digits) is ignored: the stream starts as without it."""
    pad = create_app("memory://", recent_events=50)
    async with served(pad) as server, client_of(server.url) as client:
        await client.patch("/api/scopes/thread/t1", json={"n": 1})
        async with sse(client, "/api/events?replay=1") as first:
            await first.wait_for(lambda r: len(r.events) == 1)
        event_id = first.events[0].id
        assert event_id is not None
        epoch = event_id.rpartition("-")[0]
        answers = []
        for digits in ["9" * 5000, "1" + "0" * 25, "2", "\u0663", "1e3", "", "-1"] * 3:
            headers = {"Last-Event-ID": f"{epoch}-{digits}".encode()}
            async with client.stream("GET", "/api/events?replay=1", headers=headers) as response:
                # The replay goes out in the stream's first write, with its opening comment.
                first = await anext(response.aiter_bytes())
                answers.append((response.status_code, b'"scope_key":"t1"' in first))
        # Each as without the header: ?replay=1 sends the last event.
        assert answers == [(200, True)] * 21
        assert await _until_no_stream_is_open(pad) == 0


async def _stalled_client(pad: ScratchpadApp, opened: asyncio.Event) -> None:
    """A stream client that takes the first bytes and then reads nothing more."""
    scope = {"type": "http", "method": "GET", "path": "/api/events", "raw_path": b"/api/events"}
    scope |= {"query_string": b"", "headers": [], "client": ("127.0.0.1", 50000)}

    async def receive() -> Message:
        await asyncio.sleep(3600)
        raise AssertionError("unreachable")

    async def send(message: Message) -> None:
        if message["type"] == "http.response.body":
            if opened.is_set():
                await asyncio.sleep(3600)  # stalled: its socket takes nothing more
            opened.set()

    await pad(scope, receive, send)


_DROPPED = re.compile(r"(\d+) event\(s\) dropped since the last report \((\d+) in all\)")


@pytest.mark.asyncio
async def test_stalled_clients_are_reported_with_counts_not_once_per_event(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Twenty clients that stop reading, 3,000 events: each client takes one, its buffer
    (1,000) fills, the other 1,999 are dropped. Each client is one warning when it starts
    dropping and one when it leaves, with the counts (it was one per event and client)."""
    pad = create_app("memory://")
    async with pad.lifespan():
        opened = [asyncio.Event() for _ in range(20)]
        clients = [asyncio.create_task(_stalled_client(pad, event)) for event in opened]
        for event in opened:
            await asyncio.wait_for(event.wait(), 5)
        with caplog.at_level(logging.WARNING, logger="noetic_scratchpad.server"):
            for n in range(3000):
                pad.events.emit(applied(f"t{n}"))
            for client in clients:
                client.cancel()
            await asyncio.gather(*clients, return_exceptions=True)
    lines = [r.getMessage() for r in caplog.records if r.name == "noetic_scratchpad.server"]
    assert len(lines) == 40, lines[:3]
    counts = [tuple(map(int, found.groups())) for line in lines if (found := _DROPPED.search(line))]
    assert len(counts) == 40
    assert sum(since for since, _ in counts) == 20 * 1999
    assert sorted(total for _, total in counts) == [1] * 20 + [1999] * 20
    assert sum("left" in line for line in lines) == 20


def test_a_stalled_client_is_reported_once_per_interval() -> None:
    """A minute of 100 events a second to a client that reads none: a warning at its first
    drop and at the first drop after each interval (10 s), then one when it leaves; the
    counts add up to every event dropped."""
    clock = FakeClock()
    bus = EventBus()
    hub = EventHub(recent=10, buffer=10, report_interval=10, clock=clock)
    hub.start(bus)
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    logger = logging.getLogger("noetic_scratchpad.server")
    logger.addHandler(handler)
    try:
        _, _, unsubscribe = hub.subscribe(
            lambda event: True, last_event_id=None, replay=0, client="127.0.0.1:5 /api/events"
        )
        for _ in range(60):
            for _ in range(100):
                bus.emit(applied("t1"))
            clock.now += 1
        unsubscribe()
    finally:
        logger.removeHandler(handler)
    lines = [record.getMessage() for record in records if record.levelno == logging.WARNING]
    counts = [tuple(map(int, found.groups())) for line in lines if (found := _DROPPED.search(line))]
    # 10 events fill the buffer, the other 5,990 are dropped: reported at the first drop,
    # then at the first drop of seconds 10, 20, ... 50 (1,000 since the one before), and
    # the rest when the client leaves.
    expected = [(1, 1), (990, 991), (1000, 1991), (1000, 2991), (1000, 3991), (1000, 4991)]
    assert counts == [*expected, (999, 5990)], lines
    assert all("127.0.0.1:5 /api/events" in line for line in lines)
    assert "left" in lines[-1]


@pytest.mark.asyncio
async def test_close_streams_ends_them_and_refuses_new_ones() -> None:
    pad = create_app("memory://")
    async with served(pad) as server, client_of(server.url) as client:
        async with sse(client, "/api/events") as reader:
            pad.close_streams()
            await reader.wait_for(lambda r: r.ended_cleanly, 2)
        refused = await client.get("/api/events")
        assert refused.status_code == 503
        assert refused.json()["type"].endswith(":shutting-down")


async def _stop_with_clients(
    app: Starlette | ScratchpadApp, pad: ScratchpadApp, prefix: str
) -> None:
    """Two connected stream clients, then a shutdown as SIGINT starts it: the server is
    gone within a second, both streams ended cleanly, the app's storage is closed."""
    RecordingStorage.opened.clear()
    async with served(app) as server, client_of(server.url) as client:
        readers: list[SseReader] = []
        async with (
            sse(client, f"{prefix}/api/events") as everything,
            sse(client, f"{prefix}/api/scopes/thread/t1/events") as one,
        ):
            readers = [everything, one]
            await client.patch(f"{prefix}/api/scopes/thread/t1", json={"a": 1})
            await one.wait_for(lambda r: len(r.events) == 1)
            seconds = await server.stop()
            for reader in readers:
                await reader.wait_for(lambda r: r.ended_cleanly, 1)
    assert seconds < 1.0, f"shutdown took {seconds:.2f} s with streams open"
    (storage,) = RecordingStorage.opened
    assert storage.closed
    assert pad.events.closed  # the app's own bus, closed with it


@pytest.mark.asyncio
@pytest.mark.usefixtures("recording_scheme")
async def test_shutdown_with_connected_clients_is_quick_and_clean() -> None:
    pad = create_app("recording://")
    await _stop_with_clients(pad, pad, "")


@pytest.mark.asyncio
@pytest.mark.usefixtures("recording_scheme")
async def test_shutdown_of_a_host_app_with_the_app_mounted_in_it() -> None:
    """As FastAPI(lifespan=...) with app.mount(...): the host's server, the host's lifespan."""
    pad = create_app("recording://")

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with pad.lifespan(app):
            yield

    host = Starlette(routes=[Mount("/scratchpad", app=pad)], lifespan=lifespan)
    await _stop_with_clients(host, pad, "/scratchpad")
