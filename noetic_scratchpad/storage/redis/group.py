"""Rounds across keys: the writes of many keys queued at once share their round trips.

Each key's writes are already combined per key (the store's ``KeyedBatcher``); this module
combines the batches of different keys. At most ``limit`` rounds of writes are in flight at
a time: a batch that arrives while they all are waits, and the next round to start takes
every batch waiting by then (up to :data:`MAX_GROUP`). A round of one key is the store's
own write (a read, then a compare-and-set); a round of many reads every key in one
``MULTI``/``EXEC`` and sends every key's compare-and-set in one pipeline, so that they cost
this process two round trips' work in all, not two each. (With the server on the other
core, this process's CPU sets the rate of 100 writers on 100 keys.) When the writers keep
up, nothing waits: a write runs at once, with no timer and no grouping of its own.

Each key keeps its own rules: its compare-and-set checks its own revision and writes its
journal rows, their trim and its announcement, as alone; a key whose compare-and-set finds
another write in between (or whose script the server does not know yet) runs again alone,
reading afresh; a key that fails fails alone. Unlike PostgreSQL's, a round never waits for
a lock another process holds, so no batch needs a timer to start without it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from contextlib import suppress
from dataclasses import dataclass
from typing import Any

from ..._runtime import Event, new_event
from ...locks import WorkAbandoned

__all__ = ("MAX_GROUP", "Member", "Rounds")

#: The most keys one round writes.
MAX_GROUP = 256


@dataclass(eq=False, slots=True)
class Member:
    """One key's batch in a round; ``alone``: it is to run again in a round of its own."""

    key: str
    jobs: Sequence[Any]
    woken: Event
    lead: bool = False  # woken to start the next round
    finished: bool = False
    outcome: Any = None  # the jobs' outcomes, or the exception that fails them all
    alone: bool = False

    def finish(self, outcome: Any = None, *, alone: bool = False) -> None:
        self.outcome, self.alone, self.finished = outcome, alone, True


RunOne = Callable[[str, Sequence[Any]], Awaitable[list[Any]]]
RunMany = Callable[[list[Member]], Awaitable[None]]


class Rounds:
    """Runs each key's batch at once while fewer than ``limit`` rounds are in flight, and
    the batches queued meanwhile in one round together."""

    def __init__(self, run_one: RunOne, run_many: RunMany, *, limit: int) -> None:
        self._run_one = run_one
        self._run_many = run_many
        self.limit = max(1, limit)
        self._running = 0
        self._waiting: deque[Member] = deque()

    async def run(self, key: str, jobs: Sequence[Any]) -> list[Any]:
        """The outcomes of ``jobs`` on ``key``, once written (or the exception failing
        them all, raised)."""
        if self._running < self.limit:  # nothing waits: a round of its own, now
            self._running += 1
            try:
                return await self._run_one(key, jobs)
            finally:
                self._running -= 1
                self._wake_next()
        member = Member(key, jobs, new_event())
        self._waiting.append(member)
        try:
            await member.woken.wait()
        except BaseException:
            if not member.finished:
                with suppress(ValueError):
                    self._waiting.remove(member)
                if member.lead:  # the round it was to start starts elsewhere
                    self._running -= 1
                    self._wake_next()
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
        """Run ``member`` with the batches waiting now, in one round."""
        group = [member]
        try:
            while self._waiting and len(group) < MAX_GROUP:
                group.append(self._waiting.popleft())
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
                if not one.finished:  # cancelled: the loop is closing
                    one.finish(_abandoned())
                if one is not member:
                    one.woken.set()
            self._running -= 1
            self._wake_next()

    def _wake_next(self) -> None:
        if self._waiting and self._running < self.limit:
            first = self._waiting.popleft()
            first.lead = True
            self._running += 1
            first.woken.set()


def _abandoned() -> WorkAbandoned:
    return WorkAbandoned("the write was abandoned: its event loop is shutting down")
