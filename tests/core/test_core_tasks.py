"""The core's task group: the bus's async handlers and the backend's write workers run in
it from ``open`` to ``aclose``, which joins them; nothing of the library runs after."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import anyio
import pytest

from noetic_scratchpad import EventBus, StateDiscarded
from noetic_scratchpad.core import ScratchpadCore
from noetic_scratchpad.events import CLOSE_GRACE, ScratchpadEvent
from noetic_scratchpad.storage import MemoryStorage
from noetic_scratchpad.storage.sqlite.writer import SqliteWriter


def discarded() -> StateDiscarded:
    return StateDiscarded(layer_id="l", scope_key="k", reason="test")


@pytest.mark.anyio
async def test_aclose_joins_a_handler_that_outlasts_the_bus(anyio_backend: str) -> None:
    """A handler that shields its cleanup past the bus's wait is no longer waited for by
    the bus, but the core's group still joins it: when ``aclose`` returns it has ended."""
    ended: list[str] = []

    async def handler(event: ScratchpadEvent) -> None:
        try:
            await anyio.sleep(10)
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.sleep(CLOSE_GRACE + 0.2)  # past handler_timeout + CLOSE_GRACE
            ended.append("ended")

    core = ScratchpadCore(storage=MemoryStorage(), events=EventBus(handler_timeout=0.05))
    core.events.subscribe(handler)
    with anyio.fail_after(10):
        async with core:
            core.events.emit(discarded())
            await anyio.sleep(0.01)
    assert ended == ["ended"]


@pytest.mark.anyio
async def test_the_groups_cancellation_keeps_a_handlers_shield(
    anyio_backend: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A handler whose shielded cleanup is under way when the core's group gives up waiting
    and cancels it keeps its shield, as a task of the group's own would (on asyncio the
    handler is an asyncio task the group's keeper answers for: ``task.cancel()`` would
    cut the cleanup short, unlogged). Past the group's second wait it is left running,
    logged; it ends when its cleanup does."""
    inside, go, finished = anyio.Event(), anyio.Event(), anyio.Event()
    ended: list[str] = []

    async def handler(event: ScratchpadEvent) -> None:
        try:
            await anyio.sleep_forever()
        finally:
            try:
                with anyio.CancelScope(shield=True):  # entered on the bus's timeout
                    inside.set()
                    await go.wait()  # set only once aclose has returned
                ended.append("ended")
            finally:
                finished.set()

    core = ScratchpadCore(storage=MemoryStorage(), events=EventBus(handler_timeout=0.01))
    core.events.subscribe(handler)
    core._group.grace = 0.01  # the group's two waits, short: the handler outlasts both
    with anyio.fail_after(10), caplog.at_level(logging.ERROR, "noetic_scratchpad"):
        async with core:
            core.events.emit(discarded())
            await inside.wait()
        assert "ignored their cancellation" in caplog.text
        assert not finished.is_set()  # still in its shielded cleanup, not cancelled there
        go.set()
        await finished.wait()
    assert ended == ["ended"]


@pytest.mark.asyncio
async def test_no_task_of_the_library_runs_after_aclose(tmp_path: Path) -> None:
    """Opened in one task, written by others, closed in another: while open, the bus and
    the backend run their work in the core's group; after ``aclose`` no task is left."""
    core = ScratchpadCore(storage=f"sqlite:///{tmp_path / 'notes.db'}")
    handled: list[str] = []

    async def handler(event: ScratchpadEvent) -> None:
        await asyncio.sleep(0)
        handled.append(event.kind)

    core.events.subscribe(handler)
    await asyncio.create_task(core.open())
    assert core.events.tasks.lent
    assert core.backend.tasks.lent  # type: ignore[attr-defined]

    async def write(n: int) -> None:
        await (await core.handle(f"t{n}", read=False)).update({"goal": f"g{n}"})

    await asyncio.gather(*(write(n) for n in range(5)))
    for n in range(5):
        await write(n)
    await asyncio.create_task(core.aclose())
    assert handled.count("update_applied") == 10
    assert asyncio.all_tasks() == {asyncio.current_task()}
    assert not core.events.tasks.lent

    async with core:  # opened again: a new group
        await write(9)
        assert core.backend.tasks.lent  # type: ignore[attr-defined]
    assert asyncio.all_tasks() == {asyncio.current_task()}


@pytest.mark.asyncio
async def test_a_failing_write_worker_is_logged_and_the_next_burst_runs(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker that raises after its burst (a bug) is logged by the core's group, which
    goes on: the next write still commits. (Each burst is two writes at once: an idle
    writer runs the first alone, and the worker the one queued behind it.)"""
    original = SqliteWriter._work
    bursts: list[int] = []

    async def broken(self: SqliteWriter) -> None:
        bursts.append(1)
        await original(self)
        if len(bursts) == 2:
            raise RuntimeError("boom")

    monkeypatch.setattr(SqliteWriter, "_work", broken)
    async with ScratchpadCore(storage=f"sqlite:///{tmp_path / 'notes.db'}") as core:
        handle = await core.handle("t", read=False)

        async def burst(goal: str) -> None:
            await asyncio.gather(handle.update({"first": goal}), handle.update({"goal": goal}))

        with caplog.at_level(logging.ERROR, "noetic_scratchpad"), anyio.fail_after(5):
            await burst("one")
            await burst("two")
            await asyncio.sleep(0.01)
            await burst("three")
        assert "background task failed" in caplog.text
        assert len(bursts) == 3
        assert (await core.handle("t")).snapshot == {"first": "three", "goal": "three"}


@pytest.mark.asyncio
async def test_a_backend_shared_by_two_cores_stays_with_the_first(tmp_path: Path) -> None:
    """A borrowed backend keeps the group of the core that lent it first; closing that
    core ends the lending, and the backend keeps working."""
    from noetic_scratchpad.storage import open_storage

    backend = await open_storage(f"sqlite:///{tmp_path / 'notes.db'}")
    try:
        first, second = ScratchpadCore(storage=backend), ScratchpadCore(storage=backend)
        async with first:
            async with second:
                assert backend.tasks.lent  # type: ignore[attr-defined]
                await (await second.handle("t", read=False)).update({"goal": "a"})
            assert backend.tasks.lent  # type: ignore[attr-defined]  # still the first's
            await (await first.handle("t", read=False)).update({"goal": "b"})
        assert not backend.tasks.lent  # type: ignore[attr-defined]
        await backend.set("k", {"n": 1})
        assert await backend.get("k") == {"n": 1}
    finally:
        await backend.aclose()


def test_a_core_serves_several_event_loops(tmp_path: Path) -> None:
    """Each ``asyncio.run`` ends the group of its loop; the next one opens a new group."""
    core = ScratchpadCore(storage=f"sqlite:///{tmp_path / 'notes.db'}")

    async def write(goal: str) -> None:
        await (await core.handle("t", read=False)).update({"goal": goal})
        assert core.backend.tasks.lent  # type: ignore[attr-defined]

    asyncio.run(write("one"))
    asyncio.run(write("two"))

    async def read_and_close() -> object:
        try:
            return (await core.handle("t")).snapshot
        finally:
            await core.aclose()

    assert asyncio.run(read_and_close()) == {"goal": "two"}
