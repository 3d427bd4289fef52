"""A layer's ttl, history_max_age and sweep on asyncio and under trio (``anyio_backend``
in conftest); every backend is covered on asyncio in tests/storage/test_retention.py."""

from __future__ import annotations

import time

import pytest

from noetic_scratchpad import scratchpad
from noetic_scratchpad.storage import MemoryStorage
from noetic_scratchpad.testing import FaultyStorage

pytestmark = pytest.mark.anyio


async def test_expiry_and_the_sweep_on_either_loop() -> None:
    now = [0.0]
    layer = scratchpad(ttl=10, history_max_age=5, clock=lambda: now[0])
    storage = MemoryStorage()
    handle = await layer.open(storage, thread_id="t1")
    await handle.update({"goal": "ship"})
    (info,) = await storage.describe("scopes/")
    now[0] = info.updated_at + 5
    assert await handle.history() == []  # the one entry is history_max_age old
    now[0] = info.updated_at + 10
    assert (await layer.open(storage, thread_id="t1")).revision == 0
    assert await layer.sweep(storage) == (1, 0)
    await handle.update({"goal": "again"})
    assert (handle.snapshot, handle.revision) == ({"goal": "again"}, 2)


async def test_a_handle_writing_again_within_the_ttl_does_not_ask_storage_again() -> None:
    """A write asks storage whether the scope expired (describe) unless the handle's own
    last write is what it builds on and began less than ttl ago; past that, it asks."""
    now = [0.0]
    storage = FaultyStorage(MemoryStorage())
    handle = await scratchpad(ttl=10, clock=lambda: now[0]).open(storage, thread_id="t1")
    now[0] = time.time()
    for step in range(3):
        await handle.update({"step": step})
    assert storage.calls["describe"] == 1  # the first write only
    now[0] += 9.9
    await handle.update({"step": 3})
    assert storage.calls["describe"] == 1
    now[0] += 10  # 10 s after the last write began: it may have expired
    await handle.update({"late": True})
    assert storage.calls["describe"] == 2
    assert (handle.snapshot, handle.revision) == ({"late": True}, 5)
