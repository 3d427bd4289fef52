"""Repeated call ids, one rule on every path (issue 23, item 4; issue 25, item 5).

A call id met again with the same arguments is a retry: nothing is written, the caller gets
the first call's result and an ``UpdateRetried`` event says so. Met again with other
arguments it is a new call (some runtimes number their calls ``call_0`` in every turn):
it is applied, and its ``UpdateApplied`` says the id was reused. Nothing is skipped
without an event.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from noetic_scratchpad import (
    ScratchpadHandle,
    UpdateApplied,
    UpdateRejected,
    UpdateRetried,
    open_storage,
    scratchpad,
)
from noetic_scratchpad.errors import StorageError
from noetic_scratchpad.events import EventBus
from noetic_scratchpad.items import FunctionCall
from noetic_scratchpad.storage import MemoryStorage, StorageBackend
from noetic_scratchpad.testing import FaultyStorage, capture_events

from .conftest import Bind

#: Every async test runs twice: on asyncio and under trio (``anyio_backend`` in conftest).
pytestmark = pytest.mark.anyio


def call(call_id: str, name: str = "scratchpad/update", **values: Any) -> FunctionCall:
    return FunctionCall(call_id=call_id, name=name, arguments=json.dumps(values))


# -- the store hook -------------------------------------------------------------------------


async def test_store_applies_call_0_of_every_turn(bind: Bind) -> None:
    """The issue's repro: a runtime numbers its calls ``call_0``, ``call_1`` in every turn.
    The second turn's calls are new calls: applied, their events noting the reused id."""
    scope = await bind(scratchpad())
    turns = [
        [call("call_0", goal="fix login"), call("call_1", a=1)],
        [call("call_0", blockers=["no staging"]), call("call_1", b=2)],
    ]

    with capture_events(scope.ctx.events) as events:
        for items in turns:
            await scope.layer.hooks.store(new_items=items, state=scope.initial, ctx=scope.ctx)

    assert await scope.stored() == {"goal": "fix login", "a": 1, "blockers": ["no staging"], "b": 2}
    applied = events.of(UpdateApplied)
    assert [(e.call_id, e.keys, e.reused_call_id, e.revision) for e in applied] == [
        ("call_0", ("goal",), False, 1),
        ("call_1", ("a",), False, 2),
        ("call_0", ("blockers",), True, 3),
        ("call_1", ("b",), True, 4),
    ]
    assert events.of(UpdateRetried) == []


async def test_store_applies_one_id_twice_in_a_response_with_other_arguments(bind: Bind) -> None:
    scope = await bind(scratchpad())
    items = [call("c1", goal="g"), call("c1", n=1)]

    with capture_events(scope.ctx.events) as events:
        result = await scope.layer.hooks.store(new_items=items, state="", ctx=scope.ctx)

    assert result is not None
    assert result.state == {"goal": "g", "n": 1}
    assert await scope.stored() == {"goal": "g", "n": 1}
    assert [(e.keys, e.reused_call_id) for e in events.of(UpdateApplied)] == [
        (("goal",), False),
        (("n",), True),
    ]


async def test_store_retries_write_once_and_say_so(bind: Bind) -> None:
    """The same call twice in a response, and the response stored again: applied once;
    each repeat is an ``UpdateRetried`` naming the revision the first call made."""
    scope = await bind(scratchpad())
    items = [call("c1", steps=["a"]), call("c1", steps=["a"]), call("c2", n=1)]

    with capture_events(scope.ctx.events) as events:
        first = await scope.layer.hooks.store(new_items=items, state="", ctx=scope.ctx)
        second = await scope.layer.hooks.store(new_items=items, state="", ctx=scope.ctx)

    assert first is not None
    assert first.state == {"steps": ["a"], "n": 1}
    assert second is None  # nothing was written
    assert scope.handle.revision == 2
    assert [e.call_id for e in events.of(UpdateApplied)] == ["c1", "c2"]
    retried = events.of(UpdateRetried)
    assert [(e.call_id, e.source, e.keys, e.revision) for e in retried] == [
        ("c1", "store", ("steps",), 1),
        ("c1", "store", ("steps",), 1),
        ("c1", "store", ("steps",), 1),
        ("c2", "store", ("n",), 2),
    ]
    assert len(await scope.handle.history()) == 2


async def test_store_retries_a_call_the_tool_path_applied(bind: Bind) -> None:
    """A host that runs the call through ``handle.call`` and then hands the response to
    ``store``: the store hook finds a retry and writes nothing."""
    scope = await bind(scratchpad())
    item = call("c1", goal="g")
    await scope.handle.call("update", item.arguments, call_id="c1")

    with capture_events(scope.ctx.events) as events:
        result = await scope.layer.hooks.store(new_items=[item], state="", ctx=scope.ctx)

    assert result is None
    assert scope.handle.revision == 1
    assert [(e.source, e.revision) for e in events.of(UpdateRetried)] == [("store", 1)]


# -- handle.call ----------------------------------------------------------------------------


async def test_handle_call_with_an_applied_call_id_and_arguments_writes_once() -> None:
    """Issue 25: ``handle.call`` with a call id it already applied applied it again (two
    ``c1`` entries in the journal). A retry returns the first result and writes nothing."""
    handle = await scratchpad().open(MemoryStorage(), thread_id="t1")
    with capture_events(handle.ctx.events) as events:
        first = await handle.call("update", '{"steps": ["x"]}', call_id="c1")
        again = await handle.call("update", '{ "steps" : ["x"] }', call_id="c1")

    assert first == again == "Scratchpad updated (steps)."
    assert handle.revision == 1
    assert [entry.call_id for entry in await handle.history()] == ["c1"]
    assert [e.revision for e in events.of(UpdateApplied)] == [1]
    assert [(e.source, e.call_id, e.revision) for e in events.of(UpdateRetried)] == [
        ("tool", "c1", 1)
    ]


async def test_handle_call_with_a_reused_id_and_other_arguments_applies_it() -> None:
    handle = await scratchpad().open(MemoryStorage(), thread_id="t1")
    with capture_events(handle.ctx.events) as events:
        await handle.call("update", '{"goal": "a"}', call_id="call_0")
        await handle.call("update", '{"goal": "b"}', call_id="call_0")
        # A retry of the second call: it is known by its own arguments.
        await handle.call("update", '{"goal": "b"}', call_id="call_0")

    assert handle.snapshot == {"goal": "b"}
    assert [(e.call_id, e.source) for e in await handle.history()] == [
        ("call_0", "tool"),
        ("call_0", "tool"),
    ]
    applied = events.of(UpdateApplied)
    assert [(e.revision, e.reused_call_id) for e in applied] == [(1, False), (2, True)]
    assert [e.revision for e in events.of(UpdateRetried)] == [2]


async def test_an_update_and_an_edit_under_one_id_are_two_calls() -> None:
    handle = await scratchpad(edit_tool=True).open(MemoryStorage(), thread_id="t1")
    operations = [
        {"op": "set", "path": ["n"], "value_json": "1", "values_json": None, "index": None}
    ]
    with capture_events(handle.ctx.events) as events:
        await handle.call("update", {"operations": operations}, call_id="c1")
        await handle.call("edit", {"operations": operations}, call_id="c1")

    assert handle.revision == 2
    assert [e.reused_call_id for e in events.of(UpdateApplied)] == [False, True]


async def test_a_refused_call_is_not_remembered() -> None:
    """Only an applied call makes its repeats retries: a call the schema refused is
    refused again, with its event, and the same id then carries a new call."""
    from pydantic import BaseModel, ConfigDict

    class Notes(BaseModel):
        model_config = ConfigDict(extra="forbid")
        goal: str

    handle = await scratchpad(schema=Notes).open(MemoryStorage(), thread_id="t1")
    with capture_events(handle.ctx.events) as events:
        for _ in range(2):
            with pytest.raises(Exception, match="schema"):
                await handle.call("update", '{"goal": 3}', call_id="c1")
        await handle.call("update", '{"goal": "g"}', call_id="c1")

    assert [e.reason for e in events.of(UpdateRejected)] == ["schema", "schema"]
    assert [(e.revision, e.reused_call_id) for e in events.of(UpdateApplied)] == [(1, False)]
    assert events.of(UpdateRetried) == []


async def test_call_ids_are_per_scope() -> None:
    """The same id on another thread is another call."""
    backend = MemoryStorage()
    bus = EventBus()
    one = await scratchpad().open(backend, thread_id="t1", events=bus)
    two = await scratchpad().open(backend, thread_id="t2", events=bus)
    with capture_events(bus) as events:
        await one.call("update", '{"a": 1}', call_id="c1")
        await two.call("update", '{"a": 1}', call_id="c1")

    assert [e.reused_call_id for e in events.of(UpdateApplied)] == [False, False]
    assert events.of(UpdateRetried) == []


async def test_a_retry_through_another_handle_on_the_scope_writes_nothing() -> None:
    """A run's handle is new (pydantic-ai opens one per run); the memory of applied calls
    is the scope's, in this process, not the handle's."""
    backend = MemoryStorage()
    first = await scratchpad().open(backend, thread_id="t1")
    await first.call("update", '{"a": 1}', call_id="c1")
    second = await scratchpad().open(backend, thread_id="t1")
    with capture_events(second.ctx.events) as events:
        await second.call("update", '{"a": 1}', call_id="c1")

    assert [e.revision for e in events.of(UpdateRetried)] == [1]
    assert (await second.refresh(), second.revision) == ({"a": 1}, 1)


async def test_the_memory_of_call_ids_is_bounded() -> None:
    """Past its bound, the oldest call ids are forgotten (and applied again if repeated)."""
    from noetic_scratchpad.layer.writer import MAX_REMEMBERED_CALLS

    handle = await scratchpad().open(MemoryStorage(), thread_id="t1")
    for n in range(MAX_REMEMBERED_CALLS + 1):
        await handle.call("update", '{"a": 1}', call_id=f"c{n}")
    with capture_events(handle.ctx.events) as events:
        await handle.call("update", '{"a": 1}', call_id="c1")  # still known: a retry
        await handle.call("update", '{"a": 1}', call_id="c0")  # forgotten: applied again

    assert [e.call_id for e in events.of(UpdateRetried)] == ["c1"]
    assert [e.call_id for e in events.of(UpdateApplied)] == ["c0"]


# -- racing tasks ---------------------------------------------------------------------------


async def _race(backend: StorageBackend, *, tasks: int, shared_handle: bool) -> None:
    """``tasks`` tasks send the same call (id and arguments) at once: exactly one applies;
    every task gets the first result; the others are retries naming its revision."""
    bus = EventBus()
    layer = scratchpad()
    shared = await layer.open(backend, thread_id="t1", events=bus)
    handles: list[ScratchpadHandle] = [
        shared if shared_handle else await layer.open(backend, thread_id="t1", events=bus)
        for _ in range(tasks)
    ]
    outputs: list[str] = []

    async def send(handle: ScratchpadHandle) -> None:
        outputs.append(await handle.call("update", '{"steps": ["once"]}', call_id="c1"))

    with capture_events(bus) as events:
        async with anyio.create_task_group() as group:
            for handle in handles:
                group.start_soon(send, handle)

    assert outputs == ["Scratchpad updated (steps)."] * tasks
    (applied,) = events.of(UpdateApplied)
    assert applied.revision == 1
    retried = events.of(UpdateRetried)
    assert len(retried) == tasks - 1
    assert {e.revision for e in retried} == {1}
    assert (await shared.refresh(), shared.revision) == ({"steps": ["once"]}, 1)
    assert len(await shared.history()) == 1


@pytest.mark.parametrize("shared_handle", [True, False], ids=["one-handle", "many-handles"])
async def test_racing_retries_apply_once_on_memory(shared_handle: bool) -> None:
    await _race(MemoryStorage(), tasks=50, shared_handle=shared_handle)


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.parametrize("shared_handle", [True, False], ids=["one-handle", "many-handles"])
async def test_racing_retries_apply_once_on_sqlite(tmp_path: Path, shared_handle: bool) -> None:
    async with await open_storage(f"sqlite:///{tmp_path / 'race.db'}") as backend:
        await _race(backend, tasks=50, shared_handle=shared_handle)


async def test_a_retry_waiting_for_a_cancelled_first_call_applies_it() -> None:
    """The first of two identical calls hangs in storage, the second waits for it; the
    first is cancelled before it lands: the second is not told "retry" for a write that
    never happened, it applies the call."""
    faulty = FaultyStorage(MemoryStorage(), stall_on={"commit"}, faults=1)
    handle = await scratchpad().open(faulty, thread_id="t1")
    outputs: list[str] = []

    async def second() -> None:
        outputs.append(await handle.call("update", '{"a": 1}', call_id="c1"))

    with capture_events(handle.ctx.events) as events:
        async with anyio.create_task_group() as group:
            group.start_soon(second)
            with anyio.move_on_after(0.2):  # the first call stalls in its commit: cut off
                await handle.call("update", '{"a": 1}', call_id="c1")
            assert outputs == []  # the second waited for the first
            faulty.release()

    assert outputs == ["Scratchpad updated (a)."]
    assert [e.revision for e in events.of(UpdateApplied)] == [1]
    assert events.of(UpdateRetried) == []


async def test_a_retry_waiting_for_a_failed_first_call_applies_it() -> None:
    """The first call fails in storage while an identical one waits: the waiting one
    applies it (one ``UpdateRejected``, one ``UpdateApplied``)."""
    # The commit fails inside the backend's write, after the second call has started.
    faulty = FaultyStorage(MemoryStorage(), fail_on={"commit"}, faults=1)
    handle = await scratchpad().open(faulty, thread_id="t1")
    results: list[str | BaseException] = []

    async def send() -> None:
        try:
            results.append(await handle.call("update", '{"a": 1}', call_id="c1"))
        except StorageError as exc:
            results.append(exc)

    with capture_events(handle.ctx.events) as events:
        async with anyio.create_task_group() as group:
            group.start_soon(send)
            group.start_soon(send)

    assert [type(result).__name__ for result in results] == ["StorageError", "str"]
    assert [e.reason for e in events.of(UpdateRejected)] == ["storage"]
    assert [e.revision for e in events.of(UpdateApplied)] == [1]


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_asyncio_cancellation_of_a_call_or_its_retry_leaves_no_claim_behind() -> None:
    """Native asyncio cancellation: the first call cut off by ``asyncio.timeout`` while it
    stalls in storage, a waiting retry cancelled by ``task.cancel()``; a third identical
    call then applies, once."""
    faulty = FaultyStorage(MemoryStorage(), stall_on={"commit"}, faults=1)
    handle = await scratchpad().open(faulty, thread_id="t1")
    waiting = asyncio.create_task(handle.call("update", '{"a": 1}', call_id="c1"))

    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.2):
            await handle.call("update", '{"a": 1}', call_id="c1")
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    faulty.release()

    with capture_events(handle.ctx.events) as events:
        output = await handle.call("update", '{"a": 1}', call_id="c1")
        again = await handle.call("update", '{"a": 1}', call_id="c1")

    assert output == again == "Scratchpad updated (a)."
    assert [e.revision for e in events.of(UpdateApplied)] == [1]
    assert len(events.of(UpdateRetried)) == 1


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_racing_retries_on_scopes_of_both_kinds_with_another_connection_writing(
    tmp_path: Path,
) -> None:
    """One call id, the same arguments, ten tasks on each of four scopes (two threads, two
    resources of the same ids) while another connection to the file writes those scopes'
    neighbours: each scope applies the call once, and the other writer loses nothing."""
    url = f"sqlite:///{tmp_path / 'race.db'}"
    async with await open_storage(url) as backend, await open_storage(url) as other:
        layer, resources = scratchpad(), scratchpad(scope="resource")
        handles = [
            await layer.open(backend, thread_id="a"),
            await layer.open(backend, thread_id="b"),
            await resources.open(backend, thread_id="x", resource_id="a"),
            await resources.open(backend, thread_id="x", resource_id="b"),
        ]
        neighbour = await layer.open(other, thread_id="n")

        async def send(handle: ScratchpadHandle) -> None:
            await handle.call("update", '{"steps": ["once"]}', call_id="c1")

        async def write_between() -> None:
            for turn in range(20):
                await neighbour.update({"turn": turn})

        async with anyio.create_task_group() as group:
            group.start_soon(write_between)
            for handle in handles:
                for _ in range(10):
                    group.start_soon(send, handle)

        for handle in handles:
            assert (await handle.refresh(), handle.revision) == ({"steps": ["once"]}, 1)
        assert (await neighbour.refresh(), neighbour.revision) == ({"turn": 19}, 20)
