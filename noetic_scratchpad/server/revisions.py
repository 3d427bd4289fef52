"""Revisions over HTTP: the ETag of a scope, ``If-Match``, the history and a revert.

The ETag is made in ``target.py``.

``If-Match`` is checked twice. First against the stored state, read just before the
write: its ETag must be one of those named (``*``: any stored state). Then *inside* the
write, as ``expected_revision``: the revision read must still be the stored one, so a
writer that slips in between is caught by the backend's atomic read-modify-write. Then
the condition is evaluated again on the new state (it fails, unless ``*`` or a list names
it too).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import anyio
from starlette.requests import Request
from starlette.responses import Response

from .. import _json
from ..errors import ScratchpadConflictError, ScratchpadHistoryError, ScratchpadUpdateError
from ..layer import ScratchpadHandle
from ..layer.journal import caller_of, entry_json, history_of
from ..layer.retention import expired_revision, live, live_view
from ..storage.base import JournalRow, Revision
from .context import ServerContext
from .inputs import int_param, json_response, read_json_object
from .problems import Problem, storage_errors, update_problem
from .target import Target

__all__ = ("ATTEMPTS", "Precondition", "Revisions", "not_stored", "scope_response")

#: Tries of a conditional write (or a consistent history read) that other writers overtake.
ATTEMPTS = 3
#: The most history entries one request returns.
MAX_HISTORY = 1000

# Matched at one position each, never searched for: a search retried at every character
# of a long run of spaces took quadratic time (20,000 spaces: 6.9 s of the event loop).
_TAG = re.compile(r'(W/)?"([^"]*)"')


@dataclass(frozen=True, slots=True)
class Precondition:
    """An ``If-Match`` header: ``*``, or the strong tags it names (weak ones never match)."""

    any: bool
    tags: frozenset[str]
    valid: bool
    """Whether the header is ``*`` or a list of entity tags (else nothing matches)."""

    @classmethod
    def of(cls, request: Request) -> Precondition | None:
        header = request.headers.get("if-match")
        if header is None:
            return None
        if header.strip(" \t") == "*":
            return cls(any=True, tags=frozenset(), valid=True)
        found = _entity_tags(header)
        strong = frozenset(f'"{tag}"' for weak, tag in found or () if not weak)
        return cls(any=False, tags=strong, valid=bool(found))

    def matches(self, tag: str | None) -> bool:
        """Whether the stored state (its ``tag``; ``None``: nothing stored) passes."""
        return tag is not None and (self.any or tag in self.tags)


class Revisions:
    """The conditional update, ``GET .../history`` and ``POST .../revert``."""

    def __init__(self, ctx: ServerContext) -> None:
        self.ctx = ctx

    async def stored(self, target: Target) -> Revision | None:
        """The scope's stored state and revision (``None``: nothing stored)."""
        config = self.ctx.layer(target.kind).config
        with storage_errors(), anyio.fail_after(self.ctx.read_timeout(target.kind)):
            found: Revision | None = await self.ctx.storage().get_revision(target.key)
            if found is not None and config.ttl is not None:  # an expired one: nothing
                expired = await expired_revision(config, self.ctx.storage(), target.key)
                found = live(found, expired)
        return found

    async def update(
        self,
        target: Target,
        handle: ScratchpadHandle,
        values: dict[str, Any],
        condition: Precondition,
    ) -> None:
        """Merge ``values`` if ``condition`` holds for the stored state, checked again
        inside the write; a 412 problem when it does not."""
        for _ in range(ATTEMPTS):
            found = await self.stored(target)
            self.check(target, condition, found)  # with nothing stored, always a 412
            expected = found.revision if found is not None else 0
            try:
                with storage_errors():
                    await handle.update(values, expected_revision=expected)
                return
            except ScratchpadConflictError:
                continue  # written in between: evaluate the condition on the new state
        raise _contended("update")

    def check(self, target: Target, condition: Precondition | None, found: Revision | None) -> None:
        """A 412 problem unless ``condition`` (if any) holds for ``found``."""
        if condition is None:
            return
        tag = None if found is None else target.etag(found.revision, found.value)
        if condition.matches(tag):
            return
        if found is None:
            detail = (
                f"If-Match needs a stored state, and nothing is stored for {target.kind} "
                f"{target.id!r}; nothing was written. Send it without If-Match to create it."
            )
        elif not condition.valid:
            detail = (
                "If-Match is not * or a list of entity tags; nothing was written. Send the "
                'value of the ETag header as it is, quotes included (such as "r3-..."), or *.'
            )
        else:
            detail = (
                f"The scope is at revision {found.revision} (ETag {tag}), which If-Match does "
                "not name: it changed since you read it (or was reset and written again). "
                "Nothing was written; read it again, decide anew, and send its ETag."
            )
        raise Problem(
            412,
            "Precondition Failed",
            detail,
            kind="precondition-failed",
            revision=0 if found is None else found.revision,
        )

    async def history(self, request: Request, target: Target) -> Response:
        """The newest ``limit`` journaled writes, newest first, each with its diff."""
        limit = int_param(request, "limit", 20, 1, MAX_HISTORY)
        found, rows = await self._journal(target, limit)
        entries = history_of(
            found.value, found.revision, ((r.revision, r.written_at, r.entry) for r in rows)
        )
        callers = {row.revision: caller_of(row) for row in rows}
        body = {
            "kind": target.kind,
            "id": target.id,
            "layer": target.layer_id,
            "revision": found.revision,
            "entries": [entry_json(entry, callers.get(entry.revision)) for entry in entries],
        }
        return json_response(body)

    async def _journal(self, target: Target, limit: int) -> tuple[Revision, list[JournalRow]]:
        """The stored state and the newest ``limit`` journal rows, read at one instant so
        that they agree (``journal_view``)."""
        config = self.ctx.layer(target.kind).config
        with storage_errors(), anyio.fail_after(self.ctx.read_timeout(target.kind)):
            view = await self.ctx.storage().journal_view(target.key, limit=limit)
            view = await live_view(config, self.ctx.storage(), target.key, view)
        if view.current is None:
            raise not_stored(target)
        return view.current, view.rows

    async def revert(self, request: Request, target: Target, handle: ScratchpadHandle) -> Response:
        """Make the state right after ``{"revision": N}`` the scope's new revision."""
        revision = _revision_of(await read_json_object(request, self.ctx.limits.max_body_bytes))
        condition = Precondition.of(request)
        found = await self.stored(target)
        if found is None:
            raise not_stored(target)
        # The tag is checked here, and its revision again inside the revert's write, so a
        # write in between makes it a conflict (412), never a silent overwrite.
        self.check(target, condition, found)
        expected = found.revision if condition is not None else None
        try:
            with storage_errors():
                await handle.revert(revision, expected_revision=expected)
        except ScratchpadHistoryError as exc:
            raise Problem(
                409,
                "That revision cannot be restored",
                f"{exc.message} Nothing was written; GET .../history lists the revisions "
                "that can be restored.",
                kind="history",
                reason=exc.reason,
                revision=found.revision,
            ) from None
        except ScratchpadConflictError:
            if condition is not None:  # If-Match named the state the revert did not find
                self.check(target, condition, await self.stored(target))
            raise _contended("revert") from None
        except ScratchpadUpdateError as exc:
            raise update_problem(exc) from None
        return scope_response(target, handle.snapshot, handle.revision)


def scope_response(target: Target, state: Any, revision: int) -> Response:
    """A scope as the API shows it, with its ETag."""
    return json_response(
        target.body(state, revision), headers={"ETag": target.etag(revision, state)}
    )


def not_stored(target: Target) -> Problem:
    return Problem(
        404,
        "Nothing stored",
        f"No state is stored for {target.kind} {target.id!r}; PATCH it to create it, or GET "
        "api/scopes to see what is stored.",
        kind="not-found",
    )


def _entity_tags(header: str) -> list[tuple[bool, str]] | None:
    """(weak, tag) for each entity tag of a comma-separated list (RFC 9110, 5.6.1: empty
    elements and spaces around commas allowed); ``None`` if the header is not such a list."""
    tags: list[tuple[bool, str]] = []
    end = len(header)
    at = _skip(header, 0, " \t,")
    while at < end:
        tag = _TAG.match(header, at)
        if tag is None:
            return None
        tags.append((tag[1] is not None, tag[2]))
        at = _skip(header, tag.end(), " \t")
        if at < end and header[at] != ",":
            return None
        at = _skip(header, at, " \t,")
    return tags


def _skip(text: str, at: int, characters: str) -> int:
    """The first position from ``at`` on whose character is not one of ``characters``."""
    while at < len(text) and text[at] in characters:
        at += 1
    return at


def _revision_of(body: Mapping[str, Any]) -> int:
    revision = body.get("revision")
    if isinstance(revision, float) and revision.is_integer():
        revision = int(revision)  # 3.0 is the integer 3 to JSON Schema, and so to us
    if set(body) != {"revision"}:
        got = f"the keys {sorted(body)[:10]}" if body else "an empty object"
    elif isinstance(revision, bool) or not isinstance(revision, int) or revision < 0:
        got = f"revision {_json.dumps(revision)[:40].decode(errors='replace')}"
    else:
        return revision
    raise Problem(
        422,
        "Not a revert",
        'A revert is {"revision": N}, N a revision from the scope\'s history (0: its '
        f"initial state), and no other key; got {got}. Nothing was written.",
        kind="invalid-revert",
    )


def _contended(action: str) -> Problem:
    return Problem(
        503,
        "The scope is too busy",
        f"Other writers changed the scope every time the {action} was about to be written "
        f"({ATTEMPTS} tries); nothing was written. Try again shortly.",
        kind="contended",
        headers={"Retry-After": "1"},
    )
