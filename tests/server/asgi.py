"""Calling an ASGI app with raw header bytes, as a permissive server would pass them on.

httpx and uvicorn refuse some header values before an app sees them (control characters,
values over h11's 16 KiB); other servers let more through. The app must not depend on its
server's strictness, so the header tests call it directly.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from starlette.types import ASGIApp, Message


@dataclass
class Answer:
    """What the app sent back: the status, its headers, the body it sent before the client
    hung up (for an event stream: its first bytes)."""

    status: int
    headers: dict[bytes, bytes] = field(default_factory=dict)
    body: bytes = b""


async def call(
    app: ASGIApp,
    method: str,
    target: str,
    headers: list[tuple[bytes, bytes]],
    body: bytes = b"",
) -> Answer:
    """One request; the client hangs up as soon as the app has sent some of the body (so
    an event stream ends), or at once if the app asks for more than the request body."""
    path, _, query = target.partition("?")
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": query.encode(),
        "root_path": "",
        "headers": [(name.lower(), value) for name, value in headers],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 80),
    }
    sent: list[Message] = []
    answered = asyncio.Event()
    request_sent = False

    async def receive() -> Message:
        nonlocal request_sent
        if not request_sent:
            request_sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await answered.wait()
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        sent.append(message)
        if message["type"] == "http.response.body":
            answered.set()

    try:
        await asyncio.wait_for(app(scope, receive, send), 10)
    except Exception:
        # Starlette answers an unexpected error with a 500, then raises it again for the
        # server to log: the 500 is the answer the client got.
        if not any(message["type"] == "http.response.start" for message in sent):
            raise
    start = next(message for message in sent if message["type"] == "http.response.start")
    return Answer(
        start["status"],
        dict(start.get("headers", [])),
        b"".join(message.get("body", b"") for message in sent[1:]),
    )
