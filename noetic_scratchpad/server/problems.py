"""Errors for HTTP clients as ``application/problem+json`` (RFC 9457).

Every error the app answers with is a :class:`Problem`: a status, a ``type`` URI naming the
kind of problem (``urn:noetic-scratchpad:problem:...``, or ``about:blank`` for plain HTTP
errors such as an unknown path), a short ``title`` and a ``detail`` written for the
developer calling the API, from the data a refusal carries (``reason``, ``errors``,
``limit``); the model's texts (``layer.refusal_text``) are not used here.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from http import HTTPStatus
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ..errors import (
    ScratchpadReadOnlyError,
    ScratchpadUpdateError,
    ScratchpadValidationError,
    StorageCorruptError,
    StorageError,
    StorageOutcomeUnknownError,
)

__all__ = (
    "MEDIA_TYPE",
    "TYPE_PREFIX",
    "Problem",
    "http_exception_problem",
    "problem_response",
    "storage_errors",
    "storage_problem",
    "update_problem",
)

logger = logging.getLogger("noetic_scratchpad.server")

MEDIA_TYPE = "application/problem+json"
TYPE_PREFIX = "urn:noetic-scratchpad:problem:"


class Problem(Exception):
    """An error to answer with: raise it anywhere below an endpoint.

    ``kind`` becomes the ``type`` URI (``None``: ``about:blank``, titled after the status);
    ``extra`` members are added to the document (``errors``, ``reason``...).
    """

    def __init__(
        self,
        status: int,
        title: str,
        detail: str,
        *,
        kind: str | None = None,
        headers: Mapping[str, str] | None = None,
        **extra: Any,
    ) -> None:
        super().__init__(detail)
        self.status = status
        self.title = title
        self.detail = detail
        self.kind = kind
        self.headers = dict(headers or {})
        self.extra = extra

    def document(self, instance: str | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {
            "type": TYPE_PREFIX + self.kind if self.kind else "about:blank",
            "title": self.title,
            "status": self.status,
            "detail": self.detail,
        }
        if instance:
            body["instance"] = instance
        body.update(self.extra)
        return body

    def response(self, instance: str | None = None) -> Response:
        return problem_response(self, instance)


def problem_response(problem: Problem, instance: str | None = None) -> Response:
    return JSONResponse(
        problem.document(instance),
        status_code=problem.status,
        headers=problem.headers,
        media_type=MEDIA_TYPE,
    )


def http_exception_problem(exc: HTTPException) -> Problem:
    """Starlette's own 404 and 405 (no such path, method not allowed) as problems."""
    phrase = HTTPStatus(exc.status_code).phrase
    if exc.status_code == 404:
        detail = "No endpoint answers at this path; GET openapi.json lists the endpoints."
    elif exc.status_code == 405:
        allowed = (exc.headers or {}).get("Allow", "")
        detail = f"This endpoint does not accept that method; it accepts: {allowed}."
    else:
        detail = exc.detail if exc.detail != phrase else phrase + "."
    return Problem(exc.status_code, phrase, detail, headers=exc.headers)


async def handle_problem(request: Request, exc: Exception) -> Response:
    """The app's exception handler for :class:`Problem` and Starlette's ``HTTPException``."""
    problem = exc if isinstance(exc, Problem) else None
    if problem is None and isinstance(exc, HTTPException):
        problem = http_exception_problem(exc)
    if problem is None:  # pragma: no cover - registered for these two types only
        raise exc
    return problem.response(request.url.path)


async def handle_unexpected(request: Request, exc: Exception) -> Response:
    """A bug: logged with its traceback, answered as a problem without the details."""
    logger.error("unexpected error in %s %s", request.method, request.url.path, exc_info=exc)
    return Problem(
        500,
        "Internal Server Error",
        "The server failed unexpectedly; the error is in its log. Nothing you sent caused it.",
        kind="internal",
    ).response(request.url.path)


# -- the write path's errors --------------------------------------------------------------


def update_problem(exc: ScratchpadUpdateError) -> Problem:
    """A refused update as a problem for the developer calling the API, from the data the
    refusal carries."""
    if isinstance(exc, ScratchpadReadOnlyError):
        return Problem(
            409,
            "The scratchpad is read-only",
            "This scratchpad is configured with read_only=True, so updates are refused; "
            "nothing was written. Reset it, or serve a layer without read_only.",
            kind="read-only",
            reason=exc.reason,
        )
    if isinstance(exc, StorageCorruptError):  # a ScratchpadCorruptStateError
        return storage_problem(exc)
    if isinstance(exc, ScratchpadValidationError):
        fields = ", ".join(_loc(error) for error in exc.errors) or "the state"
        return Problem(
            422,
            "The update does not fit the schema",
            f"Merged into the stored state, the update fails the scratchpad's schema at: "
            f"{fields}; nothing was written. `errors` lists each failure.",
            kind="schema",
            reason=exc.reason,
            errors=[_json_safe(error) for error in exc.errors],
        )
    if exc.reason == "too_large":
        return Problem(
            422,
            "The state would be too large",
            f"The update would make the state {exc.size or 0:,} bytes, over the layer's "
            f"max_state_bytes of {exc.limit or 0:,}. Nothing was written: send a smaller "
            "update, or raise the layer's max_state_bytes.",
            kind="too-large",
            reason=exc.reason,
            limit=exc.limit,
            size=exc.size,
        )
    return Problem(
        422,
        "The update cannot be stored",
        f"{exc.message} Nothing was written.",
        kind="invalid-update",
        reason=exc.reason,
    )


@contextmanager
def storage_errors() -> Iterator[None]:
    """Turn a failing backend inside the block into a 503 problem, or a 409 for a stored
    value that cannot be read (problems pass)."""
    try:
        yield
    except (Problem, ScratchpadUpdateError):
        raise
    except Exception as exc:
        raise storage_problem(exc) from None


def storage_problem(exc: Exception) -> Problem:
    """A failing backend: 503, retryable; a stored value that cannot be read: 409, until
    the scope is reset. Details go to the log, not to the client."""
    if isinstance(exc, StorageCorruptError):
        logger.error("a stored value cannot be read while serving a request: %s", exc)
        return Problem(
            409,
            "The stored state cannot be read",
            "The value stored for this scope is not JSON this server can read (another "
            "program wrote it, or it was damaged), so the scope can be neither read nor "
            "updated; nothing was changed, and retrying will not help. Reset the scope with "
            "DELETE (its state and history are lost), or repair the row; the server's log "
            "has the details.",
            kind="storage-corrupt",
        )
    if isinstance(exc, TimeoutError):
        exc = StorageError("storage did not answer within the layer's read_timeout")
    logger.warning("storage failed while serving a request: %s: %s", type(exc).__name__, exc)
    if isinstance(exc, StorageOutcomeUnknownError):  # a lost commit, or write_timeout
        return Problem(
            503,
            "The write may or may not have landed",
            "Contact with storage was lost while the update was being saved, so it may "
            "have landed or not. Read the scope, and repeat the update if it is missing "
            "(repeating an update is harmless).",
            kind="outcome-unknown",
            headers={"Retry-After": "1"},
        )
    return Problem(
        503,
        "Storage is unavailable",
        "The storage backend failed or did not answer in time; nothing was changed. Try "
        "again shortly; the server's log has the backend's error.",
        kind="storage-unavailable",
        headers={"Retry-After": "1"},
    )


def _loc(error: Mapping[str, Any]) -> str:
    loc = error.get("loc") or []
    return ".".join(str(part) for part in loc) or "(root)"


def _json_safe(error: Mapping[str, Any]) -> dict[str, Any]:
    """A validation error with only JSON values (the layer already keeps them so)."""
    safe: dict[str, Any] = {}
    for key in ("type", "loc", "msg", "input"):
        if key in error:
            value = error[key]
            is_json = value is None or isinstance(value, str | int | float | bool | list | dict)
            safe[key] = value if is_json else repr(value)
    return safe
