"""A write prepared on the event loop (SQLite): the transition runs there, on the state the
writer last stored, and the writer's thread only checks that this very state is still
stored. When another connection wrote in between, the transition runs again on what is
stored, and only that run counts: its refusal, its result, its record.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict

from noetic_scratchpad import ScratchpadConflictError, ScratchpadUpdateError, open_storage
from noetic_scratchpad import scratchpad as make_layer
from noetic_scratchpad.events import UpdateRejected
from noetic_scratchpad.layer.journal import MISSING
from noetic_scratchpad.layer.pipeline import UpdatePipeline
from noetic_scratchpad.layer.snapshot import latest_snapshots


class Notes(BaseModel):
    model_config = ConfigDict(extra="forbid")
    goal: str = ""
    notes: str = ""
    count: int = 0


@pytest.fixture
def runs(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Per transition run: whether it ran on the main thread (the event loop's)."""
    seen: list[bool] = []
    transition = UpdatePipeline.transition

    def spy(self: UpdatePipeline, *args: Any, **kwargs: Any) -> Any:
        seen.append(threading.current_thread() is threading.main_thread())
        return transition(self, *args, **kwargs)

    monkeypatch.setattr(UpdatePipeline, "transition", spy)
    return seen


def _url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'p.db'}"


@pytest.mark.asyncio
async def test_a_write_on_the_state_it_wrote_runs_its_transition_on_the_loop(
    tmp_path: Path, runs: list[bool]
) -> None:
    backend = await open_storage(_url(tmp_path))
    try:
        handle = await make_layer(schema=Notes).open(backend, thread_id="t1")
        await handle.update({"goal": "a"})  # on a state it did not write: in the thread
        runs.clear()
        await handle.update({"count": 1})
        await handle.update({"count": 2})
        assert runs == [True, True]
        assert (handle.state, handle.revision) == ({"goal": "a", "count": 2}, 3)
        reopened = await make_layer(schema=Notes).open(backend, thread_id="t1")
        assert (reopened.state, reopened.revision) == ({"goal": "a", "count": 2}, 3)
        history = await reopened.history(limit=2)
        assert [(entry.revision, entry.changes) for entry in history] == [
            (3, {"count": (1, 2)}),
            (2, {"count": (MISSING, 1)}),
        ]
    finally:
        await backend.aclose()


@pytest.mark.asyncio
async def test_a_write_after_another_connections_runs_again_on_what_is_stored(
    tmp_path: Path, runs: list[bool]
) -> None:
    """The prepared result is made on the handle's base; another connection (another
    process's, as far as this writer knows) wrote since, so it is dropped, and the
    transition runs in the writer's thread on the stored state. Nothing is lost, and the
    dropped result is not recorded as this process's latest snapshot."""
    first, second = await open_storage(_url(tmp_path)), await open_storage(_url(tmp_path))
    try:
        layer = make_layer(schema=Notes)
        mine = await layer.open(first, thread_id="t1")
        await mine.update({"goal": "a"})
        await mine.update({"count": 1})
        other = await layer.open(second, thread_id="t1")
        await other.update({"notes": "from elsewhere"})
        runs.clear()
        await mine.update({"count": 2})
        assert runs == [True, False]  # prepared on the loop, then run on what is stored
        expected = {"goal": "a", "notes": "from elsewhere", "count": 2}
        assert (mine.state, mine.revision) == (expected, 4)
        stored = await layer.open(second, thread_id="t1")
        assert (stored.state, stored.revision) == (expected, 4)
        history = await stored.history(limit=3)
        assert [(entry.revision, entry.changes) for entry in history] == [
            (4, {"count": (1, 2)}),  # the change from what was stored, not from the base
            (3, {"notes": (MISSING, "from elsewhere")}),
            (2, {"count": (MISSING, 1)}),
        ]
        latest = latest_snapshots(first)._snapshots  # what was recorded
        assert [(snapshot.state, snapshot.revision) for _, snapshot in latest.values()] == [
            (expected, 4)
        ]
    finally:
        await first.aclose()
        await second.aclose()


@pytest.mark.asyncio
async def test_a_refusal_found_on_a_stale_base_is_not_reported(
    tmp_path: Path, runs: list[bool]
) -> None:
    """On the base, the update would pass ``max_state_bytes``; another connection has
    since shrunk the stored state, on which it fits: it is applied, and nothing is
    rejected."""
    first, second = await open_storage(_url(tmp_path)), await open_storage(_url(tmp_path))
    try:
        layer = make_layer(schema=Notes, max_state_bytes=300)
        mine = await layer.open(first, thread_id="t1")
        rejected: list[UpdateRejected] = []
        mine.ctx.events.subscribe(rejected.append)
        await mine.update({"goal": "g" * 150})
        await mine.update({"count": 1})
        other = await layer.open(second, thread_id="t1")
        await other.update({"goal": ""})
        runs.clear()
        await mine.update({"notes": "n" * 150})
        assert runs == [True, False]
        assert (mine.state, mine.revision) == ({"goal": "", "notes": "n" * 150, "count": 1}, 4)
        assert [event for event in rejected if isinstance(event, UpdateRejected)] == []
    finally:
        await first.aclose()
        await second.aclose()


@pytest.mark.asyncio
async def test_a_pass_found_on_a_stale_base_is_not_taken(tmp_path: Path, runs: list[bool]) -> None:
    """The reverse: the update fits the base, but not the state another connection stored
    since; it is refused, nothing is written, and the prepared state is recorded nowhere."""
    first, second = await open_storage(_url(tmp_path)), await open_storage(_url(tmp_path))
    try:
        layer = make_layer(schema=Notes, max_state_bytes=300)
        mine = await layer.open(first, thread_id="t1")
        await mine.update({"goal": "a"})
        await mine.update({"count": 1})
        other = await layer.open(second, thread_id="t1")
        await other.update({"goal": "g" * 150})
        runs.clear()
        with pytest.raises(ScratchpadUpdateError):
            await mine.update({"notes": "n" * 150})
        assert runs == [True, False]
        stored = await layer.open(second, thread_id="t1")
        assert (stored.state, stored.revision) == ({"goal": "g" * 150, "count": 1}, 3)
        latest = latest_snapshots(first)._snapshots  # what was recorded
        assert [snapshot.revision for _, snapshot in latest.values()] == [2]
    finally:
        await first.aclose()
        await second.aclose()


@pytest.mark.asyncio
async def test_an_expected_revision_is_checked_against_what_is_stored(
    tmp_path: Path, runs: list[bool]
) -> None:
    first, second = await open_storage(_url(tmp_path)), await open_storage(_url(tmp_path))
    try:
        layer = make_layer(schema=Notes)
        mine = await layer.open(first, thread_id="t1")
        await mine.update({"goal": "a"})
        await mine.update({"count": 1})
        other = await layer.open(second, thread_id="t1")
        await other.update({"count": 5})
        with pytest.raises(ScratchpadConflictError):
            await mine.update({"count": 2}, expected_revision=2)
        stored = await layer.open(second, thread_id="t1")
        assert (stored.state, stored.revision) == ({"goal": "a", "count": 5}, 3)
    finally:
        await first.aclose()
        await second.aclose()


@pytest.mark.asyncio
async def test_writes_of_one_scope_in_one_batch_build_on_each_other(tmp_path: Path) -> None:
    """Several handles' writes to one scope share a transaction: the first may take its
    prepared result; each later one finds the earlier one's state, not its base, so it
    runs on that one."""
    backend = await open_storage(_url(tmp_path))
    try:
        layer = make_layer(schema=Notes)
        handles = [await layer.open(backend, thread_id="t1") for _ in range(5)]
        await handles[0].update({"goal": "a"})
        for handle in handles[1:]:
            await handle.update({"count": 0})
        for _ in range(3):
            await asyncio.gather(
                *(handle.update({"notes": f"{i}"}) for i, handle in enumerate(handles))
            )
        final = await layer.open(backend, thread_id="t1")
        assert final.revision == 5 + 15
        history = await final.history(limit=20)
        assert [entry.revision for entry in history] == list(range(20, 0, -1))
        assert all(entry.changes is not None for entry in history)
    finally:
        await backend.aclose()
