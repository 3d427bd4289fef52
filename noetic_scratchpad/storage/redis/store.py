""":class:`RedisStorage`: the storage contract on a Redis server, shared by any number of
processes and machines.

Layout, every key under the prefix ``P`` (``?prefix=``, default ``scratchpad:``):

- ``P v:<key>``: a hash with the value's JSON text exactly as :func:`~..base.encode_json`
  wrote it (``value``), its ``revision``, the time of its write (``at``) and the token of
  the write that made it. A delete removes all but ``revision``, so that the key's next
  write continues above it: its revisions never repeat;
- ``P j:<key>``: the journal, a sorted set of rows (``[revision, time, entry]`` as JSON)
  scored by revision, trimmed to ``keep`` rows as each is added;
- ``P index``: the keys that hold a value, in a sorted set whose members all score 0, so
  that Redis orders them by their bytes: UTF-8's byte order is code point order, and a
  prefix is one ``ZRANGEBYLEX`` range. A listing is then exact and sorted, costs the keys
  it returns, not the database's size, and never matches another application's keys, which
  ``SCAN`` with a ``MATCH`` pattern (glob characters in a prefix to escape, duplicates to
  drop, every key of the database walked) would not give.

A write (see :mod:`.script`): read the hash (and, when a commit asks for them, the journal)
in one ``MULTI``/``EXEC``, run the commit functions in Python, then send one Lua script
that writes the value, the journal rows, their trim and the index entry only if the
revision read is still the stored one; if not, read again and retry. The commit function
is Python, so the server can only do this final compare-and-set. A script rather than
``WATCH``/``MULTI``: the same optimistic check, but the read and the write need no
connection held between them (``WATCH`` pins one per write in flight: 2,000 writes in
flight on redis-py's default pool failed with ``Too many connections``), one round trip
less, and the server runs the check and the write as one command. Measured raw (5 KB
value, Redis 7 on loopback, a pool of 50, three reps): a read-modify-write took 206-650 µs
with the script against 270-578 µs with ``WATCH``/``MULTI``, and 100 concurrent ones on one
key ran at 212-250 against 116-168 per second. A client that dies
between its read and its write leaves nothing behind: nothing is written until the
script runs, and it runs whole or not at all.

In one process the writes of a key go through a :class:`~noetic_scratchpad.locks.
KeyedBatcher`: those queued behind a running write share the next compare-and-set, so
a hundred tasks on one scope do not retry against each other; and the batches of many
keys queued while earlier writes are in flight share one read and one pipeline of
compare-and-sets (:mod:`..grouping`).
"""

from __future__ import annotations

import builtins
import os
import random
import time
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass
from typing import Any

import anyio
import redis.asyncio
import redis.exceptions

from ...errors import (
    StorageBusyError,
    StorageConfigError,
    StorageCorruptError,
    StorageError,
    StorageOutcomeUnknownError,
)
from ...locks import KeyedBatcher
from .._options import int_option
from .._prefix import prefix_upper_bound
from ..base import (
    MAX_JOURNAL_LIMIT,
    CommitFn,
    JournalCommitFn,
    JournalRow,
    JournalView,
    KeyInfo,
    Revision,
    StorageBackend,
    decode_json,
    encode_json,
    journal_limit,
)
from ..grouping import GroupedWrites, Member
from ..notices import ChangeNotice, encode_notice, process_origin
from .failures import (
    CLIENT_ERRORS,
    NOT_WRITTEN,
    UNCHANGED,
    UNCONFIRMED,
    storage_error,
    translated_errors,
)
from .listener import listen
from .options import RedisSettings, parse_redis_url
from .script import COMPARE_AND_SET

__all__ = ("RedisStorage",)

_CLOSE_TIMEOUT = 10.0
#: How long a write keeps retrying while writers in other processes keep changing its key.
_CONFLICT_BUDGET = 30.0
#: How many rounds of writes are in flight at a time before the next keys' wait to share one.
_ROUNDS = 2
#: A compare-and-set whose reply is lost: its outcome, and the error that says so.
_CAS_UNKNOWN = (UNCONFIRMED, StorageOutcomeUnknownError)
_FIELDS = (b"value", b"revision", b"at")


@dataclass(slots=True)
class _Job:
    """A commit: ``fn`` maps a ``Revision`` (and, when ``after`` is set, the journal rows
    above it) to a ``Commit``, whose entry is journaled when ``keep`` is positive."""

    fn: Any
    keep: int
    after: int | None


@dataclass(slots=True)
class _Stored:
    """A key's hash as one read saw it: its value (``None``: missing), its revision (kept
    past a delete) and, when asked for, its journal, newest first."""

    current: Revision | None
    revision: int
    rows: builtins.list[JournalRow]


class RedisStorage(StorageBackend):
    """JSON values in Redis, shared safely by many processes and machines.

    Open it with ``await open_storage("redis://host:6379/0")`` or :meth:`open`; close it
    with :meth:`aclose` (or ``async with``). asyncio only: redis-py's client is asyncio's.
    A standalone server (or a primary): the keys of one write are not given a hash tag, so
    Redis Cluster is not supported.
    """

    url = "redis://"

    def __init__(
        self, client: redis.asyncio.Redis, settings: RedisSettings, *, max_batch: int = 256
    ) -> None:
        self._client = client
        self.settings = settings
        self._closed = False
        self._index = f"{settings.prefix}index".encode()
        self._cas = client.register_script(COMPARE_AND_SET)
        # A key's batch runs at once, or with other keys' batches (see :mod:`..grouping`).
        self._rounds = GroupedWrites(self._write_alone, self._write_group, limit=_ROUNDS)
        self._batcher: KeyedBatcher[str, _Job, Any] = KeyedBatcher(
            self._rounds.run, max_batch=max_batch
        )
        self.tasks = self._batcher.tasks
        """Where the writes run: an object owning this backend may lend them its task
        group (``with backend.tasks.hosted_by(group):``)."""
        self.origin = process_origin()
        """The process name this backend's notices carry (see :mod:`..notices`)."""
        self.announces = True
        """Whether writes and deletes are announced to other processes (``PUBLISH`` on
        :attr:`channel`)."""
        self.channel = f"{settings.prefix}changes"
        """The pub/sub channel the changes under this prefix are announced on."""

    @classmethod
    async def open(
        cls,
        url: str,
        *,
        prefix: str | None = None,
        pool_size: int | None = None,
        max_batch: int = 256,
        **client_options: Any,
    ) -> RedisStorage:
        """Connect to ``url`` and check that the server answers.

        ``prefix`` and ``pool_size`` override the URL's (see :mod:`.options`);
        ``client_options`` go to redis-py's connection pool (``socket_timeout``,
        ``health_check_interval``, ...). Raises :class:`StorageConfigError` for a bad URL or
        option or a refused password, and :class:`StorageError` when the server cannot be
        reached.
        """
        settings = parse_redis_url(url, prefix=prefix, pool_size=pool_size)
        max_batch = int_option("max_batch", max_batch, minimum=1)
        try:
            # A blocking pool: a call that finds every connection busy waits for one
            # (the plain pool fails it), so a thousand scopes written at once queue.
            # No wait limit of the pool's own (redis-py's default fails a write after 20 s
            # in the queue): the layer's write_timeout and read_timeout bound every call.
            options = {"timeout": None, **client_options}
            pool = redis.asyncio.BlockingConnectionPool.from_url(
                settings.url, max_connections=settings.pool_size, **options
            )
            client = redis.asyncio.Redis.from_pool(pool)
        except (ValueError, TypeError) as exc:
            raise StorageConfigError(
                f"bad Redis URL or option for {settings.display!r}: {settings.scrub(str(exc))}"
            ) from exc
        storage = cls(client, settings, max_batch=max_batch)
        try:
            with translated_errors(settings, "connect", UNCHANGED):
                await client.ping()
        except TypeError as exc:  # an option redis-py's connections do not take
            await client.aclose()
            raise StorageConfigError(
                f"bad Redis connection option for {settings.display!r}: {settings.scrub(str(exc))}"
            ) from exc
        except BaseException:
            await client.aclose()
            raise
        return storage

    # -- the primitives ---------------------------------------------------------------

    async def journal_view(self, key: str, *, limit: int) -> JournalView:
        limit = journal_limit(limit)
        stored = await self._read(key, "read", limit)
        return JournalView(stored.current, stored.rows)

    async def commit_with_journal(
        self, key: str, fn: JournalCommitFn, *, keep: int, after: int
    ) -> Revision:
        self._check_open()
        result: Revision = await self._batcher.submit(key, _Job(fn, keep, after))
        return result

    async def describe(self, prefix: str = "") -> builtins.list[KeyInfo]:
        upper = prefix_upper_bound(prefix)
        low = b"[" + prefix.encode() if prefix else b"-"
        high = b"(" + upper.encode() if upper is not None else b"+"
        with translated_errors(self.settings, "describe keys", UNCHANGED):
            self._check_open()
            members = await self._client.zrangebylex(self._index, low, high)
            async with self._client.pipeline(transaction=True) as pipe:
                for member in members:
                    pipe.hmget(self._value_key(member), b"revision", b"at")
                    pipe.hstrlen(self._value_key(member), "value")
                answers = await pipe.execute()
        found = []
        for n, member in enumerate(members):
            (revision, at), size = answers[2 * n], answers[2 * n + 1]
            if revision is None or at is None:
                continue  # deleted since the index was read
            name = member.decode() if isinstance(member, bytes) else member
            found.append(KeyInfo(name, size, float(at), int(revision)))
        return found

    async def delete(self, key: str) -> None:
        what = f"delete of {key!r}"
        with translated_errors(self.settings, what, UNCONFIRMED):
            self._check_open()
            async with self._client.pipeline(transaction=True) as pipe:
                # ``revision`` stays: the key's next life continues above it.
                pipe.hdel(self._value_key(key), "value", "at", "token")
                pipe.delete(self._journal_key(key))
                pipe.zrem(self._index, key)
                text = self.announces and encode_notice(
                    ChangeNotice(key, self.origin, deleted=True)
                )
                if text:  # in the transaction: announced exactly when it happens
                    pipe.publish(self.channel, text)
                await pipe.execute()

    async def purge_deleted(self, prefix: str) -> int:
        """Forget the revisions kept in the hashes of the deleted keys under ``prefix``
        (see :mod:`..purge`). Deleted keys are in no index, so this walks the database
        with ``SCAN MATCH``: an erasure's cost, never a listing's. A hash is removed only
        while it holds no value, in one script: a key written meanwhile stays."""
        pattern = _glob_escape(self._value_key(prefix)) + b"*"
        removed = 0
        with translated_errors(
            self.settings, f"purge of deleted keys under {prefix!r}", UNCONFIRMED
        ):
            self._check_open()
            async for found in self._client.scan_iter(match=pattern, count=1000):
                removed += int(await self._client.eval(_FORGET_DELETED, 1, found))
        return removed

    async def sweep_expired(self, prefix: str, written_by: float, *, limit: int) -> int:
        """Delete at most ``limit`` keys under ``prefix`` last written at or before
        ``written_by`` (see :mod:`..sweep`): candidates from the index, each deleted by
        a script that checks its write time again (a key written meanwhile stays) and
        keeps its revision, as :meth:`delete` does. Not Redis's own key expiry: it would
        take the revision with the value, and the key would start again at 1."""
        old = [info.key for info in await self.describe(prefix) if info.updated_at <= written_by]
        removed = 0
        with translated_errors(self.settings, f"sweep of keys under {prefix!r}", UNCONFIRMED):
            for key in old[: max(limit, 0)]:
                self._check_open()
                keys = (self._value_key(key), self._journal_key(key), self._index)
                removed += int(await self._client.eval(_SWEEP, 3, *keys, repr(written_by), key))
        return removed

    async def trim_journals(self, prefix: str, written_by: float, *, limit: int) -> int:
        """Delete at most ``limit`` journal rows under ``prefix`` written at or before
        ``written_by`` (see :mod:`..sweep`), oldest first: each key's rows are read,
        and those below the newest old one removed by revision (rows only grow older, so
        a write meanwhile changes nothing of it)."""
        removed, budget = 0, max(limit, 0)
        with translated_errors(self.settings, f"trim of journals under {prefix!r}", UNCONFIRMED):
            for info in await self.describe(prefix):
                if removed >= budget:
                    break
                self._check_open()
                journal = self._journal_key(info.key)
                rows: builtins.list[Any] = await self._client.zrange(
                    journal, 0, budget - removed - 1
                )
                decoded = [decode_json(data) for data in rows]
                old = [row for row in decoded if float(row[1]) <= written_by]
                if old:
                    removed += int(await self._client.zremrangebyscore(journal, "-inf", old[-1][0]))
        return removed

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        with anyio.move_on_after(_CLOSE_TIMEOUT):
            await self._batcher.wait_idle()  # writes already queued still commit
        await self._client.aclose()

    # -- faster helpers -----------------------------------------------------------------

    async def commit(self, key: str, fn: CommitFn, *, keep: int) -> Revision:
        self._check_open()
        result: Revision = await self._batcher.submit(key, _Job(fn, keep, None))
        return result

    async def drop_keys(self) -> None:
        """Delete every key under this backend's prefix (tests and tear-downs). Works
        after :meth:`aclose` too, on a client of its own."""
        client = redis.asyncio.from_url(self.settings.url)
        pattern = _glob_escape(self.settings.prefix.encode()) + b"*"
        with translated_errors(self.settings, "drop the keys", UNCONFIRMED):
            try:
                async for found in client.scan_iter(match=pattern, count=1000):
                    await client.unlink(found)
            finally:
                await client.aclose()

    def watch_changes(self) -> AsyncGenerator[ChangeNotice, None]:
        """The writes and deletes other processes make under this prefix, from a
        subscription to :attr:`channel` on a connection of its own (opened again, with a
        warning, when it is lost); see :mod:`..notices`."""
        self._check_open()
        return listen(self._client, self.settings, self.channel, self.origin)

    def _notices(self, key: str, write: tuple[Any, ...]) -> builtins.list[Any]:
        """The script's channel and notices for ``write`` (see :mod:`.script`): the
        writes of a compare-and-set are announced by the script itself, when it lands."""
        if not self.announces:
            return ["", 0]
        texts = []
        for revision, about in write[-1]:
            source, call_id = about if about is not None else (None, None)
            notice = ChangeNotice(key, self.origin, revision, False, source, call_id)
            text = encode_notice(notice)
            if text is not None:
                texts.append(text)
        return [self.channel, len(texts), *texts]

    def __repr__(self) -> str:
        return f"RedisStorage({self.settings.display!r}, prefix={self.settings.prefix!r})"

    # -- plumbing -------------------------------------------------------------------

    def _value_key(self, key: str | bytes) -> bytes:
        raw = key if isinstance(key, bytes) else key.encode()
        return f"{self.settings.prefix}v:".encode() + raw

    def _journal_key(self, key: str) -> bytes:
        return f"{self.settings.prefix}j:".encode() + key.encode()

    def _check_open(self) -> None:
        if self._closed:
            raise StorageError(
                f"the Redis storage {self.settings.display!r} is closed; "
                "open a new one with open_storage(url)"
            )

    async def _read(
        self, key: str, action: str, limit: int = 0, *, above: int | None = None
    ) -> _Stored:
        """The hash of ``key`` and its ``limit`` newest journal rows (or every row above
        revision ``above``), read in one ``MULTI``/``EXEC``: one instant."""
        what = f"{action} of {key!r}"
        outcome = UNCHANGED if action == "read" else NOT_WRITTEN
        with translated_errors(self.settings, what, outcome):
            self._check_open()
            if not limit and above is None:
                answers = [await self._client.hmget(self._value_key(key), _FIELDS)]
            else:
                async with self._client.pipeline(transaction=True) as pipe:
                    self._queue_read(pipe, key, limit, above)
                    answers = await pipe.execute()
        return self._decode(key, answers)

    def _queue_read(self, pipe: Any, key: str, limit: int, above: int | None) -> int:
        """Queue on ``pipe`` the reads of :meth:`_read`; returns how many answers they give."""
        pipe.hmget(self._value_key(key), _FIELDS)
        if above is not None:
            pipe.zrevrangebyscore(self._journal_key(key), "+inf", f"({above}")
        elif limit:
            stop = -1 if limit >= MAX_JOURNAL_LIMIT else limit - 1
            pipe.zrevrange(self._journal_key(key), 0, stop)
        else:
            return 1
        return 2

    def _decode(self, key: str, answers: builtins.list[Any]) -> _Stored:
        value, revision, _at = answers[0]
        where = f"the value of {key!r} in Redis at {self.settings.display!r}"
        try:
            number = 0 if revision is None else int(revision)
            current = None if value is None else Revision(decode_json(value), number)
            rows = [_row(member) for member in answers[1]] if len(answers) > 1 else []
        except (ValueError, RecursionError, TypeError) as exc:
            raise StorageCorruptError.unreadable(where, exc) from exc
        return _Stored(current, number, rows)

    async def _write_alone(self, key: str, jobs: Sequence[_Job]) -> builtins.list[Any]:
        """Run ``jobs`` on ``key`` and write their result with one compare-and-set,
        reading again and rerunning them while another writer gets there first."""
        above = _lowest_after(jobs)
        deadline = time.monotonic() + _CONFLICT_BUDGET
        for attempt in range(1_000_000):
            stored = await self._read(key, "update", above=above)
            outcomes, write = _apply(jobs, stored)
            if write is None:
                return outcomes  # every job failed: nothing to write
            with translated_errors(self.settings, _cas_what(key), *_CAS_UNKNOWN):
                if await self._cas(*self._cas_call(key, stored, write)):
                    return outcomes
            if time.monotonic() > deadline:
                break
            # Another process wrote the key in between: back off a little, then retry.
            await anyio.sleep(random.uniform(0, min(0.05, 0.0005 * 2 ** min(attempt, 7))))
        raise StorageBusyError(
            f"Redis update of {key!r} at {self.settings.display!r}: other writers changed "
            f"the key before every attempt for {_CONFLICT_BUDGET:.0f} s; nothing was written, "
            "retry"
        )

    async def _write_group(self, members: builtins.list[Member]) -> None:
        """Run the batches of ``members`` (distinct keys) with one read of them all and one
        pipeline of their compare-and-sets; finish each member with its outcomes, its own
        error, or as to run again alone (another writer got there first)."""
        self._check_open()
        aboves = [_lowest_after(member.jobs) for member in members]
        # A key's hash and journal are read in one instant (MULTI/EXEC); hashes alone need
        # no transaction: each HMGET is one, and each key's CAS checks its own revision.
        transaction = any(above is not None for above in aboves)
        try:
            async with self._client.pipeline(transaction=transaction) as pipe:
                counts = [
                    self._queue_read(pipe, member.key, 0, above)
                    for member, above in zip(members, aboves, strict=True)
                ]
                answers = await pipe.execute(raise_on_error=False)
        except CLIENT_ERRORS as exc:
            for member in members:
                what = f"update of {member.key!r}"
                member.finish(storage_error(self.settings, what, exc, NOT_WRITTEN))
            return
        written: builtins.list[tuple[Member, builtins.list[Any]]] = []
        async with self._client.pipeline(transaction=False) as pipe:
            start = 0
            for member, count in zip(members, counts, strict=True):
                reply, start = answers[start : start + count], start + count
                if any(isinstance(answer, Exception) for answer in reply):
                    member.finish(alone=True)  # e.g. a key of another type: its own error
                    continue
                try:
                    stored = self._decode(member.key, reply)
                except StorageCorruptError as exc:
                    member.finish(exc)
                    continue
                outcomes, write = _apply(member.jobs, stored)
                if write is None:
                    member.finish(outcomes)  # every job failed: nothing to write
                    continue
                keys, args = self._cas_call(member.key, stored, write)
                pipe.evalsha(self._cas.sha, len(keys), *keys, *args)
                written.append((member, outcomes))
            if not written:
                return
            try:
                results = await pipe.execute(raise_on_error=False)
            except CLIENT_ERRORS as exc:
                for member, _ in written:
                    what = _cas_what(member.key)
                    member.finish(storage_error(self.settings, what, exc, *_CAS_UNKNOWN))
                return
        for (member, outcomes), result in zip(written, results, strict=True):
            if isinstance(result, redis.exceptions.NoScriptError) or result == 0:
                member.finish(alone=True)  # not run, or another write came first: read again
            elif isinstance(result, BaseException):
                what = _cas_what(member.key)
                member.finish(storage_error(self.settings, what, result, *_CAS_UNKNOWN))
            else:
                member.finish(outcomes)

    def _cas_call(
        self, key: str, stored: _Stored, write: tuple[Any, ...]
    ) -> tuple[builtins.list[bytes], builtins.list[Any]]:
        """The compare-and-set's keys and arguments that write ``write`` over ``stored``."""
        # The token tells this attempt's write from any other of the same revision.
        token = os.urandom(8).hex()
        args: builtins.list[Any] = [stored.revision, int(stored.current is not None), token]
        keys = [self._value_key(key), self._journal_key(key), self._index]
        return keys, [*args, *_encoded(key, write, self._notices(key, write))]


def _lowest_after(jobs: Sequence[_Job]) -> int | None:
    """The lowest revision whose later journal rows a job asks for (``None``: none)."""
    wanted = [job.after for job in jobs if job.after is not None]
    return min(wanted) if wanted else None


def _cas_what(key: str) -> str:
    return f"compare-and-set of an update of {key!r}"


def _row(member: bytes) -> JournalRow:
    revision, at, entry = decode_json(member)
    return JournalRow(int(revision), float(at), entry)


def _apply(
    jobs: Sequence[_Job], stored: _Stored
) -> tuple[builtins.list[Any], tuple[Any, ...] | None]:
    """Run the jobs in order, each on the result of the last one that worked. Returns one
    outcome per job, and what to write: ``(revision, value text, time, rows)`` where rows
    are ``(revision, row text, keep)`` (``None``: nothing to write)."""
    if stored.current is None:
        value, seen = None, 0
    else:
        value, seen = stored.current.value, stored.current.revision
    revision = stored.revision
    # Newest first, as the batch leaves it so far: the stored rows read are the newest ones
    # (those above the lowest ``after``), so trimming this list keeps it exact.
    journal = builtins.list(stored.rows)
    track = any(job.after is not None for job in jobs)
    now = time.time()
    outcomes: builtins.list[Any] = []
    rows: builtins.list[tuple[int, bytes, int]] = []
    made: builtins.list[tuple[int, tuple[str, str | None] | None]] = []
    data: bytes | None = None
    for job in jobs:
        try:
            if job.after is None:
                commit = job.fn(Revision(value, seen))
            else:
                above = [row for row in journal if row.revision > job.after]
                commit = job.fn(Revision(value, seen), above)
            text = commit.json()
            journaled = commit.entry is not None and job.keep > 0
            row = encode_json([revision + 1, now, commit.entry]) if journaled else None
        except Exception as exc:
            outcomes.append(exc)
            continue
        revision = seen = revision + 1
        value, data = commit.value, text
        if row is not None:
            rows.append((revision, row, job.keep))
            if track:
                journal.insert(0, _row(row))
                del journal[job.keep :]
        outcomes.append(Revision(value, revision))
        made.append((revision, commit.about))
    if data is None:
        return outcomes, None
    return outcomes, (revision, data, repr(now), rows, made)


def _encoded(key: str, write: tuple[Any, ...], announced: builtins.list[Any]) -> builtins.list[Any]:
    """The script's arguments from the new revision on (see :mod:`.script`)."""
    revision, data, now, rows, _made = write
    args: builtins.list[Any] = [revision, data, now, key, *announced]
    for row_revision, row, keep in rows:
        args.extend((row_revision, row, keep))
    return args


#: Removes a value hash that holds no value (a deleted key's kept revision); 1 if it did.
_FORGET_DELETED = (
    "if redis.call('HEXISTS', KEYS[1], 'value') == 0 then "
    "return redis.call('DEL', KEYS[1]) end return 0"
)


#: Deletes a key written at or before ARGV[1] as ``delete`` does (its revision stays); 1 if it did.
_SWEEP = (
    "local at = redis.call('HGET', KEYS[1], 'at') "
    "if at and tonumber(at) <= tonumber(ARGV[1]) then "
    "redis.call('HDEL', KEYS[1], 'value', 'at', 'token') redis.call('DEL', KEYS[2]) "
    "redis.call('ZREM', KEYS[3], ARGV[2]) return 1 end return 0"
)


def _glob_escape(text: bytes) -> bytes:
    """``text`` as a ``SCAN MATCH`` pattern that matches itself only."""
    out = bytearray()
    for byte in text:
        if byte in b"\\*?[]":
            out.append(ord("\\"))
        out.append(byte)
    return bytes(out)
