"""The ``limit`` of a history and the revision of a revert: the same answer on every
backend, a clear refusal when out of range (a history limit past 64 bits raised
OverflowError on SQLite and a storage error on PostgreSQL)."""

from __future__ import annotations

import pytest

from noetic_scratchpad import ScratchpadHistoryError, UpdateRejected, scratchpad
from noetic_scratchpad.keys import state_key
from noetic_scratchpad.storage import StorageBackend
from noetic_scratchpad.storage.base import Revision
from noetic_scratchpad.testing import capture_events

pytestmark = pytest.mark.asyncio

#: The largest limit there is: a 64-bit SQL integer's.
MAX_LIMIT = 2**63 - 1


@pytest.mark.parametrize("limit", [2**63, 2**64, 10**30])
async def test_a_history_limit_past_the_largest_is_refused_clearly(
    backend: StorageBackend, limit: int
) -> None:
    handle = await scratchpad().open(backend, thread_id="t1")
    await handle.update({"goal": "a"})
    with pytest.raises(ValueError, match=r"limit .* is out of range: at most 9223372036854775807"):
        await handle.history(limit=limit)


@pytest.mark.parametrize("limit", [-1, -(2**70)])
async def test_a_negative_history_limit_is_refused_clearly(
    backend: StorageBackend, limit: int
) -> None:
    handle = await scratchpad().open(backend, thread_id="t1")
    with pytest.raises(ValueError, match=r"limit .* is out of range: at least 0"):
        await handle.history(limit=limit)


@pytest.mark.parametrize("limit", [1.5, "10", True, None])
async def test_a_history_limit_that_is_no_int_is_refused(
    backend: StorageBackend, limit: object
) -> None:
    handle = await scratchpad().open(backend, thread_id="t1")
    with pytest.raises(TypeError, match="limit must be an int"):
        await handle.history(limit=limit)  # type: ignore[arg-type]


async def test_the_largest_limit_lists_everything(backend: StorageBackend) -> None:
    handle = await scratchpad().open(backend, thread_id="t1")
    for n in range(3):
        await handle.update({"n": n})
    assert [entry.revision for entry in await handle.history(limit=MAX_LIMIT)] == [3, 2, 1]
    assert await handle.history(limit=0) == []


@pytest.mark.parametrize("limit", [MAX_LIMIT, 2**63, 2**70])
async def test_a_backend_reads_any_large_journal_limit_as_everything(
    backend: StorageBackend, limit: int
) -> None:
    """Below the public API too: no backend turns a large limit into an overflow."""
    handle = await scratchpad().open(backend, thread_id="t1")
    await handle.update({"n": 1})
    key = state_key("scratchpad", "thread", "t1")
    assert [row.revision for row in await backend.journal(key, limit=limit)] == [1]


@pytest.mark.parametrize("target", [-1, 2, 2**63, 2**70])
async def test_a_revert_to_a_revision_out_of_range_is_a_history_error(
    backend: StorageBackend, target: int
) -> None:
    """No backend overflows on a revision past 64 bits: it is a revision that does not
    exist, refused and reported as such, and nothing is written."""
    handle = await scratchpad().open(backend, thread_id="t1")
    await handle.update({"n": 1})
    with capture_events(handle.ctx.events) as events, pytest.raises(ScratchpadHistoryError):
        await handle.revert(target)
    assert [event.reason for event in events.of(UpdateRejected)] == ["history"]
    assert await backend.get_revision(state_key("scratchpad", "thread", "t1")) == Revision(
        {"n": 1}, 1
    )
