"""The write-ahead log is checkpointed by a thread of the storage's own, not inside the
writes' commits: the writer's connection only checkpoints as a backstop, the log still
starts over as writes go on, and closing the storage ends the thread."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from pathlib import Path

import pytest

from noetic_scratchpad.storage.sqlite import SqliteStorage
from noetic_scratchpad.storage.sqlite import checkpoints as checkpoints_module
from noetic_scratchpad.storage.sqlite.checkpoints import BACKSTOP_PAGES, INTERVAL

pytestmark = pytest.mark.asyncio


async def test_the_writer_checkpoints_only_as_a_backstop(tmp_path: Path) -> None:
    async with await SqliteStorage.open(f"sqlite:///{tmp_path / 'b.db'}") as storage:
        writer = storage._writer
        pages = await writer.call(
            lambda: writer.conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0]
        )
        assert pages == BACKSTOP_PAGES > 1_000  # SQLite's default is 1,000


async def test_the_log_starts_over_while_writes_go_on(tmp_path: Path) -> None:
    """Ten rounds of about 1.2 MB of pages each, each followed by a small write once
    ``INTERVAL`` has passed (which asks for a checkpoint of it): without checkpoints
    before the backstop's 40 MB, the log would hold all 12 MB of them."""
    path = tmp_path / "w.db"
    async with await SqliteStorage.open(f"sqlite:///{path}") as storage:
        for round_ in range(10):
            await asyncio.gather(
                *(storage.set(f"k{i}", {"round": round_, "text": "x" * 40_000}) for i in range(30))
            )
            await asyncio.sleep(INTERVAL * 1.5)
            await storage.set("tick", round_)
            await asyncio.sleep(INTERVAL)
        assert storage._writer._checkpoints.runs >= 10
        assert Path(f"{path}-wal").stat().st_size < 6_000_000  # noqa: ASYNC240 (a test)
        assert await storage.get("k0") == {"round": 9, "text": "x" * 40_000}


async def test_closing_the_storage_ends_the_thread(tmp_path: Path) -> None:
    storage = await SqliteStorage.open(f"sqlite:///{tmp_path / 'c.db'}")
    await storage.set("k", 1)
    thread = storage._writer._checkpoints._thread
    assert thread.is_alive()
    await storage.aclose()
    assert not thread.is_alive()
    with sqlite3.connect(tmp_path / "c.db") as conn:  # everything reached the file
        assert conn.execute("SELECT value FROM scratchpad_kv").fetchall() == [("1",)]


async def test_without_its_connection_the_backstop_checkpoints(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A thread that cannot open its connection says so, once, and ends: writes go on."""

    def refuse(path: str, busy_timeout: int) -> sqlite3.Connection:
        raise sqlite3.OperationalError("unable to open database file")

    monkeypatch.setattr(checkpoints_module, "_connect", refuse)
    with caplog.at_level(logging.WARNING, "noetic_scratchpad"):
        async with await SqliteStorage.open(f"sqlite:///{tmp_path / 'f.db'}") as storage:
            for n in range(3):
                await storage.set("k", n)
                await asyncio.sleep(INTERVAL)
            assert await storage.get("k") == 2
    assert caplog.text.count("no background checkpoints") == 1
