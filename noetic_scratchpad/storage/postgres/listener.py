"""The listening side of the table's ``NOTIFY`` channel: other processes' changes.

One connection of its own (not the pool's: it is held for as long as the watch runs)
``LISTEN``s on :attr:`~.options.PostgresSettings.channel`. A notification is decoded into
a :class:`~..notices.ChangeNotice` and queued for the watcher; this process's own are
dropped. A lost connection is opened again after a pause, with a warning: what other
processes committed meanwhile is not announced again (read the scopes if it matters).
A connection that goes quiet is asked ``SELECT 1`` every :data:`KEEPALIVE` seconds, so
that one cut without a word is noticed too.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, Mapping
from contextlib import suppress
from typing import Any

import anyio
import asyncpg  # type: ignore[import-untyped, unused-ignore]

from ..notices import ChangeNotice, decode_notice
from .failures import DRIVER_ERRORS
from .options import PostgresSettings

__all__ = ("KEEPALIVE", "RETRY_DELAY", "listen")

logger = logging.getLogger("noetic_scratchpad.storage")

#: Seconds of silence after which the listening connection is checked.
KEEPALIVE = 30.0
#: Seconds between attempts to open the listening connection again.
RETRY_DELAY = 1.0
#: Notices held for a watcher that does not keep up; past that the newest are dropped.
BUFFER = 10_000

# create_pool's own arguments, which asyncpg.connect does not take.
_POOL_ONLY = frozenset(
    {
        "min_size",
        "max_size",
        "max_queries",
        "max_inactive_connection_lifetime",
        "setup",
        "init",
        "reset",
        "loop",
    }
)

_LOST = object()


async def listen(
    settings: PostgresSettings,
    origin: str,
    connect_options: Mapping[str, Any] | None = None,
) -> AsyncGenerator[ChangeNotice, None]:
    """Every notice on the channel but those of ``origin``, until the generator is closed."""
    options = {k: v for k, v in (connect_options or {}).items() if k not in _POOL_ONLY}
    send, receive = anyio.create_memory_object_stream[object](BUFFER)

    def on_notify(_conn: object, _pid: int, _channel: str, payload: str) -> None:
        notice = decode_notice(payload)
        if notice is None or notice.origin == origin:
            return
        try:
            send.send_nowait(notice)
        except anyio.WouldBlock:
            logger.warning("change notices dropped: the watcher is too slow key=%s", notice.key)

    def on_lost(_conn: object) -> None:
        with suppress(anyio.WouldBlock, anyio.ClosedResourceError):
            send.send_nowait(_LOST)

    with send, receive:
        failures = 0
        while True:
            conn = await _connect(settings, options, on_notify, on_lost, failures)
            if conn is None:
                failures += 1
                await anyio.sleep(RETRY_DELAY)
                continue
            failures = 0
            try:
                while True:
                    item = None  # no yield inside a cancel scope: it would cross tasks
                    with anyio.move_on_after(KEEPALIVE):
                        item = await receive.receive()
                    if item is None:
                        if not await _alive(conn):
                            break
                    elif isinstance(item, ChangeNotice):
                        yield item
                    else:  # _LOST
                        break
            finally:
                with anyio.CancelScope(shield=True), anyio.move_on_after(2):
                    await _close(conn)
            logger.warning(
                "the connection listening for other processes' changes was lost; "
                "opening it again (changes made meanwhile are not announced) url=%s",
                settings.display,
            )


async def _connect(
    settings: PostgresSettings,
    options: Mapping[str, Any],
    on_notify: Any,
    on_lost: Any,
    failures: int,
) -> Any:
    """A connection listening on the channel, or ``None`` (logged, once per outage)."""
    conn = None
    try:
        conn = await asyncpg.connect(settings.dsn, **options)
        conn.add_termination_listener(on_lost)
        await conn.add_listener(settings.channel, on_notify)
        return conn
    except (*DRIVER_ERRORS, OSError) as exc:
        if failures == 0:
            logger.warning(
                "cannot listen for other processes' changes; retrying every %gs url=%s: %s",
                RETRY_DELAY,
                settings.display,
                settings.scrub(f"{type(exc).__name__}: {exc}"),
            )
        if conn is not None:
            await _close(conn)
        return None
    except BaseException:  # cancelled (the core closing) between connect and listen
        if conn is not None:
            with anyio.CancelScope(shield=True), anyio.move_on_after(2):
                await _close(conn)
        raise


async def _alive(conn: Any) -> bool:
    try:
        with anyio.fail_after(10):
            await conn.fetchval("SELECT 1")
    except (*DRIVER_ERRORS, OSError, TimeoutError):
        return False
    return True


async def _close(conn: Any) -> None:
    if conn.is_closed():
        return
    try:
        await conn.close(timeout=2)
    except Exception:
        conn.terminate()
