"""The one place that knows which loop runs: events, deadlines and background work.

Two implementations of the same operations, in anyio's ``_backends`` shape: :mod:`._anyio`
(anyio's event and cancel scope, on trio and on asyncio alike) and :mod:`._asyncio` (a fast
path for asyncio: its own event, and timeouts sharing one loop timer; docs/benchmarks.md
shows what it buys). :func:`implementation` chooses one for the running loop; the rest of
the package calls :func:`new_event`, :func:`wait_for` and :class:`TaskOwner` and never asks
which loop runs (only ``open_storage`` does, through :func:`running_async_library`, to
refuse SQLite and PostgreSQL under trio).

Background work (the write batcher's workers, the event bus's async handlers, a storage
close its caller may stop waiting for) belongs to the object that starts it, through a
:class:`TaskOwner`, never to the task that happened to ask for it: cancelling a caller
only ends its wait. Where the owner's tasks run, first match wins:

1. in the task group the object's own owner lends it (:meth:`TaskOwner.hosted_by`, for an
   object such as a core that owns storage and bus in an ``async with``);
2. on asyncio with the fast path on, each in a task of its own that the owner holds;
3. otherwise in a task group of the owner's, entered by one host task that it starts when
   work arrives and that ends when the work runs out.

Why this shape: an anyio task group must be entered and exited by one task, but a backend
is opened in one task and closed in another (a server's lifespan, a harness's first
request), and ``emit`` is synchronous. So no caller ever enters a group here: the group of
(1) is its lender's, entered and exited by it; the group of (3) is entered and exited by
its host task, and a task group accepts new tasks from any task of its loop while open.
A host per burst of work, not per object, means nothing outlives the loop it runs on
(one backend may serve several ``asyncio.run`` calls) and nothing needs closing.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import TYPE_CHECKING, Any, TypeVar

import anyio

from . import _anyio, _asyncio
from ._asyncio import running_asyncio_loop
from ._base import Event, Expired

if TYPE_CHECKING:
    import asyncio

    from anyio.abc import TaskGroup

__all__ = (
    "Event",
    "Expired",
    "TaskOwner",
    "implementation",
    "new_event",
    "running_async_library",
    "running_asyncio_loop",
    "running_trio",
    "start_background",
    "wait_for",
)

T = TypeVar("T")

logger = logging.getLogger("noetic_scratchpad")

#: Whether asyncio takes the fast path (:mod:`._asyncio`); the benchmarks turn it off to
#: measure the generic path on the same loop.
FAST_PATH = True


def running_trio() -> bool:
    """Whether trio runs this thread's tasks. Without a system call (asyncio's loop lookup
    makes one): it is asked on every timed storage call. ``False`` when trio was never
    imported."""
    trio = sys.modules.get("trio")
    return trio is not None and bool(trio.lowlevel.in_trio_run())


def implementation() -> ModuleType:
    """The implementation for the running loop: :mod:`._asyncio` unless trio runs (or the
    fast path is off), else :mod:`._anyio`."""
    return _anyio if not FAST_PATH or running_trio() else _asyncio


def new_event() -> Event:
    """An event of the running loop."""
    event: Event = implementation().new_event()
    return event


def wait_for(seconds: float | None, pending: Awaitable[T]) -> Awaitable[T]:
    """``await wait_for(seconds, pending)``: ``pending``, given up after ``seconds``
    (``None``: never) with :class:`Expired`. A ``TimeoutError`` of ``pending``'s own passes
    through; what it had started may still complete: the caller only stops waiting."""
    waiting: Awaitable[T] = implementation().wait_for(seconds, pending)
    return waiting


def running_async_library() -> str | None:
    """The name of the async library running the current task (``"asyncio"``,
    ``"trio"``...), or ``None`` when none is detected."""
    if running_asyncio_loop() is not None:
        return "asyncio"
    try:
        import sniffio  # trio depends on it; anyio no longer does
    except ImportError:
        return None
    try:
        return sniffio.current_async_library()
    except sniffio.AsyncLibraryNotFoundError:
        return None


def start_background(
    fn: Callable[[], Awaitable[None]], tasks: set[asyncio.Task[None]] | None = None
) -> tuple[bool, asyncio.Task[None] | None]:
    """Run ``fn()`` in a task that belongs to no caller (anyio has none): an asyncio task,
    held in ``tasks`` if given, or a trio system task (``fn`` must not raise there, or the
    run ends). Returns whether it started (not when no loop runs in this thread) and the
    asyncio task."""
    loop = running_asyncio_loop()
    if loop is not None:
        return True, _start_task(loop, set() if tasks is None else tasks, fn, ())
    trio = sys.modules.get("trio")  # never imported here: it is an optional dependency
    if trio is None or not trio.lowlevel.in_trio_run():
        return False, None
    trio.lowlevel.spawn_system_task(fn)
    return True, None


def _start_task(
    loop: asyncio.AbstractEventLoop,
    tasks: set[asyncio.Task[None]],
    fn: Callable[..., Awaitable[None]],
    args: tuple[Any, ...],
) -> asyncio.Task[None]:
    """``fn(*args)`` in an asyncio task of its own, held in ``tasks`` until it ends (asyncio
    holds tasks weakly). Arguments, not a closure: a write batch starts this way."""
    task: asyncio.Task[None] = loop.create_task(fn(*args))  # type: ignore[arg-type]  # a coroutine
    tasks.add(task)
    task.add_done_callback(tasks.discard)
    return task


class TaskOwner:
    """The background tasks of one object; see the module's docstring for where they run.

    :meth:`start_soon` never waits and never raises: ``False`` says no loop runs in this
    thread to run the work. A task that raises is logged; it never cancels the others.
    """

    __slots__ = ("_group", "_hosts", "_lent", "_pending", "_running", "_tasks")

    def __init__(self) -> None:
        self._lent: TaskGroup | None = None  # (1): the lender's group
        self._tasks: set[asyncio.Task[None]] = set()  # (2): asyncio holds tasks weakly
        self._group: TaskGroup | None = None  # (3): the open group of the running host
        self._hosts: set[asyncio.Task[None]] = set()
        self._pending: list[tuple[Callable[..., Awaitable[None]], tuple[Any, ...]]] = []
        self._running = 0  # tasks started in (1) or (3) and not yet finished

    @contextmanager
    def hosted_by(self, group: TaskGroup) -> Iterator[None]:
        """Start this owner's tasks in ``group`` (open, and owned by the object that owns
        this one) until the block ends; tasks running then finish there."""
        self._lent = group
        try:
            yield
        finally:
            self._lent = None

    def start_soon(self, fn: Callable[..., Awaitable[None]], *args: Any) -> bool:
        """Run ``fn(*args)`` in a task of this owner's (arguments, not a closure: a write
        batch starts this way)."""
        if self._lent is not None:
            self._lent.start_soon(_guarded, fn, args)
            return True
        if self._group is not None:
            self._running += 1
            self._group.start_soon(self._run, fn, args)
            return True
        loop = running_asyncio_loop()
        if loop is not None and FAST_PATH:
            _start_task(loop, self._tasks, fn, args)
            return True
        if not self._pending and not start_background(self._host, self._hosts)[0]:
            return False
        self._pending.append((fn, args))
        return True

    async def _host(self) -> None:
        """Enter the owner's group, start what is pending in it, and leave it when every
        task there has finished."""
        async with anyio.create_task_group() as group:
            pending, self._pending = self._pending, []
            self._running += len(pending)
            self._group = group
            for fn, args in pending:
                group.start_soon(self._run, fn, args)

    async def _run(self, fn: Callable[..., Awaitable[None]], args: tuple[Any, ...]) -> None:
        try:
            await _guarded(fn, args)
        finally:
            self._running -= 1
            if not self._running:
                # Before this task ends: trio closes a group to new tasks as its last
                # one ends, so work from now on starts the next host.
                self._group = None


async def _guarded(fn: Callable[..., Awaitable[None]], args: tuple[Any, ...]) -> None:
    """``fn(*args)``, logged if it fails: an error in a group would cancel its other tasks."""
    try:
        await fn(*args)
    except Exception:
        logger.exception("background task failed task=%s", getattr(fn, "__qualname__", fn))
