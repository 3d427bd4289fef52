"""What the Redis backend adds to the contract suite (which runs on it too): its URL's
options and secrets, values another program wrote, the key layout under a prefix, and the
compare-and-set's answer to a retried reply."""

from __future__ import annotations

import asyncio
import logging

import pytest

from noetic_scratchpad import open_storage
from noetic_scratchpad.errors import StorageConfigError, StorageCorruptError, StorageError
from noetic_scratchpad.storage.base import Commit, Revision
from noetic_scratchpad.storage.redis import RedisStorage
from tests.conftest import REDIS_URL, redis_test_url, require_redis

pytestmark = pytest.mark.asyncio


async def test_the_password_is_never_shown(caplog: pytest.LogCaptureFixture) -> None:
    """Neither repr nor an error's message shows the URL's password, wherever it is."""
    require_redis()
    caplog.set_level(logging.DEBUG)
    async with await open_storage(f"{REDIS_URL}?password=hunter2-secret&prefix=p:") as opened:
        assert "hunter2-secret" not in repr(opened)
        assert "password=***" in repr(opened)
    with pytest.raises(StorageError) as caught:
        await open_storage("redis://admin:hunter2-secret@127.0.0.1:1/0?socket_connect_timeout=1")
    assert "hunter2-secret" not in str(caught.value)
    assert "admin:***@" in str(caught.value)
    assert "nothing was changed" in str(caught.value)
    assert "hunter2-secret" not in caplog.text


async def test_bad_options_are_config_errors() -> None:
    require_redis()
    with pytest.raises(StorageConfigError, match="pool_size"):
        await open_storage(f"{REDIS_URL}?pool_size=0")
    with pytest.raises(StorageConfigError, match="bogus_option"):
        await open_storage(f"{REDIS_URL}?bogus_option=1")
    with pytest.raises(StorageConfigError, match="'prefix' twice"):
        await open_storage(f"{REDIS_URL}?prefix=a&prefix=b")
    with pytest.raises(StorageConfigError, match="'table'"):
        await open_storage(REDIS_URL, table="x")


async def test_a_value_another_program_wrote_is_corrupt_for_that_key_only(
    redis_storage: RedisStorage,
) -> None:
    """A value that is not JSON text fails every read and write of its key with
    StorageCorruptError; the listing still shows it, other keys work, delete clears it."""
    await redis_storage.set("good", {"n": 1})
    await redis_storage.set("bad", {"n": 1})
    client = redis_storage._client
    await client.hset(redis_storage._value_key("bad"), "value", b'{"goal": ')
    with pytest.raises(StorageCorruptError, match="'bad'"):
        await redis_storage.get("bad")
    with pytest.raises(StorageCorruptError):
        await redis_storage.update("bad", lambda value: value)
    assert await redis_storage.list() == ["bad", "good"]
    assert await redis_storage.get("good") == {"n": 1}
    await redis_storage.delete("bad")
    assert await redis_storage.update("bad", lambda value: value) is None
    # Above the revision the key had when it was deleted: revisions never repeat.
    assert (await redis_storage.get_revision("bad")).revision == 2


async def test_prefixes_keep_stores_apart_even_with_glob_characters() -> None:
    """Two prefixes on one database never see each other's keys, and dropping one (with
    glob characters in it, which SCAN's pattern must not read as a pattern) leaves the
    other's keys alone."""
    require_redis()
    base = redis_test_url()
    one = await open_storage(f"{base}*?[a]:")
    two = await open_storage(f"{base}x-a:")  # what the pattern, unescaped, matches
    try:
        await one.set("k", 1)
        await two.set("k", 2)
        assert await one.list() == ["k"]
        assert await one.get("k") == 1
        await one.drop_keys()
        assert await two.get("k") == 2
        assert await one.get("k") is None
    finally:
        await one.aclose()
        await two.aclose()
        await one.drop_keys()
        await two.drop_keys()


async def test_a_retried_compare_and_set_reports_the_write_that_landed(
    redis_storage: RedisStorage,
) -> None:
    """The script run twice with the same arguments (a client's retry after a lost reply)
    answers that the write landed, and writes nothing more."""
    await redis_storage.set("k", "old")
    keys = [redis_storage._value_key("k"), redis_storage._journal_key("k"), redis_storage._index]
    # No channel, no notice (see storage/redis/script.py), then one journal row.
    args = [1, 1, "token-1", 2, b'"new"', "1.5", "k", "", 0, 2, b'[2,1.5,"e"]', 5]
    assert await redis_storage._cas(keys=keys, args=args) == 1
    assert await redis_storage._cas(keys=keys, args=args) == 1
    assert await redis_storage.get_revision("k") == Revision("new", 2)
    assert len(await redis_storage.journal("k", limit=10)) == 1
    # Another token at the same revision is another write: refused.
    other = [1, 1, "token-2", 2, b'"other"', "1.5", "k", "", 0]
    assert await redis_storage._cas(keys=keys, args=other) == 0


async def test_two_clients_racing_on_one_key_lose_nothing() -> None:
    """Two backends (two connection pools, as two processes have) incrementing one key
    with journaled commits: every increment lands once, revisions are consecutive."""
    require_redis()
    url = redis_test_url()
    first, second = await open_storage(url), await open_storage(url)

    def bump(current: Revision) -> Commit:
        return Commit((current.value or 0) + 1, {"n": (current.value or 0) + 1})

    try:
        results = await asyncio.gather(
            *(backend.commit("n", bump, keep=5) for backend in (first, second) * 200)
        )
        assert sorted(result.revision for result in results) == list(range(1, 401))
        assert await first.get_revision("n") == Revision(400, 400)
        rows = await second.journal("n", limit=10)
        assert [row.revision for row in rows] == [400, 399, 398, 397, 396]
        assert [row.entry for row in rows] == [{"n": n} for n in (400, 399, 398, 397, 396)]
    finally:
        await first.aclose()
        await second.aclose()
        await second.drop_keys()


async def test_a_write_waiting_for_a_pooled_connection_has_no_deadline_of_the_pools_own() -> None:
    """redis-py's blocking pool fails a call that waited 20 s for a connection, which under
    a burst of scopes failed writes that were well within their write_timeout: the layer's
    timeouts bound a call, not the pool. An application's own ``timeout=`` still wins."""
    require_redis()
    backend = await RedisStorage.open(redis_test_url())
    tight = await RedisStorage.open(redis_test_url(), timeout=5)
    try:
        assert backend._client.connection_pool.timeout is None
        assert tight._client.connection_pool.timeout == 5
    finally:
        await backend.aclose()
        await tight.aclose()
