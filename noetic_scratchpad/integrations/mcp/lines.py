"""Stdin's messages, one a line, read in linear time and bounded in size.

MCP over stdio sends one JSON-RPC message a line. A line is assembled from the pipe's
chunks with each byte looked at once (only the new chunk is searched for the newline, and
the line is decoded once), so a line of n bytes costs O(n) however it is chunked. A line
longer than the limit is not kept: past its first bytes (enough to read its request id)
it is discarded up to its newline, and reported as an :class:`OversizedLine`.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

import anyio

__all__ = (
    "DEFAULT_MAX_MESSAGE_BYTES",
    "HEAD_BYTES",
    "LineSplitter",
    "OversizedLine",
    "PipeLines",
    "check_max_message_bytes",
)

#: The longest message (line, without its newline) read by default: 32 times the largest
#: state a layer stores by default (``max_state_bytes``, 128 KiB).
DEFAULT_MAX_MESSAGE_BYTES = 4 * 1024 * 1024
#: How much of an over-long line is kept to read its request id from.
HEAD_BYTES = 4096
READ_SIZE = 65536


@dataclass(frozen=True)
class OversizedLine:
    """A line longer than the limit: its ``size`` in bytes (without the newline) and its
    first bytes, ``head``."""

    size: int
    head: bytes


def check_max_message_bytes(value: int) -> int:
    """``value`` if it is a usable limit (a whole number of bytes, 1 or more)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(
            f"max_message_bytes must be a whole number of bytes, 1 or more, not {value!r}"
        )
    return value


class LineSplitter:
    """Complete lines out of chunks of bytes: :meth:`feed` each chunk as it comes,
    :meth:`finish` at the end of the input.

    A line (without its newline) of at most ``max_bytes`` comes out as ``bytes``; a longer
    one as an :class:`OversizedLine`, no more than ``max_bytes + 1`` of it ever held.
    """

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = check_max_message_bytes(max_bytes)
        self._line = bytearray()  # the current line so far (extended in amortized O(1))
        self._head: bytes | None = None  # set while an over-long line is being discarded
        self._discarded = 0

    @property
    def buffered(self) -> int:
        """How many bytes of the current line are held."""
        return len(self._line) + len(self._head or b"")

    def feed(self, chunk: bytes) -> list[bytes | OversizedLine]:
        lines: list[bytes | OversizedLine] = []
        start = 0
        while (end := chunk.find(b"\n", start)) != -1:
            self._add(chunk, start, end)
            lines.append(self._take())
            start = end + 1
        self._add(chunk, start, len(chunk))
        return lines

    def finish(self) -> list[bytes | OversizedLine]:
        """The last line, when the input did not end with a newline."""
        return [self._take()] if self.buffered or self._discarded else []

    def _add(self, chunk: bytes, start: int, end: int) -> None:
        if self._head is None:
            keep = min(end, start + self.max_bytes + 1 - len(self._line))
            self._line += chunk[start:keep]
            if len(self._line) <= self.max_bytes:
                return
            # Over the limit: from here on, count the line's bytes instead of keeping them.
            self._head = bytes(self._line[:HEAD_BYTES])
            self._discarded = len(self._line)
            self._line = bytearray()
            start = keep
        self._discarded += end - start

    def _take(self) -> bytes | OversizedLine:
        if self._head is not None:
            line: bytes | OversizedLine = OversizedLine(self._discarded, self._head)
            self._head, self._discarded = None, 0
            return line
        taken = bytes(self._line)
        self._line = bytearray()
        return taken


OnOversized = Callable[[OversizedLine], Awaitable[None]]


class PipeLines:
    """The UTF-8 lines of a pollable file descriptor (a pipe, socket or terminal), each
    with a newline, as an async iterator; the lines over ``max_bytes`` go to
    ``on_oversized`` instead. The descriptor is read when it is readable, so a cancellation
    can stop the wait."""

    def __init__(self, fd: int, *, max_bytes: int, on_oversized: OnOversized) -> None:
        self._fd = fd
        self._splitter = LineSplitter(max_bytes)
        self._on_oversized = on_oversized

    async def __aiter__(self) -> AsyncIterator[str]:
        while True:
            await anyio.wait_readable(self._fd)
            chunk = os.read(self._fd, READ_SIZE)  # readable: returns at once
            lines = self._splitter.feed(chunk) if chunk else self._splitter.finish()
            for line in lines:
                if isinstance(line, OversizedLine):
                    await self._on_oversized(line)
                else:
                    # The SDK's own reader also replaces what is not UTF-8.
                    yield line.decode("utf-8", errors="replace") + "\n"
            if not chunk:
                return
