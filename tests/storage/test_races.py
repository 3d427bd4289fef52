"""Races that really race: concurrent writers through the layer handle lose nothing.

The single-process races run on every backend (the ``storage`` fixture); the cross-process
race needs a file several processes share, so it runs on SQLite.
"""

from __future__ import annotations

import asyncio
import gc
import textwrap
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict

from noetic_scratchpad import (
    ExecutionContext,
    ScopedStorage,
    ScratchpadHandle,
    ScratchpadLayer,
    ScratchpadValidationError,
    UpdateApplied,
    UpdateRejected,
    open_storage,
    scratchpad,
)
from noetic_scratchpad.events import EventBus
from noetic_scratchpad.locks import KeyedBatcher
from noetic_scratchpad.storage import StorageBackend
from noetic_scratchpad.testing import capture_events

from .helpers import finish, python


async def bind(
    layer: ScratchpadLayer, storage: StorageBackend, scope: str, bus: EventBus | None = None
) -> ScratchpadHandle:
    """A handle on ``scope`` as an execution gets it: a fresh context, then ``layer.init``."""
    ctx = ExecutionContext(thread_id=scope, events=bus or EventBus())
    await layer.init(storage=ScopedStorage(storage, layer.id, scope), scope_key=scope, ctx=ctx)
    handle: ScratchpadHandle = ctx.context["scratchpad"]
    return handle


def stored_key(scope: str) -> str:
    return f"scopes/scratchpad/thread/{scope}/state"


@pytest.mark.asyncio
async def test_100_tasks_one_scope_lose_nothing(storage: StorageBackend) -> None:
    """100 executions of one thread, each with its own handle bound before any writes, write
    distinct keys at once: every key is in the stored state and every write was applied."""
    layer = scratchpad()
    bus = EventBus()
    handles = [await bind(layer, storage, "shared", bus) for _ in range(100)]
    with capture_events(bus) as events:
        await asyncio.gather(*(handle.update({f"key{n}": n}) for n, handle in enumerate(handles)))
    results = [handle.state for handle in handles]  # what each handle's own write produced
    expected = {f"key{n}": n for n in range(100)}
    assert await storage.get(stored_key("shared")) == expected
    assert len(events.of(UpdateApplied)) == 100
    assert events.of(UpdateRejected) == []
    # Each writer saw at least its own key on top of the ones committed before it.
    assert all(result[f"key{n}"] == n for n, result in enumerate(results))
    assert max(len(result) for result in results) == 100


@pytest.mark.asyncio
async def test_100_scopes_each_get_their_own_writes(storage: StorageBackend) -> None:
    """100 writers on 100 scopes, each writing 5 times, all at once: every scope holds
    exactly its own writes."""
    layer = scratchpad()
    handles = [await bind(layer, storage, f"scope-{n}") for n in range(100)]

    async def writer(n: int, handle: ScratchpadHandle) -> None:
        for step in range(5):
            await handle.update({f"step{step}": n})

    await asyncio.gather(*(writer(n, handle) for n, handle in enumerate(handles)))
    stored = await storage.get_many(stored_key(f"scope-{n}") for n in range(100))
    assert stored == {
        stored_key(f"scope-{n}"): {f"step{step}": n for step in range(5)} for n in range(100)
    }


class Notes(BaseModel):
    model_config = ConfigDict(extra="allow")
    count: int = 0


@pytest.mark.asyncio
async def test_rejected_update_does_not_spoil_neighbours(storage: StorageBackend) -> None:
    """Among 60 concurrent updates of one scope, the 10 that fail the schema are rejected
    (ScratchpadValidationError and an UpdateRejected event each) and the 50 others all land."""
    layer = scratchpad(schema=Notes)
    bus = EventBus()
    handles = [await bind(layer, storage, "mixed", bus) for _ in range(60)]

    def update_for(n: int) -> dict[str, Any]:
        return {"count": "not a number"} if n % 6 == 0 else {f"k{n}": n, "count": n}

    with capture_events(bus) as events:
        outcomes = await asyncio.gather(
            *(handle.update(update_for(n)) for n, handle in enumerate(handles)),
            return_exceptions=True,
        )
    rejected = [n for n, outcome in enumerate(outcomes) if isinstance(outcome, BaseException)]
    assert rejected == list(range(0, 60, 6))
    assert all(isinstance(outcomes[n], ScratchpadValidationError) for n in rejected)
    assert [event.reason for event in events.of(UpdateRejected)] == ["schema"] * 10
    assert len(events.of(UpdateApplied)) == 50
    state = await storage.get(stored_key("mixed"))
    assert {key for key in state if key.startswith("k")} == {
        f"k{n}" for n in range(60) if n % 6 != 0
    }
    assert isinstance(state["count"], int)


@pytest.mark.asyncio
async def test_lock_registries_empty_after_10000_scopes(
    storage: StorageBackend, backend_kind: str
) -> None:
    """After writes to 10,000 distinct scopes, every KeyedBatcher in the process (the
    backend's and any other) holds no key: nothing grows with the scopes ever seen.

    PostgreSQL pays a network round trip per write, so it writes 2,000 scopes to keep the
    suite fast; its per-key registry is exercised the same way.
    """
    layer = scratchpad()
    count = 2_000 if backend_kind == "postgres" else 10_000
    scopes = [f"thread-{n}" for n in range(count)]

    async def write(scope: str) -> None:
        handle = await bind(layer, storage, scope)
        await handle.update({"scope": scope})

    for start in range(0, len(scopes), 1000):
        await asyncio.gather(*(write(scope) for scope in scopes[start : start + 1000]))
    assert len(await storage.list("scopes/scratchpad/thread/")) == count
    last = f"thread-{count - 1}"
    assert await storage.get(stored_key(last)) == {"scope": last}
    batchers = [obj for obj in gc.get_objects() if isinstance(obj, KeyedBatcher)]
    assert [len(batcher) for batcher in batchers] == [0] * len(batchers)


_WRITER = textwrap.dedent(
    """
    import asyncio, sys
    from noetic_scratchpad import ExecutionContext, ScopedStorage, open_storage, scratchpad

    async def main(url, name, count):
        async with await open_storage(url) as storage:
            layer = scratchpad()
            ctx = ExecutionContext(thread_id="shared")
            scoped = ScopedStorage(storage, "scratchpad", "shared")
            await layer.init(storage=scoped, scope_key="shared", ctx=ctx)
            handle = ctx.context["scratchpad"]
            print("ready", flush=True)
            sys.stdin.readline()  # start together
            for n in range(count):
                await handle.update({f"{name}-{n}": n})

    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
    """
)


@pytest.mark.slow
@pytest.mark.asyncio
async def test_4_processes_25_writes_one_sqlite_file(tmp_path: Path) -> None:
    """4 processes, each with its own storage on one SQLite file, write 25 distinct keys each
    to one scope, starting together: all 100 keys are stored."""
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    async with await open_storage(url):
        pass  # create the file and table once, so the writers race only on the writes
    procs = [python(_WRITER, url, f"p{p}", "25") for p in range(4)]
    try:
        for proc in procs:
            assert proc.stdout is not None
            assert proc.stdout.readline().strip() == "ready"
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        for proc in procs:
            _, err = await asyncio.to_thread(finish, proc, 120)
            assert proc.returncode == 0, err
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    async with await open_storage(url) as storage:
        state = await storage.get(stored_key("shared"))
    assert state == {f"p{p}-{n}": n for p in range(4) for n in range(25)}
