"""The JSON schemas of the OpenAPI document's bodies (the update body is the layer's own)."""

from __future__ import annotations

from typing import Any

from ..keys import Scope

__all__ = ("base_schemas",)

_INTEGER = {"type": "integer", "minimum": 0}


def base_schemas(kinds: list[Scope]) -> dict[str, Any]:
    """The schemas every document holds, for an app serving ``kinds`` of scope."""
    return {
        "Problem": {
            "type": "object",
            "description": "RFC 9457 problem details",
            "required": ["type", "title", "status", "detail"],
            "properties": {
                "type": {"type": "string"},
                "title": {"type": "string"},
                "status": {"type": "integer"},
                "detail": {"type": "string"},
                "instance": {"type": "string"},
                "reason": {"type": "string"},
                "errors": {"type": "array", "items": {"type": "object"}},
                "revision": {**_INTEGER, "description": "The scope's stored revision"},
            },
        },
        "Session": {
            "type": "object",
            "required": ["token_required", "read_only"],
            "properties": {
                "token_required": {"type": "boolean"},
                "read_only": {
                    "type": "boolean",
                    "description": "Whether the caller's credentials may only read",
                },
            },
        },
        "Scope": {
            "type": "object",
            "required": ["kind", "id", "layer", "revision", "state"],
            "properties": {
                "kind": {"type": "string", "enum": kinds},
                "id": {"type": "string"},
                "layer": {"type": "string"},
                "revision": {
                    "type": "integer",
                    "minimum": 0,
                    "description": "How many writes made the state; the ETag names it (0: "
                    "nothing stored, as after a PATCH with no key on a scope never written)",
                },
                "state": {"description": "The stored state: text, or a JSON object"},
            },
        },
        "ScopeList": {
            "type": "object",
            "required": ["scopes", "total"],
            "properties": {
                "total": _INTEGER,
                "scopes": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "required": ["kind", "id", "layer", "revision", "size", "updated_at"],
                        "properties": {
                            "kind": {"type": "string", "enum": kinds},
                            "id": {"type": "string"},
                            "layer": {"type": "string"},
                            "revision": _INTEGER,
                            "size": {"type": "integer", "description": "bytes of stored JSON"},
                            "updated_at": {"type": "string", "format": "date-time"},
                        },
                    },
                },
            },
        },
        "View": _view(kinds),
        "History": _history(kinds),
        "HistoryEntry": _history_entry(),
        "Revert": {
            "type": "object",
            "required": ["revision"],
            "additionalProperties": False,
            "properties": {
                "revision": {
                    **_INTEGER,
                    "description": "The revision whose state to restore (0: the initial state)",
                }
            },
        },
    }


def _view(kinds: list[Scope]) -> dict[str, Any]:
    return {
        "type": "object",
        "required": [
            "kind",
            "id",
            "layer",
            "revision",
            "budget",
            "counter",
            "empty",
            "text",
            "tokens",
            "total_tokens",
            "omitted_tokens",
            "cut",
        ],
        "properties": {
            "kind": {"type": "string", "enum": kinds},
            "id": {"type": "string"},
            "layer": {"type": "string"},
            "revision": _INTEGER,
            "budget": {**_INTEGER, "description": "The block's budget in tokens"},
            "counter": {
                "type": "string",
                "enum": ["estimate", "count_tokens"],
                "description": "What counts the tokens: the default estimate (about four "
                "characters a token), or the app's count_tokens",
            },
            "empty": {
                "type": "boolean",
                "description": "The state is empty: the model is shown no block at all",
            },
            "text": {
                "type": ["string", "null"],
                "description": "The block exactly as the model reads it; null when empty, or "
                "when not even a cut block fits the budget",
            },
            "tokens": {**_INTEGER, "description": "The block's tokens (at most the budget)"},
            "total_tokens": {**_INTEGER, "description": "The whole block's tokens, uncut"},
            "omitted_tokens": {**_INTEGER, "description": "About how many tokens the cut left out"},
            "cut": {
                "description": "null when the model sees everything",
                "oneOf": [
                    {
                        "type": "object",
                        "required": ["notice", "shown_chars", "hidden"],
                        "properties": {
                            "notice": {
                                "type": ["string", "null"],
                                "description": "The block's last line, telling the model "
                                "of the cut",
                            },
                            "shown_chars": {
                                **_INTEGER,
                                "description": "How many characters of the body it shows",
                            },
                            "hidden": {
                                "type": "string",
                                "description": "What the model does not see: the rest of "
                                "the body, or (a view shortened by its lists and texts) each "
                                "part's hidden items under a line naming them",
                            },
                            "parts": {
                                "type": "array",
                                "description": "The lists and texts shown in part: path, "
                                "kind (list or text), total and shown items (characters)",
                                "items": {"type": "object"},
                            },
                        },
                    },
                    {"type": "null"},
                ],
            },
        },
    }


def _history(kinds: list[Scope]) -> dict[str, Any]:
    return {
        "type": "object",
        "required": ["kind", "id", "layer", "revision", "entries"],
        "properties": {
            "kind": {"type": "string", "enum": kinds},
            "id": {"type": "string"},
            "layer": {"type": "string"},
            "revision": {**_INTEGER, "description": "The scope's stored revision"},
            "entries": {
                "type": "array",
                "description": "The journaled writes, newest first",
                "items": {"$ref": "#/components/schemas/HistoryEntry"},
            },
        },
    }


def _history_entry() -> dict[str, Any]:
    change = {
        "type": "object",
        "description": "The key's value before and after the write; absent where it had none",
        "properties": {"before": {}, "after": {}},
        "additionalProperties": False,
    }
    return {
        "type": "object",
        "required": [
            "revision",
            "written_at",
            "source",
            "call_id",
            "caller",
            "keys",
            "update",
            "replaced",
            "changes",
        ],
        "properties": {
            "revision": {"type": "integer", "minimum": 1},
            "written_at": {"type": "string", "format": "date-time"},
            "source": {"type": "string", "description": "tool, store, api or revert"},
            "call_id": {"type": ["string", "null"]},
            "caller": {
                "description": "Who sent the HTTP request that made the write (null: not "
                "one, such as a tool call or code): how it was authorized, and the client's "
                "address and User-Agent as the request gave them",
                "oneOf": [
                    {
                        "type": "object",
                        "required": ["auth", "address", "agent"],
                        "properties": {
                            "auth": {"type": "string", "enum": ["token", "session", "none"]},
                            "address": {"type": ["string", "null"]},
                            "agent": {"type": ["string", "null"]},
                        },
                    },
                    {"type": "null"},
                ],
            },
            "keys": {"type": "array", "items": {"type": "string"}},
            "update": {"description": "The change as applied"},
            "replaced": {"type": "boolean", "description": "The write replaced the whole state"},
            "changes": {
                "description": "Each key written, before and after (the key '' for a whole "
                "state that is not an object); null when the journal cannot rebuild it",
                "oneOf": [
                    {"type": "object", "additionalProperties": change},
                    {"type": "null"},
                ],
            },
        },
    }
