"""Reading what a client sent: JSON bodies and query parameters, refused with 4xx problems."""

from __future__ import annotations

from typing import Any

from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response

from .. import _json
from .._time import iso_time
from .problems import Problem

__all__ = ("int_param", "iso_time", "json_response", "read_json_object")


def json_response(
    content: Any, status: int = 200, headers: dict[str, str] | None = None
) -> Response:
    """JSON through the package's encoder (orjson; integers past 64 bits kept)."""
    return Response(_json.dumps(content), status, headers, media_type="application/json")


async def read_json_object(request: Request, limit: int) -> dict[str, Any]:
    """The request's body as a JSON object, or a problem: 415 (not JSON), 413 (over
    ``limit`` bytes), 400 (not valid JSON), 422 (JSON, but not an object)."""
    media = request.headers.get("content-type", "").partition(";")[0].strip().lower()
    if media != "application/json" and not (
        media.startswith("application/") and media.endswith("+json")
    ):
        raise Problem(
            415,
            "Unsupported Media Type",
            "Send the update as a JSON object with `Content-Type: application/json`.",
            kind="unsupported-media-type",
        )
    if _declared_length(request) > limit:
        raise _too_large(limit)
    body = bytearray()
    try:
        async for chunk in request.stream():
            body += chunk
            if len(body) > limit:
                raise _too_large(limit)
    except ClientDisconnect:  # no one is left to read the answer; it must not be a 500
        raise _malformed("The client went away before the body was complete.") from None
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise _malformed("The body is not UTF-8 text; JSON must be.") from None
    if not text.strip():
        raise _malformed('The body is empty; send a JSON object such as {"goal": "..."}.')
    try:
        return _json.loads_arguments(text)
    except _json.ArgumentsError as exc:
        if exc.kind == "type":
            raise Problem(
                422,
                "The body is not a JSON object",
                f"The body is a JSON {exc.found}; an update is an object whose keys are "
                'merged into the state, such as {"goal": "..."}.',
                kind="not-an-object",
            ) from None
        if exc.kind == "depth":
            raise _malformed("The body nests too deeply to be parsed.") from None
        raise _malformed(f"The body is not valid JSON: {exc}.") from None


def _declared_length(request: Request) -> int:
    """The body's ``Content-Length`` (0 if absent or not ASCII digits), capped past any
    limit: int() of over 4,300 digits raises, and of fewer costs time."""
    declared = request.headers.get("content-length", "").strip().lstrip("0")
    if not declared.isascii() or not declared.isdigit():
        return 0
    return int(declared) if len(declared) <= 18 else 10**18


def int_param(request: Request, name: str, default: int, minimum: int, maximum: int) -> int:
    """An integer query parameter within ``[minimum, maximum]``; a 400 problem otherwise."""
    raw = request.query_params.get(name)
    if raw is None:
        return default
    value = raw.strip()
    # The length first: int() of a long run of digits costs time (and raises past 4300).
    if value.isdecimal() and len(value) <= len(str(maximum)) and minimum <= int(value) <= maximum:
        return int(value)
    raise Problem(
        400,
        "Invalid query parameter",
        f"`{name}` must be an integer from {minimum} to {maximum}, not {raw!r}.",
        kind="invalid-parameter",
    )


def _too_large(limit: int) -> Problem:
    return Problem(
        413,
        "Content Too Large",
        f"The body is larger than this server accepts ({limit:,} bytes); send a smaller update.",
        kind="body-too-large",
    )


def _malformed(detail: str) -> Problem:
    return Problem(400, "Malformed JSON body", detail, kind="malformed-body")
