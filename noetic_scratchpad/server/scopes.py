"""The scope endpoints: list, read, update, reset, and one scope's event stream.

A scope is addressed as ``api/scopes/{kind}/{id}[/{action}]``, the id percent-encoded as
one path segment (``a/b`` is ``a%2Fb``: ``a`` and ``a/b`` are two scopes). Servers hand
the app the *decoded* path, where that ``/`` is lost, so the id is read from the raw path
instead. One route takes every method and action and dispatches through
:attr:`ScopeRoutes.actions`: an action is a table of methods to handlers, so a new one
is one entry and one handler.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import quote, unquote, unquote_to_bytes

import anyio
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from .. import tracing
from ..errors import ScratchpadUpdateError
from ..events import ScopeReset, ScratchpadEvent
from ..keys import SCOPES, layer_prefix, parse_state_key
from ..keys import Scope as ScopeKind
from .callers import caller_of
from .context import ServerContext
from .guard import session_of
from .inputs import int_param, iso_time, json_response, read_json_object
from .openapi import MAX_OFFSET
from .problems import Problem, storage_errors, update_problem
from .revisions import Precondition, Revisions, not_stored, scope_response
from .stream import EventStream
from .subjects import SubjectRoutes
from .target import Target
from .views import ModelViews

__all__ = ("ScopeRoutes",)


Handler = Callable[[Request, Target], Awaitable[Response]]


class ScopeRoutes:
    """The endpoints under ``api/scopes`` and ``api/events``."""

    def __init__(self, ctx: ServerContext) -> None:
        self.ctx = ctx
        self.revisions = Revisions(ctx)
        self.subjects = SubjectRoutes(ctx)
        self.views = ModelViews(ctx)
        self.actions: dict[str, dict[str, Handler]] = {
            "": {"GET": self.read, "PATCH": self.update, "DELETE": self.reset},
            "view": {"GET": self.views.view},
            "history": {"GET": self.revisions.history},
            "revert": {"POST": self.revert},
            "events": {"GET": self.scope_events},
            "export": {"GET": self.subjects.export},
            "erase": {"DELETE": self.subjects.erase},
        }

    # -- api/scopes ------------------------------------------------------------------------

    async def list(self, request: Request) -> Response:
        """Every stored scope of the served layers, the latest write first."""
        ctx = self.ctx
        kind = request.query_params.get("kind")
        if kind is not None and kind not in ctx.layers:
            raise Problem(
                400,
                "Invalid query parameter",
                f"`kind` must be one of {', '.join(ctx.layers)}, not {kind!r}.",
                kind="invalid-parameter",
            )
        limit = int_param(request, "limit", ctx.limits.list_limit, 1, ctx.limits.list_limit)
        offset = int_param(request, "offset", 0, 0, MAX_OFFSET)
        backend = ctx.storage()
        rows: list[dict[str, Any]] = []
        with storage_errors(), anyio.fail_after(ctx.read_timeout()):
            for layer_id in dict.fromkeys(layer.id for layer in ctx.layers.values()):
                for info in await backend.describe(layer_prefix(layer_id)):
                    ref = parse_state_key(info.key)
                    if ref is None or (kind is not None and ref.kind != kind):
                        continue
                    served = ctx.layers.get(ref.kind)
                    if served is None or served.id != ref.layer_id:
                        continue
                    rows.append(
                        {
                            "kind": ref.kind,
                            "id": ref.scope_id,
                            "layer": ref.layer_id,
                            "revision": info.revision,
                            "size": info.size,
                            "updated_at": iso_time(info.updated_at),
                        }
                    )
        rows.sort(key=lambda row: (row["updated_at"], row["kind"], row["id"]), reverse=True)
        return json_response({"scopes": rows[offset : offset + limit], "total": len(rows)})

    # -- api/scopes/{kind}/{id}[/{action}] -------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        target, action = self._target(scope)
        methods = self.actions.get(action)
        if methods is None:
            raise Problem(
                404,
                "Not Found",
                f"A scope has no endpoint {action!r}. Percent-encode a '/' in a scope id "
                "as %2F: the id is one path segment.",
            )
        handler = methods.get(request.method)
        if handler is None:
            allowed = ", ".join(methods)
            raise Problem(
                405,
                "Method Not Allowed",
                f"This endpoint does not accept {request.method}; it accepts: {allowed}.",
                headers={"Allow": allowed},
            )
        response = await handler(request, target)
        await response(scope, receive, send)

    def _target(self, scope: Scope) -> tuple[Target, str]:
        """(the scope addressed, the action) from the raw path's last segments."""
        raw = scope.get("raw_path")
        path = raw.decode("latin-1") if raw else quote(scope["path"], safe="/")
        parts = path.split("/")
        if len(parts) >= 3 and parts[-3] == "scopes":
            tail = [*parts[-2:], ""]
        elif len(parts) >= 4 and parts[-4] == "scopes":
            tail = parts[-3:]
        else:
            tail = []
        # The route matched the decoded path: it must decode to the same tail, so that
        # no other reading of the path is possible.
        rest = "/".join(unquote(part) for part in tail).removesuffix("/")
        if not tail or rest != scope.get("path_params", {}).get("rest"):
            raise Problem(
                404,
                "Not Found",
                "Address a scope as api/scopes/{kind}/{id}, the id percent-encoded as one "
                "path segment (a '/' in it as %2F).",
            )
        kind, encoded, action = tail
        layer = self.ctx.layer(kind)
        try:
            scope_id = unquote_to_bytes(encoded).decode("utf-8")
        except UnicodeDecodeError:
            raise Problem(
                400,
                "Invalid scope id",
                "The scope id's percent-encoding is not UTF-8; encode ids as UTF-8.",
                kind="invalid-scope-id",
            ) from None
        checked_kind: ScopeKind = next(k for k in SCOPES if k == kind)
        return Target(checked_kind, self.ctx.check_id(kind, scope_id), layer.id), action

    async def read(self, request: Request, target: Target) -> Response:
        """The stored state and its revision, with its ETag; 404 when nothing is stored."""
        with tracing.memory_span(
            "read", layer_id=target.layer_id, scope_key=target.id, scope=target.kind
        ) as span:
            found = await self.revisions.stored(target)
            if span is not None:
                stored = (None, None) if found is None else (found.revision, found.value)
                tracing.read(span, revision=stored[0], state=stored[1], scope_key=target.id)
        if found is None:
            raise not_stored(target)
        return scope_response(target, found.value, found.revision)

    async def update(self, request: Request, target: Target) -> Response:
        """Deep-merge the body into the state: the tool's write path, events say "api".
        With ``If-Match``, only onto the state it names (412 otherwise)."""
        values = await read_json_object(request, self.ctx.limits.max_body_bytes)
        condition = Precondition.of(request)
        handle = await self.ctx.handle(target.kind, target.id, self._caller(request))
        revision = handle.revision
        try:
            if condition is not None:
                await self.revisions.update(target, handle, values, condition)
            else:
                with storage_errors():
                    await handle.update(values)
        except ScratchpadUpdateError as exc:
            raise update_problem(exc) from None
        if handle.revision == revision:  # a body with no key wrote nothing: show what is stored
            with storage_errors():
                await handle.refresh()
        return scope_response(target, handle.snapshot, handle.revision)

    async def revert(self, request: Request, target: Target) -> Response:
        """``{"revision": N}``: the state right after revision N becomes a new revision."""
        handle = await self.ctx.handle(target.kind, target.id, self._caller(request))
        return await self.revisions.revert(request, target, handle)

    def _caller(self, request: Request) -> dict[str, Any]:
        return caller_of(request, token_required=self.ctx.token_required)

    async def reset(self, request: Request, target: Target) -> Response:
        """Delete the scope's state; 404 when nothing is stored. The state is not read, so
        a scope whose stored value cannot be read can still be reset."""
        backend = self.ctx.storage()
        with (
            storage_errors(),
            tracing.memory_span(
                "reset", layer_id=target.layer_id, scope_key=target.id, scope=target.kind
            ) as span,
            anyio.fail_after(self.ctx.read_timeout(target.kind)),
        ):
            stored = target.key in await backend.list(target.key)
            if stored:
                await backend.delete(target.key)
            if span is not None:
                span.set_attribute(tracing.RECORD_COUNT, int(stored))
        if not stored:
            raise not_stored(target)
        self.ctx.events.emit(
            ScopeReset(layer_id=target.layer_id, scope_key=target.id, scope=target.kind)
        )
        return Response(status_code=204)

    # -- event streams ---------------------------------------------------------------------

    async def scope_events(self, request: Request, target: Target) -> Response:
        """Server-sent events of one scope: its id, layer and kind. (An event from code
        that does not name its kind of scope goes to the thread and the resource alike.)"""

        def accepts(event: ScratchpadEvent) -> bool:
            return (
                event.scope_key == target.id
                and event.layer_id == target.layer_id
                and event.scope in (target.kind, None)
            )

        return self._stream(request, accepts)

    async def all_events(self, request: Request) -> Response:
        """Server-sent events of every scope the app's bus hears of."""
        return self._stream(request, _everything)

    def _stream(self, request: Request, accepts: Callable[[ScratchpadEvent], bool]) -> EventStream:
        limits = self.ctx.limits
        session_id = session_of(request.scope)
        sessions = self.ctx.sessions
        return EventStream(
            self.ctx.hub,
            accepts,
            keepalive=limits.keepalive,
            last_event_id=request.headers.get("last-event-id"),
            replay=int_param(request, "replay", 0, 0, limits.recent_events),
            # Opened with a session's cookie: it ends with the session (logout, expiry).
            allowed=None if session_id is None else lambda: sessions.alive(session_id),
        )


def _everything(event: ScratchpadEvent) -> bool:
    return True
