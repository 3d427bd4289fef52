"""How the MCP server reads stdin: lines assembled in linear time, a line over the size
limit discarded as it arrives, and the request id read from an over-long line's start."""

from __future__ import annotations

import os
from typing import Any, SupportsIndex

import anyio
import pytest

from noetic_scratchpad.integrations.mcp.lines import (
    HEAD_BYTES,
    LineSplitter,
    OversizedLine,
    PipeLines,
)
from noetic_scratchpad.integrations.mcp.oversize import request_id

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class CountingChunk(bytes):
    """A chunk that counts the bytes searched in it: ``scanned`` across all chunks."""

    scanned = 0

    def find(  # type: ignore[override]
        self, sub: bytes, start: SupportsIndex = 0, end: SupportsIndex | None = None
    ) -> int:
        found = super().find(sub, start, end)
        stop = len(self) if found == -1 else found + len(sub)
        CountingChunk.scanned += stop - int(start)
        return found


def chunked(data: bytes, size: int) -> list[CountingChunk]:
    return [CountingChunk(data[i : i + size]) for i in range(0, len(data), size)]


@pytest.mark.parametrize("chunk_size", [1 << 20, 4096, 64, 7])
def test_each_byte_is_searched_once_however_the_line_is_chunked(chunk_size: int) -> None:
    """A line arriving in many chunks costs no more than in one: the old reader searched
    and copied everything pending again for each chunk (quadratic in the line's length)."""
    line = b'{"x": "' + b"a" * 300_000 + b'"}'
    data = line + b"\nnext\nlast"
    splitter = LineSplitter(1 << 20)
    CountingChunk.scanned = 0
    lines: list[Any] = []
    for chunk in chunked(data, chunk_size):
        lines += splitter.feed(chunk)
    lines += splitter.finish()
    assert lines == [line, b"next", b"last"]
    assert CountingChunk.scanned == len(data)


def test_a_line_over_the_limit_is_discarded_as_it_comes_and_the_next_is_kept() -> None:
    limit = 10_000
    splitter = LineSplitter(limit)
    line = b'{"jsonrpc": "2.0", "id": 3, "params": "' + b"b" * 1_000_000 + b'"}'
    out: list[Any] = []
    most_held = 0
    for chunk in chunked(line + b"\n" + b'{"id": 4}\n', 999):
        out += splitter.feed(chunk)
        most_held = max(most_held, splitter.buffered)
    assert out == [OversizedLine(len(line), line[:HEAD_BYTES]), b'{"id": 4}']
    assert most_held <= limit + 1  # never the line: discarded until its newline
    assert splitter.buffered == 0


def test_a_line_just_at_the_limit_is_kept_and_one_byte_more_is_not() -> None:
    splitter = LineSplitter(5)
    assert splitter.feed(b"12345\n123456\n") == [b"12345", OversizedLine(6, b"123456")]
    assert splitter.feed(b"1234567") == []
    assert splitter.finish() == [OversizedLine(7, b"123456")]


@pytest.mark.parametrize("limit", [0, -1, True, 1.5])
def test_a_limit_that_is_not_a_positive_whole_number_is_refused(limit: Any) -> None:
    with pytest.raises(ValueError, match="max_message_bytes"):
        LineSplitter(limit)


@pytest.mark.parametrize(
    ("head", "expected"),
    [
        (b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"x":"aaa', 7),
        (b'{"method": "tools/call" , "id" : "req-1", "params": {', "req-1"),
        (b'{"jsonrpc":"2.0","params":{"a":[1,{"id":3}]},"id":4,"method":"x","pa', 4),
        (b'{"params":{"s":"a \\"id\\": 3, {[\\""},"id":8,"method":"x","params', 8),
        # Not the message's own id, or none that can be read:
        (b'{"jsonrpc":"2.0","method":"tools/call","params":{"id":5,"arguments":{"x":"a', None),
        (b'{"jsonrpc":"2.0","method":"tools/call","id":12', None),  # may be cut off
        (b'{"jsonrpc":"2.0","id":1,"result":{"content":"aaa', None),  # a response
        (b'{"id":true,"method":"x",', None),
        (b'{"id":{"n":1},"method":"x",', None),
        (b'[{"jsonrpc":"2.0","id":1,"method":"x"},', None),  # a batch
        (b"\xff\xfe not json at all", None),
        (b"", None),
    ],
)
def test_the_request_id_is_read_from_the_top_level_of_a_cut_off_message(
    head: bytes, expected: object
) -> None:
    assert request_id(head) == expected


async def test_a_line_split_across_many_reads_is_reassembled(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One read per piece, pieces cutting through multi-byte characters."""
    first = ('{"goal": "café 🙂 ' + "é" * 5000 + '"}').encode()
    data = first + b"\n" + "second ✓".encode()  # the last line has no newline
    pieces = [data[i : i + 333] for i in range(0, len(data), 333)]
    reads = 0
    read_once = anyio.Event()
    real_read = os.read

    def counting_read(fd: int, n: int) -> bytes:
        nonlocal reads
        reads += 1
        read_once.set()
        return real_read(fd, n)

    monkeypatch.setattr(os, "read", counting_read)
    read_end, write_end = os.pipe()

    async def oversized(line: OversizedLine) -> None:
        raise AssertionError(f"no line is over the limit: {line}")

    async def write_slowly() -> None:
        nonlocal read_once
        for piece in pieces:
            read_once = anyio.Event()
            os.write(write_end, piece)
            await read_once.wait()  # the reader took this piece alone
        os.close(write_end)

    lines: list[str] = []
    try:
        with anyio.fail_after(20):
            async with anyio.create_task_group() as group:
                group.start_soon(write_slowly)
                stdin = PipeLines(read_end, max_bytes=len(data), on_oversized=oversized)
                lines = [line async for line in stdin]
    finally:
        os.close(read_end)
    assert reads >= len(pieces) > 30
    assert lines == [first.decode() + "\n", "second ✓\n"]
