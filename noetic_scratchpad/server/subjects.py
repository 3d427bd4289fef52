"""A data subject's scopes over HTTP: export, import, erase (see ``portability``).

``GET api/scopes/{kind}/{id}/export`` and ``DELETE api/scopes/{kind}/{id}/erase`` take the
scope's id and, repeated ``?thread=ID``, the threads the application lists for it;
``POST api/scopes`` loads an export document. They reach the layers the app serves.
"""

from __future__ import annotations

from typing import Any

import anyio
from starlette.requests import Request
from starlette.responses import Response

from ..portability import (
    ExportFormatError,
    ImportConflictError,
    Subject,
    erase_subject,
    export_subject,
    import_subject,
    read_document,
)
from .context import ServerContext
from .inputs import json_response, read_json_object
from .problems import Problem, storage_errors
from .target import Target

__all__ = ("MAX_THREADS", "SubjectRoutes")

#: The most ``?thread=`` ids one request names.
MAX_THREADS = 100


class SubjectRoutes:
    """The handlers; :class:`~.scopes.ScopeRoutes` routes to them."""

    def __init__(self, ctx: ServerContext) -> None:
        self.ctx = ctx

    def _layers(self) -> list[str]:
        return list(dict.fromkeys(layer.id for layer in self.ctx.layers.values()))

    def _subject(self, request: Request, target: Target) -> Subject:
        threads = request.query_params.getlist("thread")
        if len(threads) > MAX_THREADS:
            raise Problem(
                400,
                "Invalid query parameter",
                f"At most {MAX_THREADS} `thread` ids a request; split the subject's threads "
                "over several requests.",
                kind="invalid-parameter",
            )
        checked = tuple(self.ctx.check_id("thread", thread) for thread in threads)
        if target.kind == "resource":
            return Subject(target.id, checked)
        return Subject(None, (target.id, *checked))

    async def export(self, request: Request, target: Target) -> Response:
        """The export document of the subject: 200, with no scope when nothing is stored."""
        subject = self._subject(request, target)
        with storage_errors(), anyio.fail_after(self.ctx.read_timeout()):
            document = await export_subject(self.ctx.storage(), subject, layers=self._layers())
        return json_response(document)

    async def erase(self, request: Request, target: Target) -> Response:
        """Delete the subject's scopes and what the storage keeps of them: 200 with the
        report (also when nothing was stored: an erasure is safe to repeat)."""
        subject = self._subject(request, target)
        with storage_errors():
            report = await erase_subject(self.ctx.storage(), subject, layers=self._layers())
        return json_response(report.as_json())

    def _check_served(self, document: dict[str, Any]) -> None:
        """Only the layers the app serves, each for its kind, and none read-only: an
        import writes states as they were exported (the layer's load recovers one that
        no longer fits its schema), so it is held to what a PATCH could reach."""
        try:
            read_document(document)
        except ExportFormatError as exc:
            raise Problem(422, "Not an export", f"{exc}.", kind="invalid-export") from None
        # Every scope, a scope without keys too: the document is refused or taken whole.
        for scope in document["scopes"]:
            kind, layer = scope["kind"], scope["layer"]
            served = self.ctx.layers.get(kind)
            if served is None or served.id != layer:
                raise Problem(
                    422,
                    "Not an export",
                    f"The export holds a {kind} scope of the layer {layer!r}, which this "
                    "app does not serve for that kind; import it with the command line.",
                    kind="invalid-export",
                )
            if served.config.read_only:
                raise Problem(
                    409,
                    "Read-only",
                    f"The {kind} scratchpads this app serves are read-only.",
                    kind="read-only",
                )

    async def load(self, request: Request) -> Response:
        """``POST api/scopes``: write an export document's scopes back (``?replace=true``
        replaces keys stored with other values); 409 listing the conflicts otherwise."""
        replace = request.query_params.get("replace", "false")
        if replace not in ("true", "false"):
            raise Problem(
                400,
                "Invalid query parameter",
                f"`replace` must be true or false, not {replace!r}.",
                kind="invalid-parameter",
            )
        document = await read_json_object(request, self.ctx.limits.max_body_bytes)
        self._check_served(document)
        with storage_errors():
            try:
                report = await import_subject(
                    self.ctx.storage(), document, replace=replace == "true"
                )
            except ExportFormatError as exc:
                raise Problem(422, "Not an export", f"{exc}.", kind="invalid-export") from None
            except ImportConflictError as exc:
                raise Problem(
                    409,
                    "Stored with other values",
                    str(exc).replace("import with replace", "POST again with ?replace=true") + ".",
                    kind="import-conflict",
                    conflicts=exc.conflicts,
                ) from None
        return json_response(report.as_json())
