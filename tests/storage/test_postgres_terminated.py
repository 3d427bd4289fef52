"""Server sessions ended under load (``pg_terminate_backend``, as a failover or an
administrator does): every refusal is one of this backend's classified errors, in words a
caller can act on, and no acknowledged write is lost."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import uuid
from dataclasses import dataclass, field

import asyncpg
import pytest

from noetic_scratchpad import open_storage
from noetic_scratchpad.errors import StorageError, StorageOutcomeUnknownError
from noetic_scratchpad.storage import StorageBackend
from noetic_scratchpad.storage.postgres.failures import (
    NOT_SENT,
    ROLLED_BACK,
    UNCHANGED,
    UNCONFIRMED,
)
from tests.conftest import postgres_test_url, require_postgres

pytestmark = [pytest.mark.postgres, pytest.mark.asyncio]

KEYS = 6
WRITERS = 40
# The driver's own words for a connection it can no longer use: never a caller's to read.
DRIVER_INTERNALS = ("InternalClientError", "cannot switch to state", "another operation")


@dataclass
class Run:
    """What the writers saw: tokens acknowledged, refused as rolled back, or unconfirmed,
    and every refusal."""

    acknowledged: set[str] = field(default_factory=set)
    rolled_back: set[str] = field(default_factory=set)
    unconfirmed: set[str] = field(default_factory=set)
    refusals: list[BaseException] = field(default_factory=list)
    update_refusals: list[BaseException] = field(default_factory=list)
    kills: int = 0
    met_unusable: asyncio.Event = field(default_factory=asyncio.Event)
    """Set at the first refusal caused by a connection the driver could no longer use."""


async def writer(storage: StorageBackend, n: int, run: Run, stop: asyncio.Event) -> None:
    """Add tokens of its own to a shared key's list, with a read and a set in between."""
    i = 0
    while not stop.is_set():
        token = f"{n}:{i}"
        key = f"k{(n + i) % KEYS}"
        i += 1
        try:
            if i % 4 == 0:
                await storage.get(key)
            elif i % 4 == 1:
                await storage.set(f"own/{n}", i)
            else:
                await storage.update(key, lambda current, t=token: [*(current or []), t])
                run.acknowledged.add(token)
        except Exception as exc:  # every refusal is checked below
            run.refusals.append(exc)
            if _unusable_connections([exc]):
                run.met_unusable.set()
            if i % 4 > 1:
                run.update_refusals.append(exc)
                unconfirmed = isinstance(exc, StorageOutcomeUnknownError)
                (run.unconfirmed if unconfirmed else run.rolled_back).add(token)


async def terminator(app: str, run: Run, stop: asyncio.Event) -> None:
    """Ends the storage's server sessions again and again, at random moments of their
    work (idle in the pool, inside a transaction, at its commit)."""
    conn = await asyncpg.connect(postgres_test_url().split("?")[0])
    try:
        while not stop.is_set():
            run.kills += await conn.fetchval(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE application_name = $1",
                app,
            )
            await asyncio.sleep(0.02)
    finally:
        await conn.close()


async def test_sessions_ended_under_load_give_only_classified_refusals() -> None:
    """40 writers (updates, sets, reads) on a pool of 8 while the server's sessions are
    ended every 20 ms, until the run has seen connections the driver left unusable:

    - every refusal is a ``StorageError`` that says what happened to the data (one of the
      outcomes of :mod:`.failures`), never the driver's internals;
    - a refused update says it was rolled back, or is a ``StorageOutcomeUnknownError``
      (its commit was lost) saying it may or may not have been applied;
    - every acknowledged update is stored, and none refused as rolled back is."""
    require_postgres()
    app = f"nsp_{uuid.uuid4().hex[:10]}"
    url = f"{postgres_test_url()}&application_name={app}&pool_size=8"
    storage = await open_storage(url)
    run, stop = Run(), asyncio.Event()
    tasks = [asyncio.create_task(writer(storage, n, run, stop)) for n in range(WRITERS)]
    tasks.append(asyncio.create_task(terminator(app, run, stop)))
    try:
        # Until the driver has been caught with an unusable connection (it takes a kill
        # that lands between two of its messages: at most 30 s), and a while after it.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(run.met_unusable.wait(), 30)
        await asyncio.sleep(2)
    finally:
        stop.set()
        await asyncio.gather(*tasks)
    try:
        stored = await storage.get_many([f"k{k}" for k in range(KEYS)])
    finally:
        await storage.drop_table()  # type: ignore[attr-defined]
        await storage.aclose()

    kinds = collections.Counter(type(exc).__name__ for exc in run.refusals)
    assert run.kills > 10, f"the sessions were not ended ({run.kills} kills)"
    assert _unusable_connections(run.refusals), f"no unusable connection was met: {kinds}"
    for exc in run.refusals:
        message = str(exc)
        assert isinstance(exc, StorageError), f"{type(exc).__name__}: {message}"
        assert not any(word in message for word in DRIVER_INTERNALS), message
        outcomes = [o for o in (UNCHANGED, NOT_SENT, ROLLED_BACK, UNCONFIRMED) if o in message]
        assert len(outcomes) == 1, message
        if isinstance(exc, StorageOutcomeUnknownError):
            assert outcomes == [UNCONFIRMED], message
    for exc in run.update_refusals:
        assert isinstance(exc, StorageOutcomeUnknownError) or ROLLED_BACK in str(exc), exc
    written = {token for tokens in stored.values() for token in tokens}
    assert run.acknowledged, "no update was acknowledged"
    assert run.acknowledged <= written, f"lost: {sorted(run.acknowledged - written)[:10]}"
    assert not (run.rolled_back & written), "refused as rolled back, yet stored"


def _unusable_connections(refusals: list[BaseException]) -> list[BaseException]:
    """The refusals caused by a connection the driver could no longer use."""

    def driver_cause(exc: BaseException | None) -> BaseException | None:
        while exc is not None and not isinstance(exc, asyncpg.InternalClientError):
            exc = exc.__cause__
        return exc

    return [exc for exc in refusals if driver_cause(exc) is not None]
