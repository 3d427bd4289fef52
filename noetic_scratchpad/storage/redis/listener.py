"""The subscribing side of the prefix's pub/sub channel: other processes' changes.

A client of its own (the backend's pool is left to the writes: a subscription holds its
connection for as long as it runs) subscribes to the channel; each message is decoded
into a :class:`~..notices.ChangeNotice`, this process's own dropped. A lost connection is
opened again after a pause, with a warning: pub/sub delivers at most once, so what other
processes wrote meanwhile is not announced again.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator
from contextlib import suppress
from typing import Any

import anyio
import redis.asyncio

from ..notices import ChangeNotice, decode_notice
from .failures import CLIENT_ERRORS
from .options import RedisSettings

__all__ = ("KEEPALIVE", "RETRY_DELAY", "listen")

logger = logging.getLogger("noetic_scratchpad.storage")

#: Seconds a wait for a message lasts before the connection is checked with a ``PING``.
KEEPALIVE = 30.0
#: Seconds between attempts to subscribe again.
RETRY_DELAY = 1.0


async def listen(
    client: redis.asyncio.Redis, settings: RedisSettings, channel: str, origin: str
) -> AsyncGenerator[ChangeNotice, None]:
    """Every notice on ``channel`` but those of ``origin``, until the generator is closed."""
    pool = client.connection_pool
    kwargs = {k: v for k, v in pool.connection_kwargs.items() if k != "timeout"}
    # Named, so that an operator can tell it in CLIENT LIST (spaces are not allowed).
    kwargs["client_name"] = f"noetic-scratchpad-watch:{channel}".replace(" ", "_")
    failures = 0
    while True:
        own = redis.asyncio.Redis(
            connection_pool=redis.asyncio.ConnectionPool(
                connection_class=pool.connection_class, max_connections=2, **kwargs
            )
        )
        pubsub: Any = own.pubsub(ignore_subscribe_messages=True)
        try:
            try:
                await pubsub.subscribe(channel)
            except CLIENT_ERRORS as exc:
                if failures == 0:
                    logger.warning(
                        "cannot subscribe to other processes' changes; retrying every %gs "
                        "url=%s: %s",
                        RETRY_DELAY,
                        settings.display,
                        settings.scrub(f"{type(exc).__name__}: {exc}"),
                    )
                failures += 1
                await anyio.sleep(RETRY_DELAY)
                continue
            failures = 0
            while True:
                try:
                    message = await pubsub.get_message(timeout=KEEPALIVE)
                    if message is None:
                        await pubsub.ping()
                        continue
                except CLIENT_ERRORS:
                    break
                if message.get("type") != "message":
                    continue
                notice = decode_notice(message["data"])
                if notice is not None and notice.origin != origin:
                    yield notice
        finally:
            with anyio.CancelScope(shield=True), anyio.move_on_after(2):
                with suppress(*CLIENT_ERRORS):
                    await pubsub.aclose()
                with suppress(*CLIENT_ERRORS):
                    await own.aclose()
        logger.warning(
            "the connection subscribed to other processes' changes was lost; opening it "
            "again (changes made meanwhile are not announced) url=%s",
            settings.display,
        )
        await anyio.sleep(RETRY_DELAY / 10)
