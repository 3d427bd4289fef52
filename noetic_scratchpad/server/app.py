"""``create_app``: the scratchpads over HTTP, as an ASGI app to serve or mount.

Starlette: small, async, an app mounts under a path in any Starlette or FastAPI app, and
its lifespan is a plain async context manager the host can run inside its own.

Shutdown with event streams open: uvicorn, told to stop, closes idle connections and then
*waits for open responses to finish* before it runs the lifespan's shutdown. A stream that
ends only at lifespan shutdown keeps it waiting for ever. So the app ends its streams when
the server *begins* to stop: it watches the ``should_exit`` flag of the server whose signal
handler is installed (uvicorn's), and :meth:`ScratchpadApp.close_streams` does it by hand
for other servers.
"""

from __future__ import annotations

import logging
import signal
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.routing import Route

from .._runtime import start_background
from ..core import ScratchpadCore
from ..events import EventBus
from ..layer import ScratchpadLayer
from ..render import Tokenizer
from ..storage import StorageBackend
from .context import Limits, ServerContext, layers_by_kind
from .guard import Guard, check_read_only_token, check_token
from .openapi import openapi_document
from .pages import Pages
from .problems import Problem, handle_problem, handle_unexpected
from .scopes import ScopeRoutes
from .sessions import DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_AGE, Sessions, check_lifetime
from .stream import EventHub

__all__ = ("ScratchpadApp", "create_app")

logger = logging.getLogger("noetic_scratchpad.server")

#: How often the app looks at the server's ``should_exit`` flag (uvicorn's own tick is 0.1 s).
WATCH_INTERVAL = 0.05


class ScratchpadApp(Starlette):
    """The app ``create_app`` returns: a Starlette app with the scratchpads' endpoints."""

    def __init__(
        self,
        ctx: ServerContext,
        *,
        routes: list[Route],
        middleware: list[Middleware],
    ) -> None:
        super().__init__(
            routes=routes,
            middleware=middleware,
            exception_handlers={
                Problem: handle_problem,
                HTTPException: handle_problem,
                Exception: handle_unexpected,
            },
            lifespan=self.lifespan,
        )
        self._ctx = ctx
        self._running = False

    @property
    def core(self) -> ScratchpadCore:
        """The app's core: its storage, its bus and the handles every endpoint writes
        through (``pad.core.handle(...)``, ``pad.core.call(...)``)."""
        return self._ctx.core

    @property
    def events(self) -> EventBus:
        """The app-wide bus: every scope the app opens reports here. Give it to your
        harness (``AgentHarness(..., events=pad.events)``) to see the agents' writes too."""
        return self._ctx.events

    @property
    def storage(self) -> StorageBackend:
        """The backend; for a URL, opened by the lifespan (``RuntimeError`` before)."""
        backend = self._ctx.core.opened
        if backend is None:
            raise RuntimeError(
                "the app's storage is opened by its lifespan, which has not started; run "
                "the app under a server, or `async with pad.lifespan():`"
            )
        return backend

    @property
    def sessions(self) -> Sessions:
        """The inspector's sessions, kept in memory: they end with the app (a restart asks
        for the token again)."""
        return self._ctx.sessions

    @property
    def open_streams(self) -> int:
        """How many event streams are open now (each an ``EventSource`` or other client)."""
        return self._ctx.hub.open_streams

    def close_streams(self) -> None:
        """End every open event stream now, and refuse new ones until the next start.

        Call it when your server begins to shut down if it is not uvicorn (whose start of
        shutdown the app notices by itself): open streams would otherwise hold it up."""
        self._ctx.hub.stop()

    @asynccontextmanager
    async def lifespan(self, app: Any = None) -> AsyncIterator[None]:
        """Open storage (for a URL), start the event hub; at exit, end the streams, close
        what the app opened. ``app`` is ignored: pass this as a host's ``lifespan=``, or
        enter it inside the host's own lifespan."""
        if self._running:
            raise RuntimeError("the app's lifespan is already running")
        self._running = True
        ctx = self._ctx
        try:
            # A URL is opened now (a bad one fails the start-up); on a restart the core
            # makes a new bus of its own, the last run having closed it.
            await ctx.core.open()
            ctx.hub.start(ctx.events)
            # A task of its own rather than a task group around the ``yield``: the host's
            # errors must reach it as they are, not wrapped in an exception group.
            hub, epoch = ctx.hub, ctx.hub.epoch
            _, watcher = start_background(lambda: _stop_with_server(hub, epoch))
            try:
                yield
            finally:
                if watcher is not None:
                    watcher.cancel()
        finally:
            ctx.hub.stop()
            try:
                # Its own bus and a URL's storage closed; a borrowed bus drained, a
                # borrowed backend left open.
                await ctx.core.aclose()
            finally:
                self._running = False


async def _stop_with_server(hub: EventHub, epoch: str) -> None:
    """End the event streams as soon as the server hosting the app starts to shut down;
    return when the run of the hub that started it (``epoch``) is over."""
    server = _running_server()
    if server is None:
        return
    # A plain flag set by a signal handler: there is no event to wait on, only to poll.
    while not server.should_exit:
        if hub.closed or hub.epoch != epoch:
            return
        await anyio.sleep(WATCH_INTERVAL)
    if hub.epoch == epoch:
        logger.info("the server is shutting down; ending the event streams")
        hub.stop()


def _running_server() -> Any:
    """The server whose SIGINT handler is installed, if it has a ``should_exit`` flag:
    uvicorn's ``Server`` installs its bound ``handle_exit`` while it serves."""
    handler = signal.getsignal(signal.SIGINT)
    owner = getattr(handler, "__self__", None)
    return owner if isinstance(getattr(owner, "should_exit", None), bool) else None


def create_app(
    storage: str | StorageBackend | None = None,
    layers: ScratchpadLayer | Sequence[ScratchpadLayer] | None = None,
    token: str | None = None,
    events: EventBus | None = None,
    *,
    cors_origins: Sequence[str] = (),
    trusted_hosts: Sequence[str] | None = None,
    max_body_bytes: int = 1024 * 1024,
    keepalive: float = 15.0,
    recent_events: int = 200,
    session_max_age: float = DEFAULT_MAX_AGE,
    session_idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
    count_tokens: Tokenizer | None = None,
    read_only_token: str | None = None,
) -> ScratchpadApp:
    """The scratchpads over HTTP: an ASGI app to serve, or to mount in your app.

    ``storage``: an opened backend (yours to close), or a URL the app opens in its lifespan
    and closes at shutdown (``None``: ``$NOETIC_SCRATCHPAD_STORAGE``, else ``memory://``).
    ``layers``: the scratchpad layers whose scopes it serves, at most one thread-scoped and
    one resource-scoped (default: plain ones of both kinds). ``token``: when set, every
    request needs ``Authorization: Bearer <token>`` (or the inspector's session cookie).
    ``read_only_token``: a second token, beside ``token``, that may read everything (the
    event streams and the inspector too) and is refused 403 for every write.
    ``events``: the app-wide bus (default: the app's own, closed at shutdown).
    ``cors_origins``: origins allowed to call it from a browser (default: none).
    ``trusted_hosts``: when set, other ``Host`` headers are refused (DNS rebinding).
    ``max_body_bytes``, ``keepalive`` (seconds between keep-alive comments on event
    streams), ``recent_events`` (kept for replay): limits with safe defaults.
    ``session_max_age``, ``session_idle_timeout``: seconds after which an inspector session
    ends, from its start however busy (8 h), and from its last use (1 h).
    ``count_tokens``: the model's token counter, that the model's view (``GET
    .../view``) counts the block and its budget in, as your hosts do (default, the
    estimate: about four characters a token).

    Raises ``ValueError`` (or ``TypeError``: a ``storage`` or a layer of another type)
    for a bad argument, at once.
    """
    for name, value in (("max_body_bytes", max_body_bytes), ("recent_events", recent_events)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive int, not {value!r}")
    if not isinstance(keepalive, int | float) or not 0 < keepalive <= 3600:
        raise ValueError(f"keepalive must be a number of seconds in (0, 3600], not {keepalive!r}")
    token = check_token(token)
    read_only_token = check_read_only_token(read_only_token, token)
    sessions = Sessions(
        max_age=check_lifetime("session_max_age", session_max_age),
        idle_timeout=check_lifetime("session_idle_timeout", session_idle_timeout),
    )
    by_kind = layers_by_kind(layers)
    limits = Limits(max_body_bytes=max_body_bytes, keepalive=keepalive, recent_events=recent_events)
    served = [layer for kind, layer in by_kind.items() if kind == layer.scope]
    ctx = ServerContext(
        # StorageTypeError, a TypeError, for a storage of another type
        core=ScratchpadCore(served, storage=storage, events=events, count_tokens=count_tokens),
        layers=by_kind,
        limits=limits,
        sessions=sessions,
        token_required=token is not None,
    )
    pages = Pages(
        openapi_document(
            by_kind,
            token=token is not None,
            read_only_token=read_only_token is not None,
            limits=limits,
        ),
        sessions=sessions if token else None,
    )
    return ScratchpadApp(
        ctx,
        routes=_routes(ScopeRoutes(ctx), pages),
        middleware=_middleware(token, read_only_token, trusted_hosts, cors_origins, sessions),
    )


def _routes(scopes: ScopeRoutes, pages: Pages) -> list[Route]:
    return [
        Route("/", pages.inspector, methods=["GET"]),
        Route("/openapi.json", pages.openapi, methods=["GET"]),
        Route("/api/scopes", scopes.list, methods=["GET"]),
        Route("/api/scopes", scopes.subjects.load, methods=["POST"]),  # an export's import
        Route("/api/scopes/{rest:path}", scopes),  # every method: ScopeRoutes dispatches
        Route("/api/events", scopes.all_events, methods=["GET"]),
        Route("/api/session", pages.session_info, methods=["GET"]),
        Route("/api/session", pages.start_session, methods=["POST"]),
        Route("/api/session", pages.end_session, methods=["DELETE"]),
    ]


def _middleware(
    token: str | None,
    read_only_token: str | None,
    trusted_hosts: Sequence[str] | None,
    cors_origins: Sequence[str],
    sessions: Sessions,
) -> list[Middleware]:
    middleware = [
        Middleware(
            Guard,
            token=token,
            read_only_token=read_only_token,
            trusted_hosts=trusted_hosts,
            sessions=sessions,
        )
    ]
    if cors_origins:
        # Outside the guard: a browser's preflight carries no credentials.
        cors = Middleware(
            CORSMiddleware,
            allow_origins=list(cors_origins),
            allow_methods=["GET", "PATCH", "DELETE", "POST"],
            allow_headers=["Authorization", "Content-Type", "If-Match", "Last-Event-ID"],
            expose_headers=["ETag"],  # for If-Match: a cross-origin script must read it
        )
        middleware.insert(0, cors)
    return middleware
