"""Cancelling one writer never fails the others that share its transaction.

Writes queued together run as one transaction. Here the writer whose job opens such a
transaction is cancelled in the middle of it, in every way an application cancels a task:
``task.cancel()``, ``asyncio.timeout``, a failing sibling in an ``asyncio.TaskGroup``, an
anyio cancel scope. The other writers of that transaction must get their results and their
updates must be stored; the cancelled one may or may not have landed. (Before the batches
ran in a task of their own, they got ``CancelledError``, and on PostgreSQL their updates
were rolled back.)
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from noetic_scratchpad import Agent, AgentHarness, ScriptedModel, UpdateApplied, scratchpad
from noetic_scratchpad.keys import state_key
from noetic_scratchpad.storage import StorageBackend, open_storage
from noetic_scratchpad.testing import capture_events
from tests.conftest import postgres_test_url, require_postgres

from .helpers import write_lock_held

CANCELS = ["task.cancel", "asyncio.timeout", "TaskGroup", "anyio"]
KEY = "k"


def add(name: str, before: Callable[[], None] = lambda: None) -> Any:
    def fn(current: Any) -> Any:
        before()
        return {**(current or {}), name: 1}

    return fn


@asynccontextmanager
async def writes_held(kind: str, storage: StorageBackend, path: Path) -> AsyncIterator[Any]:
    """While inside, another connection keeps this storage's writes of ``KEY`` waiting;
    ``await release()`` lets them go."""
    if kind == "sqlite":
        async with write_lock_held(path, "elsewhere") as lock:
            yield lock.release
        return
    import asyncpg

    table = getattr(storage, "settings").quoted_table  # noqa: B009
    raw = await asyncpg.connect(getattr(storage, "settings").dsn)  # noqa: B009
    try:
        transaction = raw.transaction()
        await transaction.start()
        await raw.execute(f"SELECT 1 FROM {table} WHERE key = $1 FOR UPDATE", KEY)
        yield transaction.commit
    finally:
        await raw.close()


async def cancelled_writer(
    storage: StorageBackend, cancel: str, thread_blocks: bool
) -> tuple[asyncio.Task[Any], Callable[[], None]]:
    """Start the writer to cancel; its update, once running inside the transaction, makes
    its own cancellation happen (and, in a database thread, waits for it to arrive)."""
    loop = asyncio.get_running_loop()
    triggers: list[Callable[[], None]] = []

    def trigger() -> None:
        loop.call_soon_threadsafe(triggers[0])
        if thread_blocks:  # SQLite: the update runs in the writer's thread
            time.sleep(0.3)

    update = add("first", trigger)

    async def write() -> Any:
        if cancel == "asyncio.timeout":
            async with asyncio.timeout(None) as deadline:
                triggers.append(lambda: deadline.reschedule(loop.time()))
                return await storage.update(KEY, update)
        if cancel == "anyio":
            with anyio.CancelScope() as scope:
                triggers.append(scope.cancel)
                return await storage.update(KEY, update)
            return "cancelled"
        if cancel == "TaskGroup":
            failing = asyncio.Event()
            triggers.append(failing.set)

            async def sibling() -> None:
                await failing.wait()
                raise RuntimeError("a sibling task failed")

            async with asyncio.TaskGroup() as group:
                group.create_task(storage.update(KEY, update))
                group.create_task(sibling())
        return await storage.update(KEY, update)

    task = asyncio.ensure_future(write())
    if cancel == "task.cancel":
        triggers.append(task.cancel)
    return task, trigger


@pytest.mark.asyncio
@pytest.mark.parametrize("cancel", CANCELS)
@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
async def test_cancelling_the_writer_that_opens_a_transaction_spares_the_others(
    kind: str, cancel: str, tmp_path: Path
) -> None:
    path = tmp_path / "c.db"
    if kind == "postgres":
        require_postgres()
    url = f"sqlite:///{path}" if kind == "sqlite" else postgres_test_url()
    storage = await open_storage(url)
    try:
        await storage.set(KEY, {"seed": 1})
        async with writes_held(kind, storage, path) as release:
            blocked = asyncio.ensure_future(storage.update(KEY, add("blocked")))
            await asyncio.sleep(0.2)  # its transaction waits for the other connection
            first, _ = await cancelled_writer(storage, cancel, thread_blocks=kind == "sqlite")
            await asyncio.sleep(0.05)  # queued first: it opens the next transaction
            others = [asyncio.ensure_future(storage.update(KEY, add(f"o{i}"))) for i in range(5)]
            await asyncio.sleep(0.05)
            await release()
            with anyio.fail_after(20):
                results = await asyncio.gather(*others, return_exceptions=True)
                first_outcome = await asyncio.gather(first, return_exceptions=True)
                await blocked
        for index, result in enumerate(results):
            assert isinstance(result, dict), f"writer o{index} got {result!r}"
            assert result[f"o{index}"] == 1
        assert first_outcome[0] != {"never": "returned"}  # cancelled or not: either is fine
        stored = await storage.get(KEY)
        assert {"seed", "blocked", "o0", "o1", "o2", "o3", "o4"} <= set(stored)
    finally:
        await storage.aclose()
        if kind == "postgres":
            async with await open_storage(url) as cleanup:
                await cleanup.drop_table()  # type: ignore[attr-defined]


@pytest.mark.asyncio
async def test_a_write_timeout_on_one_run_spares_the_tool_updates_of_the_others(
    tmp_path: Path,
) -> None:
    """The layer's own ``write_timeout`` on one execution, with SQLite's writer held by
    another process, fails that execution's update alone: the updates of executions of
    another harness layer sharing the storage all land, each with its UpdateApplied."""
    path = tmp_path / "t.db"
    url = f"sqlite:///{path}"
    patient = AgentHarness(
        name="patient",
        agent=Agent(model=ScriptedModel([])),
        params={},
        context_layers=[scratchpad()],
        storage=url,
    )
    async with patient:
        hasty = AgentHarness(
            name="hasty",
            agent=Agent(model=ScriptedModel([])),
            params={},
            context_layers=[scratchpad(write_timeout=0.2)],
            storage=patient.storage,  # the same writer, the same transactions
        )
        with capture_events(patient.events) as events:
            async with write_lock_held(path, "elsewhere") as lock:
                hasty_write = asyncio.ensure_future(
                    hasty.update_state("scratchpad", {"hasty": 1}, thread_id="t1")
                )
                writes = [
                    asyncio.ensure_future(
                        patient.update_state("scratchpad", {f"p{i}": 1}, thread_id="t1")
                    )
                    for i in range(5)
                ]
                await asyncio.sleep(0.5)  # the hasty write has timed out by now
                assert hasty_write.done()
                await lock.release()
            await asyncio.gather(*writes)
        with pytest.raises(Exception, match="may have been saved or not"):
            hasty_write.result()
        state = await patient.storage.get(state_key("scratchpad", "thread", "t1"))
        assert {f"p{i}" for i in range(5)} <= set(state)
        assert len(events.of(UpdateApplied)) == 5
