"""Per-key serialization with combining: the queue every storage write goes through.

A :class:`KeyedBatcher` keeps one queue per key. The first job of an idle key starts a
worker task for it; the worker takes everything queued (up to ``max_batch``) as one batch,
runs it, hands each job its own outcome, and repeats until the queue is empty, when the
key is forgotten, so the registry does not grow with the number of scopes ever seen.

The worker is a task of the batcher's own (its :class:`~._runtime.TaskOwner`, which an
owning object may host in its task group: ``batcher.tasks.hosted_by(group)``), never a
caller's: cancelling a caller (a timeout, ``task.cancel()``, an anyio cancel scope) only ends
that caller's wait. A job cancelled while still queued is removed and never runs; one
already in a running batch runs to the end (its write may land), and the other jobs of that
batch get their results as if nothing happened. Each caller gets its result only after its
batch has finished (for storage: after the commit).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable, Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import anyio

from ._runtime import Event, TaskOwner, new_event
from .errors import StorageOutcomeUnknownError

__all__ = ("BatchRunner", "KeyedBatcher", "WorkAbandoned", "cut_short_at_shutdown")

K = TypeVar("K", bound=Hashable)
J = TypeVar("J")
R = TypeVar("R")

#: Runs one batch for one key; returns one result (or the exception to raise) per job, in order.
BatchRunner = Callable[[K, list[J]], Awaitable[Sequence["R | BaseException"]]]


@dataclass(eq=False, slots=True)
class _Waiter(Generic[J]):
    job: J
    finished: Event = field(default_factory=new_event)
    done: bool = False
    outcome: Any = None

    def finish(self, outcome: Any) -> None:
        self.outcome, self.done = outcome, True
        self.finished.set()

    def result(self) -> Any:
        if isinstance(self.outcome, BaseException):
            raise self.outcome
        return self.outcome


class WorkAbandoned(RuntimeError):
    """The batcher's worker was cancelled (its event loop is closing) before the job ran:
    nothing of it was written."""

    @classmethod
    def at_shutdown(cls) -> WorkAbandoned:
        """What a write still queued when its event loop closed gets (every queue's, one
        text)."""
        return cls(
            "the write was abandoned before it ran, as its event loop is shutting down; "
            "nothing was written"
        )


def cut_short_at_shutdown() -> StorageOutcomeUnknownError:
    """What a write whose batch was under way when its worker was cancelled (its event
    loop closing) gets: the backend may have committed it or not (every queue's, one
    text)."""
    return StorageOutcomeUnknownError(
        "the write was under way when its event loop began shutting down, so it may have "
        "been written or not; read the key to know"
    )


class KeyedBatcher(Generic[K, J, R]):
    """Serializes jobs per key and runs the jobs queued for one key as one batch."""

    def __init__(self, run_batch: BatchRunner[K, J, R], *, max_batch: int = 256) -> None:
        if max_batch < 1:
            raise ValueError(f"max_batch must be at least 1, not {max_batch}")
        self._run_batch = run_batch
        self.max_batch = max_batch
        self._queues: dict[K, deque[_Waiter[J]]] = {}
        self.tasks = TaskOwner()
        """Where the workers run."""
        self._idle: anyio.Event | None = None

    def __len__(self) -> int:
        """How many keys have work queued or running (0 when idle)."""
        return len(self._queues)

    async def submit(self, key: K, job: J) -> R:
        """Run ``job`` for ``key`` after every job queued before it; return its result."""
        waiter: _Waiter[J] = _Waiter(job)
        queue = self._queues.get(key)
        if queue is None:
            queue = self._queues[key] = deque()
            if not self.tasks.start_soon(self._work, key, queue):
                del self._queues[key]
                raise RuntimeError("KeyedBatcher.submit needs a running asyncio or trio loop")
        queue.append(waiter)
        try:
            await waiter.finished.wait()
        except BaseException:
            if not waiter.done and waiter in queue:
                queue.remove(waiter)  # not taken yet: it never runs
            raise
        result: R = waiter.result()
        return result

    async def wait_idle(self) -> None:
        """Wait until every key's queue is empty and its last batch has finished."""
        while self._queues:
            if self._idle is None:
                self._idle = anyio.Event()
            await self._idle.wait()

    async def _work(self, key: K, queue: deque[_Waiter[J]]) -> None:
        """The worker of ``key``: run what is queued, batch after batch, then forget it."""
        try:
            while queue:
                batch = [queue.popleft() for _ in range(min(len(queue), self.max_batch))]
                try:
                    outcomes = await self._run_checked(key, [waiter.job for waiter in batch])
                except BaseException as exc:
                    for waiter in batch:  # cancelled under way, the batch may have landed
                        waiter.finish(
                            exc if isinstance(exc, Exception) else cut_short_at_shutdown()
                        )
                    if not isinstance(exc, Exception):
                        raise  # cancelled: the loop is closing
                    continue
                for waiter, outcome in zip(batch, outcomes, strict=True):
                    waiter.finish(outcome)
        finally:
            for waiter in queue:
                waiter.finish(WorkAbandoned.at_shutdown())
            del self._queues[key]
            if not self._queues and self._idle is not None:
                self._idle.set()
                self._idle = None

    async def _run_checked(self, key: K, jobs: list[J]) -> Sequence[Any]:
        outcomes = await self._run_batch(key, jobs)
        if len(outcomes) != len(jobs):
            raise RuntimeError(
                f"batch runner returned {len(outcomes)} results for {len(jobs)} jobs"
            )
        return outcomes
