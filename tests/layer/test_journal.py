"""Revisions, the journal, history, revert and conflict-checked writes, through the handle."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, ConfigDict

from noetic_scratchpad import (
    ScratchpadConfigError,
    ScratchpadConflictError,
    ScratchpadHistoryError,
    ScratchpadValidationError,
    UpdateApplied,
    UpdateRejected,
    scratchpad,
)
from noetic_scratchpad.keys import state_key
from noetic_scratchpad.layer.journal import MISSING
from noetic_scratchpad.storage import MemoryStorage
from noetic_scratchpad.testing import capture_events

#: Every async test runs twice: on asyncio and under trio (``anyio_backend`` in conftest).
pytestmark = pytest.mark.anyio

KEY = state_key("scratchpad", "thread", "t1")


class Notes(BaseModel):
    model_config = ConfigDict(extra="forbid")

    goal: str
    steps: list[str] = []


async def test_each_applied_write_advances_the_revision_and_says_so() -> None:
    handle = await scratchpad().open(MemoryStorage(), thread_id="t1")
    assert handle.revision == 0
    with capture_events(handle.ctx.events) as events:
        await handle.update({"goal": "a"})
        await handle.call("update", '{"steps": ["x"]}', call_id="c1")
    assert handle.revision == 2
    assert [event.revision for event in events.of(UpdateApplied)] == [1, 2]
    again = await scratchpad().open(handle.storage.backend, thread_id="t1")  # type: ignore[union-attr]
    assert again.revision == 2


async def test_history_says_who_wrote_what_newest_first() -> None:
    handle = await scratchpad().open(MemoryStorage(), thread_id="t1")
    await handle.update({"goal": "a", "steps": ["one"]})
    await handle.call("update", '{"steps": []}', call_id="c7")
    history = await handle.history()
    assert [entry.revision for entry in history] == [2, 1]
    newest, oldest = history
    assert (newest.source, newest.call_id, newest.keys) == ("tool", "c7", ("steps",))
    assert newest.update == {"steps": []}
    assert newest.changes == {"steps": (["one"], [])}
    assert oldest.source == "api"
    assert oldest.changes == {"goal": (MISSING, "a"), "steps": (MISSING, ["one"])}
    assert newest.written_at >= oldest.written_at > 0


async def test_a_bad_overwrite_is_undone_by_revert() -> None:
    handle = await scratchpad(schema=Notes).open(MemoryStorage(), thread_id="t1")
    await handle.update({"goal": "ship", "steps": ["tests", "docs"]})
    await handle.call("update", '{"steps": ["docs"]}')  # the model dropped an item
    with capture_events(handle.ctx.events) as events:
        await handle.revert(1)
    assert handle.snapshot == {"goal": "ship", "steps": ["tests", "docs"]}
    assert handle.revision == 3
    (applied,) = events.of(UpdateApplied)
    assert (applied.source, applied.keys, applied.revision) == ("revert", ("steps",), 3)
    newest = (await handle.history(limit=1))[0]
    assert newest.source == "revert"
    assert newest.update == {"revert": 1}
    # The revert is itself journaled: reverting it brings the bad overwrite back.
    await handle.revert(2)
    assert handle.snapshot == {"goal": "ship", "steps": ["docs"]}


async def test_revert_to_zero_gives_the_initial_state() -> None:
    handle = await scratchpad(template="# notes").open(MemoryStorage(), thread_id="t1")
    await handle.update({"notes": "# notes\n- a"})
    await handle.revert(0)
    assert handle.snapshot == "# notes"
    assert handle.revision == 2


async def test_revert_outside_the_kept_window_is_refused_and_reported() -> None:
    backend = MemoryStorage()
    handle = await scratchpad(history_limit=2).open(backend, thread_id="t1")
    for i in range(5):
        await handle.update({"n": i})
    before = await backend.get(KEY)
    for target in (1, 2, 9, -1):
        with capture_events(handle.ctx.events) as events, pytest.raises(ScratchpadHistoryError):
            await handle.revert(target)
        assert [event.reason for event in events.of(UpdateRejected)] == ["history"]
    assert await backend.get(KEY) == before
    await handle.revert(3)  # the oldest the two kept entries can rebuild
    assert handle.snapshot == {"n": 2}


async def test_a_revision_from_before_a_reset_cannot_be_restored() -> None:
    """Revisions go on across a reset, but the states before it are gone: reverting to one
    is refused (not taken for "nothing stored", which would give the initial state);
    revisions made since the reset revert as usual."""
    backend = MemoryStorage()
    handle = await scratchpad().open(backend, thread_id="t1")
    for i in range(3):
        await handle.update({"n": i})
    await backend.delete(KEY)
    await handle.refresh()
    await handle.update({"n": "after"})
    await handle.update({"n": "later"})
    assert handle.revision == 5
    for target in (3, 2, 1):
        with capture_events(handle.ctx.events) as events, pytest.raises(ScratchpadHistoryError):
            await handle.revert(target)
        assert [event.reason for event in events.of(UpdateRejected)] == ["history"]
    assert await backend.get(KEY) == {"n": "later"}
    await handle.revert(4)
    assert handle.snapshot == {"n": "after"}
    await handle.revert(0)
    assert handle.snapshot == ""


async def test_revert_checks_the_schema_gate() -> None:
    backend = MemoryStorage()
    handle = await scratchpad().open(backend, thread_id="t1")
    await handle.update({"goal": 1})  # written before the schema existed
    await handle.update({"goal": "fine"})
    strict = await scratchpad(schema=Notes).open(backend, thread_id="t1")
    with pytest.raises(ScratchpadValidationError):
        await strict.revert(1)
    assert await backend.get(KEY) == {"goal": "fine"}


async def test_a_stale_expected_revision_is_a_conflict_and_writes_nothing() -> None:
    backend = MemoryStorage()
    layer = scratchpad()
    editor = await layer.open(backend, thread_id="t1")
    agent = await layer.open(backend, thread_id="t1")
    await editor.update({"goal": "a"})
    await agent.update({"goal": "b"})  # the editor has not seen this one
    with capture_events(editor.ctx.events) as events, pytest.raises(ScratchpadConflictError) as e:
        await editor.update({"goal": "c"}, expected_revision=1)
    assert (e.value.expected, e.value.actual, e.value.reason) == (1, 2, "conflict")
    assert [event.reason for event in events.of(UpdateRejected)] == ["conflict"]
    assert await backend.get(KEY) == {"goal": "b"}
    await editor.update({"goal": "c"}, expected_revision=2)
    assert editor.revision == 3


async def test_refused_updates_journal_nothing() -> None:
    handle = await scratchpad(schema=Notes).open(MemoryStorage(), thread_id="t1")
    await handle.update({"goal": "a"})
    for bad in ({"steps": "x"}, {"goal": 1}):
        with pytest.raises(ScratchpadValidationError):
            await handle.update(bad)
    assert [entry.revision for entry in await handle.history()] == [1]
    assert handle.revision == 1


async def test_the_journal_keeps_history_limit_entries() -> None:
    handle = await scratchpad(history_limit=3).open(MemoryStorage(), thread_id="t1")
    for i in range(10):
        await handle.update({"n": i})
    assert [entry.revision for entry in await handle.history(limit=100)] == [10, 9, 8]


async def test_history_limit_zero_journals_nothing_but_counts_revisions() -> None:
    handle = await scratchpad(history_limit=0).open(MemoryStorage(), thread_id="t1")
    await handle.update({"n": 1})
    await handle.update({"n": 2})
    assert handle.revision == 2
    assert await handle.history() == []
    with pytest.raises(ScratchpadHistoryError):
        await handle.revert(1)


async def test_a_first_write_over_nothing_stored_is_journaled_whole() -> None:
    handle = await scratchpad(template="draft").open(MemoryStorage(), thread_id="t1")
    await handle.update({"notes": "a"})
    (entry,) = await handle.history()
    assert entry.replaced
    assert entry.update == {"notes": "a"}
    assert entry.changes is not None


@pytest.mark.parametrize("limit", [-1, 1.5, True, "10", 2**63])
async def test_a_bad_history_limit_is_refused_at_once(limit: object) -> None:
    """Not an int, or one no backend can count to (a PostgreSQL bigint's range)."""
    with pytest.raises(ScratchpadConfigError, match="history_limit"):
        scratchpad(history_limit=limit)


async def test_a_revert_with_a_stale_expected_revision_is_a_conflict() -> None:
    backend = MemoryStorage()
    handle = await scratchpad().open(backend, thread_id="t1")
    await handle.update({"goal": "a"})
    await handle.update({"goal": "b"})
    with capture_events(handle.ctx.events) as events, pytest.raises(ScratchpadConflictError):
        await handle.revert(1, expected_revision=1)
    assert [event.reason for event in events.of(UpdateRejected)] == ["conflict"]
    assert await backend.get(KEY) == {"goal": "b"}
    await handle.revert(1, expected_revision=2)
    assert handle.snapshot == {"goal": "a"}
