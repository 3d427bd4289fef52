"""The scheduler of writes across keys (storage/grouping.py) that PostgreSQL and Redis
share: under load, batches of many keys run as one group; a batch cancelled while it
waits, in every way an application cancels (``task.cancel()``, ``asyncio.timeout``, an
anyio cancel scope), is never run and never fails the others; a batch cancelled when
woken to lead hands the group on; neither leaves the scheduler holding a slot.

(The backends call it from their per-key batcher's own tasks, so a caller's cancellation
ends only that caller's wait; see tests/storage/test_group_races.py for those.)"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import anyio
import pytest

from noetic_scratchpad.errors import StorageOutcomeUnknownError
from noetic_scratchpad.storage.grouping import GroupedWrites, Member

from .helpers import CANCELS, cancelled

pytestmark = pytest.mark.asyncio


class Store:
    """Keys written by ``run_one`` (alone) or ``run_many`` (a group), each run taking a
    turn of the loop, as a round trip would; a key is written whole or not at all. A write
    of the key ``held`` alone waits for ``release`` first (a row another process locks);
    with ``groups_wait`` set, every group waits for it (a round trip under way)."""

    def __init__(self, held: str | None = None) -> None:
        self.values: dict[str, int] = {}
        self.groups: list[list[str]] = []
        self.held = held
        self.release = asyncio.Event()
        self.groups_wait: asyncio.Event | None = None

    async def run_one(self, key: str, jobs: Sequence[Any]) -> list[Any]:
        if key == self.held:
            await self.release.wait()
        await asyncio.sleep(0.001)
        return [self._write(key, job) for job in jobs]

    async def run_many(self, members: list[Member]) -> None:
        self.groups.append([member.key for member in members])
        if self.groups_wait is not None:
            await self.groups_wait.wait()
        await asyncio.sleep(0.001)
        for member in members:
            member.finish([self._write(member.key, job) for job in member.jobs])

    def _write(self, key: str, job: Any) -> int:
        self.values[key] = self.values.get(key, 0) + job
        return self.values[key]


@pytest.mark.parametrize("how", CANCELS)
async def test_batches_cancelled_while_waiting_never_run_nor_hold_a_slot(how: str) -> None:
    store = Store(held="stuck")
    groups = GroupedWrites(store.run_one, store.run_many, limit=1)
    keys = [f"k{i}" for i in range(40)]
    kept: dict[str, list[Any]] = {}

    async def write(key: str) -> None:
        kept[key] = await groups.run(key, [1])

    async def release_later() -> None:
        await asyncio.sleep(0.05)  # after the cancellations: they hit waiting batches
        store.release.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(write, "stuck")
        await asyncio.sleep(0)
        for i, key in enumerate(keys):
            if i % 3 == 0:
                tg.start_soon(cancelled, how, lambda key=key: write(key), 0.01)
            else:
                tg.start_soon(write, key)
        tg.start_soon(release_later)
    assert any(len(group) > 1 for group in store.groups)  # they did queue and group
    for i, key in enumerate(keys):
        if i % 3:
            assert kept[key] == [1]
            assert store.values[key] == 1
        else:
            assert key not in store.values  # cancelled while waiting: never run
    assert groups._running == 0  # no slot kept
    assert not groups._waiting
    # The scheduler goes on: a write now runs at once, alone.
    assert await asyncio.wait_for(groups.run("after", [5]), 1) == [5]


async def test_a_cancelled_leader_hands_its_group_on() -> None:
    """The batch woken to start the next group is cancelled before it runs it: the next
    waiting batch starts it instead, and every other batch is written."""
    store = Store(held="first")
    groups = GroupedWrites(store.run_one, store.run_many, limit=1)
    first = asyncio.create_task(groups.run("first", [1]))
    await asyncio.sleep(0)
    leader = asyncio.create_task(groups.run("lead", [1]))  # first in the queue: next to lead
    await asyncio.sleep(0)
    others = [f"k{i}" for i in range(5)]
    waiting = [asyncio.create_task(groups.run(key, [1])) for key in others]
    await asyncio.sleep(0)
    store.release.set()
    # The first write ends and wakes "lead" to start a group; the cancel must come in
    # the loop's turns between the two, which polling catches and an event cannot.
    while not first.done():  # noqa: ASYNC110
        await asyncio.sleep(0)
    assert groups._running == 1
    assert len(groups._waiting) == len(others)
    leader.cancel()  # woken, before it resumes (as when its batcher's task is cancelled)
    await asyncio.gather(leader, return_exceptions=True)
    assert await asyncio.wait_for(asyncio.gather(*waiting), 2) == [[1]] * len(others)
    assert await first == [1]
    assert "lead" not in store.values  # cancelled before it ran: nothing written
    assert groups._running == 0
    assert not groups._waiting


async def test_waiting_batches_start_late_when_the_running_ones_hold_too_long() -> None:
    """With ``hold``, batches waiting behind a stuck group start a group of their own."""
    store = Store(held="stuck")
    groups = GroupedWrites(store.run_one, store.run_many, limit=1, hold=0.02)
    blocked = asyncio.create_task(groups.run("stuck", [1]))
    await asyncio.sleep(0)
    results = await asyncio.wait_for(
        asyncio.gather(*(groups.run(f"k{i}", [1]) for i in range(5))), 1
    )
    assert results == [[1]] * 5
    assert not blocked.done()
    store.release.set()
    assert await blocked == [1]


async def test_a_group_cut_short_tells_its_members_their_writes_may_have_landed() -> None:
    """The task running a group is cancelled while the group is under way (its batcher's
    task, as the event loop closes): the other batches of the group learn that their
    writes may have landed, not that they were abandoned, and the scheduler keeps no slot."""
    store = Store(held="first")
    store.groups_wait = asyncio.Event()
    groups = GroupedWrites(store.run_one, store.run_many, limit=1)
    first = asyncio.create_task(groups.run("first", [1]))
    await asyncio.sleep(0)
    leader = asyncio.create_task(groups.run("lead", [1]))
    members = [asyncio.create_task(groups.run(f"k{i}", [1])) for i in range(3)]
    await asyncio.sleep(0)
    store.release.set()
    await first
    while not store.groups:  # noqa: ASYNC110  # the group is under way
        await asyncio.sleep(0)
    assert store.groups == [["lead", "k0", "k1", "k2"]]
    leader.cancel()
    outcomes = await asyncio.gather(leader, *members, return_exceptions=True)
    assert isinstance(outcomes[0], asyncio.CancelledError)
    for outcome in outcomes[1:]:
        assert isinstance(outcome, StorageOutcomeUnknownError), outcome
        assert "may have been written or not" in str(outcome)
    assert groups._running == 0
    assert await asyncio.wait_for(groups.run("after", [5]), 1) == [5]
