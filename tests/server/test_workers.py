"""``noetic-scratchpad serve --workers N`` on every shared backend, run as a user runs it:
writes through any worker reach a stream on any other within a second, 200 concurrent
clients lose nothing, and a stop signal ends every worker cleanly."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import pytest_asyncio

from noetic_scratchpad.storage import open_storage
from tests.conftest import backend_url, run_python

from .helpers import AUTH, TOKEN, sse
from .test_serve import Serving, env, serving

pytestmark = pytest.mark.slow
SHARED = ["sqlite", "postgres", "redis"]


@pytest_asyncio.fixture
async def shared_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    """A URL of the backend the test is parametrized with; afterwards, its PostgreSQL table
    dropped or its Redis keys deleted."""
    url = backend_url(request.param, tmp_path)
    yield url
    async with await open_storage(url) as cleanup:
        if hasattr(cleanup, "drop_table"):
            await cleanup.drop_table()
        if hasattr(cleanup, "drop_keys"):
            await cleanup.drop_keys()


def children(parent: int) -> dict[int, bytes]:
    """``parent``'s worker processes (spawn also starts a resource tracker): each pid's
    command line."""
    found = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            cmdline = (stat.parent / "cmdline").read_bytes()
        except OSError:
            continue
        if int(fields[1]) == parent and b"resource_tracker" not in cmdline:
            found[int(stat.parent.name)] = cmdline
    return found


async def stop_cleanly(server: Serving, sig: signal.Signals) -> None:
    seconds, out, err = await server.stop(sig)
    assert server.process.returncode == 0, err
    assert "Traceback" not in err, err
    assert err == "", err
    assert out.strip().endswith("noetic-scratchpad: stopped"), out
    assert seconds < 10, f"exit took {seconds:.2f} s"


@pytest.mark.asyncio
@pytest.mark.parametrize("shared_url", SHARED, indirect=True)
async def test_a_stream_on_one_worker_sees_writes_made_through_the_others(
    shared_url: str,
) -> None:
    url = shared_url  # left behind by neither PostgreSQL nor Redis
    async with serving(
        "--storage", url, "--workers", "3", environ=env(NOETIC_SCRATCHPAD_TOKEN=TOKEN)
    ) as server:
        assert "workers    3 processes" in server.banner
        assert "a token is required" in server.banner
        for _ in range(200):  # started after the banner (the socket queues till then)
            if len(workers := children(server.process.pid)) == 3:
                break
            await asyncio.sleep(0.05)
        assert len(workers) == 3, workers
        for cmdline in workers.values():  # the token came through a pipe, not arguments
            assert TOKEN.encode() not in cmdline
        async with (
            httpx.AsyncClient(base_url=server.url, timeout=10, headers=AUTH) as watcher,
            sse(watcher, "/api/events") as reader,
        ):
            origins: set[str | None] = set()
            slowest = 0.0
            for n in range(40):
                # A new connection each time: the kernel hands it to any worker.
                async with httpx.AsyncClient(
                    base_url=server.url, timeout=10, headers=AUTH
                ) as client:
                    begin = time.monotonic()
                    response = await client.patch(f"/api/scopes/thread/w{n}", json={"n": n})
                    assert response.status_code == 200, response.text
                await reader.wait_for(
                    lambda r, n=n: any(e.data.get("scope_key") == f"w{n}" for e in r.events),
                    1.0,
                )
                slowest = max(slowest, time.monotonic() - begin)
                event = next(e for e in reader.events if e.data.get("scope_key") == f"w{n}")
                assert event.event == "update_applied"
                assert event.data["revision"] == 1
                origins.add(event.data["origin"])
                if len(origins) >= 2 and n >= 9:
                    break
            # The stream's own worker (origin None) and at least one other wrote.
            assert len(origins) >= 2, origins
            assert slowest < 1.0
            await stop_cleanly(server, signal.SIGTERM)
            await reader.wait_for(lambda r: r.ended_cleanly, 5)


@pytest.mark.asyncio
@pytest.mark.parametrize("shared_url", SHARED, indirect=True)
async def test_two_hundred_concurrent_clients_over_two_workers_lose_nothing(
    shared_url: str,
) -> None:
    url = shared_url  # left behind by neither PostgreSQL nor Redis
    clients, scopes = 200, 8
    async with (
        serving("--storage", url, "--workers", "2", environ=env()) as server,
        httpx.AsyncClient(base_url=server.url, timeout=30) as watcher,
        sse(watcher, "/api/events") as reader,
    ):

        async def write(n: int) -> None:
            async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
                response = await client.patch(
                    f"/api/scopes/thread/s{n % scopes}", json={f"c{n}": n}
                )
                assert response.status_code == 200, response.text

        await asyncio.gather(*(write(n) for n in range(clients)))
        async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
            for s in range(scopes):
                body = (await client.get(f"/api/scopes/thread/s{s}")).json()
                wanted = {f"c{n}": n for n in range(s, clients, scopes)}
                assert body["state"] == wanted
                assert body["revision"] == len(wanted)
        # Every write reached the one stream, from whichever worker made it.
        await reader.wait_for(
            lambda r: sum(e.event == "update_applied" for e in r.events) >= clients, 5
        )
        applied = [e for e in reader.events if e.event == "update_applied"]
        assert len(applied) == clients
        revisions = {(e.data["scope_key"], e.data["revision"]) for e in applied}
        assert len(revisions) == clients  # none repeated, none missing
        await stop_cleanly(server, signal.SIGINT)
        await reader.wait_for(lambda r: r.ended_cleanly, 5)


@pytest.mark.asyncio
async def test_workers_refuse_memory_storage() -> None:
    process = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "noetic_scratchpad", "serve", "--workers", "2"),
        *("--storage", "memory://"),
        env=env(),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await asyncio.wait_for(process.communicate(), 30)
    assert process.returncode != 0
    assert "--workers needs storage every worker can open" in err.decode()


@pytest.mark.asyncio
async def test_a_worker_that_dies_stops_the_others_and_fails(tmp_path: Path) -> None:
    url = backend_url("sqlite", tmp_path)
    async with serving("--storage", url, "--workers", "2", environ=env()) as server:
        for _ in range(200):
            if len(workers := children(server.process.pid)) == 2:
                break
            await asyncio.sleep(0.05)
        assert len(workers) == 2, workers
        dead, other = sorted(workers)
        os.kill(dead, signal.SIGKILL)
        _, err = await asyncio.wait_for(server.process.communicate(), 20)
    assert server.process.returncode == 1, err
    assert f"worker {dead} was killed by SIGKILL; stopped the others" in err.decode()
    assert "Traceback" not in err.decode()
    assert other not in children(server.process.pid)


def test_a_workers_stderr_hides_the_storage_urls_secrets(tmp_path: Path) -> None:
    """A worker is a fresh interpreter: it filters its own stderr, as ``main`` does."""
    url = "postgresql://app:s3cret-pw@db.internal/agents"
    script = (
        "import logging\n"
        "from noetic_scratchpad.cli.serve import AppOptions, worker_logging\n"
        f"worker_logging(AppOptions(url={url!r}), 'warning')\n"
        f"logging.getLogger('asyncpg').warning('cannot reach %s', {url!r})\n"
    )
    done = run_python("-c", script, cwd=tmp_path, env=env())
    assert done.returncode == 0, done.stderr
    assert "cannot reach postgresql://app:***@db.internal/agents" in done.stderr
    assert "s3cret-pw" not in done.stderr
