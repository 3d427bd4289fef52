"""Rounds across keys on Redis (storage/grouping.py): the batches of many keys queued
while earlier writes are in flight share one read and one pipeline of compare-and-sets,
and each key keeps its own rules: its revisions, journal rows and trim; a key another
writer changed in between runs again alone; a key that fails fails alone."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from noetic_scratchpad._runtime import new_event
from noetic_scratchpad.errors import StorageCorruptError, StorageError
from noetic_scratchpad.storage.base import Commit, Revision
from noetic_scratchpad.storage.grouping import Member
from noetic_scratchpad.storage.redis import RedisStorage
from noetic_scratchpad.storage.redis.store import _Job

pytestmark = pytest.mark.asyncio

KEYS = [f"k{i}" for i in range(20)]


class Spy:
    """Records the rounds a backend runs: the keys of each round of many, and the keys
    written alone."""

    def __init__(self, storage: RedisStorage) -> None:
        self.groups: list[list[str]] = []
        self.alone: list[str] = []
        rounds = storage._rounds
        run_one, run_many = rounds._run_one, rounds._run_many

        async def one(key: str, jobs: Any) -> list[Any]:
            self.alone.append(key)
            return await run_one(key, jobs)

        async def many(members: list[Member]) -> None:
            self.groups.append([member.key for member in members])
            await run_many(members)

        rounds._run_one, rounds._run_many = one, many


def add_one(current: Revision) -> Commit:
    return Commit(current.value + 1, None)


def entry_commit(n: int) -> Callable[[Revision], Commit]:
    return lambda current: Commit({"n": n, "was": current.revision}, {"n": n})


async def write_all(storage: RedisStorage, commits: dict[str, Any], keep: int = 2) -> list[Any]:
    """Every key's commit at once (so that all but the first rounds' wait and group)."""
    return await asyncio.gather(
        *(storage.commit(key, fn, keep=keep) for key, fn in commits.items()),
        return_exceptions=True,
    )


async def test_the_writes_of_many_keys_share_a_round_and_keep_each_keys_journal(
    redis_storage: RedisStorage,
) -> None:
    for key in KEYS:
        await redis_storage.commit(key, entry_commit(-1), keep=2)
    spy = Spy(redis_storage)
    for n in range(3):
        results = await write_all(redis_storage, {key: entry_commit(n) for key in KEYS})
        assert results == [Revision({"n": n, "was": n + 1}, n + 2)] * len(KEYS)
    for key in KEYS:
        assert await redis_storage.get_revision(key) == Revision({"n": 2, "was": 3}, 4)
        rows = await redis_storage.journal(key, limit=9)
        assert [(row.revision, row.entry) for row in rows] == [(4, {"n": 2}), (3, {"n": 1})]
    # 60 writes: two rounds of one key at a time, the keys queued behind them in one.
    assert len(spy.alone) + sum(len(group) for group in spy.groups) == 60
    assert len(spy.alone) + len(spy.groups) <= 60 / 4


async def test_journal_reads_above_a_revision_are_grouped_too(redis_storage: RedisStorage) -> None:
    for key in KEYS:
        await redis_storage.commit(key, entry_commit(0), keep=5)
        await redis_storage.commit(key, entry_commit(1), keep=5)
    spy = Spy(redis_storage)
    seen: dict[str, list[int]] = {}

    def after_one(key: str) -> Any:
        def fn(current: Revision, rows: list[Any]) -> Commit:
            seen[key] = [row.revision for row in rows]
            return Commit({"rows": len(rows)}, {"n": 2})

        return fn

    results = await asyncio.gather(
        *(redis_storage.commit_with_journal(key, after_one(key), keep=5, after=1) for key in KEYS)
    )
    assert results == [Revision({"rows": 1}, 3)] * len(KEYS)
    assert seen == {key: [2] for key in KEYS}
    assert sum(len(group) for group in spy.groups) >= 10


async def test_a_key_another_writer_changed_in_between_retries_alone(
    redis_storage: RedisStorage,
) -> None:
    """The commit of ``contested`` in a round writes the key through another client (as
    another process would) before the round's compare-and-sets are sent: that key's
    compare-and-set fails, it reads again and runs again alone; the others land."""
    for key in KEYS:
        await redis_storage.set(key, 0)
    calls: list[int] = []

    def contested(current: Revision) -> Commit:
        calls.append(current.revision)
        if len(calls) == 1:  # the round's run: another process writes first
            with ThreadPoolExecutor(1) as pool:
                elsewhere = _write_elsewhere(
                    redis_storage.settings.url, redis_storage.settings.prefix
                )
                pool.submit(asyncio.run, elsewhere).result()
        return Commit(current.value + 1, {"n": current.value + 1})

    spy = Spy(redis_storage)
    commits: dict[str, Any] = {
        key: (lambda current: Commit(current.value + 1, None)) for key in KEYS
    }
    commits[KEYS[-1]] = contested
    results = await write_all(redis_storage, commits)
    assert calls == [1, 2]  # run in the round, then again on the other write's revision
    assert results[:-1] == [Revision(1, 2)] * (len(KEYS) - 1)
    assert results[-1] == Revision(101, 3)
    assert KEYS[-1] in spy.groups[0]
    assert spy.alone[2:] == [KEYS[-1]]  # after the two first keys, only it ran alone
    rows = await redis_storage.journal(KEYS[-1], limit=9)
    assert [(row.revision, row.entry) for row in rows] == [(3, {"n": 101}), (2, {"other": 1})]


async def _write_elsewhere(url: str, prefix: str) -> None:
    """The write of another process on ``k19``, on a client of its own."""
    backend = await RedisStorage.open(url, prefix=prefix)
    try:
        await backend.commit("k19", lambda current: Commit(100, {"other": 1}), keep=2)
    finally:
        await backend.aclose()


async def test_a_failing_key_fails_alone(redis_storage: RedisStorage) -> None:
    for key in KEYS:
        await redis_storage.set(key, 0)
    await redis_storage._client.hset(redis_storage._value_key(KEYS[-1]), "value", b"not json")
    spy = Spy(redis_storage)

    def refuse(current: Revision) -> Commit:
        raise ValueError("refused")

    commits: dict[str, Any] = {
        key: (lambda current: Commit(current.value + 1, None)) for key in KEYS
    }
    commits[KEYS[-2]] = refuse
    results = await write_all(redis_storage, commits)
    assert isinstance(results[-1], StorageCorruptError)
    assert isinstance(results[-2], ValueError)
    assert results[:-2] == [Revision(1, 2)] * (len(KEYS) - 2)
    assert {KEYS[-2], KEYS[-1]} <= set(spy.groups[0])
    assert spy.alone == KEYS[:2]  # neither failure ran again
    assert await redis_storage.get_revision(KEYS[-2]) == Revision(0, 1)


async def test_a_key_the_server_refuses_to_read_fails_alone(redis_storage: RedisStorage) -> None:
    for key in KEYS:
        await redis_storage.set(key, 0)
    await redis_storage._client.delete(redis_storage._value_key(KEYS[-1]))
    await redis_storage._client.set(redis_storage._value_key(KEYS[-1]), b"a string, not a hash")
    spy = Spy(redis_storage)
    results = await write_all(redis_storage, dict.fromkeys(KEYS, add_one))
    assert isinstance(results[-1], StorageError)
    assert "WRONGTYPE" in str(results[-1])
    assert "nothing was written" in str(results[-1])
    assert results[:-1] == [Revision(1, 2)] * (len(KEYS) - 1)
    assert KEYS[-1] in spy.groups[0]
    assert spy.alone[2:] == [KEYS[-1]]  # its error is the one it has alone


async def test_a_script_the_server_does_not_know_runs_alone_and_is_loaded(
    redis_storage: RedisStorage,
) -> None:
    for key in KEYS:
        await redis_storage.set(key, 0)
    redis_storage._cas.sha = "0" * 40  # as after the server's SCRIPT FLUSH or a restart
    members = [
        Member(key, [_Job(lambda current: Commit(1, None), 0, None)], new_event()) for key in KEYS
    ]
    await redis_storage._write_group(members)
    assert all(member.finished and member.alone for member in members)
    assert await redis_storage.get_revision(KEYS[0]) == Revision(0, 1)  # nothing written
    results = await write_all(
        redis_storage, {key: (lambda current: Commit(1, None)) for key in KEYS}
    )
    assert results == [Revision(1, 2)] * len(KEYS)
    assert redis_storage._cas.sha != "0" * 40


async def test_a_cancelled_write_is_written_whole_or_not_at_all(
    redis_storage: RedisStorage,
) -> None:
    for key in KEYS:
        await redis_storage.commit(key, entry_commit(0), keep=50)
    tasks = [
        asyncio.create_task(redis_storage.commit(key, entry_commit(n), keep=50))
        for n in range(1, 6)
        for key in KEYS
    ]
    await asyncio.sleep(0.002)
    for task in tasks[::3]:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    await redis_storage._batcher.wait_idle()
    for key in KEYS:
        current = await redis_storage.get_revision(key)
        assert current is not None
        rows = await redis_storage.journal(key, limit=50)
        # Value and journal agree: one row per revision, the newest the value's.
        assert [row.revision for row in rows] == list(range(current.revision, 0, -1))
        assert rows[0].entry == {"n": current.value["n"]}
