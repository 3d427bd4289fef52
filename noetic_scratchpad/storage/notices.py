"""Changes made by other processes: an optional capability of a backend.

A backend shared by several processes (PostgreSQL, Redis, an SQLite file) can announce
each write and delete it commits, and hand the announcements of the *other* processes to
a watcher: :meth:`WatchesChanges.watch_changes`, an async iterator of
:class:`ChangeNotice`. The core feeds them into its bus as events (see
``noetic_scratchpad.events.remote``); a backend of your own need not have it (its events
then stay in the process that wrote).

A notice names the change and nothing of its contents: the key, the revision it made,
the write's source and call id, and the process it came from (:func:`process_origin`).
That keeps it under PostgreSQL's 8,000-byte ``NOTIFY`` payload (:func:`encode_notice`
drops the call id first, then refuses); a receiver that needs more reads the key.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import socket
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

__all__ = (
    "MAX_NOTICE_BYTES",
    "ChangeNotice",
    "WatchesChanges",
    "decode_notice",
    "encode_notice",
    "process_origin",
    "watch_changes",
)

logger = logging.getLogger("noetic_scratchpad.storage")

#: The largest encoded notice: below PostgreSQL's 8,000-byte ``NOTIFY`` payload, with room
#: to spare for the server's own framing.
MAX_NOTICE_BYTES = 7_900

_origin: tuple[int, str] | None = None


def process_origin() -> str:
    """This process's name in notices: ``host:pid:random``, new after a fork (so that a
    forked worker is a process of its own)."""
    global _origin
    pid = os.getpid()
    if _origin is None or _origin[0] != pid:
        _origin = (pid, f"{socket.gethostname()}:{pid}:{secrets.token_hex(3)}")
    return _origin[1]


@dataclass(frozen=True, slots=True)
class ChangeNotice:
    """One committed change of a key by some process: a write (``deleted`` false) that
    made ``revision``, or a delete (``revision`` ``None`` when the backend does not know
    the last one). ``source`` and ``call_id``: what the write's caller said of it
    (``Commit.about``), ``None`` when it said nothing."""

    key: str
    origin: str
    revision: int | None = None
    deleted: bool = False
    source: str | None = None
    call_id: str | None = None


def encode_notice(notice: ChangeNotice) -> str | None:
    """The notice as compact JSON text of at most :data:`MAX_NOTICE_BYTES` bytes: the
    call id is left out when it would not fit; ``None`` (logged) when even the key does
    not (no key of a scope comes near)."""
    fields: list[Any] = [
        "d" if notice.deleted else "w",
        notice.key,
        notice.revision,
        notice.origin,
        notice.source,
        notice.call_id,
    ]
    for _ in range(2):
        text = json.dumps(fields, ensure_ascii=False, separators=(",", ":"))
        if len(text.encode()) <= MAX_NOTICE_BYTES:
            return text
        fields[5] = None
    logger.warning(
        "a change of a key too long to announce was not announced key_bytes=%d",
        len(notice.key.encode()),
    )
    return None


def decode_notice(text: str | bytes) -> ChangeNotice | None:
    """What :func:`encode_notice` wrote; ``None`` (logged) for anything else."""
    try:
        op, key, revision, origin, source, call_id = json.loads(text)
        if op not in ("w", "d") or not isinstance(key, str) or not isinstance(origin, str):
            raise ValueError("not a notice")
        if revision is not None and not isinstance(revision, int):
            raise ValueError("not a revision")
        return ChangeNotice(
            key,
            origin,
            revision,
            op == "d",
            source if isinstance(source, str) else None,
            call_id if isinstance(call_id, str) else None,
        )
    except (ValueError, TypeError):
        logger.warning("an unreadable change notice was ignored bytes=%d", len(text))
        return None


@runtime_checkable
class WatchesChanges(Protocol):
    """A backend that tells of the changes other processes commit."""

    #: The process name its own notices carry (default :func:`process_origin`); a notice
    #: with it is never handed to its own watchers.
    origin: str

    def watch_changes(self) -> AsyncGenerator[ChangeNotice, None]:
        """The changes other processes commit from now on, as they commit (an async
        generator: close it, or cancel its consumer, to stop watching). Notices this
        backend's own writes made are left out. A lost connection is retried, logged;
        changes made while it was lost may be missed."""


def watch_changes(backend: object) -> AsyncGenerator[ChangeNotice, None] | None:
    """``backend.watch_changes()``, or ``None`` when it has no such capability (or it is
    turned off: ``backend.announces`` false)."""
    if not isinstance(backend, WatchesChanges) or not getattr(backend, "announces", True):
        return None
    return backend.watch_changes()
