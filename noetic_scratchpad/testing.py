"""Test helpers that ship with the package: capture the events a piece of code emits.

``ScriptedModel`` (a model that replays turns) lives in the runtime and is exported from
the package's top level.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TypeVar

from .events import EventBus, ScratchpadEvent

__all__ = ("CapturedEvents", "capture_events")

E = TypeVar("E", bound=ScratchpadEvent)


class CapturedEvents(list[ScratchpadEvent]):
    """The events seen so far, in order, with a filter by type."""

    def of(self, kind: type[E]) -> list[E]:
        """The captured events of one type, in order."""
        return [event for event in self if isinstance(event, kind)]


@contextmanager
def capture_events(bus: EventBus) -> Iterator[CapturedEvents]:
    """Collect every event emitted on ``bus`` inside the ``with`` block."""
    captured = CapturedEvents()
    unsubscribe = bus.subscribe(captured.append)
    try:
        yield captured
    finally:
        unsubscribe()
