"""Who may call the app: the bearer token, the inspector's session cookie, trusted hosts.

With a token, every request needs ``Authorization: Bearer <token>`` or the cookie of a
session the inspector starts by presenting the token once (``POST api/session``): a
browser's ``EventSource`` cannot send headers. The cookie holds a random session id the
server knows (``sessions.py``), never the token; logout ends it, and it expires. It is
``HttpOnly`` and ``SameSite=Strict``; the API's writes need a JSON body or a method a
cross-site form cannot send, so the cookie cannot be used from another site's page. The
one thing served without either is the inspector's page, a static file with no data in
it. Tokens are compared in constant time and never logged.

A second, read-only token may be given: a request with it (or with the cookie of a
session it started) may read everything, the event streams included, and is refused 403
for every write: a method other than GET, HEAD or OPTIONS, but for starting and ending its
own inspector session.
"""

from __future__ import annotations

import hmac
from collections.abc import Sequence
from typing import Literal

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from .problems import Problem
from .sessions import Sessions

__all__ = (
    "COOKIE_NAME",
    "Access",
    "Guard",
    "access_of",
    "check_read_only_token",
    "check_token",
    "route_path",
    "session_cookie",
    "session_of",
)

#: What a request's credentials allow.
Access = Literal["read", "write"]

COOKIE_NAME = "noetic_scratchpad_session"
#: Paths served without credentials: the inspector's page (static, no data in it).
OPEN_PATHS = frozenset({"/", "/index.html"})
#: Where the guard leaves, in the request's ``state``, the session that authorized it.
_SESSION_STATE = "noetic_scratchpad_session"
#: Where the guard leaves, in the request's ``state``, what its credentials allow.
_ACCESS_STATE = "noetic_scratchpad_access"
#: Methods that change nothing: what read-only credentials may send.
READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
#: Writes read-only credentials may still send: starting and ending their own session.
SESSION_PATH = "/api/session"


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


def check_read_only_token(read_only_token: str | None, token: str | None) -> str | None:
    """``read_only_token`` if it can be sent in a header and stands beside ``token``;
    ``ValueError`` saying why not (never showing either)."""
    try:
        read_only_token = check_token(read_only_token)
    except ValueError as exc:
        raise ValueError(f"read_only_token: {exc}") from None
    if read_only_token is None:
        return None
    if token is None:
        raise ValueError(
            "read_only_token needs token, the read-write one, too: without a token every "
            "request may write, and a read-only token would limit nothing"
        )
    if hmac.compare_digest(read_only_token.encode(), token.encode()):
        raise ValueError("read_only_token must differ from token")
    return read_only_token


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
        read_only_token: str | None = None,
    ) -> None:
        self.app = app
        self.token = token
        self.read_only_token = read_only_token
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
        access = self._access(scope, headers)
        if access == "write":
            return None
        if access == "read":
            if scope["method"] in READ_METHODS or route_path(scope) == SESSION_PATH:
                return None
            return Problem(
                403,
                "Read-only credentials",
                f"This {scope['method']} would change the scratchpads, and it was sent with "
                "the read-only token (or an inspector session started with it), which may "
                "only read: nothing was changed. Send the read-write token to change them.",
                kind="read-only-credentials",
            )
        return Problem(
            401,
            "Authentication required",
            "Send the server's token as `Authorization: Bearer <token>`; the inspector "
            "asks for it once and keeps a session cookie, which logout ends and which "
            "expires.",
            kind="unauthorized",
            headers={"WWW-Authenticate": 'Bearer realm="noetic-scratchpad"'},
        )

    def _access(self, scope: Scope, headers: Headers) -> Access | None:
        """What the request's token, or the cookie of a session not ended, allows (noted
        in the request's ``state``, and so is the session: its event stream ends with
        it); ``None``: neither."""
        access = self._credentials(scope, headers)
        if access is not None:
            scope.setdefault("state", {})[_ACCESS_STATE] = access
        return access

    def _credentials(self, scope: Scope, headers: Headers) -> Access | None:
        token = self.token
        if token is None:
            return "write"
        scheme, _, credentials = headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer" and credentials:
            sent = credentials.strip().encode()
            # Both compared, each in constant time: the time taken tells neither apart.
            writes = hmac.compare_digest(sent, token.encode())
            reads = self.read_only_token is not None and hmac.compare_digest(
                sent, self.read_only_token.encode()
            )
            return "write" if writes else "read" if reads else None
        session_id = session_cookie(headers.get("cookie", ""))
        read_only = self.sessions.use(session_id)
        if read_only is None:
            return None
        scope.setdefault("state", {})[_SESSION_STATE] = session_id
        return "read" if read_only else "write"

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


def access_of(scope: Scope) -> Access:
    """What the request's credentials allow (``"write"`` on an app without a token)."""
    access: Access = scope.get("state", {}).get(_ACCESS_STATE, "write")
    return access


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
