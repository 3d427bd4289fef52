"""Fixtures shared by the storage tests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

import pytest_asyncio

from tests.conftest import redis_test_url, require_redis

if TYPE_CHECKING:
    from noetic_scratchpad.storage.redis import RedisStorage


@pytest_asyncio.fixture
async def redis_storage() -> AsyncIterator[RedisStorage]:
    """A Redis backend on a key prefix of its own, whose keys are dropped after the test
    (skipped without a server outside CI)."""
    from noetic_scratchpad.storage.redis import RedisStorage

    require_redis()
    backend = await RedisStorage.open(redis_test_url())
    try:
        yield backend
    finally:
        await backend.aclose()
        await backend.drop_keys()
