"""The snapshot a handle keeps, and what it spares the next write.

A handle's ``current`` is one immutable :class:`Snapshot`: the state, its revision, its
JSON, whether it fits the schema, whether it holds floats. A write starts from it and
returns the next one; a stored state is checked against the schema again only when
nothing in this process knows it.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict

from noetic_scratchpad import ExecutionContext, ScopedStorage, _json, open_storage, scratchpad
from noetic_scratchpad.layer.snapshot import (
    MAX_LATEST_SCOPES,
    LatestSnapshots,
    Snapshot,
    latest_snapshots,
)
from noetic_scratchpad.schema import SchemaGate
from noetic_scratchpad.storage import MemoryStorage, StorageBackend


class Notes(BaseModel):
    model_config = ConfigDict(extra="forbid")
    goal: str = ""
    count: int = 0
    ratio: float = 0.0


class Acks(BaseModel):
    model_config = ConfigDict(extra="forbid")
    goal: str = ""
    acks: dict[str, int] = {}


@pytest.fixture
def checks(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every state the layer validates as a whole (validation passes)."""
    seen: list[Any] = []
    monkeypatch.setattr(SchemaGate, "errors", lambda gate, state: seen.append(state) or [])
    return seen


async def _backend(kind: str, tmp_path: Path) -> StorageBackend:
    return await open_storage("memory://" if kind == "memory" else f"sqlite:///{tmp_path / 'p.db'}")


@pytest.mark.asyncio
@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_the_handle_keeps_one_snapshot_of_what_it_wrote(kind: str, tmp_path: Path) -> None:
    """After a write, ``current`` is the stored state at its revision, validated, with its
    JSON; ``state`` and ``revision`` read from it, and ``snapshot`` is a copy of it."""
    backend = await _backend(kind, tmp_path)
    try:
        handle = await scratchpad(schema=Notes).open(backend, thread_id="t1")
        before = handle.current
        assert before == Snapshot({}, 0)
        await handle.update({"goal": "ship", "count": 1})

        current = handle.current
        assert current is not before
        assert (current.state, current.revision) == ({"goal": "ship", "count": 1}, 1)
        assert current.validated is True
        assert current.encoded == _json.dumps({"goal": "ship", "count": 1})
        assert current.has_floats is None or current.has_floats is False
        assert handle.state is current.state
        assert handle.revision == 1
        copied = handle.snapshot
        assert copied == current.state
        assert copied is not current.state
        with pytest.raises(AttributeError):
            current.revision = 5  # type: ignore[misc]
    finally:
        await backend.aclose()


@pytest.mark.asyncio
async def test_a_write_that_writes_nothing_keeps_the_snapshot() -> None:
    """An update with no key and a retried call leave ``current`` as it was."""
    handle = await scratchpad().open(MemoryStorage(), thread_id="t1")
    await handle.call("update", '{"goal": "a"}', call_id="c1")
    current = handle.current
    await handle.update({})
    await handle.call("update", '{"goal": "a"}', call_id="c1")
    assert handle.current is current


@pytest.mark.asyncio
async def test_a_loaded_state_that_was_discarded_is_not_taken_as_validated() -> None:
    """A stored state that fails the schema loads as the initial state at the stored
    revision, not validated: the next write checks what is stored again (and starts over
    from the initial state), rather than merging into it."""
    backend = MemoryStorage()
    layer = scratchpad(schema=Notes)
    storage = ScopedStorage(backend, layer.id, "t1")
    await storage.set("state", {"goal": "x", "count": "many"})
    handle = await layer.open(backend, thread_id="t1")
    assert (handle.current.state, handle.current.revision) == ({}, 1)
    assert handle.current.validated is False
    await handle.update({"goal": "again"})
    assert await storage.get("state") == {"goal": "again"}


@pytest.mark.asyncio
@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_handles_taking_turns_on_one_scope_do_not_check_each_others_states(
    kind: str, tmp_path: Path, checks: list[Any]
) -> None:
    """Two executions writing one scope in turn: each write finds the other's state
    stored, which this process made and checked, so it is not validated again."""
    backend = await _backend(kind, tmp_path)
    try:
        layer = scratchpad(schema=Notes)
        first = await layer.open(backend, thread_id="t1")
        second = await layer.open(backend, thread_id="t1")
        await first.update({"goal": "start"})
        checks.clear()
        for count in range(1, 7):
            await (first if count % 2 else second).update({"count": count})
        assert checks == []
        assert (second.state, second.revision) == ({"goal": "start", "count": 6}, 7)
    finally:
        await backend.aclose()


@pytest.mark.asyncio
@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_concurrent_writers_on_one_scope_check_no_state_they_made(
    kind: str, tmp_path: Path, checks: list[Any]
) -> None:
    """Twenty executions writing one scope at once (on SQLite, batched into shared
    transactions, each write running on the one before it): none checks the state another
    one made, and none is lost."""
    backend = await _backend(kind, tmp_path)
    try:
        layer = scratchpad(schema=Acks)
        handles = [await layer.open(backend, thread_id="t1") for _ in range(20)]
        await handles[0].update({"goal": "count"})
        checks.clear()
        await asyncio.gather(
            *(
                handle.update({"acks": {f"{i}.{j}": j}})
                for j in range(3)
                for i, handle in enumerate(handles)
            )
        )
        assert checks == []
        final = await layer.open(backend, thread_id="t1")
        assert len(final.state["acks"]) == 20 * 3
    finally:
        await backend.aclose()


@pytest.mark.asyncio
async def test_a_handle_without_storage_checks_the_hosts_state_once(checks: list[Any]) -> None:
    """The store hook without init writes to the state the host passed: checked at the
    first write (the host's), not at the next ones (the layer's own)."""
    layer = scratchpad(schema=Notes)
    ctx = ExecutionContext(thread_id="t1")
    handle = layer.bind(None, ctx, {"goal": "from the host"})
    await handle.update({"count": 1})
    assert checks == [{"goal": "from the host"}]
    await handle.update({"count": 2})
    await handle.update({"count": 3})
    assert len(checks) == 1
    assert (handle.state, handle.revision) == ({"goal": "from the host", "count": 3}, 0)


@pytest.mark.asyncio
async def test_recall_reads_the_float_hint_from_the_snapshot() -> None:
    """The renderer's float hint comes with the snapshot: a write that adds no float keeps
    what the last one knew; one that adds a float says nothing, and recall looks once."""
    layer = scratchpad()
    handle = await layer.open(MemoryStorage(), thread_id="t1")
    await handle.update({"a": 1})
    assert handle.floats_hint(handle.state) is False
    assert handle.current.has_floats is False
    await handle.update({"b": 2})
    assert handle.current.has_floats is False  # carried over, not looked up
    await handle.update({"ratio": 0.5})
    assert handle.current.has_floats is None
    assert handle.floats_hint(handle.state) is True
    assert handle.current.has_floats is True
    assert handle.floats_hint({"a": 1}) is None  # not the handle's state: the renderer looks


def test_latest_snapshots_know_a_state_only_at_its_revision_and_content() -> None:
    """A snapshot recorded before its write commits is trusted only for the state it holds
    at the revision it names, by the pipeline that made it: a write that failed after all
    and someone else's state at that revision are told apart."""
    latest = LatestSnapshots()
    maker, other = object(), object()
    made = Snapshot({"goal": "a"}, 4, validated=True)
    latest.record("scope", maker, made)
    assert latest.known("scope", maker, made.state, 4) is made
    assert latest.known("scope", maker, {"goal": "a"}, 4) is made  # a decoded copy
    assert latest.known("scope", maker, {"goal": "b"}, 4) is None  # another state at 4
    assert latest.known("scope", maker, made.state, 5) is None
    assert latest.known("scope", other, made.state, 4) is None  # another schema's
    assert latest.known("elsewhere", maker, made.state, 4) is None


def test_latest_snapshots_stay_within_their_bound() -> None:
    """Writes to more scopes than are remembered keep the most recent ones only."""
    latest = LatestSnapshots()
    maker = object()
    for scope in range(MAX_LATEST_SCOPES * 3):
        latest.record(f"s{scope}", maker, Snapshot({"n": scope}, 1, validated=True))
    assert len(latest) == MAX_LATEST_SCOPES
    newest = f"s{MAX_LATEST_SCOPES * 3 - 1}"
    assert latest.known(newest, maker, {"n": MAX_LATEST_SCOPES * 3 - 1}, 1) is not None
    assert latest.known("s0", maker, {"n": 0}, 1) is None


def test_latest_snapshots_are_per_backend() -> None:
    """Two backends' scopes of one name never share what is known of them."""
    first, second = MemoryStorage(), MemoryStorage()
    assert latest_snapshots(first) is latest_snapshots(first)
    assert latest_snapshots(first) is not latest_snapshots(second)
