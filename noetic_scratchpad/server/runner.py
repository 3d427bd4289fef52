"""Running the app under uvicorn, as ``noetic-scratchpad serve`` does."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import multiprocessing
import multiprocessing.process
import os
import signal
import socket
import threading
import time
from collections.abc import Callable, Generator, Sequence
from typing import Any

import uvicorn
from starlette.types import ASGIApp

__all__ = ("StoppableServer", "WorkerExitedError", "serve", "serve_in_worker", "serve_workers")

logger = logging.getLogger("noetic_scratchpad.server")


class StoppableServer(uvicorn.Server):
    """uvicorn's server, minus re-raising the stop signal once it has stopped.

    uvicorn re-raises a caught SIGINT or SIGTERM after its graceful shutdown, so that the
    process dies of it (``KeyboardInterrupt``, exit status 130 or 143). For a command whose
    user asked it to stop, a completed graceful shutdown is a success: status 0.
    """

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        wanted = (signal.SIGINT, signal.SIGTERM)
        # The app finds the server through this bound method to notice a shutdown begin.
        previous = {sig: signal.signal(sig, self.handle_exit) for sig in wanted}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


async def serve(app: ASGIApp, sock: socket.socket, *, access_log: bool) -> None:
    """Serve ``app`` on the listening ``sock`` until SIGINT or SIGTERM; returns when done.

    uvicorn's logging is left to the application (``log_config=None``): its loggers,
    ``uvicorn.error`` and ``uvicorn.access``, go wherever the root logger's records go.
    """
    config = uvicorn.Config(app, log_config=None, lifespan="on", access_log=access_log)
    await StoppableServer(config).serve(sockets=[sock])


def serve_in_worker(app: ASGIApp, sock: socket.socket, *, access_log: bool) -> None:
    """A worker's whole run: serve ``app`` on ``sock`` in a loop of its own until SIGTERM
    (or SIGINT), then return, having run the app's lifespan shutdown (exit status 0)."""
    config = uvicorn.Config(app, log_config=None, lifespan="on", access_log=access_log)
    StoppableServer(config).run(sockets=[sock])


async def serve_workers(
    target: Callable[..., None], args: tuple[Any, ...], workers: int, *, grace: float = 10.0
) -> None:
    """Run ``target(*args)`` in ``workers`` fresh processes until SIGINT or SIGTERM.

    Each worker serves the listening socket it is given in ``args`` (the kernel spreads the
    connections among them). A stop signal is passed on to every worker as SIGTERM, and
    each has ``grace`` seconds to end its streams and close its storage before it is killed.
    A worker that exits on its own stops the others: ``WorkerExitedError``.
    """
    context = multiprocessing.get_context("spawn")  # no inherited event loop, no fork
    processes = [
        context.Process(target=target, args=args, name=f"worker-{n}") for n in range(workers)
    ]
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    wanted = (signal.SIGINT, signal.SIGTERM)
    for sig in wanted:
        loop.add_signal_handler(sig, stop.set)
    gone: multiprocessing.process.BaseProcess | None = None
    try:
        for process in processes:
            process.start()
        while not stop.is_set() and gone is None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 0.25)
            gone = next((p for p in processes if p.exitcode is not None), None)
            if gone is not None and not stop.is_set():
                # Ctrl+C in a terminal reaches the workers too: one may end before the
                # signal reaches this loop.
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), 0.5)
    finally:
        for sig in wanted:
            loop.remove_signal_handler(sig)
        for process in processes:
            if process.pid is not None and process.exitcode is None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(process.pid, signal.SIGTERM)
        await asyncio.to_thread(_join, processes, grace)
    if not stop.is_set() and gone is not None:
        raise WorkerExitedError(gone.pid, gone.exitcode)


class WorkerExitedError(Exception):
    """A worker of :func:`serve_workers` exited while the server ran."""

    def __init__(self, pid: int | None, status: int | None) -> None:
        how = (
            f"was killed by {signal.Signals(-status).name}"
            if status is not None and status < 0
            else f"exited with status {status}"
        )
        super().__init__(f"worker {pid} {how}; stopped the others")
        self.pid = pid
        self.status = status


def _join(processes: Sequence[multiprocessing.process.BaseProcess], grace: float) -> None:
    deadline = time.monotonic() + grace
    for process in processes:
        process.join(max(0.0, deadline - time.monotonic()))
    for process in processes:
        if process.exitcode is None:
            logger.warning("worker %s did not stop in %.0f s; killing it", process.pid, grace)
            process.kill()
            process.join()
