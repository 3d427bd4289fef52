"""Which loop runs (asyncio or trio), and work started on it that belongs to no caller.

The one place in the package that tells the two loops apart: :func:`running_trio` and
:func:`running_asyncio_loop` say which runs (``_deadline`` asks the first to choose between
anyio's cancel scope and its asyncio timer, which needs the loop), :func:`new_event` makes
an event of the running loop, and :func:`start_background` starts a task of its own on either
loop (the event bus runs async handlers this way, and the write batcher its batches, so
that cancelling the task that happened to start the work never cancels work that others
wait for). Elsewhere code branches only on what these return.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import anyio

__all__ = (
    "Event",
    "new_event",
    "running_async_library",
    "running_asyncio_loop",
    "running_trio",
    "start_background",
)


class Event(Protocol):
    """What ``asyncio.Event``, ``trio.Event`` and ``anyio.Event`` all offer."""

    def set(self) -> None: ...

    def is_set(self) -> bool: ...

    async def wait(self) -> Any: ...


#: ``running_asyncio_loop()``: the asyncio loop running in this thread; ``None`` when none
#: does (under trio, or with no loop at all). The private getter itself, not a wrapper: it
#: runs on every timed storage call, and it returns ``None`` where ``get_running_loop``
#: raises, which would cost more per call.
running_asyncio_loop: Callable[[], asyncio.AbstractEventLoop | None] = asyncio._get_running_loop  # noqa: SLF001


def running_trio() -> bool:
    """Whether trio runs this thread's tasks. Without a system call (asyncio's loop lookup
    makes one): it is asked on every timed storage call. ``False`` when trio was never
    imported."""
    trio = sys.modules.get("trio")
    return trio is not None and bool(trio.lowlevel.in_trio_run())


def new_event() -> Event:
    """An event of the running loop: trio's under trio, else asyncio's. (What
    ``anyio.Event()`` makes, without its lookup of the running library, which costs ten
    times the event itself: one is made for every storage write.)"""
    if running_trio():
        return anyio.Event()
    return asyncio.Event()


def running_async_library() -> str | None:
    """The name of the async library running the current task (``"asyncio"``,
    ``"trio"``...), or ``None`` when none is detected (storage refuses to open SQLite or
    PostgreSQL under anything but asyncio)."""
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
    fn: Callable[..., Awaitable[None]],
    *args: Any,
    tasks: set[asyncio.Task[None]] | None = None,
) -> tuple[bool, asyncio.Task[None] | None]:
    """Run ``fn(*args)`` in a task of its own on the running loop (arguments, not a
    closure: a write batch starts this way, and a closure is a cell for each name).

    Returns whether it started (not when no loop runs in this thread) and, on asyncio, its
    task (``None`` under trio, where it is a system task: ``fn`` must not raise there, or
    the run ends). asyncio keeps only weak references to tasks: the caller holds the task,
    or passes ``tasks``, a set that holds it until it ends.
    """
    loop = running_asyncio_loop()
    if loop is None:  # not asyncio: the only other loop anyio runs on is trio
        trio = sys.modules.get("trio")  # never imported here: it is an optional dependency
        if trio is None:
            return False, None
        try:
            trio.lowlevel.spawn_system_task(fn, *args)
        except RuntimeError:  # not inside trio either
            return False, None
        return True, None
    task: asyncio.Task[None] = loop.create_task(fn(*args))  # type: ignore[arg-type]  # a coroutine
    if tasks is not None:
        tasks.add(task)
        task.add_done_callback(tasks.discard)
    return True, task
