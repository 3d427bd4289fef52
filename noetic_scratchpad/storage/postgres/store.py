""":class:`PostgresStorage`: the storage contract on one PostgreSQL table.

Reads take a pool connection for one statement. Updates of a key are queued on a
:class:`~noetic_scratchpad.locks.KeyedBatcher`: the updates that arrive while a transaction
of that key runs make up its next transaction (:mod:`.writer`). A hundred tasks writing one
scope therefore hold one pool connection and commit a few times, instead of taking every
connection of the pool and queueing on the row lock.
"""

from __future__ import annotations

import builtins
from collections.abc import AsyncGenerator, Iterable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any

import anyio
import asyncpg  # type: ignore[import-untyped, unused-ignore]

from ... import _json
from ...errors import StorageError
from ...locks import KeyedBatcher
from .._options import int_option
from .._prefix import prefix_upper_bound
from ..base import (
    CommitFn,
    JournalCommitFn,
    JournalRow,
    JournalView,
    JsonValue,
    KeyInfo,
    Revision,
    StorageBackend,
    UpdateFn,
    journal_limit,
)
from ..grouping import GroupedWrites, Member
from ..notices import ChangeNotice, process_origin
from .codec import decode_text, encode
from .connection import create_pool, pooled_connection
from .failures import DRIVER_ERRORS, ROLLED_BACK, UNCHANGED, UNCONFIRMED, storage_error
from .group import CONCURRENT, HOLD_SECONDS, update_rows
from .journal import decode_journal
from .listener import listen
from .options import PostgresSettings, parse_postgres_url
from .schema import prepare_tables
from .table import TableSql, fetch_prefix
from .writer import CommitJob, announce, update_row

__all__ = ("PostgresStorage",)

_CLOSE_TIMEOUT = 10.0


class PostgresStorage(StorageBackend):
    """A table of JSON values in PostgreSQL, shared safely by many processes.

    Open it with ``await open_storage("postgresql://...")`` or :meth:`open`; close it with
    :meth:`aclose` (or ``async with``). asyncio only: asyncpg does not run under trio.
    """

    url = "postgresql://"

    def __init__(
        self,
        pool: asyncpg.Pool,
        settings: PostgresSettings,
        *,
        max_batch: int = 256,
    ) -> None:
        self._pool = pool
        self.settings = settings
        self._closed = False
        self._batcher: KeyedBatcher[str, CommitJob, Any] = KeyedBatcher(
            self._run_batch, max_batch=max_batch
        )
        self._groups = GroupedWrites(
            self._run_alone,
            self._run_group,
            limit=min(CONCURRENT, settings.max_size),
            hold=HOLD_SECONDS,
        )
        self.tasks = self._batcher.tasks
        """Where the writes run: an object owning this backend may lend them its task
        group (``with backend.tasks.hosted_by(group):``)."""
        self._sql = TableSql(
            settings.quoted_table, settings.quoted_journal_table, settings.quoted_retired_table
        )
        self.connect_options: dict[str, Any] = {}
        """What :meth:`open` passed to asyncpg besides the URL (the listener connects with
        it too)."""
        self.origin = process_origin()
        """The process name this backend's notices carry (see :mod:`..notices`)."""
        self.announces = True
        """Whether writes and deletes are announced to other processes (``NOTIFY`` on
        :attr:`PostgresSettings.channel`, in the write's transaction)."""

    @classmethod
    async def open(
        cls,
        url: str,
        *,
        table: str | None = None,
        pool_size: int | None = None,
        min_size: int | None = None,
        max_size: int | None = None,
        max_batch: int = 256,
        **connect_options: Any,
    ) -> PostgresStorage:
        """Connect a pool to ``url`` and create the tables if they are missing.

        ``connect_options`` go to :func:`asyncpg.create_pool` (for example ``ssl``,
        ``command_timeout`` or ``server_settings``). ``max_batch`` caps how many queued
        updates of one key share a transaction. Raises :class:`StorageConfigError` for a
        bad URL or option, an unknown database or refused credentials, and
        :class:`StorageError` when the server cannot be reached.
        """
        settings = parse_postgres_url(
            url, table=table, pool_size=pool_size, min_size=min_size, max_size=max_size
        )
        max_batch = int_option("max_batch", max_batch, minimum=1)
        pool = await create_pool(settings, connect_options)
        storage = cls(pool, settings, max_batch=max_batch)
        storage.connect_options = dict(connect_options)
        try:
            await storage._create_table()
        except BaseException:
            pool.terminate()
            raise
        return storage

    async def _create_table(self) -> None:
        async with self._connection("create the table") as conn:
            await prepare_tables(conn, self._sql, self.settings)

    # -- the contract ---------------------------------------------------------------

    async def get(self, key: str) -> JsonValue | None:
        async with self._connection("read", key) as conn:
            return await conn.fetchval(self._sql.get, key)

    async def set(self, key: str, value: JsonValue) -> None:
        data = encode(value)
        async with self._connection("write", key, outcome=UNCONFIRMED) as conn:
            revision = await conn.fetchval(self._sql.set_existing, key, data)
            if revision is not None:
                if self.announces:
                    notice = ChangeNotice(key, self.origin, revision)
                    await announce(conn, self._sql, self.settings, [notice])
                return
        # A missing key: created under the row lock, which finds the revision it continues
        # from (TableSql.retired_revision says why one statement cannot).
        await self.update(key, lambda _current: value)

    async def delete(self, key: str) -> None:
        # The row's delete waits for (and then locks out) any write of the key; only then
        # does the journal's delete start, and see every row those writes added. The row's
        # revision is kept with its delete, so that the key's next life continues above it.
        connection = self._connection("delete", key, outcome=UNCONFIRMED)
        async with connection as conn:
            async with conn.transaction():
                status = await conn.execute(self._sql.retire, key)
                await conn.execute(self._sql.clear_journal, key)
            if self.announces and not status.endswith(
                " 0"
            ):  # a key that was there  # after the commit, as a write's (see .writer.announce)
                notice = ChangeNotice(key, self.origin, deleted=True)
                await announce(conn, self._sql, self.settings, [notice])

    async def purge_deleted(self, prefix: str) -> int:
        """Forget the retired revisions (and stray journal rows) of the deleted keys under
        ``prefix``, in one transaction; see :mod:`..purge`."""
        upper = prefix_upper_bound(prefix)
        removed = 0
        connection = self._connection("forget deleted keys", outcome=UNCONFIRMED)
        async with connection as conn, conn.transaction():
            for sql in self._sql.purge_deleted:
                status = await conn.execute(sql, prefix, upper)
                removed += int(status.rsplit(" ", 1)[-1])
        return removed

    async def sweep_expired(self, prefix: str, written_by: float, *, limit: int) -> int:
        """Delete at most ``limit`` keys under ``prefix`` last written (``now()`` of the
        server) before ``written_by``, in one transaction; see :mod:`..sweep`."""
        upper = prefix_upper_bound(prefix)
        connection = self._connection("sweep expired keys", outcome=UNCONFIRMED)
        async with connection as conn, conn.transaction():
            rows = await conn.fetch(
                self._sql.sweep, prefix, upper, written_by, journal_limit(limit)
            )
            gone = [row["key"] for row in rows]
            if gone:
                await conn.execute(self._sql.clear_journals, gone)
        return len(gone)

    async def trim_journals(self, prefix: str, written_by: float, *, limit: int) -> int:
        """Delete at most ``limit`` journal rows under ``prefix`` written at or before
        ``written_by``; see :mod:`..sweep`."""
        upper = prefix_upper_bound(prefix)
        connection = self._connection("trim journals", outcome=UNCONFIRMED)
        async with connection as conn:
            status = await conn.execute(
                self._sql.trim_journals, prefix, upper, written_by, journal_limit(limit)
            )
        return int(status.rsplit(" ", 1)[-1])

    async def get_revision(self, key: str) -> Revision | None:
        async with self._connection("read", key) as conn:
            row = await conn.fetchrow(self._sql.get_revision, key)
        return None if row is None else Revision(row["value"], row["revision"])

    async def journal(self, key: str, *, limit: int) -> builtins.list[JournalRow]:
        limit = journal_limit(limit)
        if limit == 0:
            return []
        async with self._connection("read the journal", key) as conn:
            rows = await conn.fetch(self._sql.journal_rows, key, limit)
        return decode_journal(self.settings.journal_table, key, rows)

    async def journal_view(self, key: str, *, limit: int) -> JournalView:
        limit = journal_limit(limit)
        async with (
            self._connection("read the journal", key) as conn,
            # One snapshot for both statements: no commit lands between them.
            conn.transaction(isolation="repeatable_read", readonly=True),
        ):
            found = await conn.fetchrow(self._sql.get_revision, key)
            rows = await conn.fetch(self._sql.journal_rows, key, limit) if limit else []
        current = None if found is None else Revision(found["value"], found["revision"])
        return JournalView(current, decode_journal(self.settings.journal_table, key, rows))

    async def list(self, prefix: str = "") -> builtins.list[str]:
        async with self._connection("list keys") as conn:
            rows = await fetch_prefix(conn, self._sql.keys, prefix)
        return [row["key"] for row in rows]

    async def get_many(self, keys: Iterable[str]) -> dict[str, JsonValue]:
        wanted = builtins.list(dict.fromkeys(keys))
        if not wanted:
            return {}
        async with self._connection("read") as conn:
            rows = await conn.fetch(self._sql.get_many, wanted)
        return {row["key"]: row["value"] for row in rows}

    async def update(self, key: str, fn: UpdateFn) -> JsonValue:
        """Apply ``fn`` under the row lock of ``key``; see :meth:`StorageBackend.update`.

        Updates of ``key`` queued in this process while a transaction runs share the next
        transaction: each ``fn`` sees the result of the one before it, one that raises
        fails alone, and every caller gets its own result after the commit.
        """
        self._check_open()
        result: JsonValue = await self._batcher.submit(key, CommitJob(fn))
        return result

    async def commit(self, key: str, fn: CommitFn, *, keep: int) -> Revision:
        """Apply ``fn`` and journal its entry under the row lock of ``key``, in the same
        statement as the write; see :meth:`StorageBackend.commit`."""
        self._check_open()
        result: Revision = await self._batcher.submit(key, CommitJob(fn, keep, False))
        return result

    async def commit_with_journal(
        self, key: str, fn: JournalCommitFn, *, keep: int, after: int
    ) -> Revision:
        """:meth:`commit`, with the journal rows above ``after`` read under the row lock;
        see :meth:`StorageBackend.commit_with_journal`."""
        self._check_open()
        result: Revision = await self._batcher.submit(key, CommitJob(fn, keep, False, after))
        return result

    async def describe(self, prefix: str = "") -> builtins.list[KeyInfo]:
        async with self._connection("describe keys") as conn:
            rows = await fetch_prefix(conn, self._sql.describe, prefix)
        return [
            KeyInfo(row["key"], _size(row["text"]), row["updated_at"], row["revision"])
            for row in rows
        ]

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        with anyio.move_on_after(_CLOSE_TIMEOUT) as scope:
            await self._batcher.wait_idle()  # writes already queued still commit
            await self._pool.close()
        if scope.cancelled_caught:
            self._pool.terminate()

    def watch_changes(self) -> AsyncGenerator[ChangeNotice, None]:
        """The writes and deletes other processes commit to this table, from a connection
        of its own that ``LISTEN``s on the table's channel (reconnected, with a warning,
        when it is lost); see :mod:`..notices`."""
        self._check_open()
        return listen(self.settings, self.origin, self.connect_options)

    async def drop_table(self) -> None:
        """Drop this backend's tables and everything in them (tests and tear-downs).

        Works after :meth:`aclose` too, on a connection of its own.
        """
        if not self._closed:
            async with self._connection("drop the table") as conn:
                await conn.execute(self._sql.drop)
            return
        try:
            conn = await asyncpg.connect(self.settings.dsn)
            try:
                await conn.execute(self._sql.drop)
            finally:
                await conn.close()
        except DRIVER_ERRORS as exc:
            raise storage_error(self.settings, "drop the table", exc, UNCHANGED) from exc

    def __repr__(self) -> str:
        return f"PostgresStorage({self.settings.display!r}, table={self.settings.table!r})"

    # -- plumbing -------------------------------------------------------------------

    async def _run_batch(self, key: str, jobs: builtins.list[CommitJob]) -> builtins.list[Any]:
        for job in jobs:
            if job.after is not None:  # reads the journal under the lock: alone
                return await self._run_alone(key, jobs)
        return await self._groups.run(key, jobs)

    async def _run_group(self, members: builtins.list[Member]) -> None:
        async with self._connection("update", outcome=ROLLED_BACK) as conn:
            origin = self.origin if self.announces else None
            await update_rows(conn, self._sql, self.settings, members, origin)

    async def _run_alone(self, key: str, jobs: Sequence[CommitJob]) -> builtins.list[Any]:
        async with self._connection("update", key, outcome=ROLLED_BACK) as conn:
            origin = self.origin if self.announces else None
            return await update_row(conn, self._sql, self.settings, key, jobs, origin)

    def _check_open(self) -> None:
        if self._closed:
            raise StorageError(
                f"the PostgreSQL storage {self.settings.display!r} is closed; "
                "open a new one with open_storage(url)"
            )

    def _connection(
        self, action: str, key: str | None = None, *, outcome: str = UNCHANGED
    ) -> AbstractAsyncContextManager[Any]:
        """A pool connection; failures become errors whose message ends with ``outcome``:
        what a failure means for the stored data."""
        self._check_open()
        return pooled_connection(self._pool, self.settings, action, key, outcome)


def _size(text: str) -> int:
    """The size of a value's compact JSON text, as the other backends report it, from the
    column's text; a value that cannot be read back is listed with its stored size, so that
    one bad row never hides the others."""
    try:
        return len(_json.dumps(decode_text(text.encode())))
    except (ValueError, RecursionError):
        return len(text.encode())
