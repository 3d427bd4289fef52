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

1. in the task group the object's own owner lends it (:meth:`TaskOwner.hosted_by`; a
   core lends its :class:`GroupHost`'s to its bus and its backend from ``open`` to
   ``aclose``): on asyncio's fast path as asyncio tasks that a keeper task in that group
   joins and cancels with it (anyio's task start costs more), and a :class:`Worker` as one
   task there woken per burst;
2. on asyncio with the fast path on, each in a task of its own that the owner holds;
3. otherwise in a task group of the owner's, entered by one host task that it starts when
   work arrives and that ends when the work runs out.

Why this shape: an anyio task group must be entered and exited by one task, but a backend
is opened in one task and closed in another (a server's lifespan, a harness's first
request), and ``emit`` is synchronous. So no caller ever enters a group here: the group of
(1) is its lender's, entered and exited by it (a core's by a host task of its own); the
group of (3) is entered and exited by
its host task, and a task group accepts new tasks from any task of its loop while open.
A host per burst of work, not per object, means nothing outlives the loop it runs on
(one backend may serve several ``asyncio.run`` calls) and nothing needs closing.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
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
    "GroupHost",
    "TaskOwner",
    "Worker",
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
    :meth:`worker` gives a job that runs again and again (a queue's worker) one task for as
    long as a group is lent, woken once per burst of work.
    """

    __slots__ = (
        "_group",
        "_hosts",
        "_kept",
        "_lent",
        "_pending",
        "_released",
        "_residents",
        "_running",
        "_tasks",
        "_workers",
    )

    def __init__(self) -> None:
        self._lent: TaskGroup | None = None  # (1): the lender's group
        # (1) on asyncio's fast path: the tasks started while lent, and the event that
        # tells the group's keeper of them the lending ended
        self._kept: _Kept | None = None
        self._released: Event | None = None
        self._workers: list[Worker] = []
        self._residents: list[Worker] = []  # workers with a task in the lent group
        self._tasks: set[asyncio.Task[None]] = set()  # (2): asyncio holds tasks weakly
        self._group: TaskGroup | None = None  # (3): the open group of the running host
        self._hosts: set[asyncio.Task[None]] = set()
        self._pending: list[tuple[Callable[..., Awaitable[None]], tuple[Any, ...]]] = []
        self._running = 0  # tasks started in (1) or (3) and not yet finished

    @property
    def lent(self) -> bool:
        """Whether a group is lent to this owner now."""
        return self._lent is not None

    @contextmanager
    def hosted_by(self, group: TaskGroup) -> Iterator[bool]:
        """Start this owner's tasks in ``group`` (open, and owned by the object that owns
        this one) until the block ends; tasks running then finish there, and the workers'
        tasks end once their burst is done. An owner that another object lends its group to
        already keeps that one (a backend or a bus shared by two cores): the block then
        changes nothing. Yields whether it lent ``group``."""
        if self._lent is not None:
            yield False
            return
        self._lent = group
        if FAST_PATH and running_asyncio_loop() is not None:
            self._kept, self._released = _Kept(), implementation().new_event()
            group.start_soon(self._keep, self._kept, self._released)
        try:
            for worker in self._workers:  # waiting there from now on, not from a first write
                worker.reside(group)
            yield True
        finally:
            self.release(group)

    def release(self, group: TaskGroup) -> None:
        """End the lending of ``group`` now, if it is lent (what leaving :meth:`hosted_by`
        does; for a group whose loop is gone, whose host will never leave it)."""
        if self._lent is not group:
            return
        self._lent = None
        released, self._released, self._kept = self._released, None, None
        if released is not None:
            released.set()
        residents, self._residents = self._residents, []
        for worker in residents:
            worker.stop()

    def start_soon(self, fn: Callable[..., Awaitable[None]], *args: Any) -> bool:
        """Run ``fn(*args)`` in a task of this owner's (arguments, not a closure: a write
        batch starts this way)."""
        if self._lent is not None:
            kept = self._kept
            loop = running_asyncio_loop() if kept is not None else None
            if kept is not None and loop is not None:
                _start_task(loop, kept.tasks, kept.run, (fn, args))  # its keeper is in the group
            else:
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

    async def _keep(self, kept: _Kept, released: Event) -> None:
        """On asyncio's fast path, the lent group's task that answers for the owner's tasks
        started while lent (each an asyncio task: anyio's task start costs more, see
        docs/benchmarks.md): when the lending ends it waits for them; cancelled with the
        group, it cancels them and waits for them before it ends. So they are joined and
        cancelled with the group as its own tasks would be: through a cancel scope of
        theirs, which respects the shields inside (``task.cancel()`` would not)."""
        import asyncio  # only ever on asyncio

        tasks = kept.tasks
        try:
            await released.wait()
            while tasks:
                await asyncio.wait(tuple(tasks))
        except BaseException:
            kept.cancel()
            with anyio.CancelScope(shield=True):
                while tasks:  # also those started from now on: cancelled as they start
                    await asyncio.wait(tuple(tasks))
            raise

    def worker(self, fn: Callable[[], Awaitable[None]]) -> Worker:
        """A :class:`Worker` of this owner's running ``fn()`` each time it is woken."""
        return Worker(self, fn)

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


class Worker:
    """A job of a :class:`TaskOwner` that runs again each time :meth:`wake` asks for it (a
    queue's worker: it runs until its queue is empty, and the next item wakes it again).

    The caller wakes it only while it is not running (the queue knows). While the owner is
    lent a group, one task there runs it burst after burst, woken by an event: cheaper per
    burst than starting a task in the group (docs/benchmarks.md). When the lending ends,
    that task runs a wake it was given, if any, and ends; cancelled with its group, it
    hands such a wake on (:meth:`TaskOwner.start_soon`). Otherwise each wake is
    :meth:`TaskOwner.start_soon`.
    """

    __slots__ = ("_fn", "_owner", "_resident")

    def __init__(self, owner: TaskOwner, fn: Callable[[], Awaitable[None]]) -> None:
        self._owner = owner
        self._fn = fn
        self._resident: _Resident | None = None  # the task in the lent group, if any
        owner._workers.append(self)  # noqa: SLF001  # the owner and its workers are one unit

    def wake(self) -> bool:
        """Run the job soon; ``False`` when no loop runs in this thread to run it."""
        resident = self._resident
        if resident is None:
            lent = self._owner._lent  # noqa: SLF001
            if lent is None:
                return self._owner.start_soon(self._fn)
            resident = self.reside(lent)  # its last one was cancelled with the group's work
        resident.woken = True
        resident.event.set()
        return True

    def reside(self, group: TaskGroup) -> _Resident:
        """Start the task in ``group`` (lent to the owner) that runs the job at each wake."""
        resident = self._resident = _Resident(implementation().new_event)
        self._owner._residents.append(self)  # noqa: SLF001
        group.start_soon(self._reside, resident)
        return resident

    def stop(self) -> None:
        """End the resident task once it has run what it was woken for (the lending
        ended): later wakes go elsewhere."""
        resident, self._resident = self._resident, None
        if resident is not None:
            resident.stopped = True
            resident.event.set()

    async def _reside(self, resident: _Resident) -> None:
        """The resident task: run the job at each wake until stopped."""
        fn = self._fn
        try:
            while True:
                if not resident.woken:
                    if resident.stopped:
                        return
                    await resident.event.wait()
                    continue
                resident.woken = False
                resident.event = resident.new_event()
                try:
                    await fn()
                except Exception:  # as _guarded, inline: this runs once per burst
                    logger.exception("background task failed task=%s", _name(fn))
        finally:
            if self._resident is resident:
                self._resident = None  # cancelled with its group: the next wake starts anew
            if resident.woken:  # a wake it never ran: nobody else would run the queue
                try:
                    self._owner.start_soon(fn)
                except RuntimeError:  # lent still, to a group that is closed
                    logger.exception("a background job was dropped task=%s", _name(fn))


class _Resident:
    """The state of one resident task of a :class:`Worker`."""

    __slots__ = ("event", "new_event", "stopped", "woken")

    def __init__(self, new_event: Callable[[], Event]) -> None:
        self.new_event = new_event  # the loop's, resolved once
        self.event = new_event()  # set to wake the task
        self.woken = False  # whether a wake waits to be run
        self.stopped = False


class _Kept:
    """The tasks a lent owner started on asyncio's fast path (:meth:`TaskOwner._keep`),
    each run in a cancel scope of its own that :meth:`cancel` cancels: a group cancels its
    own tasks that way, so a shielded scope inside (a handler's cleanup) holds. Cancelling
    an asyncio task directly would pierce it: anyio's shields stop only cancel scopes."""

    __slots__ = ("cancelled", "scopes", "tasks")

    def __init__(self) -> None:
        self.tasks: set[asyncio.Task[None]] = set()
        self.scopes: set[anyio.CancelScope] = set()  # of the tasks running now
        self.cancelled = False

    def cancel(self) -> None:
        """Cancel every task, those not started yet as they start."""
        self.cancelled = True
        for scope in self.scopes:
            scope.cancel()

    async def run(self, fn: Callable[..., Awaitable[None]], args: tuple[Any, ...]) -> None:
        """``fn(*args)`` as :func:`_guarded` does, in the task's cancel scope."""
        with anyio.CancelScope() as scope:
            if self.cancelled:
                scope.cancel()
            self.scopes.add(scope)
            try:
                await _guarded(fn, args)
            finally:
                self.scopes.discard(scope)


class GroupHost:
    """A task group of an object's own (a core's), lent to the task owners of what it
    owns (its bus, its backend) from :meth:`start` until :meth:`aclose`.

    One host task, started by :meth:`start` and belonging to no caller, enters and leaves
    the group, so the object may be opened in one task and closed in another. Work that
    arrives for a lent owner runs in the group; an exception there is logged
    (:class:`TaskOwner`). :meth:`aclose` ends the lending, lets what runs finish (at most
    ``grace`` seconds), then cancels it and waits as long again; a task still running then
    has ignored its cancellation, and is logged and left. On a loop other than the one
    it was started on (a host run by several ``asyncio.run`` calls), :meth:`serving` says
    no: the next :meth:`start` releases the old group's owners and starts anew.
    """

    __slots__ = ("_done", "_group", "_hosts", "_loop", "_owners", "_ready", "_stop", "grace")

    def __init__(self, grace: float = 0.5) -> None:
        self.grace = grace
        self._loop: object = None  # what runs the host task: an asyncio loop, a trio token
        self._group: TaskGroup | None = None
        self._owners: list[TaskOwner] = []
        self._stop: Event | None = None
        self._done: Event | None = None
        self._ready: Event | None = None
        self._hosts: set[asyncio.Task[None]] = set()

    def serving(self) -> bool:
        """Whether the group is open, or opening, on the running loop."""
        return self._stop is not None and self._loop is _current_run()

    def ready(self) -> bool:
        """Whether the group is open on the running loop and lent: :meth:`start` has
        nothing to do."""
        ready = self._ready
        return ready is not None and ready.is_set() and self.serving()

    async def start(self, owners: Sequence[TaskOwner]) -> None:
        """Open the group in a host task and lend it to ``owners`` (each not lent another
        group already); returns once they are lent. Nothing happens when it is open
        already (but the wait for that)."""
        if self.serving():
            ready = self._ready
            if ready is not None and not ready.is_set():
                await ready.wait()
            return
        self._forget()
        run = _current_run()
        stop, done, ready = new_event(), new_event(), new_event()
        started, _ = start_background(lambda: self._host(owners, stop, done, ready), self._hosts)
        if not started:  # no loop runs here: impossible in a coroutine
            return
        self._loop, self._stop, self._done, self._ready = run, stop, done, ready
        await ready.wait()

    async def aclose(self) -> None:
        """End the lending and join the group's tasks (see the class); idempotent."""
        stop, done, group = self._stop, self._done, self._group
        if stop is None or done is None:
            return
        if self._loop is not _current_run():
            self._forget()  # its loop is gone, or it is another's: nothing to wait for here
            return
        self._stop = None
        stop.set()
        with anyio.move_on_after(self.grace):
            await done.wait()
        if not done.is_set() and group is not None:
            group.cancel_scope.cancel()
            with anyio.move_on_after(self.grace):
                await done.wait()
        if not done.is_set():
            logger.error("background tasks ignored their cancellation; left running")

    def _forget(self) -> None:
        """Release the owners of a group whose host is not (or no longer) ours to join."""
        if self._group is not None:
            for owner in self._owners:
                owner.release(self._group)
        self._loop = self._group = self._stop = self._done = self._ready = None
        self._owners = []

    async def _host(
        self, owners: Sequence[TaskOwner], stop: Event, done: Event, ready: Event
    ) -> None:
        group: TaskGroup | None = None
        try:
            async with anyio.create_task_group() as group:
                self._group = group
                with ExitStack() as lending:
                    self._owners = [
                        owner for owner in owners if lending.enter_context(owner.hosted_by(group))
                    ]
                    ready.set()
                    await stop.wait()
        except Exception:  # nothing should reach here: its tasks are guarded
            logger.exception("the background task group failed")
        finally:
            if group is not None and self._group is group:
                self._group, self._owners = None, []
            ready.set()  # also when it failed to start: nobody waits in vain
            done.set()


def _current_run() -> object:
    """What runs this thread's tasks: the asyncio loop, or trio's token; ``None``: none."""
    loop = running_asyncio_loop()
    if loop is not None or not running_trio():
        return loop
    trio = sys.modules["trio"]
    return trio.lowlevel.current_trio_token()


async def _guarded(fn: Callable[..., Awaitable[None]], args: tuple[Any, ...]) -> None:
    """``fn(*args)``, logged if it fails: an error in a group would cancel its other tasks."""
    try:
        await fn(*args)
    except Exception:
        logger.exception("background task failed task=%s", _name(fn))


def _name(fn: Callable[..., object]) -> object:
    return getattr(fn, "__qualname__", fn)
