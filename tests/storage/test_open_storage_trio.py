"""open_storage under trio: SQLite and PostgreSQL say they need asyncio; memory:// works."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest
import trio

from noetic_scratchpad import StorageConfigError, open_storage
from noetic_scratchpad._runtime import running_async_library
from noetic_scratchpad.storage import MemoryStorage

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "trio"


@pytest.mark.parametrize(
    ("url", "kind"),
    [
        ("sqlite:///{tmp}/scratchpad.db", "SQLite"),
        ("postgresql://postgres@127.0.0.1:1/test", "PostgreSQL"),
        ("postgres://postgres@127.0.0.1:1/test", "PostgreSQL"),
    ],
    ids=["sqlite", "postgresql", "postgres"],
)
async def test_asyncio_only_backends_say_so_under_trio(url: str, kind: str, tmp_path: Path) -> None:
    """Opening SQLite or PostgreSQL storage under trio is a StorageConfigError saying the
    backend runs on asyncio only, that the layer and memory:// run under trio, and how to
    proceed; nothing is created and no connection is tried."""
    assert trio.lowlevel.current_root_task() is not None
    resolved = url.format(tmp=tmp_path)

    with pytest.raises(StorageConfigError) as info:
        await open_storage(resolved)

    message = str(info.value)
    assert f"the {kind} storage backend" in message
    assert "runs on asyncio only" in message
    assert "under trio" in message
    assert "memory:// storage also run under trio" in message
    assert 'anyio.run(main, backend="asyncio")' in message
    assert not (tmp_path / "scratchpad.db").exists()


async def test_memory_storage_opens_under_trio() -> None:
    """memory:// needs no asyncio: it opens and works under trio."""
    storage = await open_storage("memory://")
    assert isinstance(storage, MemoryStorage)
    assert await storage.update("k", lambda current: (current or 0) + 1) == 1
    await storage.aclose()


async def test_running_library_is_trio_here() -> None:
    """The check sees trio inside a trio task."""
    assert running_async_library() == "trio"


def test_running_library_outside_any_loop_and_under_asyncio() -> None:
    """No running loop gives ``None`` (the backend is then left to try); asyncio gives
    ``"asyncio"``."""

    async def library() -> str | None:
        return running_async_library()

    assert running_async_library() is None
    assert asyncio.run(library()) == "asyncio"


def test_running_library_without_sniffio(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without sniffio (anyio no longer needs it; trio does), a running asyncio loop is
    asyncio and no loop is ``None``."""

    async def library() -> str | None:
        return running_async_library()

    monkeypatch.setitem(sys.modules, "sniffio", None)  # makes `import sniffio` fail

    assert running_async_library() is None
    assert asyncio.run(library()) == "asyncio"
