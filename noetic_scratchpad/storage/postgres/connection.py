"""The connection pool: opening it, and lending its connections to one call at a time.

Opening the pool sorts its failures by what fixes them: a bad connection option, or a
database, user or password the server refuses, is a :class:`StorageConfigError` (fix the
URL); a server that cannot be reached is a :class:`StorageError` (check the server). Each
connection sends and receives json and jsonb with this backend's codec (:mod:`.codec`), and
is given back without asyncpg's reset query (see :func:`_keep_session`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager, suppress
from typing import Any

import asyncpg  # type: ignore[import-untyped, unused-ignore]

from ...errors import StorageConfigError, StorageError
from .codec import register_json_codecs
from .failures import (
    DRIVER_ERRORS,
    NOT_SENT,
    UNUSABLE_CONNECTION,
    action_text,
    storage_error,
    translated_errors,
)
from .options import PostgresSettings

__all__ = ("create_pool", "pooled_connection")


async def create_pool(
    settings: PostgresSettings, connect_options: Mapping[str, Any]
) -> asyncpg.Pool:
    """A pool of connections to ``settings.dsn``; ``connect_options`` go to
    :func:`asyncpg.create_pool`."""
    try:
        return await asyncpg.create_pool(
            settings.dsn,
            min_size=settings.min_size,
            max_size=settings.max_size,
            init=register_json_codecs,
            reset=_keep_session,
            **connect_options,
        )
    except TypeError as exc:
        raise StorageConfigError(
            f"bad connection option for {settings.display!r}: {settings.scrub(str(exc))}"
        ) from exc
    except (
        asyncpg.InvalidCatalogNameError,
        asyncpg.InvalidAuthorizationSpecificationError,
        asyncpg.InvalidPasswordError,
    ) as exc:
        raise StorageConfigError(
            f"PostgreSQL at {settings.display!r} refused the connection: "
            f"{settings.scrub(str(exc))}; check the database name, user and password in "
            "the URL"
        ) from exc
    except DRIVER_ERRORS as exc:
        raise StorageError(
            f"cannot connect to PostgreSQL at {settings.display!r} "
            f"({type(exc).__name__}: {settings.scrub(str(exc))}); check that the server "
            "is running and that the URL's host and port are right"
        ) from exc


@asynccontextmanager
async def pooled_connection(
    pool: asyncpg.Pool,
    settings: PostgresSettings,
    action: str,
    key: str | None,
    outcome: str,
) -> AsyncIterator[Any]:
    """A connection of ``pool`` for one call; driver and network failures become
    :class:`StorageError` whose message ends with ``outcome``: what a failure means for
    the stored data (see :mod:`.failures`)."""
    try:
        conn = await pool.acquire()
    except DRIVER_ERRORS as exc:
        raise storage_error(settings, action_text(action, key), exc, NOT_SENT) from exc
    try:
        with translated_errors(settings, action, key, outcome):
            try:
                yield conn
            except BaseException as exc:
                # Released as it is, it would fail the next call too (its reset runs
                # nothing outside a transaction): closed, the pool replaces it. (A lost
                # commit arrives already translated, the driver's error as its cause.)
                if isinstance(exc, UNUSABLE_CONNECTION) or isinstance(
                    exc.__cause__, UNUSABLE_CONNECTION
                ):
                    conn.terminate()
                raise
    finally:
        # A release that fails has terminated the connection; the pool opens a new one.
        with suppress(Exception):
            await pool.release(conn)


async def _keep_session(conn: asyncpg.Connection) -> None:
    """Release without asyncpg's reset query: this backend never changes session state,
    and an extra round trip per write is its largest fixed cost. (asyncpg still rolls
    back an open transaction before calling this.)"""
