"""The storage key layout: where each layer keeps each scope's keys.

One module owns it, for the layer, the backends' callers and the CLI alike::

    scopes/{layer_id}/{kind}/{encoded id}/{key}        e.g. scopes/scratchpad/thread/t1/state

``kind`` is ``thread`` or ``resource``, so thread ``u42`` and user ``u42`` never share a
key. The id is percent-encoded (RFC 3986: letters, digits and ``-._~`` stay as they are;
``/``, ``%`` and everything else become ``%XX``), and an id made only of dots is escaped
whole, so an id is always exactly one path segment that no other id produces: ``a`` and
``a/b`` are two scopes, and deleting one prefix never reaches the other.

The first release kept a scope at ``layers/{layer_id}/{id}/state``, one namespace for both
kinds, ids unencoded. :func:`parse_legacy_state_key` reads such keys for the
``noetic-scratchpad migrate`` command; nothing else uses that layout.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args
from urllib.parse import quote, unquote

__all__ = (
    "LEGACY_ROOT",
    "MAX_ID_BYTES",
    "ROOT",
    "STATE_KEY",
    "Scope",
    "ScopeRef",
    "check_scope_id",
    "kind_prefix",
    "layer_prefix",
    "legacy_state_key",
    "parse_legacy_state_key",
    "parse_state_key",
    "scope_prefix",
    "state_key",
)

Scope = Literal["thread", "resource"]
SCOPES: tuple[Scope, ...] = get_args(Scope)

ROOT = "scopes/"
LEGACY_ROOT = "layers/"
STATE_KEY = "state"
#: Longest id in UTF-8 bytes. Encoded, it stays far below PostgreSQL's index limit
#: (about 2,700 bytes a key), and no real thread or user id comes near it.
MAX_ID_BYTES = 512


@dataclass(frozen=True, slots=True)
class ScopeRef:
    """One stored scope: which layer, which kind of scope, which id."""

    layer_id: str
    kind: Scope
    scope_id: str


def check_scope_id(scope_id: str, kind: str = "scope") -> str:
    """Return ``scope_id`` when it can name a scope; ``ValueError`` saying why not."""
    if not isinstance(scope_id, str) or not scope_id:
        raise ValueError(f"a {kind} id must be a non-empty string, not {scope_id!r}")
    try:
        size = len(scope_id.encode())
    except UnicodeEncodeError:
        raise ValueError(
            f"the {kind} id {scope_id!r} is not valid Unicode text (it holds a lone "
            "surrogate); use ids made of ordinary characters"
        ) from None
    if size > MAX_ID_BYTES:
        raise ValueError(
            f"the {kind} id is {size:,} bytes long, over the limit of {MAX_ID_BYTES}; use a "
            "shorter id (a UUID or a hash of the long one)"
        )
    return scope_id


def _check_kind(kind: str) -> Scope:
    if kind not in SCOPES:
        raise ValueError(f"scope must be 'thread' or 'resource', not {kind!r}")
    return kind


def _encode(scope_id: str) -> str:
    encoded = quote(scope_id, safe="")
    if not encoded.strip("."):  # ".", "..": never a path segment of their own
        return "%2E" * len(encoded)
    return encoded


def layer_prefix(layer_id: str) -> str:
    """Every scope of one layer, both kinds."""
    return f"{ROOT}{quote(layer_id, safe='')}/"


def kind_prefix(layer_id: str, kind: str) -> str:
    """Every scope of one kind of one layer."""
    return f"{layer_prefix(layer_id)}{_check_kind(kind)}/"


def scope_prefix(layer_id: str, kind: str, scope_id: str) -> str:
    """Where the keys of one scope live; ``ValueError`` for an unusable id or kind."""
    return f"{kind_prefix(layer_id, kind)}{_encode(check_scope_id(scope_id, kind))}/"


def state_key(layer_id: str, kind: str, scope_id: str) -> str:
    """The key of one scope's state."""
    return scope_prefix(layer_id, kind, scope_id) + STATE_KEY


def parse_state_key(key: str) -> ScopeRef | None:
    """The scope whose state ``key`` is, or ``None`` for any other key."""
    if not key.startswith(ROOT):
        return None
    parts = key[len(ROOT) :].split("/")
    if len(parts) != 4 or parts[1] not in SCOPES or parts[3] != STATE_KEY:
        return None
    return ScopeRef(unquote(parts[0]), _check_kind(parts[1]), unquote(parts[2]))


def legacy_state_key(layer_id: str, scope_id: str) -> str:
    """Where the first release kept a scope's state."""
    return f"{LEGACY_ROOT}{layer_id}/{scope_id}/{STATE_KEY}"


def parse_legacy_state_key(key: str, layer_id: str) -> str | None:
    """The id of a first-release state key of ``layer_id``, or ``None``."""
    prefix, suffix = f"{LEGACY_ROOT}{layer_id}/", f"/{STATE_KEY}"
    if not key.startswith(prefix) or not key.endswith(suffix):
        return None
    scope_id = key[len(prefix) : -len(suffix)]
    return scope_id or None
