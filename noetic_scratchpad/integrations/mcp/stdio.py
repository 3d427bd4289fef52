"""``serve_stdio``: the server on this process's stdin and stdout, its storage opened and
closed around it."""

from __future__ import annotations

import logging
import os
import stat
import sys
from collections.abc import Sequence
from typing import cast

import anyio
from mcp.server.stdio import stdio_server

from ...events import EventBus
from ...layer import ScratchpadLayer
from ...render import Tokenizer, check_token_counter
from ...storage import StorageBackend, open_storage
from .lines import DEFAULT_MAX_MESSAGE_BYTES, OnOversized, PipeLines, check_max_message_bytes
from .oversize import OversizeRefusals
from .server import create_server

__all__ = ("cancellable_stdin", "serve_stdio")

logger = logging.getLogger("noetic_scratchpad.integrations.mcp")
CLOSE_TIMEOUT = 10.0


async def serve_stdio(
    storage: str | StorageBackend,
    *,
    layer: ScratchpadLayer | Sequence[ScratchpadLayer] | None = None,
    default_id: str = "default",
    allow_scope_argument: bool = False,
    events: EventBus | None = None,
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    count_tokens: Tokenizer | None = None,
) -> None:
    """Serve MCP on this process's stdin and stdout until the client closes stdin.

    ``storage``: a URL, opened here and closed on the way out (also when cancelled), or a
    backend, which stays the caller's. While serving, the SDK points file descriptor 1 at
    stderr, so stray output cannot corrupt the protocol.

    ``max_message_bytes``: the longest message (one line of stdin) the server reads. A
    longer one is discarded as it arrives, never held whole: a request is answered with a
    JSON-RPC error (``-32600``) when its id can be read from its first bytes, anything else
    is logged, and the messages after it are served.

    ``count_tokens``: the model's token counter, for ``scratchpad_read``'s block (see
    ``create_server``). ``default_id``: the one scope served, unless
    ``allow_scope_argument=True`` lets the model name any (see ``create_server``).
    ``layer``: one layer, or several with names of their own, each with its tools.
    """
    check_max_message_bytes(max_message_bytes)
    check_token_counter(count_tokens)  # before storage is opened
    backend = await open_storage(storage) if isinstance(storage, str) else storage
    try:
        server = create_server(
            layer,
            backend,
            default_id=default_id,
            allow_scope_argument=allow_scope_argument,
            events=events,
            count_tokens=count_tokens,
        )
        refusals = OversizeRefusals(max_message_bytes)
        stdin = cancellable_stdin(max_message_bytes, refusals)
        async with stdio_server(stdin=stdin) as (read_stream, write_stream):
            refusals.attach(write_stream)
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


def cancellable_stdin(
    max_message_bytes: int, on_oversized: OnOversized
) -> anyio.AsyncFile[str] | None:
    """Stdin's lines, read when the pipe is readable, those over ``max_message_bytes``
    handed to ``on_oversized``; ``None`` (the SDK's own reader, without a size limit) on
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
    lines = PipeLines(fd, max_bytes=max_message_bytes, on_oversized=on_oversized)
    # The SDK only iterates the lines (``async for line in stdin``).
    return cast("anyio.AsyncFile[str]", lines)
