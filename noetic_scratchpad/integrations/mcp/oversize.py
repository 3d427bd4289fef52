"""Refusing a message over the size limit: its request id read from its first bytes, and
the JSON-RPC error that answers it.

Only the head of an over-long line is kept, so it cannot be parsed as JSON; its top-level
members are read token by token instead, as far as the head goes.
"""

from __future__ import annotations

import json
import logging
import re
from typing import Any, Protocol

import anyio
from mcp import types
from mcp.shared.message import SessionMessage

from .lines import OversizedLine

__all__ = ("OversizeRefusals", "refusal_error", "request_id", "top_level_scalars")

logger = logging.getLogger("noetic_scratchpad.integrations.mcp")

# One JSON token after optional whitespace: a complete string, a structural character, or
# a run of anything else (a number, true, false, null; possibly cut off by the head's end).
_TOKEN = re.compile(rb'\s*("[^"\\]*(?:\\.[^"\\]*)*"|[{}\[\]:,]|[^\s{}\[\]:,"]+)')
_OPEN, _CLOSE = (b"{", b"["), (b"}", b"]")
_SCALAR_END = (b",", b"}")
_NOT_SCALAR = object()  # a member whose value is an object or an array


def top_level_scalars(head: bytes) -> dict[str, Any]:
    """The members of the JSON object that ``head`` begins, as far as it goes: each
    complete scalar member with its value; an object or array member with a placeholder.
    Members nested deeper are not the message's own, so they are never taken."""
    tokens: list[tuple[int, bytes]] = []  # each with the depth it is at (0: the message)
    depth, pos = 0, 0
    while match := _TOKEN.match(head, pos):
        token, pos = match[1], match.end()
        depth -= token in _CLOSE
        tokens.append((depth, token))
        depth += token in _OPEN
    members: dict[str, Any] = {}
    if not tokens or tokens[0][1] != b"{":
        return members  # not an object (a batch, or not JSON)
    for i in range(1, len(tokens) - 2):
        (_, before), (depth, key), (_, colon) = tokens[i - 1], tokens[i], tokens[i + 1]
        if not (depth == 1 and before in (b"{", b",") and key[:1] == b'"' and colon == b":"):
            continue
        value = tokens[i + 2][1]
        if value in _OPEN:
            members[_load(key)] = _NOT_SCALAR
        elif i + 3 < len(tokens) and tokens[i + 3][1] in _SCALAR_END:  # not cut off
            members[_load(key)] = _load(value)
    return members


def request_id(head: bytes) -> int | str | None:
    """The id of the request whose line begins with ``head``; ``None`` when none can be
    read there, or when the line is a response (it has ``result`` or ``error``)."""
    members = top_level_scalars(head)
    found = members.get("id")
    if "result" in members or "error" in members:
        return None
    if isinstance(found, bool) or not isinstance(found, int | str):
        return None
    return found


def refusal_error(line: OversizedLine, limit: int) -> types.ErrorData:
    return types.ErrorData(
        code=types.INVALID_REQUEST,
        message=f"Message too large: {line.size:,} bytes, over this server's limit of "
        f"{limit:,} bytes; it was not read and nothing was done. Send a smaller request, or "
        "start the server with a higher --max-message-bytes.",
        data={"size": line.size, "limit": limit},
    )


class MessageSender(Protocol):
    async def send(self, item: SessionMessage, /) -> None: ...


class OversizeRefusals:
    """Answers each over-long request with a JSON-RPC error on the server's write stream,
    once :meth:`attach` gave it; an over-long line without a readable id is logged."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._stream: MessageSender | None = None

    def attach(self, stream: MessageSender) -> None:
        self._stream = stream

    async def __call__(self, line: OversizedLine) -> None:
        found = request_id(line.head)
        if found is None or self._stream is None:
            logger.warning(
                "refused a message of %s bytes, over the limit of %s (--max-message-bytes); "
                "no request id could be read from its start, so no error was sent back",
                f"{line.size:,}",
                f"{self.limit:,}",
            )
            return
        logger.warning(
            "refused request %r: its message of %s bytes is over the limit of %s "
            "(--max-message-bytes); answered with an error",
            found,
            f"{line.size:,}",
            f"{self.limit:,}",
        )
        error = types.JSONRPCError(jsonrpc="2.0", id=found, error=refusal_error(line, self.limit))
        try:
            await self._stream.send(SessionMessage(error))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            logger.debug("the server stopped before request %r could be refused", found)


def _load(token: bytes) -> Any:
    try:
        return json.loads(token)
    except ValueError:  # not a JSON value (a head that is not JSON)
        return _NOT_SCALAR
