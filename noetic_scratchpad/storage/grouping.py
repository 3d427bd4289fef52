"""Writes of many keys queued at once share one transaction (or one round of requests).

A backend's writes are combined per key first (its ``KeyedBatcher``: the updates of one
key queued while one runs go together); :class:`GroupedWrites` combines the batches of
different keys. At most ``limit`` groups run at a time: a batch that arrives while they
all run waits, and the next group to start takes every batch waiting by then (up to
:data:`MAX_GROUP`). When the writers keep up nothing waits: a batch runs at once, alone,
with no timer and nothing to group. So under load the round trips, the commits and this
process's work per request are shared by the keys of a group, and an uncontended write
costs what it did.

``run_one(key, jobs)`` writes one key's batch by itself; ``run_many(members)`` writes a
group and finishes each :class:`Member` with its outcomes, with the exception that fails
it, or as to run alone (``finish(alone=True)``: a key the group could not take, such as a
row another transaction holds, or one to retry after a conflict), which then runs by
``run_one``. Each key keeps its own rules: the backend's group write applies each batch
as its write alone would.

``hold``: seconds after which waiting batches start a group anyway, even with ``limit``
groups running. PostgreSQL needs it: a group running may wait for a row lock another
process holds, and no key should wait long for another key's lock. A Redis round never
waits for a lock, and passes ``None``.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from contextlib import suppress
from dataclasses import dataclass
from typing import Any

from .._runtime import Event, new_event
from ..locks import cut_short_at_shutdown

__all__ = ("MAX_GROUP", "GroupedWrites", "Member")

#: The most keys one group writes.
MAX_GROUP = 256


@dataclass(eq=False, slots=True)
class Member:
    """One key's batch in a group; ``alone``: it is to run by itself instead."""

    key: str
    jobs: Sequence[Any]
    woken: Event
    lead: bool = False  # woken to start the next group
    finished: bool = False
    outcome: Any = None  # the jobs' outcomes, or the exception that fails them all
    alone: bool = False

    def finish(self, outcome: Any = None, *, alone: bool = False) -> None:
        self.outcome, self.alone, self.finished = outcome, alone, True


RunOne = Callable[[str, Sequence[Any]], Awaitable[list[Any]]]
RunMany = Callable[[list[Member]], Awaitable[None]]


class GroupedWrites:
    """Runs each key's batch at once while fewer than ``limit`` groups run, and the
    batches queued meanwhile in one group together (see the module's text)."""

    def __init__(
        self, run_one: RunOne, run_many: RunMany, *, limit: int, hold: float | None = None
    ) -> None:
        self._run_one = run_one
        self._run_many = run_many
        self.limit = max(1, limit)
        self._hold = hold
        self._running = 0
        self._waiting: deque[Member] = deque()
        self._overdue: asyncio.TimerHandle | None = None

    async def run(self, key: str, jobs: Sequence[Any]) -> list[Any]:
        """The outcomes of ``jobs`` on ``key``, once written (or the exception failing
        them all, raised)."""
        if self._running < self.limit:  # nothing waits: a write of its own, now
            self._running += 1
            try:
                return await self._run_one(key, jobs)
            finally:
                self._running -= 1
                self._wake_next()
        member = Member(key, jobs, new_event())
        self._waiting.append(member)
        if self._overdue is None:
            self._arm()
        try:
            await member.woken.wait()
        except BaseException:
            if not member.finished:
                with suppress(ValueError):
                    self._waiting.remove(member)
                if member.lead:  # the group it was to start starts elsewhere
                    self._running -= 1
                    self._wake_next()
                self._rearm()
            raise
        if not member.finished:
            await self._lead(member)
        if member.alone:
            return await self._run_one(key, jobs)
        if isinstance(member.outcome, BaseException):
            raise member.outcome
        outcomes: list[Any] = member.outcome
        return outcomes

    async def _lead(self, member: Member) -> None:
        """Run ``member`` with the batches waiting now, in one group."""
        group = [member]
        try:
            while self._waiting and len(group) < MAX_GROUP:
                group.append(self._waiting.popleft())
            self._rearm()
            if len(group) == 1:
                member.finish(await self._run_one(member.key, member.jobs))
            else:
                await self._run_many(group)
        except Exception as exc:
            for one in group:
                if not one.finished:
                    one.finish(exc)
        finally:
            for one in group:
                if not one.finished:  # cancelled under way (the loop is closing): it may land
                    one.finish(cut_short_at_shutdown())
                if one is not member:
                    one.woken.set()
            self._running -= 1
            self._wake_next()

    def _start(self, first: Member) -> None:
        first.lead = True
        self._running += 1
        first.woken.set()

    def _wake_next(self) -> None:
        if self._waiting and self._running < self.limit:
            self._start(self._waiting.popleft())

    def _arm(self) -> None:
        if self._hold is not None:
            self._overdue = asyncio.get_running_loop().call_later(self._hold, self._start_late)

    def _start_late(self) -> None:
        """The batches have waited ``hold`` seconds: the groups running (waiting for row
        locks another process holds, say) are not to hold them up any longer."""
        self._overdue = None
        if self._waiting:
            self._start(self._waiting.popleft())
            self._rearm()

    def _rearm(self) -> None:
        """The late start is due ``hold`` seconds from now if batches wait, else never."""
        if self._overdue is not None:
            self._overdue.cancel()
            self._overdue = None
        if self._waiting:
            self._arm()
