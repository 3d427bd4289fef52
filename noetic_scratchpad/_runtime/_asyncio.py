"""The asyncio fast path: asyncio's own event, and timeouts that share one loop timer.

``asyncio.timeout()`` schedules a timer per call, and asyncio keeps timers in a heap whose
comparisons run in Python: with a hundred writes in flight, the write timeout was a
quarter of a write's event-loop CPU. Here the limits in force on a loop are kept per
timeout length, oldest first (so in deadline order), and one timer wakes at the earliest
deadline, cancels the tasks whose time is up and sleeps until the next one.
:func:`wait_for` arms its limit only once the call first suspends: a call that never does
(memory storage) pays for no timer and no loop lookup. What this buys over
:mod:`._anyio` on asyncio, docs/benchmarks.md shows.
"""

from __future__ import annotations

import asyncio
import types
import weakref
from collections.abc import Awaitable, Callable, Generator
from types import TracebackType
from typing import Any, TypeVar

from ._base import Event, Expired

__all__ = ("Limit", "limit", "new_event", "running_asyncio_loop", "wait_for")

T = TypeVar("T")

#: ``running_asyncio_loop()``: the asyncio loop running in this thread; ``None`` when none
#: does (under trio, or with no loop at all). The private getter itself, not a wrapper: it
#: runs on every timed storage call, and it returns ``None`` where ``get_running_loop``
#: raises, which would cost more per call.
running_asyncio_loop: Callable[[], asyncio.AbstractEventLoop | None] = asyncio._get_running_loop  # noqa: SLF001


#: ``new_event()``: asyncio's event, the class itself (an object that resolved this
#: implementation makes its events without a call of ours). ``anyio.Event()`` looks up the
#: running library first, which costs ten times the event itself (one is made for every
#: storage write).
new_event: Callable[[], Event] = asyncio.Event


class Limit:
    """``with limit(seconds):`` around an await in a task: ``TimeoutError`` when time is up.

    Like ``asyncio.timeout``: when the deadline passes the task is cancelled, and the
    cancellation leaves the block as ``TimeoutError``; a cancellation from elsewhere stays
    a cancellation. ``expired`` tells a ``TimeoutError`` of this limit from another one.
    """

    __slots__ = (
        "_cancelling",
        "_keeper",
        "_loop",
        "_queue",
        "_seconds",
        "deadline",
        "expired",
        "task",
    )
    task: asyncio.Task[object]
    deadline: float
    _cancelling: int
    _queue: dict[Limit, None]  # the keeper's limits of this length

    def __init__(
        self, keeper: _Timekeeper, loop: asyncio.AbstractEventLoop, seconds: float
    ) -> None:
        self._keeper = keeper
        self._loop = loop
        self._seconds = seconds
        self.expired = False
        # task, deadline, _cancelling and _queue: set on entering, as only then known

    def __enter__(self) -> Limit:
        loop = self._loop
        task = asyncio.current_task(loop)  # given the loop: no getpid (3.11)
        if task is None:
            raise RuntimeError("a Limit must be used inside an asyncio task")
        self.task = task
        self._cancelling = task.cancelling()
        self.deadline = loop.time() + self._seconds
        self._queue = self._keeper.add(self, loop)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._queue.pop(self, None)
        if (
            self.expired
            and exc_type is asyncio.CancelledError
            and self.task.uncancel() <= self._cancelling
        ):
            raise TimeoutError from exc

    def _expire(self) -> None:
        self.expired = True
        self.task.cancel()


class _Timekeeper:
    """The limits in force on one loop, and the one timer that enforces them.

    It holds no reference to its loop, not even through its timer's handle (the loop is
    handed to each call): the registry of timekeepers is keyed by loops weakly, and a
    reference from value to key would keep every loop ever used alive.
    """

    def __init__(self) -> None:
        # timeout length -> limits of that length, oldest (earliest deadline) first
        self._queues: dict[float, dict[Limit, None]] = {}
        # When the timer that counts is due, and its number: a timer superseded by an
        # earlier one still fires, and does nothing.
        self._due: float | None = None
        self._timer_number = 0

    def add(self, limit: Limit, loop: asyncio.AbstractEventLoop) -> dict[Limit, None]:
        """Put ``limit`` (entered: its deadline set) in force; returns its queue."""
        queue = self._queues.get(limit._seconds)  # noqa: SLF001  # one unit with Limit
        if queue is None:
            queue = self._queues[limit._seconds] = {}  # noqa: SLF001
        queue[limit] = None
        due = self._due
        if due is None or limit.deadline < due:
            self._arm(loop, limit.deadline)
        return queue

    def _arm(self, loop: asyncio.AbstractEventLoop, deadline: float) -> None:
        self._due = deadline
        self._timer_number += 1
        loop.call_at(deadline, self._fire, loop, self._timer_number)

    def _fire(self, loop: asyncio.AbstractEventLoop, number: int) -> None:
        if number != self._timer_number:
            return  # superseded by a timer set for an earlier deadline
        self._due = None
        now = loop.time()
        earliest: float | None = None
        for seconds, queue in list(self._queues.items()):
            while queue:
                oldest = next(iter(queue))
                if oldest.deadline > now:
                    if earliest is None or oldest.deadline < earliest:
                        earliest = oldest.deadline
                    break
                del queue[oldest]
                oldest._expire()  # noqa: SLF001  # the keeper and its limits are one unit
            if not queue:
                del self._queues[seconds]
        if earliest is not None:
            self._arm(loop, earliest)

    def __len__(self) -> int:
        """How many limits are in force."""
        return sum(len(queue) for queue in self._queues.values())


_timekeepers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Timekeeper] = (
    weakref.WeakKeyDictionary()
)


#: The timekeeper last asked for and its loop, weakly: the same loop asks for it on every
#: write, and the registry's lookup makes a weak reference each time.
_last: tuple[weakref.ref[asyncio.AbstractEventLoop], _Timekeeper] | None = None


def timekeeper(loop: asyncio.AbstractEventLoop) -> _Timekeeper:
    """The timekeeper of ``loop``, made on first use and forgotten with the loop."""
    global _last
    last = _last
    if last is not None and last[0]() is loop:
        return last[1]
    found = _timekeepers.get(loop)
    if found is None:
        found = _timekeepers[loop] = _Timekeeper()
    _last = (weakref.ref(loop), found)
    return found


def limit(seconds: float, loop: asyncio.AbstractEventLoop | None = None) -> Limit | None:
    """A :class:`Limit` of ``seconds`` on ``loop`` (default: the running asyncio loop);
    ``None`` when no asyncio loop runs in this thread."""
    if loop is None:
        loop = running_asyncio_loop()
    return None if loop is None else Limit(timekeeper(loop), loop, seconds)


async def wait_for(seconds: float | None, pending: Awaitable[T]) -> T:
    """``await pending``, given up after ``seconds`` (``None``: never) with :class:`Expired`.

    A ``TimeoutError`` that ``pending`` raises itself (a backend's own timeout) passes
    through as it is. What it had started may still complete: the caller only stops
    waiting. On asyncio the limit is armed only once ``pending`` first suspends: a call
    that completes without suspending (memory storage) could never be cut off, so it
    pays for no timer. Neither makes asyncio's lookup of the running loop (a ``getpid``
    system call on Python 3.11): the limit takes the loop of the future the call waits on.
    """
    if seconds is None:
        return await pending
    steps = pending.__await__()
    try:
        yielded = steps.send(None)
    except StopIteration as done:
        result: T = done.value
        return result
    return await _bounded(steps, yielded, seconds)


@types.coroutine
def _bounded(steps: Generator[Any, Any, T], yielded: Any, seconds: float) -> Generator[Any, Any, T]:
    """The rest of an await that has suspended, under a :class:`Limit` armed now. This
    generator hands on the suspension it is given, then lets ``yield from`` pass the rest
    through: a loop of its own here, run on every resume, cost microseconds a write."""
    try:
        # The loop of the future the call waits on is the running one (asyncio's tasks
        # refuse any other), and asking it costs no system call, as a lookup does.
        loop = yielded.get_loop()
    except AttributeError:  # a bare yield (asyncio.sleep(0)): no future to ask
        loop = None  # (limit looks it up)
    bound = limit(seconds, loop)
    assert bound is not None  # the caller chose this module: an asyncio loop runs
    try:
        with bound:
            while True:
                try:
                    sent = yield yielded
                except GeneratorExit:
                    steps.close()
                    raise
                except BaseException as exc:  # the task's cancellation, thrown in at the yield
                    try:
                        yielded = steps.throw(exc)
                    except StopIteration as done:
                        thrown_result: T = done.value
                        return thrown_result
                    continue  # it caught that and suspended again
                if sent is None:  # how asyncio's tasks resume: yield from sends the same
                    return (yield from steps)
                try:
                    yielded = steps.send(sent)
                except StopIteration as done:
                    sent_result: T = done.value
                    return sent_result
    except TimeoutError:
        if bound.expired:
            raise Expired from None
        raise  # the call's own timeout, not ours
