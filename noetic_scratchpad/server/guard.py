"""Who may call the app: the bearer token, the inspector's session cookie, trusted hosts.

With a token, every request needs ``Authorization: Bearer <token>`` or the cookie of a
session the inspector starts by presenting the token once (``POST api/session``): a
browser's ``EventSource`` cannot send headers. The cookie holds a random session id the
server knows (``sessions.py``), never the token; logout ends it, and it expires. It is
``HttpOnly`` and ``SameSite=Strict``; the API's writes need a JSON body or a method a
cross-site form cannot send, so the cookie cannot be used from another site's page. The
one thing served without either is the inspector's page, a static file with no data in
it. Tokens are compared in constant time and never logged.
"""

from __future__ import annotations

import hmac
from collections.abc import Sequence

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from .problems import Problem
from .sessions import Sessions

__all__ = (
    "COOKIE_NAME",
    "Guard",
    "check_token",
    "route_path",
    "session_cookie",
    "session_of",
)

COOKIE_NAME = "noetic_scratchpad_session"
#: Paths served without credentials: the inspector's page (static, no data in it).
OPEN_PATHS = frozenset({"/", "/index.html"})
#: Where the guard leaves, in the request's ``state``, the session that authorized it.
_SESSION_STATE = "noetic_scratchpad_session"


def check_token(token: str | None) -> str | None:
    """``token`` if it can be sent in a header; ``ValueError`` saying why not."""
    if token is None:
        return None
    if not isinstance(token, str) or not token:
        raise ValueError("the token must be a non-empty string (or None for no token)")
    if not token.isascii() or not token.isprintable() or any(c.isspace() for c in token):
        raise ValueError(
            "the token must be printable ASCII without spaces, so it can travel in an "
            "Authorization header; generate one with: python -c 'import secrets; "
            "print(secrets.token_urlsafe(32))'"
        )
    return token


def route_path(scope: Scope) -> str:
    """The request's path inside this app (below the path it is mounted at)."""
    path: str = scope["path"]
    root: str = scope.get("root_path", "")
    if root and path.startswith(root):
        return path[len(root) :] or "/"
    return path


class Guard:
    """ASGI middleware: refuses untrusted ``Host`` headers, then unauthenticated requests."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        token: str | None,
        trusted_hosts: Sequence[str] | None,
        sessions: Sessions,
    ) -> None:
        self.app = app
        self.token = token
        self.sessions = sessions
        self.trusted_hosts = (
            None if trusted_hosts is None else {host.lower() for host in trusted_hosts}
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        problem = self._refusal(scope, headers)
        if problem is None:
            await self.app(scope, receive, send)
            return
        response = problem.response(scope.get("root_path", "") + route_path(scope))
        await response(scope, receive, send)

    def _refusal(self, scope: Scope, headers: Headers) -> Problem | None:
        if self.trusted_hosts is not None and not self._host_trusted(headers):
            return Problem(
                400,
                "Untrusted Host header",
                "This server answers only to the host names it was told to trust (a guard "
                "against DNS rebinding); use one of them in the URL.",
                kind="untrusted-host",
            )
        if self.token is None or route_path(scope) in OPEN_PATHS:
            return None
        if self._authorized(scope, headers):
            return None
        return Problem(
            401,
            "Authentication required",
            "Send the server's token as `Authorization: Bearer <token>`; the inspector "
            "asks for it once and keeps a session cookie, which logout ends and which "
            "expires.",
            kind="unauthorized",
            headers={"WWW-Authenticate": 'Bearer realm="noetic-scratchpad"'},
        )

    def _authorized(self, scope: Scope, headers: Headers) -> bool:
        """Whether the request carries the token, or the cookie of a session not ended
        (which is then noted in the request's ``state``: its event stream ends with it)."""
        token = self.token
        if token is None:
            return True
        scheme, _, credentials = headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer" and credentials:
            return hmac.compare_digest(credentials.strip().encode(), token.encode())
        session_id = session_cookie(headers.get("cookie", ""))
        if not self.sessions.check(session_id):
            return False
        scope.setdefault("state", {})[_SESSION_STATE] = session_id
        return True

    def _host_trusted(self, headers: Headers) -> bool:
        host = headers.get("host", "").lower()
        if host.startswith("["):  # [::1]:8000
            name = host[: host.find("]") + 1]
        else:
            name = host.rpartition(":")[0] if host.count(":") == 1 else host
        return name in self.trusted_hosts if self.trusted_hosts is not None else True


def session_of(scope: Scope) -> str | None:
    """The id of the session whose cookie authorized the request (``None``: the token did,
    or no token is needed)."""
    session_id: str | None = scope.get("state", {}).get(_SESSION_STATE)
    return session_id


def session_cookie(header: str) -> str | None:
    """The session cookie's value in a ``Cookie`` header, if there is one.

    Read by hand, in one pass: ``http.cookies`` takes quadratic time on some values (a
    quoted run of backslashes), and a session id is never quoted or escaped.
    """
    for pair in header.split(";"):
        name, equals, value = pair.partition("=")
        if equals and name.strip() == COOKIE_NAME:
            return value.strip()
    return None
