"""SQLite announces its writes to other processes only while another process watches.

A row of the table of changes cost a fifth of an uncontended write; it is written only
while a process other than the writer's is registered in ``{table}_watchers``, and every
write committed after a watcher registered is still announced to it (see
``storage/sqlite/changes.py``).
"""

from __future__ import annotations

import json
import logging
import sqlite3
import textwrap
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest

from noetic_scratchpad.storage import Commit, open_storage
from noetic_scratchpad.storage.sqlite import changes
from noetic_scratchpad.storage.sqlite.store import SqliteStorage
from tests.storage.helpers import Notices, finish, python, watching

pytestmark = pytest.mark.asyncio


def _announced(path: Path) -> list[tuple[str, int | None, int, str]]:
    """The rows of the file's table of changes: (key, revision, deleted, origin)."""
    conn = sqlite3.connect(path)
    try:
        return conn.execute(
            "SELECT key, revision, deleted, origin FROM scratchpad_kv_changes ORDER BY id"
        ).fetchall()
    finally:
        conn.close()


def _journaled(n: int) -> Commit:
    return Commit({"n": n}, {"source": "tool", "call_id": f"c{n}"}, None)


@asynccontextmanager
async def _opened(path: Path, origin: str | None = None) -> AsyncIterator[SqliteStorage]:
    """A backend on ``path``; with ``origin``, its watch stands for a process of that name."""
    async with await open_storage(f"sqlite:///{path}") as backend:
        assert isinstance(backend, SqliteStorage)
        if origin is not None:
            backend.origin = origin
        yield backend


@asynccontextmanager
async def _leased(
    path: Path, monkeypatch: pytest.MonkeyPatch, lease: float
) -> AsyncIterator[tuple[SqliteStorage, SqliteStorage]]:
    """A writer and another process's watcher polling every 20 ms, on ``path``, with
    watch leases of ``lease`` seconds."""
    monkeypatch.setattr(changes, "LEASE", lease)
    async with _opened(path) as writer, _opened(path, "the-watcher") as watcher:
        watcher.watch_interval = 0.02
        yield writer, watcher


async def _write_all(backend: SqliteStorage, key: str, count: int) -> None:
    for n in range(count):
        await backend.commit(key, lambda _c, n=n: _journaled(n), keep=5)


def _heard(notices: Notices, keys: list[str]) -> dict[str, list[int]]:
    """The revisions of each key among the notices received so far, in arrival order."""
    heard: dict[str, list[int]] = {key: [] for key in keys}
    while True:
        try:
            notice = notices.receive_nowait()
        except anyio.WouldBlock:
            return heard
        assert notice.revision is not None
        heard[notice.key].append(notice.revision)


def _assert_heard_from_the_start(
    heard: dict[str, list[int]], started_at: dict[str, int], last: dict[str, int]
) -> None:
    """Each key heard without a gap, from at most the revision after the one stored when
    the watch started (``started_at``) up to its ``last``."""
    for key, revision in last.items():
        revisions = heard[key]
        assert revisions, key
        assert revisions == list(range(revisions[0], revision + 1)), key
        assert revisions[0] <= started_at[key] + 1, key


async def test_no_write_is_announced_while_no_other_process_watches(tmp_path: Path) -> None:
    """Journaled commits, plain commits, updates and sets write no row of the table of
    changes when no process watches; a delete, rare, is announced watched or not."""
    path = tmp_path / "alone.db"
    async with _opened(path) as backend:
        await _write_all(backend, "journaled", 3)
        await backend.commit("plain", lambda _c: Commit({"a": 1}, None, None), keep=0)
        await backend.update("updated", lambda value: {"b": 2})
        await backend.set("set", {"c": 3})
        assert _announced(path) == []
        await backend.delete("set")
        assert [row[:3] for row in _announced(path)] == [("set", 1, 1)]


async def test_a_watch_of_the_writer_s_own_process_makes_it_announce_nothing(
    tmp_path: Path,
) -> None:
    """A process's own watch leaves out its own changes: they are not written for it."""
    path = tmp_path / "own.db"
    async with _opened(path) as backend:
        async with watching(backend):
            await _write_all(backend, "k", 3)
        assert _announced(path) == []


async def test_every_write_after_a_watch_starts_is_announced_while_writers_race_it(
    tmp_path: Path,
) -> None:
    """Ten tasks write ten keys, a write every 5 ms each, while another process starts
    watching: on every key, the watch hears each revision from the first it hears to the
    last, and at least every one written after it started. (Paced: a watch that falls
    1,000 rows behind between two polls misses some, by design.)"""
    path = tmp_path / "race.db"
    keys = [f"k{n}" for n in range(10)]
    written: dict[str, int] = dict.fromkeys(keys, 0)
    started_at: dict[str, int] = {}
    stop = anyio.Event()

    async with _opened(path) as writer, _opened(path, "the-watcher") as watcher:

        async def write(key: str) -> None:
            while not stop.is_set():
                committed = await writer.commit(key, lambda _c: _journaled(0), keep=5)
                written[key] = committed.revision
                await anyio.sleep(0.005)

        async with anyio.create_task_group() as tg:
            for key in keys:
                tg.start_soon(write, key)
            await anyio.sleep(0.1)  # writing before the watch registers, and while it does
            async with watching(watcher, 10_000) as notices:
                started_at.update(written)  # every later revision must be heard
                await anyio.sleep(0.3)
                stop.set()
                await anyio.sleep(0.5)  # two polls past the last write at least
                heard = _heard(notices, keys)
    _assert_heard_from_the_start(heard, started_at, written)


#: Another process: four tasks write four keys, a write every 5 ms each, until a line on
#: stdin; then it prints each key's last revision as JSON.
_WRITER = textwrap.dedent(
    """
    import asyncio, json, sys
    from noetic_scratchpad.storage import Commit, open_storage

    async def main():
        async with await open_storage("sqlite:///" + sys.argv[1]) as backend:
            last = {}
            stop = asyncio.Event()

            async def write(key):
                while not stop.is_set():
                    entry = {"source": "tool", "call_id": None}
                    done = await backend.commit(
                        key, lambda _c: Commit({"n": 1}, entry, None), keep=5
                    )
                    last[key] = done.revision
                    await asyncio.sleep(0.005)

            tasks = [asyncio.create_task(write(f"p{n}")) for n in range(4)]
            print("writing", flush=True)
            await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
            stop.set()
            await asyncio.gather(*tasks)
            print(json.dumps(last), flush=True)

    asyncio.run(main())
    """
)


async def test_another_process_writing_is_heard_from_the_watch_s_start_on(
    tmp_path: Path,
) -> None:
    """Another process writes four keys without pause while this one starts watching: each
    key's revisions are heard without a gap from at most the one stored when the watch
    started listening to the writer's last, across processes."""
    path = tmp_path / "processes.db"
    async with _opened(path) as watcher:  # creates the file and its tables first
        child = python(_WRITER, str(path))
        try:
            assert child.stdout is not None
            assert child.stdout.readline().strip() == "writing", finish(child)
            await anyio.sleep(0.1)  # the child writes, unwatched
            async with watching(watcher, 10_000) as notices:
                conn = sqlite3.connect(path)
                started_at = dict(conn.execute("SELECT key, revision FROM scratchpad_kv"))
                conn.close()
                await anyio.sleep(0.3)
                assert child.stdin is not None
                child.stdin.write("stop\n")
                child.stdin.flush()
                last = json.loads(child.stdout.readline())
                await anyio.sleep(0.5)  # two polls past the last write at least
                heard = _heard(notices, list(last))
        finally:
            finish(child)
    _assert_heard_from_the_start(heard, started_at, last)


async def test_announcing_stops_once_a_stopped_watch_s_lease_lapses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A watch that stops (or dies) is forgotten when its lease runs out: the writers of
    other processes then stop writing rows for it."""
    path = tmp_path / "lapse.db"
    async with _leased(path, monkeypatch, 1.0) as (writer, watcher):
        async with watching(watcher, 10_000) as notices:
            await _write_all(writer, "k", 2)
            with anyio.fail_after(5):
                assert [(await notices.receive()).revision for _ in range(2)] == [1, 2]
        announced = len(_announced(path))
        assert announced == 2
        await anyio.sleep(1.2)  # past the lease of its last renewal
        await _write_all(writer, "k", 2)
        assert len(_announced(path)) == announced


async def test_a_watch_renews_its_lease_and_hears_every_write_past_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Writes over three lease lengths are all heard: the watch renews before it lapses,
    and nothing about it is logged."""
    path = tmp_path / "renew.db"
    async with _leased(path, monkeypatch, 1.0) as (writer, watcher):
        with caplog.at_level(logging.WARNING, "noetic_scratchpad.storage"):
            async with watching(watcher, 10_000) as notices:
                for _ in range(40):
                    await _write_all(writer, "k", 1)
                    await anyio.sleep(0.075)
                with anyio.fail_after(5):
                    heard = [(await notices.receive()).revision for _ in range(40)]
    assert heard == list(range(1, 41))
    assert "may have been missed" not in caplog.text


async def test_a_watch_renewed_after_its_lease_lapsed_says_writes_may_be_missed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """An event loop blocked past the lease: writers may have stopped announcing, so the
    watch warns when it renews, and goes on hearing the writes after that."""
    path = tmp_path / "late.db"
    async with _leased(path, monkeypatch, 0.5) as (writer, watcher):
        with caplog.at_level(logging.WARNING, "noetic_scratchpad.storage"):
            async with watching(watcher, 10_000) as notices:
                time.sleep(0.8)  # noqa: ASYNC251  # blocks the loop and the watch past the lease
                with anyio.fail_after(5):
                    while "may have been missed" not in caplog.text:  # noqa: ASYNC110  # a log line
                        await anyio.sleep(0.01)
                await _write_all(writer, "k", 1)
                with anyio.fail_after(5):
                    assert (await notices.receive()).revision == 1


async def test_announces_false_writes_no_row_even_for_a_watching_process(
    tmp_path: Path,
) -> None:
    """``backend.announces = False`` stops this process's announcements, watched or not;
    set again, the next writes are announced."""
    path = tmp_path / "off.db"
    async with _opened(path) as writer, _opened(path, "the-watcher") as watcher:
        async with watching(watcher, 10_000) as notices:
            writer.announces = False
            await _write_all(writer, "k", 2)
            assert _announced(path) == []
            writer.announces = True
            await _write_all(writer, "k", 1)
            with anyio.fail_after(2):
                assert (await notices.receive()).revision == 3
        assert [row[:2] for row in _announced(path)] == [("k", 3)]


async def test_a_registration_forgets_the_lapsed_ones_of_processes_gone(tmp_path: Path) -> None:
    """Every process start registers a new name: registering removes those that lapsed,
    so the table holds the live watchers only."""
    path = tmp_path / "gone.db"
    async with _opened(path) as writer, _opened(path, "the-watcher") as watcher:
        conn = sqlite3.connect(path, isolation_level=None)
        conn.execute(
            "INSERT INTO scratchpad_kv_watchers VALUES ('gone', ?), ('alive', ?)",
            (time.time() - 1, time.time() + 60),
        )
        conn.close()
        async with watching(watcher):
            await _write_all(writer, "k", 1)
        conn = sqlite3.connect(path)
        origins = {row[0] for row in conn.execute("SELECT origin FROM scratchpad_kv_watchers")}
        conn.close()
    assert origins == {"alive", "the-watcher"}
