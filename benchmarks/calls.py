"""``python -m benchmarks.calls [--updates N] [--storage URL]``: Python calls per update.

One scope's updates on SQLite (or the storage at ``URL``), each ``handle.call("update",
..., call_id=...)`` as a host
makes it, counted by a profiler on every thread (the event loop's and SQLite's): each
Python function entered counts once (C functions do not). Two ways in: through a
``ScratchpadCore`` opened with ``async with`` (its task group lent to the bus and the
backend: the write worker is one task there, woken per burst), and on a backend opened
alone (no group lent: a task per burst, asyncio's fast path); and through a core whose bus
has one async subscriber (a task per event for it). Unlike CPU time, the count
does not move with the machine's load, so it compares two trees on a shared machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import threading
import uuid
from pathlib import Path
from types import FrameType
from typing import Any

from noetic_scratchpad import ScratchpadCore, open_storage, scratchpad


class CallCounter:
    """Counts Python function entries on every thread while :attr:`on`. Installed before
    any storage opens: a thread takes its profiler when it starts."""

    def __init__(self) -> None:
        self.calls = 0
        self.on = False

    def profile(self, frame: FrameType, event: str, arg: Any) -> None:
        if event == "call" and self.on:
            self.calls += 1

    def install(self) -> None:
        threading.setprofile(self.profile)
        sys.setprofile(self.profile)

    def remove(self) -> None:
        sys.setprofile(None)
        threading.setprofile(None)


COUNTER = CallCounter()

#: Scopes of this run's own: a server's storage keeps those of earlier runs.
RUN = uuid.uuid4().hex[:8]


async def async_subscriber(event: Any) -> None:
    """An async handler that does nothing: what the bus's task per event costs."""


def update_args(i: int) -> str:
    return json.dumps({"notes": {f"turn {i}": f"replayed batch {i * 7 % 97}, all green"}})


async def calls_per_update(handle: Any, updates: int) -> float:
    for i in range(20):  # warm: caches, the connection thread, the worker
        await handle.call("update", update_args(-i - 1), call_id=f"warm-{i}")
    COUNTER.calls, COUNTER.on = 0, True
    try:
        for i in range(updates):
            await handle.call("update", update_args(i), call_id=f"call-{i}")
    finally:
        COUNTER.on = False
    return COUNTER.calls / updates


async def main(updates: int, storage: str | None = None) -> None:
    layer = scratchpad(max_state_bytes=1024 * 1024)
    COUNTER.install()
    with tempfile.TemporaryDirectory() as workdir:
        url = storage or f"sqlite:///{Path(workdir) / 'calls.db'}"
        async with ScratchpadCore(layer, storage=url) as core:
            handle = await core.handle(f"through-core-{RUN}", read=False)
            through_core = await calls_per_update(handle, updates)
        async with ScratchpadCore(layer, storage=url) as core:
            core.events.subscribe(async_subscriber)
            handle = await core.handle(f"async-subscriber-{RUN}", read=False)
            with_subscriber = await calls_per_update(handle, updates)
        backend = await open_storage(url)
        try:
            alone = ScratchpadCore(layer, storage=backend)
            handle = await alone.handle(f"backend-alone-{RUN}", read=False)
            await alone.aclose()  # the core's group ends; the backend stays open, unlent
            backend_alone = await calls_per_update(handle, updates)
        finally:
            await backend.aclose()
    COUNTER.remove()
    where = "SQLite" if storage is None else storage.split(":", 1)[0]
    print(f"Python calls per tool-call update, {where}, every thread ({updates} updates)")
    print(f"  through an open ScratchpadCore  {through_core:.1f}")
    print(f"  the same, one async subscriber  {with_subscriber:.1f}")
    print(f"  on a backend, no group lent     {backend_alone:.1f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--updates", type=int, default=200)
    parser.add_argument("--storage", help="a storage URL (default: a new SQLite file)")
    args = parser.parse_args()
    asyncio.run(main(args.updates, args.storage))
