"""``noetic-scratchpad serve``, run as a user runs it: a subprocess on a free port."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import socket
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from .helpers import AUTH, TOKEN, sse

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Serving:
    process: asyncio.subprocess.Process
    url: str
    banner: str

    async def stop(self, sig: signal.Signals) -> tuple[float, str, str]:
        """Send ``sig``; (seconds until the process exited, its stdout, its stderr)."""
        begin = time.monotonic()
        self.process.send_signal(sig)
        out, err = await asyncio.wait_for(self.process.communicate(), 10)
        return time.monotonic() - begin, out.decode(), err.decode()


def env(**extra: str) -> dict[str, str]:
    values = {k: v for k, v in os.environ.items() if not k.startswith("NOETIC_SCRATCHPAD_")}
    values["PYTHONPATH"] = str(ROOT)
    values.update(extra)
    return values


async def run_cli(*args: str, environ: dict[str, str] | None = None) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "noetic_scratchpad",
        *args,
        cwd=ROOT,
        env=environ or env(),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 30)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


@asynccontextmanager
async def serving(*args: str, environ: dict[str, str] | None = None) -> AsyncIterator[Serving]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "noetic_scratchpad",
        "serve",
        "--port",
        "0",
        *args,
        cwd=ROOT,
        env=environ or env(),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert process.stdout is not None
    banner = ""
    try:
        async with asyncio.timeout(30):
            while "Press Ctrl+C" not in banner:
                line = await process.stdout.readline()
                if not line:
                    err = await process.stderr.read() if process.stderr else b""
                    raise AssertionError(f"serve exited early: {banner}{err.decode()}")
                banner += line.decode()
        match = re.search(r"inspector\s+(http://127\.0\.0\.1:\d+)/", banner)
        assert match, banner
        yield Serving(process, match.group(1), banner)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


@pytest.mark.asyncio
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
async def test_serve_stops_cleanly_with_a_stream_open(tmp_path: Path, sig: signal.Signals) -> None:
    url = f"sqlite:///{tmp_path / 'pad.db'}"
    async with serving("--storage", url) as server:
        assert "no token" in server.banner
        async with httpx.AsyncClient(base_url=server.url, timeout=10) as client:
            page = await client.get("/")
            assert page.status_code == 200
            async with sse(client, "/api/events") as reader:
                response = await client.patch("/api/scopes/thread/t1", json={"goal": "ship"})
                assert response.status_code == 200
                await reader.wait_for(lambda r: len(r.events) == 1)
                seconds, out, err = await server.stop(sig)
                await reader.wait_for(lambda r: r.ended_cleanly, 1)
    assert server.process.returncode == 0, err
    assert seconds < 2.0, f"exit took {seconds:.2f} s"
    assert "Traceback" not in err, err
    assert err == ""
    assert out.strip().endswith("noetic-scratchpad: stopped")
    # The write is stored: storage was closed properly, and a new reader sees it.
    code, shown, _ = await run_cli("show", "--thread", "t1", "--json", "--storage", url)
    assert code == 0
    assert '"goal": "ship"' in shown


@pytest.mark.asyncio
async def test_serve_with_a_token_from_the_environment_and_a_schema(tmp_path: Path) -> None:
    environ = env(NOETIC_SCRATCHPAD_TOKEN=TOKEN)
    schema = "tests.server.helpers:TaskNotes"
    url = f"sqlite:///{tmp_path / 'pad.db'}"
    async with serving("--storage", url, "--schema", schema, environ=environ) as server:
        assert "a token is required" in server.banner
        assert TOKEN not in server.banner
        async with httpx.AsyncClient(base_url=server.url, timeout=10) as client:
            assert (await client.get("/api/scopes")).status_code == 401
            refused = await client.patch(
                "/api/scopes/thread/t1", json={"blockers": "one"}, headers=AUTH
            )
            assert refused.status_code == 422
            assert refused.json()["errors"][0]["loc"] == ["blockers"]
        _, out, err = await server.stop(signal.SIGINT)
    assert server.process.returncode == 0
    assert TOKEN not in out + err


@pytest.mark.asyncio
async def test_serve_refuses_a_public_bind_without_a_token() -> None:
    code, out, err = await run_cli("serve", "--host", "0.0.0.0", "--storage", "memory://")
    assert code == 1
    assert out == ""
    assert "without a token" in err
    assert "NOETIC_SCRATCHPAD_TOKEN" in err
    assert "--insecure" in err
    assert "Traceback" not in err


@pytest.mark.asyncio
async def test_serve_reports_a_bad_storage_url_or_a_busy_port_in_one_line() -> None:
    code, _, err = await run_cli("serve", "--port", "0", "--storage", "nope://x")
    assert code == 2  # a usage error, as argparse reports one: the usage, then one line
    assert err.startswith("usage: noetic-scratchpad serve ")
    assert err.splitlines()[-1].startswith(
        "noetic-scratchpad serve: error: --storage: unknown storage scheme 'nope'"
    )
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = str(busy.getsockname()[1])
        code, _, err = await run_cli("serve", "--port", port, "--storage", "memory://")
    assert code == 1
    assert err.count("\n") == 1
    assert f"cannot listen on 127.0.0.1:{port}" in err
    code, _, err = await run_cli("serve", "--schema", "no.such.module:Model")
    assert code == 2
    assert "--schema no.such.module:Model: cannot import 'no.such.module'" in err


@pytest.mark.asyncio
async def test_serve_sets_the_sessions_lifetimes() -> None:
    """``--session-idle-timeout`` reaches the app: a session unused that long is over; a
    lifetime that cannot work is a usage error before anything is served."""
    environ = env(NOETIC_SCRATCHPAD_TOKEN=TOKEN)
    async with serving(
        "--storage", "memory://", "--session-idle-timeout", "1", environ=environ
    ) as server:
        async with httpx.AsyncClient(base_url=server.url, timeout=10) as client:
            assert (await client.post("/api/session", headers=AUTH)).status_code == 204
            assert (await client.get("/api/scopes")).status_code == 200  # the cookie
            await asyncio.sleep(1.5)
            assert (await client.get("/api/scopes")).status_code == 401
        await server.stop(signal.SIGTERM)

    for flag, value in [("--session-idle-timeout", "0"), ("--session-max-age", "nan")]:
        code, out, err = await run_cli("serve", flag, value, "--storage", "memory://")
        assert (code, out) == (2, "")
        assert flag in err
        assert "Traceback" not in err


@pytest.mark.asyncio
async def test_serve_with_a_read_only_token_from_the_environment() -> None:
    read_token = "read-only-token-fedcba9876543210"
    environ = env(NOETIC_SCRATCHPAD_TOKEN=TOKEN, NOETIC_SCRATCHPAD_READ_ONLY_TOKEN=read_token)
    read = {"Authorization": f"Bearer {read_token}"}
    async with serving("--storage", "memory://", environ=environ) as server:
        assert "the read-only token may read, not write" in server.banner
        async with httpx.AsyncClient(base_url=server.url, timeout=10) as client:
            written = await client.patch("/api/scopes/thread/t1", json={"a": 1}, headers=AUTH)
            refused = await client.patch("/api/scopes/thread/t1", json={"a": 2}, headers=read)
            shown = await client.get("/api/scopes/thread/t1", headers=read)
        _, out, err = await server.stop(signal.SIGTERM)
    assert written.status_code == 200
    assert refused.status_code == 403
    assert refused.headers["content-type"] == "application/problem+json"
    assert shown.json()["state"] == {"a": 1}
    assert read_token not in server.banner + out + err
    assert TOKEN not in server.banner + out + err

    # Without the read-write token, a read-only one would limit nothing: refused.
    alone = env(NOETIC_SCRATCHPAD_READ_ONLY_TOKEN=read_token)
    code, out, err = await run_cli("serve", "--storage", "memory://", environ=alone)
    assert code == 1
    assert out == ""
    assert "a read-only token needs the read-write one too" in err
    assert read_token not in err
    code, _, err = await run_cli(
        "serve", "--storage", "memory://", "--token", TOKEN, "--read-only-token", TOKEN
    )
    assert code == 1
    assert "must differ" in err
    assert TOKEN not in err
