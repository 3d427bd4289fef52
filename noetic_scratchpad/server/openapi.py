"""The OpenAPI 3.1 document the app serves at ``openapi.json``, written out by hand.

Hand-written rather than generated from docstrings: the update body is the layer's own
JSON schema (the one the model sees for the tool), each scope path lists exactly the
problems it can answer with, and the raw-path routing of scope ids (see ``scopes.py``)
has no route Starlette's schema helpers could describe.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from .. import __version__
from ..keys import MAX_ID_BYTES, Scope
from ..layer import LayerFunction, ScratchpadLayer
from ..portability import FORMAT, VERSION
from .context import Limits
from .problems import MEDIA_TYPE
from .revisions import MAX_HISTORY
from .schemas import base_schemas
from .subjects import MAX_THREADS
from .views import MAX_BUDGET

__all__ = ("MAX_OFFSET", "openapi_document")

#: The longest id, in characters, the document promises: four UTF-8 bytes each at most.
_ID_CHARS = MAX_ID_BYTES // 4
_REVISION = {"type": "integer", "minimum": 0}

#: The largest ``offset`` of ``GET api/scopes``.
MAX_OFFSET = 10**9

_PROBLEMS = {
    400: "Invalid scope id, query parameter or JSON body",
    401: "No token, or a wrong one",
    403: "A write sent with the read-only token (or a session it started)",
    404: "No such scope, or nothing stored for it",
    405: "Method not allowed",
    409: "The scratchpad is read-only, the revision cannot be restored, or the stored state "
    "cannot be read (reset the scope)",
    412: "If-Match does not name the stored state",
    413: "The body is larger than the server accepts",
    415: "The body is not JSON",
    422: "The body is not an object or not a revert, cannot be stored, or fails the schema",
    503: "Storage unavailable, the app not started, shutting down, or the scope too busy",
}


def openapi_document(
    layers: dict[Scope, ScratchpadLayer],
    *,
    token: bool,
    limits: Limits,
    read_only_token: bool = False,
) -> dict[str, Any]:
    """The document for an app serving ``layers``; ``token``: whether auth is on;
    ``read_only_token``: whether a read-only token is, whose writes are refused 403."""
    schemas = base_schemas(list(layers))
    paths: dict[str, Any] = {
        "/api/scopes": {"get": _list_operation(list(layers), token, limits)},
        "/api/events": {"get": _events_operation("Events of every scope", token, limits)},
        "/api/session": {
            "get": _operation(
                "Whether the server needs a token",
                token,
                {200: _json({"$ref": "#/components/schemas/Session"})},
                [400],
            ),
            "post": _operation(
                "Start an inspector session: a cookie standing in for the token until "
                "DELETE or expiry",
                token,
                {204: _empty("Session cookie set", cookie=True)},
                [400],
            ),
            "delete": _operation(
                "End the inspector session: its cookie is refused from now on",
                token,
                {204: _empty("Session ended, cookie cleared")},
                [400],
            ),
        },
    }
    schemas.update(_subject_schemas(layers))
    paths["/api/scopes"]["post"] = _import_operation(token)
    for kind, layer in layers.items():
        update = layer.provides["update"]
        parameters = update.parameters if isinstance(update, LayerFunction) else {}
        update_schema = _hoist(dict(parameters), f"{kind}_", schemas)
        schemas[f"{kind}_update"] = update_schema
        base = f"/api/scopes/{kind}/{{scope_id}}"
        paths[base] = _scope_operations(kind, token)
        paths[base + "/view"] = {"get": _view_operation(kind, token)}
        paths[base + "/history"] = {"get": _history_operation(kind, token)}
        paths[base + "/revert"] = {"post": _revert_operation(kind, token)}
        paths[base + "/export"] = {"get": _subject_operation(kind, token, erase=False)}
        paths[base + "/erase"] = {"delete": _subject_operation(kind, token, erase=True)}
        paths[base + "/events"] = {
            "get": _events_operation(f"Events of one {kind} scope", token, limits, scoped=True)
        }
    if read_only_token:
        for path, operations in paths.items():
            for method, operation in operations.items():
                if method in ("post", "put", "patch", "delete") and path != "/api/session":
                    operation["responses"]["403"] = _problem(403)
    document: dict[str, Any] = {
        "openapi": "3.1.0",
        "info": {
            "title": "noetic-scratchpad",
            "version": __version__,
            "description": "Read, update and reset agents' scratchpads; follow their events.",
        },
        "paths": paths,
        "components": {"schemas": schemas, "parameters": _parameters(limits)},
    }
    if token:
        document["components"]["securitySchemes"] = {
            "bearer": {"type": "http", "scheme": "bearer"},
            "session": {"type": "apiKey", "in": "cookie", "name": "noetic_scratchpad_session"},
        }
        document["security"] = [{"bearer": []}, {"session": []}]
    return document


def _scope_operations(kind: str, token: bool) -> dict[str, Any]:
    params = [{"$ref": "#/components/parameters/scope_id"}]
    patch = _operation(
        f"Deep-merge an update into a {kind} scope's state (the tool's write path)",
        token,
        {200: _scope("The state after the update")},
        [400, 404, 409, 412, 413, 415, 422, 503],
    )
    patch["parameters"] = [{"$ref": "#/components/parameters/if_match"}]
    patch["requestBody"] = _body(f"{kind}_update")
    return {
        "parameters": params,
        "get": _operation(
            f"Read a {kind} scope's stored state and revision",
            token,
            {200: _scope("The stored state")},
            [400, 404, 409, 503],
        ),
        "patch": patch,
        "delete": _operation(
            f"Reset a {kind} scope: delete its state, revision and history",
            token,
            {204: _empty("Deleted")},
            [400, 404, 503],
        ),
    }


def _history_operation(kind: str, token: bool) -> dict[str, Any]:
    operation = _operation(
        f"A {kind} scope's journaled writes, newest first, each with its diff",
        token,
        {200: _json({"$ref": "#/components/schemas/History"})},
        [400, 404, 409, 503],
    )
    operation["parameters"] = [
        {"$ref": "#/components/parameters/scope_id"},
        {
            "name": "limit",
            "in": "query",
            "description": "How many entries, at most (default 20)",
            "schema": {"type": "integer", "minimum": 1, "maximum": MAX_HISTORY},
        },
    ]
    return operation


def _view_operation(kind: str, token: bool) -> dict[str, Any]:
    operation = _operation(
        f"What the model reads of a {kind} scope: its block, tokens against the budget, "
        "and what a cut leaves out",
        token,
        {200: _json({"$ref": "#/components/schemas/View"})},
        [400, 404, 409, 503],
    )
    operation["parameters"] = [
        {"$ref": "#/components/parameters/scope_id"},
        {
            "name": "budget",
            "in": "query",
            "description": "The block's budget in tokens (default, the layer's)",
            "schema": {"type": "integer", "minimum": 0, "maximum": MAX_BUDGET},
        },
    ]
    return operation


def _revert_operation(kind: str, token: bool) -> dict[str, Any]:
    operation = _operation(
        f"Make the state right after a revision a {kind} scope's new revision",
        token,
        {200: _scope("The state after the revert")},
        [400, 404, 409, 412, 413, 415, 422, 503],
    )
    operation["parameters"] = [
        {"$ref": "#/components/parameters/scope_id"},
        {"$ref": "#/components/parameters/if_match"},
    ]
    operation["requestBody"] = _body("Revert")
    return operation


def _subject_operation(kind: str, token: bool, *, erase: bool) -> dict[str, Any]:
    """``GET .../export`` or ``DELETE .../erase`` of a data subject (see portability)."""
    if erase:
        summary = (
            f"Erase a data subject: every key, journal and kept revision of the {kind} "
            "scope and of the threads listed, in the layers this app serves"
        )
        ok = _json({"$ref": "#/components/schemas/Erasure"}, "What was erased")
    else:
        summary = (
            f"Export a data subject: the state and journal of the {kind} scope and of the "
            "threads listed, in the layers this app serves"
        )
        ok = _json({"$ref": "#/components/schemas/Export"}, "The export document")
    operation = _operation(summary, token, {200: ok}, [400, 404, 503])
    operation["parameters"] = [
        {"$ref": "#/components/parameters/scope_id"},
        {
            "name": "thread",
            "in": "query",
            "description": "A thread id of the subject's, as the application lists them "
            "(repeat the parameter for each)",
            "style": "form",
            "explode": True,
            "schema": {
                "type": "array",
                "maxItems": MAX_THREADS,
                "items": {"type": "string", "minLength": 1},
            },
        },
    ]
    return operation


def _import_operation(token: bool) -> dict[str, Any]:
    operation = _operation(
        "Import an export document: each key with its journal; a key stored with another "
        "value is a conflict (409, nothing written) unless replace=true",
        token,
        {200: _json({"$ref": "#/components/schemas/ImportReport"}, "What was imported")},
        [400, 409, 413, 415, 422, 503],
    )
    operation["parameters"] = [
        {
            "name": "replace",
            "in": "query",
            "description": "Replace keys stored with other values, their journals too",
            "schema": {"type": "string", "enum": ["true", "false"]},
        }
    ]
    operation["requestBody"] = _body("ExportInput")
    return operation


def _subject_schemas(layers: dict[Scope, ScratchpadLayer]) -> dict[str, Any]:
    time = {"type": "string", "description": "UTC, ISO 8601"}
    scope_ref = {
        "layer": {"type": "string", "enum": sorted({layer.id for layer in layers.values()})},
        "kind": {"type": "string", "enum": list(layers)},
        "id": {"type": "string", "minLength": 1, "maxLength": _ID_CHARS},
    }
    # An id the server accepted: at most MAX_ID_BYTES of UTF-8, so at most as many
    # characters (a request's limit, _ID_CHARS, holds for any four-byte characters).
    accepted_id = {"type": "string", "minLength": 1, "maxLength": MAX_ID_BYTES}
    row = {
        "type": "object",
        "required": ["layer", "kind", "id", "key", "revision"],
        "properties": {
            **scope_ref,
            "id": accepted_id,
            "key": {"type": "string"},
            "revision": _REVISION,
        },
    }
    rows = {"type": "array", "items": row}
    stored = {
        "type": "object",
        "required": ["value"],
        "properties": {
            "revision": _REVISION,
            "updated_at": time,
            "value": {"description": "The stored JSON value"},
            "journal": {
                "type": "array",
                "description": "The journaled writes, newest first",
                "items": {
                    "type": "object",
                    "required": ["revision", "entry"],
                    "properties": {
                        "revision": _REVISION,
                        "written_at": time,
                        "entry": {"description": "The journal entry (see history.md)"},
                    },
                },
            },
        },
    }
    return {
        "Export": {
            "type": "object",
            "description": "A data subject's scopes (see operations.md)",
            "required": ["format", "version", "scopes"],
            "properties": {
                "format": {"const": FORMAT},
                "version": {"const": VERSION},
                "exported_at": time,
                "subject": {
                    "type": "object",
                    "description": "What was asked for; the scopes are what is imported",
                    "properties": {
                        "resource": {"type": ["string", "null"]},
                        "threads": {"type": "array", "items": {"type": "string"}},
                    },
                },
                "scopes": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "required": ["layer", "kind", "id", "keys"],
                        "properties": {
                            **scope_ref,
                            "keys": {
                                "type": "object",
                                "propertyNames": {"minLength": 1},
                                "additionalProperties": stored,
                            },
                        },
                    },
                },
            },
        },
        # What an import reads of a document, exactly as it checks it; the rest is ignored.
        "ExportInput": {
            "type": "object",
            "required": ["format", "version", "scopes"],
            "properties": {
                "format": {"const": FORMAT},
                "version": {"const": VERSION},
                "scopes": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "required": ["layer", "kind", "id", "keys"],
                        "properties": {
                            **scope_ref,
                            "id": {"type": "string", "minLength": 1},
                            "keys": {
                                "type": "object",
                                "propertyNames": {"minLength": 1},
                                "additionalProperties": {
                                    "type": "object",
                                    "required": ["value"],
                                    "properties": {
                                        "journal": {
                                            "type": "array",
                                            "items": {
                                                "type": "object",
                                                "required": ["revision", "entry"],
                                                "properties": {"revision": _REVISION},
                                            },
                                        }
                                    },
                                },
                            },
                        },
                    },
                },
            },
        },
        "ImportReport": {
            "type": "object",
            "required": ["imported", "replaced", "unchanged"],
            "properties": {"imported": rows, "replaced": rows, "unchanged": rows},
        },
        "Erasure": {
            "type": "object",
            "required": ["subject", "scopes", "keys_deleted", "complete"],
            "properties": {
                "subject": {"type": "object"},
                "scopes": {"type": "array", "items": {"type": "object"}},
                "keys_deleted": {"type": "integer", "minimum": 0},
                "deleted_records_forgotten": {"type": ["integer", "null"], "minimum": 0},
                "complete": {
                    "type": "boolean",
                    "description": "false: the storage cannot forget the revisions it keeps "
                    "of deleted keys, and records naming the ids may remain",
                },
            },
        },
    }


def _scope(description: str) -> dict[str, Any]:
    response = _json({"$ref": "#/components/schemas/Scope"}, description)
    response["headers"] = {
        "ETag": {
            "required": True,
            "description": "The state's entity tag, for If-Match",
            "schema": {"type": "string"},
        }
    }
    return response


def _body(schema: str) -> dict[str, Any]:
    return {
        "required": True,
        "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{schema}"}}},
    }


def _list_operation(kinds: list[Scope], token: bool, limits: Limits) -> dict[str, Any]:
    operation = _operation(
        "List the stored scopes, the latest write first",
        token,
        {200: _json({"$ref": "#/components/schemas/ScopeList"})},
        [400, 503],
    )
    operation["parameters"] = [
        {"name": "kind", "in": "query", "schema": {"type": "string", "enum": kinds}},
        {
            "name": "limit",
            "in": "query",
            "schema": {"type": "integer", "minimum": 1, "maximum": limits.list_limit},
        },
        {
            "name": "offset",
            "in": "query",
            "schema": {"type": "integer", "minimum": 0, "maximum": MAX_OFFSET},
        },
    ]
    return operation


def _events_operation(
    summary: str, token: bool, limits: Limits, *, scoped: bool = False
) -> dict[str, Any]:
    stream = {
        "description": "Server-sent events: `event:` the kind, `data:` the event as JSON, "
        "`id:` for Last-Event-ID; comments keep the connection alive",
        "content": {"text/event-stream": {"schema": {"type": "string"}}},
    }
    operation = _operation(summary, token, {200: stream}, [400, 404, 503] if scoped else [400, 503])
    operation["parameters"] = [
        {"$ref": "#/components/parameters/replay"},
        {"name": "Last-Event-ID", "in": "header", "schema": {"type": "string"}},
    ]
    return operation


def _operation(
    summary: str, token: bool, ok: dict[int, Any], problems: list[int]
) -> dict[str, Any]:
    responses: dict[str, Any] = {str(status): body for status, body in ok.items()}
    for status in [*problems, *([401] if token else [])]:
        responses[str(status)] = _problem(status)
    return {"summary": summary, "responses": responses}


def _problem(status: int) -> dict[str, Any]:
    return {
        "description": _PROBLEMS[status],
        "content": {MEDIA_TYPE: {"schema": {"$ref": "#/components/schemas/Problem"}}},
    }


def _json(schema: dict[str, Any], description: str = "OK") -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _empty(description: str, *, cookie: bool = False) -> dict[str, Any]:
    response: dict[str, Any] = {"description": description}
    if cookie:
        response["headers"] = {"Set-Cookie": {"schema": {"type": "string"}}}
    return response


def _parameters(limits: Limits) -> dict[str, Any]:
    return {
        "scope_id": {
            "name": "scope_id",
            "in": "path",
            "required": True,
            "description": f"The thread or resource id, percent-encoded as one path segment "
            f"(a '/' as %2F); at most {MAX_ID_BYTES} bytes of UTF-8",
            "schema": {"type": "string", "minLength": 1},
        },
        "if_match": {
            "name": "If-Match",
            "in": "header",
            "description": "Write only if the stored state is the one this ETag names (or "
            "`*`: any stored state); 412 otherwise",
            "schema": {"type": "string"},
        },
        "replay": {
            "name": "replay",
            "in": "query",
            "description": "How many of the latest kept events to send first",
            "schema": {"type": "integer", "minimum": 0, "maximum": limits.recent_events},
        },
    }


def _hoist(schema: Mapping[str, Any], prefix: str, into: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with its ``$defs`` moved into ``into`` (named ``prefix + name``) and its
    ``#/$defs/...`` references pointed there: inside an OpenAPI document, ``#`` is the
    document, not the schema."""
    own = copy.deepcopy(dict(schema))
    defs = own.pop("$defs", {})

    def rewrite(node: Any) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                node = {**node, "$ref": "#/components/schemas/" + prefix + ref[len("#/$defs/") :]}
            return {key: rewrite(value) for key, value in node.items()}
        if isinstance(node, list):
            return [rewrite(item) for item in node]
        return node

    for name, definition in defs.items():
        into[prefix + name] = rewrite(definition)
    result: dict[str, Any] = rewrite(own)
    return result
