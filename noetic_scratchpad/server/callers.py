"""Who made an HTTP write: kept in its journal entry, so a history says who wrote what.

A write through the API is journaled with source ``api`` (a revert, ``revert``), as a
write from code is. The app adds ``caller``: how the request was authorized (``token``,
``session``: the inspector's cookie, or ``none`` on an app without a token), the client's
address, and its ``User-Agent``, cut short. The address and the agent are what the
request said (a proxy's address, behind one); only ``auth`` was checked.

The entry is stamped on its way to storage, by the backend the write's handle is given,
so the layer's write path stays the same for every host.
"""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any

from starlette.requests import Request

from ..storage import StorageBackend
from ..storage.base import Commit, CommitFn, JournalCommitFn, JournalRow, Revision
from ..storage.namespace import NamespacedStorage
from .guard import session_of

__all__ = ("MAX_AGENT_CHARS", "CallerStamp", "caller_of")

#: The most characters of a ``User-Agent`` a journal entry keeps.
MAX_AGENT_CHARS = 120


def caller_of(request: Request, *, token_required: bool) -> dict[str, Any]:
    """Who sent ``request``: ``{"auth", "address", "agent"}`` (``None`` where unknown)."""
    if session_of(request.scope) is not None:
        auth = "session"
    else:
        auth = "token" if token_required else "none"
    agent = request.headers.get("user-agent")
    return {
        "auth": auth,
        "address": request.client.host if request.client else None,
        "agent": agent[:MAX_AGENT_CHARS] if agent else None,
    }


class CallerStamp(NamespacedStorage):
    """``backend`` as one request's writes see it: each journal entry also holds
    ``caller``. Everything else goes to the backend as it is."""

    def __init__(self, backend: StorageBackend, caller: dict[str, Any]) -> None:
        super().__init__(backend, "")
        self.caller = caller

    def commit(self, key: str, fn: CommitFn, *, keep: int) -> Coroutine[Any, Any, Revision]:
        caller = self.caller

        def stamped(current: Revision) -> Commit:
            return _stamp(fn(current), caller)

        return self.backend.commit(key, stamped, keep=keep)

    async def commit_with_journal(
        self, key: str, fn: JournalCommitFn, *, keep: int, after: int
    ) -> Revision:
        caller = self.caller

        def stamped(current: Revision, rows: list[JournalRow]) -> Commit:
            return _stamp(fn(current, rows), caller)

        return await self.backend.commit_with_journal(key, stamped, keep=keep, after=after)


def _stamp(commit: Commit, caller: dict[str, Any]) -> Commit:
    if isinstance(commit.entry, dict):
        commit.entry = {**commit.entry, "caller": caller}
    return commit
