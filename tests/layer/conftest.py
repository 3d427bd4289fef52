"""Fixtures for the layer tests: the loop to run on, and a layer bound to one scope of a
memory backend.

The layer and the memory backend run on asyncio and under trio (SPEC.md): every async test
here is marked ``anyio`` and runs once on each, through ``anyio_backend``. The other
fixtures are plain (sync) functions returning coroutines, so they serve both loops.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from noetic_scratchpad import ExecutionContext, ScratchpadHandle, ScratchpadLayer, _json
from noetic_scratchpad.storage import MemoryStorage, ScopedStorage, StorageBackend, open_storage
from tests.conftest import backend_url


@dataclass
class BoundScope:
    """A layer after ``init`` on one scope: its backend, context, handle and init state."""

    layer: ScratchpadLayer
    backend: MemoryStorage
    storage: ScopedStorage
    ctx: ExecutionContext
    handle: ScratchpadHandle
    initial: Any

    @property
    def key(self) -> str:
        return self.storage.full_key("state")

    async def stored(self) -> Any:
        """The stored state (``None`` when nothing was written)."""
        return await self.backend.get(self.key)

    async def stored_bytes(self) -> bytes:
        """The stored state as JSON text: compare before and after, byte for byte."""
        return _json.dumps(await self.stored())


Bind = Callable[..., Awaitable[BoundScope]]


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    """The loop an ``anyio``-marked test runs on: each test runs on both, ids ``[asyncio]``
    and ``[trio]``."""
    backend: str = request.param
    return backend


@pytest.fixture
def bind() -> Bind:
    """``await bind(layer, thread_id="t1", resource_id=None, stored=..., backend=None)``."""

    async def bind_scope(
        layer: ScratchpadLayer,
        *,
        thread_id: str = "t1",
        resource_id: str | None = None,
        stored: Any = None,
        backend: MemoryStorage | None = None,
    ) -> BoundScope:
        backend = backend or MemoryStorage()
        ctx = ExecutionContext(thread_id=thread_id, resource_id=resource_id)
        storage = ScopedStorage.for_layer(backend, layer, ctx)
        scope_key = storage.scope_key
        if stored is not None:
            await storage.set("state", stored)
        result = await layer.hooks.init(storage=storage, scope_key=scope_key, ctx=ctx)
        handle = ctx.context[layer.id]
        assert isinstance(handle, ScratchpadHandle)
        return BoundScope(layer, backend, storage, ctx, handle, result.state)

    return bind_scope


@pytest_asyncio.fixture(params=["memory", "sqlite", "postgres"])
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[StorageBackend]:
    """Each backend in turn (asyncio tests: PostgreSQL and SQLite run on asyncio only),
    closed afterwards, its PostgreSQL tables dropped."""
    storage = await open_storage(backend_url(request.param, tmp_path))
    try:
        yield storage
    finally:
        if hasattr(storage, "drop_table"):
            await storage.drop_table()
        await storage.aclose()
