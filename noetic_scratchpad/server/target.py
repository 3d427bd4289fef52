"""The scope a request is about, and the ETag of one of its states.

An ETag is ``"r{revision}-{digest}"``: the revision, and a digest of the scope (kind,
layer, id) and of its state. The revision alone would not do: a reset removes a scope with
its revision and journal, and the next write starts again at 1, so ``"r3"`` could name two
different states. With the digest a tag names one state of one scope. Equal states at the
same revision of the same scope share a tag, as a strong ETag may: their JSON is the same.
"""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass
from typing import Any

import orjson

from ..keys import Scope, state_key

__all__ = ("Target", "entity_tag")


def entity_tag(kind: str, layer_id: str, scope_id: str, revision: int, state: Any) -> str:
    """The strong ETag of ``state`` at ``revision`` of one scope (quotes included)."""
    digest = hashlib.blake2b(digest_size=9)
    digest.update(f"{kind}\0{layer_id}\0{scope_id}\0".encode())
    digest.update(_canonical(state))
    return f'"r{revision}-{base64.urlsafe_b64encode(digest.digest()).decode()}"'


def _canonical(state: Any) -> bytes:
    """``state`` as JSON with sorted keys: PostgreSQL's jsonb hands keys back in an order
    of its own, and the same state must have the same tag whoever reads it."""
    try:
        return orjson.dumps(state, option=orjson.OPT_SORT_KEYS)
    except orjson.JSONEncodeError:  # integers past 64 bits: the standard library's JSON
        return json.dumps(state, sort_keys=True, separators=(",", ":")).encode()


@dataclass(frozen=True, slots=True)
class Target:
    """The scope a request is about."""

    kind: Scope
    id: str
    layer_id: str

    @property
    def key(self) -> str:
        return state_key(self.layer_id, self.kind, self.id)

    def body(self, state: Any, revision: int) -> dict[str, Any]:
        """A scope as the API shows it."""
        return {
            "kind": self.kind,
            "id": self.id,
            "layer": self.layer_id,
            "revision": revision,
            "state": state,
        }

    def etag(self, revision: int, state: Any) -> str:
        """The ETag of ``state`` at ``revision`` of this scope."""
        return entity_tag(self.kind, self.layer_id, self.id, revision, state)
