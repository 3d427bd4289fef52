"""What the server tests share: a schema, an in-process client, a real uvicorn server, and
a reader of server-sent events."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx
import uvicorn
from pydantic import BaseModel, ConfigDict
from starlette.types import ASGIApp

from noetic_scratchpad.server import ScratchpadApp

TOKEN = "test-token-0123456789abcdef"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


class TaskNotes(BaseModel):
    model_config = ConfigDict(extra="forbid")

    currentGoal: str
    completedSteps: list[str] = []
    blockers: list[str] = []


class FakeClock:
    """Monotonic seconds that move only when the test moves them."""

    def __init__(self) -> None:
        self.now = 5000.0

    def __call__(self) -> float:
        return self.now


@asynccontextmanager
async def api_client(
    pad: ScratchpadApp, headers: dict[str, str] | None = None
) -> AsyncIterator[httpx.AsyncClient]:
    """An in-process client of ``pad``, its lifespan running (for non-streaming calls)."""
    async with pad.lifespan():
        transport = httpx.ASGITransport(app=pad)
        async with httpx.AsyncClient(
            transport=transport, base_url="http://127.0.0.1", headers=headers
        ) as client:
            yield client


@dataclass
class Served:
    """A real uvicorn server on a free loopback port, in this event loop."""

    server: uvicorn.Server
    task: asyncio.Task[None]
    url: str

    async def stop(self) -> float:
        """Ask it to stop as a signal would; the seconds until it has stopped."""
        loop = asyncio.get_running_loop()
        begin = loop.time()
        self.server.should_exit = True
        await asyncio.wait_for(asyncio.shield(self.task), 10)
        return loop.time() - begin


def free_socket() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    sock.setblocking(False)
    return sock


@asynccontextmanager
async def served(app: ASGIApp) -> AsyncIterator[Served]:
    """``app`` under uvicorn on 127.0.0.1 (lifespan on, as a user would run it). Runs in the
    main thread, so uvicorn installs its signal handlers and the app can find the server."""
    sock = free_socket()
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_config=None, lifespan="on", ws="none")
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        for _ in range(500):
            if server.started or task.done():
                break
            await asyncio.sleep(0.01)
        if task.done():
            task.result()
        assert server.started, "uvicorn did not start within 5 s"
        yield Served(server, task, f"http://127.0.0.1:{port}")
    finally:
        if not task.done():
            server.should_exit = True
            await asyncio.wait_for(task, 10)
        sock.close()


@dataclass
class SseEvent:
    event: str
    data: Any
    id: str | None


@dataclass
class SseReader:
    """Reads one event stream in a task: ``comments``, ``events``, and how it ended."""

    response: httpx.Response
    events: list[SseEvent] = field(default_factory=list)
    comments: list[str] = field(default_factory=list)
    ended_cleanly: bool = False
    error: BaseException | None = None
    _changed: asyncio.Event = field(default_factory=asyncio.Event)

    async def run(self) -> None:
        fields: dict[str, str] = {}
        try:
            async for line in self.response.aiter_lines():
                if line.startswith(":"):
                    self.comments.append(line[1:].strip())
                elif line:
                    name, _, value = line.partition(":")
                    fields[name] = value.removeprefix(" ")
                elif "data" in fields:
                    self.events.append(
                        SseEvent(
                            fields.get("event", "message"),
                            json.loads(fields["data"]),
                            fields.get("id"),
                        )
                    )
                    fields = {}
                else:
                    fields = {}
                self._changed.set()
            self.ended_cleanly = True
        except BaseException as exc:  # recorded for the test to look at
            self.error = exc
        finally:
            self._changed.set()

    async def wait_for(self, condition: Callable[[SseReader], bool], seconds: float = 5) -> None:
        async with asyncio.timeout(seconds):
            while not condition(self):
                self._changed.clear()
                if self.ended_cleanly or self.error is not None:
                    assert condition(self), f"the stream ended first (error: {self.error!r})"
                await self._changed.wait()


@asynccontextmanager
async def sse(
    client: httpx.AsyncClient, url: str, headers: dict[str, str] | None = None
) -> AsyncIterator[SseReader]:
    """An open event stream, read in the background; yields once its first bytes came."""
    async with client.stream("GET", url, headers=headers) as response:
        assert response.status_code == 200, await response.aread()
        assert response.headers["content-type"].startswith("text/event-stream")
        reader = SseReader(response)
        task = asyncio.create_task(reader.run())
        try:
            await reader.wait_for(lambda r: "stream open" in r.comments)
            yield reader
        finally:
            if not task.done():
                task.cancel()
            await asyncio.gather(task, return_exceptions=True)
