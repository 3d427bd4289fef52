"""The backend contract of reading a key's value and journal together: ``journal_view``
(both read at one instant) and ``commit_with_journal`` (the rows handed to a commit, in
its own transaction). A revert and a history rely on them; read apart, a write in between
left the journal ahead of the value.

Part of the contract suite (see ``test_contract.py``): run once per backend and wrapper.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from noetic_scratchpad.storage import StorageBackend
from noetic_scratchpad.storage.base import Commit, JournalRow, JournalView, Revision

from .helpers import CONTRACT_KINDS

pytestmark = pytest.mark.asyncio


@pytest.fixture(params=CONTRACT_KINDS)
def backend_kind(request: pytest.FixtureRequest) -> str:
    kind: str = request.param
    return kind


def counting(current: Revision) -> Commit:
    """The value ``{"n": revision + 1}``, journaled as that number."""
    made = current.revision + 1
    return Commit({"n": made}, made)


class Seen:
    """A ``commit_with_journal`` function that records what it was handed and commits
    as :func:`counting` does."""

    def __init__(self) -> None:
        self.calls: list[tuple[Revision, list[JournalRow]]] = []

    def __call__(self, current: Revision, rows: list[JournalRow]) -> Commit:
        self.calls.append((current, rows))
        return counting(current)

    @property
    def revisions(self) -> list[int]:
        """The revisions of the rows of the last call."""
        return [row.revision for row in self.calls[-1][1]]


async def test_a_view_of_a_missing_key_is_empty(storage: StorageBackend) -> None:
    assert await storage.journal_view("never/written", limit=5) == JournalView(None, [])


async def test_a_view_is_the_value_and_the_newest_rows(storage: StorageBackend) -> None:
    for _ in range(4):
        await storage.commit("k", counting, keep=10)
    view = await storage.journal_view("k", limit=3)
    assert view.current == Revision({"n": 4}, 4)
    assert view.rows == await storage.journal("k", limit=3)
    assert [(row.revision, row.entry) for row in view.rows] == [(4, 4), (3, 3), (2, 2)]
    assert (await storage.journal_view("k", limit=0)).rows == []
    assert (await storage.journal_view("k", limit=2**70)).rows == await storage.journal(
        "k", limit=10
    )


async def test_a_view_read_among_writers_ends_at_its_value(storage: StorageBackend) -> None:
    """Views read while commits land: each one's newest row is its value's revision."""
    views: list[JournalView] = []

    async def reader() -> None:
        for _ in range(30):
            views.append(await storage.journal_view("k", limit=3))
            await asyncio.sleep(0)

    async def writer() -> None:
        for _ in range(30):
            await storage.commit("k", counting, keep=10)
            await asyncio.sleep(0)

    await storage.commit("k", counting, keep=10)
    await asyncio.gather(reader(), writer(), writer())
    for view in views:
        assert view.current is not None
        assert view.rows[0].revision == view.current.revision == view.current.value["n"]


async def test_commit_with_journal_hands_the_rows_above_after(storage: StorageBackend) -> None:
    for _ in range(5):
        await storage.commit("k", counting, keep=10)
    seen = Seen()
    assert await storage.commit_with_journal("k", seen, keep=10, after=2) == Revision({"n": 6}, 6)
    ((current, rows),) = seen.calls
    assert current == Revision({"n": 5}, 5)
    assert [(row.revision, row.entry) for row in rows] == [(5, 5), (4, 4), (3, 3)], (
        "fn gets the rows above `after` only, newest first"
    )
    # Journaled as a commit is: state and row together.
    assert await storage.journal_view("k", limit=1) == JournalView(
        Revision({"n": 6}, 6), (await storage.journal("k", limit=1))
    )
    assert [row.entry for row in await storage.journal("k", limit=2)] == [6, 5]
    await storage.commit_with_journal("k", seen, keep=10, after=6)
    assert seen.revisions == []


async def test_commit_with_journal_sees_the_commits_queued_before_it(
    storage: StorageBackend,
) -> None:
    """Commits issued together (one batch, on a batching backend), the journal reader
    last: it sees every commit before it, its rows ending at the revision it is handed;
    rows the trim has removed by then are not handed over."""
    await storage.commit("k", counting, keep=3)
    seen = Seen()
    await asyncio.gather(
        *(storage.commit("k", counting, keep=3) for _ in range(5)),
        storage.commit_with_journal("k", seen, keep=3, after=0),
    )
    ((current, rows),) = seen.calls
    assert current == Revision({"n": 6}, 6)
    assert [row.revision for row in rows] == [6, 5, 4], (
        "fn gets the rows as its transaction sees them: earlier commits in, trimmed rows out"
    )
    assert [row.entry for row in rows] == [6, 5, 4]


async def test_commit_with_journal_on_a_missing_key_gets_no_rows(storage: StorageBackend) -> None:
    """A deleted key's journal is gone with it: the next commit sees nothing, and is
    stored above the old revisions as any commit is."""
    for _ in range(3):
        await storage.commit("k", counting, keep=10)
    await storage.delete("k")
    seen = Seen()
    assert (await storage.commit_with_journal("k", seen, keep=10, after=0)).revision == 4, (
        "the write that re-creates a deleted key continues above its last revision"
    )
    assert seen.calls == [(Revision(None, 0), [])]


async def test_commit_with_journal_whose_fn_raises_writes_nothing(storage: StorageBackend) -> None:
    class Boom(Exception):
        pass

    def fail(current: Revision, rows: list[JournalRow]) -> Any:
        raise Boom("no")

    await storage.commit("k", counting, keep=10)
    with pytest.raises(Boom):
        await storage.commit_with_journal("k", fail, keep=10, after=0)
    assert await storage.journal_view("k", limit=10) == JournalView(
        Revision({"n": 1}, 1), await storage.journal("k", limit=10)
    )
    assert [row.revision for row in await storage.journal("k", limit=10)] == [1]
