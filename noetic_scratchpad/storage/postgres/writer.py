"""The atomic read-modify-write of a key: one transaction that holds the row's lock.

The transaction locks the key's row (``SELECT ... FOR UPDATE``, inserting the row first if
it is absent) and holds the lock from its read to its commit, so writers on any number of
servers serialize per key and never lose each other's updates, while different keys never
wait for each other.

Inside one process the updates of a key also go through a :class:`~noetic_scratchpad.locks.
KeyedBatcher` (see :mod:`.store`): the updates queued behind a running transaction are
combined into the next one, which runs them here in order, each on the result of the one
before it. An update that raises fails alone; when every update fails, the transaction
is rolled back, which also removes a row inserted only to be locked.
"""

from __future__ import annotations

from collections.abc import Iterable
from contextlib import suppress
from typing import Any

import asyncpg  # type: ignore[import-untyped, unused-ignore]

from ... import _json
from ...errors import StorageError, StorageOutcomeUnknownError
from ..base import JsonValue, UpdateFn
from .codec import escape
from .failures import CONNECTION_LOST, UNCONFIRMED, storage_error
from .options import PostgresSettings
from .table import TableSql

__all__ = ("update_row",)

# A row deleted between the insert-if-absent and the lock makes the lock statement retry.
_LOCK_ATTEMPTS = 8


async def update_row(
    conn: asyncpg.Connection,
    sql: TableSql,
    settings: PostgresSettings,
    key: str,
    fns: Iterable[UpdateFn],
) -> list[Any]:
    """Run ``fns`` on the value of ``key`` in one transaction holding its row lock.

    Returns one outcome per update: its new value, or the exception that fails it alone.
    A commit cut off by a lost connection is a :class:`StorageOutcomeUnknownError`.
    """
    transaction = conn.transaction(isolation="read_committed")
    await transaction.start()
    try:
        # The row lock is held from here to the end of the transaction.
        outcomes, data = _apply(fns, await _lock_row(conn, sql, settings, key))
        if data is not None:
            await conn.execute(sql.write, key, data)
    except BaseException:
        await _rollback_quietly(transaction)
        raise
    if data is None:  # every update failed: also drops a row inserted to lock
        await _rollback_quietly(transaction)
        return outcomes
    try:
        await transaction.commit()
    except CONNECTION_LOST as exc:
        what = f"commit of an update of {key!r}"
        raise storage_error(settings, what, exc, UNCONFIRMED, StorageOutcomeUnknownError) from exc
    return outcomes


async def _lock_row(
    conn: asyncpg.Connection, sql: TableSql, settings: PostgresSettings, key: str
) -> JsonValue | None:
    """The value of ``key`` once its row is locked; ``None`` for a row inserted to lock."""
    for _ in range(_LOCK_ATTEMPTS):
        row = await conn.fetchrow(sql.lock, key)
        if row is None:  # the statement always yields one row
            raise StorageError(f"locking the row of {key!r} returned nothing; retry")
        if row["created"]:
            return None
        if row["found"]:
            return row["value"]
    raise StorageError(
        f"could not lock the row of {key!r} in {settings.table!r}: it was deleted "
        f"by another writer {_LOCK_ATTEMPTS} times in a row; nothing was written, retry"
    )


def _apply(fns: Iterable[UpdateFn], current: Any) -> tuple[list[Any], bytes | None]:
    """Run the queued updates in order, each on the result of the last one that worked.

    Returns one outcome per update (its value, or the exception that fails it alone) and
    the JSON text to write, ``None`` when no update worked.
    """
    outcomes: list[Any] = []
    data: bytes | None = None
    for fn in fns:
        try:
            new = fn(current)
            encoded = escape(_json.dumps(new))
        except Exception as exc:
            outcomes.append(exc)
            continue
        current, data = new, encoded
        outcomes.append(new)
    return outcomes, data


async def _rollback_quietly(transaction: Any) -> None:
    # On a lost connection the server rolls the transaction back by itself.
    with suppress(Exception):
        await transaction.rollback()
