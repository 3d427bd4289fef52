"""Start a task that belongs to no caller, on whichever loop runs (asyncio or trio).

The one place that tells the two loops apart for background work: the event bus runs
async handlers this way, and the write batcher its batches, so that cancelling the task
that happened to start the work never cancels work that others wait for.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable

__all__ = ("start_background",)


def start_background(
    fn: Callable[[], Awaitable[None]], tasks: set[asyncio.Task[None]] | None = None
) -> tuple[bool, asyncio.Task[None] | None]:
    """Run ``fn()`` in a task of its own on the running loop.

    Returns whether it started (not when no loop runs in this thread) and, on asyncio, its
    task (``None`` under trio, where it is a system task: ``fn`` must not raise there, or
    the run ends). asyncio keeps only weak references to tasks: the caller holds the task,
    or passes ``tasks``, a set that holds it until it ends.
    """
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # not asyncio: the only other loop anyio runs on is trio
        trio = sys.modules.get("trio")  # never imported here: it is an optional dependency
        if trio is None:
            return False, None
        try:
            trio.lowlevel.spawn_system_task(fn)
        except RuntimeError:  # not inside trio either
            return False, None
        return True, None
    task: asyncio.Task[None] = loop.create_task(fn())  # type: ignore[arg-type]  # a coroutine
    if tasks is not None:
        tasks.add(task)
        task.add_done_callback(tasks.discard)
    return True, task
