"""Whose scratchpad a call reads and writes: a thread, and optionally a resource (a user).

Every host finds the scope in its own place (pydantic-ai's ``RunContext``, the Agents SDK's
run context, an MCP argument, an HTTP path); :func:`as_scope` is the one check of what it
found.
"""

from __future__ import annotations

from typing import NamedTuple, TypeAlias

from ..errors import ScratchpadConfigError

__all__ = ("RunScope", "ScopeLike", "as_scope")


class RunScope(NamedTuple):
    """A thread, and optionally a resource (used by ``scope="resource"`` scratchpads)."""

    thread_id: str
    resource_id: str | None = None


#: A thread id, a ``(thread_id, resource_id)`` pair or a :class:`RunScope`.
ScopeLike: TypeAlias = "str | tuple[str, str | None] | RunScope"


def as_scope(found: object, *, source: str = "the scope") -> RunScope:
    """``found`` as a :class:`RunScope`; a ``ScratchpadConfigError`` naming ``source`` (what
    gave it, for the message) when it is not a non-empty thread id, a pair or a scope."""
    if isinstance(found, str):
        found = RunScope(found)
    elif isinstance(found, tuple) and not isinstance(found, RunScope) and len(found) == 2:
        found = RunScope(*found)
    if (
        isinstance(found, RunScope)
        and isinstance(found.thread_id, str)
        and found.thread_id
        and (found.resource_id is None or isinstance(found.resource_id, str))
    ):
        return found
    raise ScratchpadConfigError(
        f"{source} is {found!r}; it must be a non-empty thread id string, or a "
        "(thread_id, resource_id) pair of strings (resource_id may be None)"
    )
