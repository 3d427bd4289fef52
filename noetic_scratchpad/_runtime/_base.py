"""What both implementations share: the event they make, the error a deadline raises."""

from __future__ import annotations

from typing import Any, Protocol

__all__ = ("Event", "Expired")


class Event(Protocol):
    """What ``asyncio.Event``, ``trio.Event`` and ``anyio.Event`` all offer."""

    def set(self) -> None: ...

    def is_set(self) -> bool: ...

    async def wait(self) -> Any: ...


class Expired(Exception):
    """:func:`~noetic_scratchpad._runtime.wait_for` gave up: the call took longer than its
    limit."""
