"""Running the app under uvicorn, as ``noetic-scratchpad serve`` does."""

from __future__ import annotations

import contextlib
import signal
import socket
import threading
from collections.abc import Generator

import uvicorn
from starlette.types import ASGIApp

__all__ = ("StoppableServer", "serve")


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
