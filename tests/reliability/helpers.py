"""Shared pieces of the reliability tests: holding a SQLite write lock from another process."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
from anyio.abc import Process

LOCKER = Path(__file__).with_name("sqlite_locker.py")


async def read_line(process: Process) -> str:
    """The next line the process prints (without the newline); fails on EOF."""
    assert process.stdout is not None
    data = b""
    while not data.endswith(b"\n"):
        data += await process.stdout.receive(1)
    return data.decode().rstrip("\n")


class HeldLock:
    """A write lock another process holds; :meth:`release` makes it roll back and exit."""

    def __init__(self, process: Process) -> None:
        self.process = process
        self.released = False

    async def release(self) -> None:
        if self.released:
            return
        self.released = True
        assert self.process.stdin is not None
        with anyio.fail_after(20):
            await self.process.stdin.send(b"\n")
            assert await read_line(self.process) == "released"
            assert await self.process.wait() == 0


@asynccontextmanager
async def write_lock_held(
    path: Path, key: str, table: str = "scratchpad_kv"
) -> AsyncIterator[HeldLock]:
    """Another process holds ``BEGIN IMMEDIATE`` on ``path`` (with an uncommitted write to
    ``key``) until ``release()`` or the end of the block; then it rolls back and exits."""
    process = await anyio.open_process(
        [sys.executable, str(LOCKER), str(path), table, key],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    async with process:
        with anyio.fail_after(20):
            assert await read_line(process) == "locked"
        lock = HeldLock(process)
        try:
            yield lock
        finally:
            await lock.release()
