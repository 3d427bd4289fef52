"""What only the memory backend does: it holds values and journals as Python objects."""

from __future__ import annotations

import gc
import tracemalloc

import pytest

from noetic_scratchpad.storage import MemoryStorage
from noetic_scratchpad.storage.base import Commit

pytestmark = pytest.mark.asyncio


async def test_a_journaled_key_holds_memory_in_proportion_to_its_entry() -> None:
    """A key with one small journaled write costs a few hundred bytes (its journal's list,
    the row, the entry's text, the value), not the 4 KB buffer orjson returns its bytes in
    nor a deque's 600-byte first block."""
    storage = MemoryStorage()
    keys = 2_000
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for n in range(keys):
            entry = {"source": "api", "keys": ["goal"], "update": {"goal": n}}
            await storage.commit(f"k{n}", lambda current, e=entry: Commit({"goal": 1}, e), keep=50)
        gc.collect()
        per_key = (tracemalloc.get_traced_memory()[0] - before) / keys
    finally:
        tracemalloc.stop()
    assert per_key < 1_000, f"{per_key:.0f} bytes a journaled key"
    [row] = await storage.journal("k7", limit=5)
    assert row.entry == {"source": "api", "keys": ["goal"], "update": {"goal": 7}}
