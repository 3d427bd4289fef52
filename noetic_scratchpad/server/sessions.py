"""The inspector's sessions: a random id in a cookie, known to the server, ended by logout.

``POST api/session`` (with the token) starts one; ``DELETE api/session`` ends it at once;
it also ends ``idle_timeout`` seconds after its last use, and ``max_age`` seconds after it
started however busy it is. A cookie no longer names a usable session: 401.

Kept in memory, per app, on purpose. Logout must end a session everywhere it is accepted:
a signed cookie would be accepted by every process that knows the key, and ending it would
need a revocation list they all share. In memory, a restart, or a request served by another
worker process, finds no session: a 401, and the inspector asks for the token again. It
fails closed. Ids are kept and looked up by their SHA-256 digest, so the time a lookup
takes tells nothing about the ids held, and the table holds nothing a cookie could replay.
"""

from __future__ import annotations

import hashlib
import math
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ("DEFAULT_IDLE_TIMEOUT", "DEFAULT_MAX_AGE", "Sessions", "check_lifetime")

#: A session's life at most, in seconds, however busy: a working day.
DEFAULT_MAX_AGE = 8 * 3600
#: A session unused this long ends, in seconds. The inspector, open, uses it every 3 s.
DEFAULT_IDLE_TIMEOUT = 3600
#: The most sessions kept; past it, starting one ends the least recently used.
MAX_SESSIONS = 10_000
#: Browsers cap a cookie's Max-Age at 400 days.
LONGEST = 400 * 24 * 3600
#: The longest cookie value looked up: ids are 43 characters.
_LONGEST_ID = 64


def check_lifetime(name: str, value: object) -> float:
    """``value`` if it is a number of seconds in (0, 400 days]; ``ValueError`` otherwise."""
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or not 0 < value <= LONGEST
    ):
        raise ValueError(f"{name} must be a number of seconds in (0, {LONGEST}], not {value!r}")
    return float(value)


@dataclass(slots=True)
class _Session:
    started: float
    used: float
    read_only: bool = False


class Sessions:
    """The sessions of one app. ``clock``: monotonic seconds (a test moves its own)."""

    def __init__(
        self,
        *,
        max_age: float = DEFAULT_MAX_AGE,
        idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
        limit: int = MAX_SESSIONS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_age = max_age
        self.idle_timeout = idle_timeout
        self.limit = limit
        self.clock = clock
        self._sessions: dict[bytes, _Session] = {}  # insertion order: least recently used first

    def __len__(self) -> int:
        return len(self._sessions)

    def start(self, *, read_only: bool = False) -> str:
        """A new session; its id, for the cookie. ``read_only``: started with the read-only
        token, so it may only read, as that token may."""
        now = self.clock()
        for key in [key for key, session in self._sessions.items() if self._over(session, now)]:
            del self._sessions[key]
        while len(self._sessions) >= self.limit:
            del self._sessions[next(iter(self._sessions))]
        session_id = secrets.token_urlsafe(32)
        self._sessions[_digest(session_id)] = _Session(started=now, used=now, read_only=read_only)
        return session_id

    def check(self, session_id: str | None) -> bool:
        """Whether ``session_id`` names a session that has not ended; a use of it."""
        return self.use(session_id) is not None

    def use(self, session_id: str | None) -> bool | None:
        """Whether the session ``session_id`` names is read-only; ``None`` when it names
        no session that has not ended. A use of it."""
        key = self._live(session_id)
        if key is None:
            return None
        session = self._sessions.pop(key)
        session.used = self.clock()
        self._sessions[key] = session  # to the end: the most recently used
        return session.read_only

    def alive(self, session_id: str) -> bool:
        """Whether ``session_id`` names a session that has not ended (not a use of it)."""
        return self._live(session_id) is not None

    def end(self, session_id: str | None) -> None:
        """End the session ``session_id`` names, if any."""
        if session_id is not None and len(session_id) <= _LONGEST_ID:
            self._sessions.pop(_digest(session_id), None)

    def _live(self, session_id: str | None) -> bytes | None:
        """The key of the session ``session_id`` names, if it has not ended."""
        if session_id is None or len(session_id) > _LONGEST_ID:
            return None
        key = _digest(session_id)
        session = self._sessions.get(key)
        if session is None:
            return None
        if self._over(session, self.clock()):
            del self._sessions[key]
            return None
        return key

    def _over(self, session: _Session, now: float) -> bool:
        return now - session.started >= self.max_age or now - session.used >= self.idle_timeout


def _digest(session_id: str) -> bytes:
    return hashlib.sha256(session_id.encode()).digest()
