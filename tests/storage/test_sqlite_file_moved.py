"""A SQLite database file removed, replaced or renamed while a storage has it open.

SQLite keeps writing into the file it opened, which no longer is the one at the path: no
other process sees those writes, and they are gone once the storage closes. So the
storage checks, inside each write transaction and with each read, that the file at its
path is still the one it opened, and refuses with a StorageError that says what happened
and what to do; nothing is written then.
"""

from __future__ import annotations

import os
import textwrap
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from noetic_scratchpad import StorageError, scratchpad
from noetic_scratchpad.storage.base import Commit, Revision
from noetic_scratchpad.storage.sqlite import SqliteStorage

from .helpers import finish, python

pytestmark = pytest.mark.asyncio

Operation = Callable[[SqliteStorage], Awaitable[Any]]

WRITES: dict[str, Operation] = {
    "set": lambda s: s.set("k", "after"),
    "update": lambda s: s.update("k", lambda current: "after"),
    "commit": lambda s: s.commit("k", lambda current: Commit("after", "e"), keep=5),
    "commit_with_journal": lambda s: s.commit_with_journal(
        "k", lambda current, rows: Commit("after", "e"), keep=5, after=0
    ),
    "delete": lambda s: s.delete("before"),
}

READS: dict[str, Operation] = {
    "get": lambda s: s.get("before"),
    "get_many": lambda s: s.get_many(["before"]),
    "get_revision": lambda s: s.get_revision("before"),
    "list": lambda s: s.list(),
    "describe": lambda s: s.describe(),
    "journal": lambda s: s.journal("before", limit=5),
    "journal_view": lambda s: s.journal_view("before", limit=5),
}

_LIST_KEYS = textwrap.dedent(
    """
    import asyncio, sys
    from noetic_scratchpad import open_storage

    async def main():
        async with await open_storage("sqlite:///" + sys.argv[1]) as storage:
            print(sorted(await storage.list()))

    asyncio.run(main())
    """
)


def keys_seen_by_another_process(path: Path) -> list[str]:
    out, err = finish(python(_LIST_KEYS, str(path)))
    assert err == "", err
    seen: list[str] = eval(out)  # a list of key names, printed by the child
    return seen


async def opened(path: Path) -> SqliteStorage:
    storage = await SqliteStorage.open(f"sqlite:///{path}")
    await storage.commit("before", lambda current: Commit("before", "e"), keep=5)
    return storage


async def replace_with_another_database(path: Path) -> None:
    """Rename another database over ``path``, as a restore from a backup would."""
    other = path.with_name("other.db")
    async with await SqliteStorage.open(f"sqlite:///{other}") as storage:
        await storage.set("other", "theirs")
    os.replace(other, path)


async def remove(path: Path) -> None:
    await anyio.Path(path).unlink()  # as `rm scratchpad.db` does: -wal and -shm stay


MOVES = {"removed": remove, "replaced": replace_with_another_database}


async def refusal(path: Path, move: str, operation: Operation) -> str:
    """The message of the StorageError that ``operation`` raises once the open file has
    been moved (``move``); the storage is closed afterwards."""
    storage = await opened(path)
    try:
        await MOVES[move](path)
        with pytest.raises(StorageError) as refused:
            await operation(storage)
    finally:
        await storage.aclose()
    return str(refused.value)


@pytest.mark.parametrize("move", sorted(MOVES))
@pytest.mark.parametrize("write", sorted(WRITES))
async def test_a_write_into_a_moved_file_is_refused(tmp_path: Path, move: str, write: str) -> None:
    path = tmp_path / "scratchpad.db"
    message = await refusal(path, move, WRITES[write])
    assert f"the SQLite database file {path} was removed or replaced" in message
    assert "nothing was written" in message
    assert "open_storage" in message  # what to do
    # The refused write reached no file at the path. (What else another process sees
    # there is SQLite's affair: the -wal file left at the path still holds this storage's
    # earlier commits, and SQLite reads it with whatever database is at the path now.)
    assert "k" not in keys_seen_by_another_process(path)


@pytest.mark.parametrize("move", sorted(MOVES))
@pytest.mark.parametrize("read", sorted(READS))
async def test_a_read_of_a_moved_file_is_refused(tmp_path: Path, move: str, read: str) -> None:
    """A read would answer from the file no one else sees any more: refused too."""
    message = await refusal(tmp_path / "scratchpad.db", move, READS[read])
    assert "removed or replaced" in message
    assert "nothing was read" in message


async def test_a_file_renamed_away_and_back_is_used_again(tmp_path: Path) -> None:
    """The check compares the file, not a flag set once: the same file back at the path
    is the one the storage has open, and works again."""
    path = tmp_path / "scratchpad.db"
    aside = tmp_path / "aside.db"
    async with await opened(path) as storage:
        path.rename(aside)
        with pytest.raises(StorageError, match="removed or replaced"):
            await storage.set("k", "while away")
        aside.rename(path)
        await storage.set("k", "back")
        assert await storage.get_revision("k") == Revision("back", 1)
    assert keys_seen_by_another_process(path) == ["before", "k"]


async def test_a_scratchpad_update_into_a_removed_file_raises(tmp_path: Path) -> None:
    """Through the layer: the update raises the StorageError, and the handle keeps the
    state it had."""
    path = tmp_path / "scratchpad.db"
    async with await SqliteStorage.open(f"sqlite:///{path}") as storage:
        handle = await scratchpad().open(storage, thread_id="t1")
        await handle.update({"goal": "kept"})
        path.unlink()
        with pytest.raises(StorageError, match="removed or replaced"):
            await handle.update({"goal": "lost"})
        assert handle.snapshot == {"goal": "kept"}
        assert handle.revision == 1


_HOLDER = textwrap.dedent(
    """
    import asyncio, sys
    from noetic_scratchpad import StorageError, open_storage

    async def main():
        async with await open_storage("sqlite:///" + sys.argv[1]) as storage:
            await storage.set("first", 1)
            print("ready", flush=True)
            await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
            try:
                await storage.set("second", 2)
                print("acknowledged")
            except StorageError as exc:
                print("refused:", exc)

    asyncio.run(main())
    """
)


@pytest.mark.slow
@pytest.mark.parametrize("move", sorted(MOVES))
async def test_a_process_whose_file_another_process_moved_refuses_its_write(
    tmp_path: Path, move: str
) -> None:
    """The case of the report: one process has the storage open, another removes or
    replaces the file; the first one's next write is refused, not acknowledged."""
    path = tmp_path / "scratchpad.db"
    holder = python(_HOLDER, str(path))
    assert holder.stdout is not None
    assert holder.stdout.readline().strip() == "ready"
    await MOVES[move](path)
    out, err = finish_with(holder, "go\n")
    assert out.startswith("refused: the SQLite database file"), (out, err)
    assert "removed or replaced" in out


def finish_with(proc: Any, line: str) -> tuple[str, str]:
    assert proc.stdin is not None
    proc.stdin.write(line)
    proc.stdin.flush()
    return finish(proc)
