"""``serve_stdio``: the server on this process's stdin and stdout, its storage opened and
closed around it."""

from __future__ import annotations

import codecs
import logging
import os
import stat
import sys
from collections.abc import AsyncIterator
from typing import cast

import anyio
from mcp.server.stdio import stdio_server

from ...events import EventBus
from ...layer import ScratchpadLayer
from ...storage import StorageBackend, open_storage
from .server import create_server

__all__ = ("cancellable_stdin", "serve_stdio")

logger = logging.getLogger("noetic_scratchpad.integrations.mcp")
CLOSE_TIMEOUT = 10.0


async def serve_stdio(
    storage: str | StorageBackend,
    *,
    layer: ScratchpadLayer | None = None,
    default_id: str = "default",
    events: EventBus | None = None,
) -> None:
    """Serve MCP on this process's stdin and stdout until the client closes stdin.

    ``storage``: a URL, opened here and closed on the way out (also when cancelled), or a
    backend, which stays the caller's. While serving, the SDK points file descriptor 1 at
    stderr, so stray output cannot corrupt the protocol.
    """
    backend = await open_storage(storage) if isinstance(storage, str) else storage
    try:
        server = create_server(layer, backend, default_id=default_id, events=events)
        async with stdio_server(stdin=cancellable_stdin()) as (read_stream, write_stream):
            logger.info("serving the scratchpad over stdio")
            await server.run(read_stream, write_stream, server.create_initialization_options())
    finally:
        if backend is not storage:
            # Shielded, so a cancelled server (SIGTERM) still closes it; bounded, so a
            # backend that hangs cannot keep the process alive.
            with anyio.move_on_after(CLOSE_TIMEOUT, shield=True) as scope:
                await backend.aclose()
            if scope.cancelled_caught:
                logger.warning("storage did not close within %s seconds", CLOSE_TIMEOUT)


def cancellable_stdin() -> anyio.AsyncFile[str] | None:
    """Stdin's lines, read when the pipe is readable; ``None`` (the SDK's own reader) on
    Windows or when stdin is not a pipe, socket or terminal.

    The SDK reads stdin in a worker thread, which a cancellation cannot stop: a server told
    to stop (SIGTERM, Ctrl-C) would wait for the client's next message before it could
    close its storage.
    """
    if sys.platform == "win32":
        return None
    try:
        fd = sys.stdin.fileno()
        mode = os.fstat(fd).st_mode
    except (AttributeError, OSError, ValueError):
        return None
    if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or os.isatty(fd)):
        return None  # a regular file cannot be polled
    # The SDK only iterates the lines (``async for line in stdin``).
    return cast("anyio.AsyncFile[str]", _PipeLines(fd))


class _PipeLines:
    """The UTF-8 lines of a pollable file descriptor, each with its newline, as an async
    iterator; the last line may lack one."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    async def __aiter__(self) -> AsyncIterator[str]:
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        pending = ""
        while True:
            await anyio.wait_readable(self._fd)
            chunk = os.read(self._fd, 65536)  # readable: returns at once
            *lines, pending = (pending + decoder.decode(chunk, final=not chunk)).split("\n")
            for line in lines:
                yield line + "\n"
            if not chunk:
                if pending:
                    yield pending
                return
