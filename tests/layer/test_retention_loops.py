"""A layer's ttl, history_max_age and sweep on asyncio and under trio (``anyio_backend``
in conftest); every backend is covered on asyncio in tests/storage/test_retention.py."""

from __future__ import annotations

import pytest

from noetic_scratchpad import scratchpad
from noetic_scratchpad.storage import MemoryStorage

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
