"""Typed, immutable diagnostic events and the bus that delivers them.

``models`` holds the event classes, ``bus`` the ``EventBus`` (subscribe, emit, stream,
drain, aclose), ``log`` how an event becomes a stdlib log record under the logger
``noetic_scratchpad.events`` (and the package's ``NullHandler``: nothing is printed unless
the application configures logging).
"""

from __future__ import annotations

from .bus import CLOSE_GRACE as CLOSE_GRACE
from .bus import EventBus, EventHandler
from .models import (
    ScopeReset,
    ScratchpadEvent,
    StateDiscarded,
    UpdateApplied,
    UpdateRejected,
    UpdateRetried,
    ViewTruncated,
)
from .models import WriteSource as WriteSource

__all__ = (
    "EventBus",
    "EventHandler",
    "ScopeReset",
    "ScratchpadEvent",
    "StateDiscarded",
    "UpdateApplied",
    "UpdateRejected",
    "UpdateRetried",
    "ViewTruncated",
)
