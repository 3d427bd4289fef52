"""Per-key serialization with combining: the lock every scope's writes go through.

A :class:`KeyedBatcher` is a per-key lock whose holder does the work of everyone queued
behind it. The first writer of a key becomes its leader and runs a batch; writers that
arrive meanwhile queue up, and when the batch is done leadership passes to the first of
them, who runs everything queued as the next batch. Each writer gets its own job's result,
and only after its batch has finished (for storage: after the commit).

A batch that carries other writers' jobs is shielded from the leader's cancellation; a
batch of the leader's own job alone is not, so a timeout can abandon it (a storage write
abandoned that way may still land).

Keys are forgotten as soon as nothing is queued or running for them, so the registry does
not grow with the number of scopes ever seen.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import anyio

__all__ = ("BatchRunner", "KeyedBatcher")

K = TypeVar("K", bound=Hashable)
J = TypeVar("J")
R = TypeVar("R")

#: Runs one batch for one key; returns one result (or the exception to raise) per job, in order.
BatchRunner = Callable[[K, list[J]], Awaitable[Sequence["R | BaseException"]]]


#: What a queued writer sleeps on: a future of the running asyncio loop, else (trio) an
#: anyio event. anyio.Event() costs several times a future (it looks up the running async
#: library each time), and a batch of 100 writers makes 100 of them.
_Wake = asyncio.Future[None] | anyio.Event


def _new_wake() -> _Wake:
    loop = asyncio._get_running_loop()
    return anyio.Event() if loop is None else loop.create_future()


def _set(wake: _Wake) -> None:
    if isinstance(wake, anyio.Event):
        wake.set()
    elif not wake.done():  # done: its writer was cancelled while it slept
        wake.set_result(None)


@dataclass(eq=False, slots=True)
class _Waiter(Generic[J]):
    job: J
    # Made only for a writer that has to wait: an uncontended leader never needs one.
    wake: _Wake | None = None
    lead: bool = False
    done: bool = False
    outcome: Any = None
    failed: bool = False

    def result(self) -> Any:
        if self.failed:
            raise self.outcome
        return self.outcome


class KeyedBatcher(Generic[K, J, R]):
    """Serializes jobs per key and runs the jobs queued for one key as one batch."""

    def __init__(self, run_batch: BatchRunner[K, J, R], *, max_batch: int = 256) -> None:
        if max_batch < 1:
            raise ValueError(f"max_batch must be at least 1, not {max_batch}")
        self._run_batch = run_batch
        self.max_batch = max_batch
        self._queues: dict[K, deque[_Waiter[J]]] = {}
        # Whether the last batch carried several jobs: writers are arriving together.
        self._contended = False

    def __len__(self) -> int:
        """How many keys have work queued or running (0 when idle)."""
        return len(self._queues)

    async def submit(self, key: K, job: J) -> R:
        """Run ``job`` for ``key`` after every job queued before it; return its result."""
        waiter: _Waiter[J] = _Waiter(job)
        queue = self._queues.get(key)
        if queue is None:
            queue = self._queues[key] = deque()
            waiter.lead = True
        queue.append(waiter)
        if waiter.lead and self._contended:
            # Writers woken together by the last batch are ready to run: let them queue up
            # first, so they share this batch instead of waiting for the next one.
            try:
                await anyio.lowlevel.checkpoint()
            except BaseException:
                queue.remove(waiter)
                self._hand_off(key, queue)
                raise
        elif not waiter.lead:
            waiter.wake = wake = _new_wake()
            try:
                if isinstance(wake, anyio.Event):
                    await wake.wait()
                else:
                    await wake  # cancelling the task cancels the future too: harmless
            except BaseException:  # cancelled while queued
                if waiter.lead:
                    queue.remove(waiter)
                    self._hand_off(key, queue)
                elif not waiter.done and waiter in queue:
                    queue.remove(waiter)
                raise
            if not waiter.lead:
                result: R = waiter.result()
                return result
        try:
            await self._lead(key, queue)
        finally:
            self._hand_off(key, queue)
        led: R = waiter.result()
        return led

    async def _lead(self, key: K, queue: deque[_Waiter[J]]) -> None:
        take = min(len(queue), self.max_batch)
        batch = [queue.popleft() for _ in range(take)]
        self._contended = take > 1
        jobs = [waiter.job for waiter in batch]
        if len(batch) == 1:
            # Only the leader's own job: its cancellation (a timeout, say) may abandon it,
            # and an error is simply its own.
            outcomes: Sequence[Any] = await self._run_checked(key, jobs)
        else:
            # Shielded: the jobs of other tasks ride on this batch, so the leader's
            # cancellation must not abandon them half-way.
            with anyio.CancelScope(shield=True):
                try:
                    outcomes = await self._run_checked(key, jobs)
                except BaseException as exc:
                    outcomes = [exc] * len(batch)
        for waiter, outcome in zip(batch, outcomes, strict=True):
            waiter.outcome = outcome
            waiter.failed = isinstance(outcome, BaseException)
            waiter.done = True
            if waiter.wake is not None:  # queued behind the leader, waiting
                _set(waiter.wake)

    async def _run_checked(self, key: K, jobs: list[J]) -> Sequence[Any]:
        outcomes = await self._run_batch(key, jobs)
        if len(outcomes) != len(jobs):
            raise RuntimeError(
                f"batch runner returned {len(outcomes)} results for {len(jobs)} jobs"
            )
        return outcomes

    def _hand_off(self, key: K, queue: deque[_Waiter[J]]) -> None:
        """Wake the next queued writer as leader, or forget the key."""
        if queue:
            successor = queue[0]
            successor.lead = True
            if successor.wake is not None:
                _set(successor.wake)
        else:
            del self._queues[key]
