"""The inspector's page, the OpenAPI document and the inspector's session cookie."""

from __future__ import annotations

import base64
import hashlib
import math
import re
from importlib import resources
from typing import Any

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from .guard import COOKIE_NAME, access_of, session_cookie
from .inputs import json_response
from .sessions import Sessions

__all__ = ("Pages",)

_INLINE = re.compile(r"<(script|style)>(.*?)</\1>", re.DOTALL)


def _inspector() -> tuple[str, str]:
    """The page, and a Content-Security-Policy that allows its own inline script and style
    (by hash) and nothing else: state written by a model is shown as text, never run."""
    page = (resources.files(__package__) / "static" / "inspector.html").read_text("utf-8")
    sources: dict[str, list[str]] = {"script": [], "style": []}
    for tag, body in _INLINE.findall(page):
        digest = base64.b64encode(hashlib.sha256(body.encode()).digest()).decode()
        sources[tag].append(f"'sha256-{digest}'")
    policy = (
        "default-src 'none'; "
        f"script-src {' '.join(sources['script'])}; "
        f"style-src {' '.join(sources['style'])}; "
        "connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; "
        "frame-ancestors 'none'"
    )
    return page, policy


class Pages:
    """``GET /`` (the inspector), ``GET openapi.json``, ``api/session``."""

    def __init__(self, document: dict[str, Any], *, sessions: Sessions | None) -> None:
        self.document = document
        self.sessions = sessions
        """The app's sessions; ``None`` when it needs no token (and so no session)."""
        self.page, self.policy = _inspector()

    async def inspector(self, request: Request) -> Response:
        return HTMLResponse(
            self.page,
            headers={
                "Content-Security-Policy": self.policy,
                "X-Content-Type-Options": "nosniff",
                "Referrer-Policy": "no-referrer",
                "Cache-Control": "no-cache",
            },
        )

    async def openapi(self, request: Request) -> Response:
        """The document, its server URL set to where the app is mounted."""
        root = request.scope.get("root_path", "")
        return json_response({**self.document, "servers": [{"url": root or "/"}]})

    async def session_info(self, request: Request) -> Response:
        """Whether this server needs a token (the caller, past the guard, has one), and
        whether the caller's may only read."""
        read_only = access_of(request.scope) == "read"
        return json_response({"token_required": self.sessions is not None, "read_only": read_only})

    async def start_session(self, request: Request) -> Response:
        """Start a session and set its cookie (the guard has checked the token already):
        a read-only one for the read-only token."""
        response = Response(status_code=204)
        if self.sessions is not None:
            read_only = access_of(request.scope) == "read"
            response.set_cookie(
                COOKIE_NAME,
                self.sessions.start(read_only=read_only),
                max_age=math.ceil(self.sessions.max_age),
                path=_cookie_path(request),
                httponly=True,
                samesite="strict",
                secure=request.scope.get("scheme") == "https",
            )
        return response

    async def end_session(self, request: Request) -> Response:
        """End the session the request's cookie names, and clear the cookie."""
        if self.sessions is not None:
            self.sessions.end(session_cookie(request.headers.get("cookie", "")))
        response = Response(status_code=204)
        response.delete_cookie(
            COOKIE_NAME, path=_cookie_path(request), httponly=True, samesite="strict"
        )
        return response


def _cookie_path(request: Request) -> str:
    """The cookie goes to this app only: the path it is mounted at."""
    root: str = request.scope.get("root_path", "")
    return root.rstrip("/") + "/"
