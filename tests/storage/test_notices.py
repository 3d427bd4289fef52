"""Change notices: their size limit, and PostgreSQL's ``LISTEN``/``NOTIFY`` watch."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest

from noetic_scratchpad.keys import MAX_ID_BYTES, state_key
from noetic_scratchpad.storage import Commit, StorageBackend, open_storage
from noetic_scratchpad.storage.notices import (
    MAX_NOTICE_BYTES,
    ChangeNotice,
    decode_notice,
    encode_notice,
    watch_changes,
)
from tests.conftest import postgres_test_url, redis_test_url, require_postgres, require_redis
from tests.storage.helpers import watching


def test_a_notice_fits_notify_s_payload_dropping_the_call_id_first() -> None:
    notice = ChangeNotice("k" * 7_000, "host:1:abc", 7, False, "tool", "c" * 2_000)
    text = encode_notice(notice)
    assert text is not None
    assert len(text.encode()) <= MAX_NOTICE_BYTES < 8_000
    assert decode_notice(text) == ChangeNotice("k" * 7_000, "host:1:abc", 7, False, "tool", None)
    short = ChangeNotice("k", "o", None, True)
    assert decode_notice(encode_notice(short) or "") == short


def test_a_key_too_long_for_a_notice_is_not_announced(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, "noetic_scratchpad.storage"):
        assert encode_notice(ChangeNotice("k" * 9_000, "o", 1)) is None
    assert "not announced" in caplog.text


def test_anything_else_is_no_notice(caplog: pytest.LogCaptureFixture) -> None:
    for text in ("", "[]", '{"a": 1}', '["x","k",1,"o",null,null]', '["w","k","1","o",null,null]'):
        assert decode_notice(text) is None


def test_a_backend_without_the_capability_watches_nothing() -> None:
    from noetic_scratchpad.storage import MemoryStorage

    assert watch_changes(MemoryStorage()) is None


@asynccontextmanager
async def _pair(
    kind: str, tmp_path: Path | None = None
) -> AsyncIterator[tuple[StorageBackend, StorageBackend]]:
    """Two backends on one store: a writer and a watcher."""
    if kind == "sqlite":
        assert tmp_path is not None
        url = f"sqlite:///{tmp_path / 'shared.db'}"
    elif kind == "postgres":
        require_postgres()
        url = postgres_test_url()
    else:
        require_redis()
        url = redis_test_url()
    async with await open_storage(url) as writer, await open_storage(url) as watcher:
        try:
            yield writer, watcher
        finally:
            if kind == "postgres":
                await watcher.drop_table()  # type: ignore[attr-defined]
            elif kind == "redis":
                await watcher.drop_keys()  # type: ignore[attr-defined]


async def _kill_listener(kind: str, writer: StorageBackend, watcher: StorageBackend) -> int:
    """Cut the watcher's listening connection from the server's side; how many were cut."""
    if kind == "postgres":
        channel = watcher.settings.channel  # type: ignore[attr-defined]
        async with writer._pool.acquire() as conn:  # type: ignore[attr-defined]
            killed: int = await conn.fetchval(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE query LIKE $1",
                f"%LISTEN%{channel}%",
            )
        return killed
    client = writer._client  # type: ignore[attr-defined]
    name = f"noetic-scratchpad-watch:{watcher.channel}"  # type: ignore[attr-defined]
    ids = [c["id"] for c in await client.client_list() if c.get("name") == name]
    for client_id in ids:
        await client.client_kill_filter(_id=client_id)
    return len(ids)


@pytest.mark.asyncio
@pytest.mark.parametrize("kind", ["postgres", "redis", "sqlite"])
async def test_the_largest_scope_key_is_announced_with_its_call_id(
    kind: str, tmp_path: Path
) -> None:
    """A scope id of the largest size, every character encoded to 6 bytes, and a call id of
    the largest size still travel whole, far below NOTIFY's 8,000 bytes."""
    async with _pair(kind, tmp_path) as (writer, watcher):
        watcher.origin = "the-watching-process"  # type: ignore[attr-defined]
        origin = writer.origin  # type: ignore[attr-defined]
        key = state_key("scratchpad", "thread", "é" * (MAX_ID_BYTES // 2))
        call_id = "c" * 128
        async with watching(watcher) as notices:
            await writer.commit(
                key, lambda _c: Commit({"a": 1}, None, None, ("tool", call_id)), keep=0
            )
            with anyio.fail_after(2):
                got = await notices.receive()
        if kind == "sqlite":  # not journaled (keep=0): the file knows no source
            assert got == ChangeNotice(key, origin, 1, False, None, None)
            return
        assert got == ChangeNotice(key, origin, 1, False, "tool", call_id)
        size = len((encode_notice(got) or "").encode())
        assert 1_500 < size < 2_000  # the key's 1,536 encoded characters and the rest


@pytest.mark.asyncio
async def test_sqlite_announces_each_journaled_write_of_a_batch_and_a_delete(
    tmp_path: Path,
) -> None:
    """Writes of one key batched into one transaction are one row of the table but one
    journal row each: each is told, with the source and call id its entry names."""
    async with _pair("sqlite", tmp_path) as (writer, watcher):
        watcher.origin = "the-watching-process"  # type: ignore[attr-defined]
        async with watching(watcher) as notices:

            def journaled(n: int) -> Commit:
                return Commit({"n": n}, {"source": "tool", "call_id": f"c{n}"}, None)

            async with anyio.create_task_group() as tg:
                for n in range(3):
                    tg.start_soon(lambda n=n: writer.commit("k", lambda _c: journaled(n), keep=5))
            await writer.delete("k")
            with anyio.fail_after(2):
                got = [await notices.receive() for _ in range(4)]
        assert [(n.revision, n.deleted, n.source) for n in got] == [
            (1, False, "tool"),
            (2, False, "tool"),
            (3, False, "tool"),
            (3, True, None),
        ]
        assert sorted(str(n.call_id) for n in got[:3]) == ["c0", "c1", "c2"]


@pytest.mark.asyncio
@pytest.mark.parametrize("kind", ["postgres", "redis"])
async def test_a_watch_leaves_out_its_own_process_s_changes(kind: str) -> None:
    async with _pair(kind) as (writer, watcher):
        async with watching(watcher) as notices:
            await writer.set("mine", 1)  # the same process: not announced to it
            writer.origin = "the-other-process"  # type: ignore[attr-defined]
            await writer.set("theirs", 1)
            await writer.set("theirs", 2)  # an existing key (PostgreSQL: one statement)
            await writer.delete("theirs")
            with anyio.fail_after(2):
                got = [await notices.receive() for _ in range(3)]
        assert [(n.key, n.revision, n.deleted) for n in got] == [
            ("theirs", 1, False),
            ("theirs", 2, False),
            ("theirs", None, True),
        ]


@pytest.mark.asyncio
@pytest.mark.parametrize("kind", ["postgres", "redis"])
async def test_the_listener_comes_back_after_its_connection_is_cut(
    kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    async with _pair(kind) as (writer, watcher):
        writer.origin = "the-other-process"  # type: ignore[attr-defined]
        with caplog.at_level(logging.WARNING, "noetic_scratchpad.storage"):
            async with watching(watcher) as notices:
                await writer.set("k", 1)
                with anyio.fail_after(2):
                    assert (await notices.receive()).revision == 1
                assert await _kill_listener(kind, writer, watcher) == 1
                # Written until heard: what is written before the listener is back is lost.
                heard = None
                with anyio.fail_after(10):
                    while heard is None:
                        await writer.set("k", 2)
                        with anyio.move_on_after(0.2):
                            heard = await notices.receive()
        assert "was lost; opening it again" in caplog.text
        assert heard.key == "k"


def test_a_notice_is_json_of_identifying_fields_only() -> None:
    text = encode_notice(ChangeNotice("scopes/l/thread/t/state", "o", 3, False, "api", None))
    assert json.loads(text or "") == ["w", "scopes/l/thread/t/state", 3, "o", "api", None]


@pytest.mark.asyncio
async def test_a_core_closed_while_its_listener_connects_leaves_no_connection_open() -> None:
    """The watch is cancelled at every point of its start (the core closes at once): the
    listening connection, opened or half opened, is closed each time, not left to the
    garbage collector (asyncpg's "unclosed connection")."""
    import gc
    import warnings

    from noetic_scratchpad.core import ScratchpadCore

    require_postgres()
    backend = await open_storage(postgres_test_url())
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ResourceWarning)
            for pause in [0.0, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05] * 3:
                core = ScratchpadCore(storage=backend)
                await core.open()
                await anyio.sleep(pause)
                await core.aclose()
            gc.collect()
        leaked = [w for w in caught if "unclosed connection" in str(w.message)]
        assert leaked == []
    finally:
        await backend.drop_table()  # type: ignore[attr-defined]
        await backend.aclose()
