"""The generic implementation: anyio's own event and cancel scope, on every loop anyio runs
(trio, and asyncio with the fast path off)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio

from ._base import Event, Expired

__all__ = ("new_event", "wait_for")

T = TypeVar("T")


#: ``new_event()``: anyio's event, the class itself, as :mod:`._asyncio`'s.
new_event: Callable[[], Event] = anyio.Event


async def wait_for(seconds: float | None, pending: Awaitable[T]) -> T:
    """``await pending`` in a cancel scope of ``seconds``; :class:`Expired` when it ends
    the wait (a ``TimeoutError`` of ``pending``'s own passes through)."""
    if seconds is None:
        return await pending
    with anyio.move_on_after(seconds):
        return await pending
    raise Expired
