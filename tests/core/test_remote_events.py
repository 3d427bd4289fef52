"""Events across processes: another process's writes and resets reach this one's bus.

A child process (``remote_writer.py``) writes and resets a scope on the same storage; the
parent's core hears each as an event carrying the child's origin, within a second, and
hears its own writes once (from its own writer, ``origin`` ``None``).
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest

from noetic_scratchpad import ScopeReset, ScratchpadEvent, UpdateApplied
from noetic_scratchpad.core import ScratchpadCore
from tests.conftest import backend_url

HERE = Path(__file__).parent
ROOT = HERE.parent.parent
KINDS = ["postgres", "redis", "sqlite"]


class Child:
    """The writer process: ``origin`` once started, ``step("write")`` and so on."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.origin = ""

    async def line(self) -> str:
        assert self.proc.stdout is not None
        with anyio.fail_after(30):
            return (await self.proc.stdout.readline()).decode().strip()

    async def step(self, command: str) -> float:
        """Run ``command`` in the child; the time it said it was done."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"{command}\n".encode())
        await self.proc.stdin.drain()
        assert await self.line() == "done"
        return time.monotonic()


@asynccontextmanager
async def _child(url: str, thread: str) -> AsyncIterator[Child]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(HERE / "remote_writer.py"),
        url,
        thread,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        cwd=ROOT,
    )
    child = Child(proc)
    try:
        child.origin = await child.line()
        yield child
    finally:
        if proc.returncode is None:
            assert proc.stdin is not None
            proc.stdin.write(b"quit\n")
            with anyio.move_on_after(10):
                await proc.wait()
            if proc.returncode is None:
                proc.kill()
                await proc.wait()


async def _next(events: list[ScratchpadEvent], kind: type, since: int) -> int:
    """Wait (at most a second) until an event of ``kind`` is at or past index ``since``;
    its index."""
    with anyio.fail_after(1.0):
        while True:
            for index in range(since, len(events)):
                if isinstance(events[index], kind):
                    return index
            await anyio.sleep(0.005)


@pytest.mark.asyncio
@pytest.mark.parametrize("kind", KINDS)
async def test_another_process_s_writes_and_resets_are_events_here(
    kind: str, tmp_path: Path
) -> None:
    url = backend_url(kind, tmp_path)
    thread = "shared"
    async with ScratchpadCore(storage=url) as core:
        events: list[ScratchpadEvent] = []
        core.events.subscribe(events.append)
        async with _child(url, thread) as child:
            assert child.origin
            assert child.origin != getattr(core.backend, "origin", None)
            await anyio.sleep(0.3)  # the watch is listening
            done = await child.step("write")
            found = await _next(events, UpdateApplied, 0)
            heard = time.monotonic()
            applied = events[found]
            assert isinstance(applied, UpdateApplied)
            assert applied.origin == child.origin
            assert (applied.layer_id, applied.scope_key, applied.scope) == (
                "scratchpad",
                thread,
                "thread",
            )
            assert (applied.source, applied.call_id, applied.revision) == ("tool", "remote-1", 1)
            assert heard - done < 1.0

            # This process's own write: one event, its own (origin None), never a second.
            mark = len(events)
            own = await core.call(thread, "update", {"mine": 1}, tool="update_scratchpad")
            assert own.ok
            await anyio.sleep(0.5)
            mine = [e for e in events[mark:] if isinstance(e, UpdateApplied)]
            assert [(e.origin, e.revision) for e in mine] == [(None, 2)]

            mark = len(events)
            await child.step("reset")
            found = await _next(events, ScopeReset, mark)
            reset = events[found]
            assert isinstance(reset, ScopeReset)
            assert (reset.origin, reset.scope_key, reset.scope) == (child.origin, thread, "thread")

            mark = len(events)
            await child.step("write")
            found = await _next(events, UpdateApplied, mark)
            again = events[found]
            assert isinstance(again, UpdateApplied)
            assert (again.origin, again.call_id, again.revision) == (child.origin, "remote-2", 3)
        if hasattr(core.backend, "drop_table"):
            await core.backend.drop_table()
        if hasattr(core.backend, "drop_keys"):
            await core.backend.drop_keys()


@pytest.mark.asyncio
async def test_the_http_app_s_event_stream_shows_another_process_s_writes(
    tmp_path: Path,
) -> None:
    """What a worker of several serves: its ``api/events`` shows the writes and resets
    made through another process, with that process's origin."""
    import httpx

    from noetic_scratchpad.server import create_app
    from tests.server.helpers import served, sse

    url = backend_url("sqlite", tmp_path)
    async with (
        served(create_app(url)) as server,
        httpx.AsyncClient(base_url=server.url, timeout=10) as client,
        _child(url, "shared") as child,
        sse(client, "/api/scopes/thread/shared/events") as stream,
    ):
        await child.step("write")
        await child.step("reset")
        await stream.wait_for(lambda r: len(r.events) == 2, 2)
    assert [e.event for e in stream.events] == ["update_applied", "scope_reset"]
    assert {e.data["origin"] for e in stream.events} == {child.origin}
    assert stream.events[0].data["call_id"] == "remote-1"
