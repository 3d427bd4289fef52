"""The server examples of docs/server.md and docs/events.md run and do what they say."""

from __future__ import annotations

import asyncio
import re
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.routing import Route

from noetic_scratchpad import EventBus, UpdateApplied
from noetic_scratchpad.testing import capture_events

from .helpers import served

DOCS = Path(__file__).resolve().parents[2] / "docs"


def python_blocks(name: str) -> list[str]:
    return re.findall(r"```python[^\n]*\n(.*?)```", (DOCS / name).read_text(), re.DOTALL)


@pytest.mark.asyncio
async def test_the_mounting_example_shares_storage_and_bus_with_the_agents(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/server.md: the host's lifespan runs the app's; an agent's tool call shows in
    the API and on the app's bus."""
    fastapi_block, starlette_block = python_blocks("server.md")[:2]
    assert "FastAPI(lifespan=pad.lifespan)" in fastapi_block
    compile(fastapi_block, "server.md", "exec")  # FastAPI itself is not a test dependency
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, Any] = {}
    exec(starlette_block, namespace)
    app, pad = namespace["app"], namespace["pad"]
    async with app.router.lifespan_context(app):
        with capture_events(pad.events) as events:
            result = await app.state.harness.run("Plan the release", thread_id="t1")
        assert result.output == "Noted."
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            scope = (await client.get("/scratchpad/api/scopes/thread/t1")).json()
    assert scope["state"] == {"goal": "Ship v2"}
    (applied,) = events.of(UpdateApplied)
    assert applied.source == "tool"
    assert (tmp_path / "scratchpad.db").exists()


@pytest.mark.asyncio
async def test_the_hand_written_event_stream_subscribes_first_and_ends_with_the_bus() -> None:
    """docs/events.md: the ``EventStream`` example, served by uvicorn."""
    stream_block, watch_block = python_blocks("events.md")[2:4]
    compile(watch_block, "events.md", "exec")
    namespace: dict[str, Any] = {}
    exec(stream_block, namespace)
    bus = EventBus()

    async def endpoint(request: Request) -> Any:
        return namespace["EventStream"](bus, keepalive=0.2)

    app = Starlette(routes=[Route("/events", endpoint)])
    async with served(app) as server, httpx.AsyncClient(base_url=server.url) as client:
        async with client.stream("GET", "/events") as response:
            # The headers are here: the subscription already is.
            bus.emit(UpdateApplied(layer_id="scratchpad", scope_key="t1", source="api", keys=()))
            lines = response.aiter_lines()
            assert await anext(lines) == "event: update_applied"
            assert '"scope_key":"t1"' in await anext(lines)
            seen = [await anext(lines) for _ in range(3)]
            assert ": keep-alive" in seen
            await bus.aclose()
            rest = [line async for line in lines]  # ends: the bus closed
        assert all(line in ("", ": keep-alive") for line in rest)
        # A new stream on the closed bus ends at once, cleanly.
        async with client.stream("GET", "/events") as ended:
            assert [line async for line in ended.aiter_lines()] == []


@pytest.mark.asyncio
async def test_closing_the_bus_when_uvicorn_starts_to_stop_ends_the_streams_at_once() -> None:
    """docs/events.md: the ``main()`` that watches ``server.should_exit``, serving the
    ``EventStream`` example with a client connected, stops in well under a second."""
    stream_block, watch_block = python_blocks("events.md")[2:4]
    bus = EventBus()
    made: list[uvicorn.Server] = []

    class Server(uvicorn.Server):
        def __init__(self, config: uvicorn.Config) -> None:
            super().__init__(config)
            made.append(self)

    def config(app: Any) -> uvicorn.Config:  # a free port, quiet: otherwise as the doc's
        return uvicorn.Config(app, host="127.0.0.1", port=0, log_config=None, ws="none")

    namespace: dict[str, Any] = {}
    exec(stream_block, namespace)

    async def endpoint(request: Request) -> Any:
        return namespace["EventStream"](bus)

    namespace.update(
        uvicorn=SimpleNamespace(Server=Server, Config=config),
        app=Starlette(routes=[Route("/events", endpoint)]),
        harness=SimpleNamespace(events=bus),
    )
    exec(watch_block, namespace)
    main = asyncio.create_task(namespace["main"]())
    for _ in range(500):  # uvicorn's ``started`` is a plain flag: poll it
        if made and made[0].started:
            break
        await asyncio.sleep(0.01)
    port = made[0].servers[0].sockets[0].getsockname()[1]
    async with (
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client,
        client.stream("GET", "/events") as response,
    ):
        bus.emit(UpdateApplied(layer_id="scratchpad", scope_key="t1", source="api", keys=()))
        lines = response.aiter_lines()
        assert await anext(lines) == "event: update_applied"
        assert '"scope_key":"t1"' in await anext(lines)
        begin = time.monotonic()
        made[0].should_exit = True  # what SIGINT does
        await asyncio.wait_for(main, 2)
        assert time.monotonic() - begin < 1.0
        assert [line async for line in lines] in ([], [""])  # ended cleanly
