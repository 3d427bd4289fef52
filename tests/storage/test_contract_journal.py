"""The backend contract of revisions and the journal: ``commit``, ``get_revision``,
``journal``, and the revision every write advances.

Part of the contract suite (see ``test_contract.py``): run once per backend and wrapper,
and every backend must pass it unchanged.
"""

from __future__ import annotations

import asyncio
import random
import time
from typing import Any

import pytest

from noetic_scratchpad.storage import StorageBackend
from noetic_scratchpad.storage.base import Commit, Revision

from .helpers import CONTRACT_KINDS, JournalModel, journals, model_write, random_writes
from .test_contract import assert_identical

pytestmark = pytest.mark.asyncio


@pytest.fixture(params=CONTRACT_KINDS)
def backend_kind(request: pytest.FixtureRequest) -> str:
    """The shared backends, two wrappers (a FaultyStorage, a namespace) and the example of
    docs/storage.md: each must keep the contract as the others do."""
    kind: str = request.param
    return kind


def step(entry: Any = None, *, value: Any = None) -> Any:
    """A commit function: the value ``{"n": revision + 1}`` (or ``value``) and ``entry``,
    ``{"made": revision + 1}`` when not given."""

    def fn(current: Revision) -> Commit:
        made = current.revision + 1
        return Commit(
            {"n": made} if value is None else value, {"made": made} if entry is None else entry
        )

    return fn


async def revisions(storage: StorageBackend, key: str, limit: int = 100) -> list[int]:
    return [row.revision for row in await storage.journal(key, limit=limit)]


async def test_commit_on_a_missing_key_starts_at_revision_1(storage: StorageBackend) -> None:
    """``fn`` sees ``Revision(None, 0)``; the value is stored as revision 1, which commit
    returns, get_revision reads, and the journal holds with its entry and time."""
    seen: list[Revision] = []

    def fn(current: Revision) -> Commit:
        seen.append(current)
        return Commit({"goal": "g"}, {"wrote": ["goal"]})

    before = time.time()
    assert await storage.commit("k", fn, keep=10) == Revision({"goal": "g"}, 1)
    after = time.time()
    assert seen == [Revision(None, 0)]
    assert await storage.get_revision("k") == Revision({"goal": "g"}, 1)
    assert await storage.get("k") == {"goal": "g"}
    (row,) = await storage.journal("k", limit=10)
    assert (row.revision, row.entry) == (1, {"wrote": ["goal"]})
    assert before - 1 <= row.written_at <= after + 1


async def test_get_revision_of_a_missing_key_is_none(storage: StorageBackend) -> None:
    assert await storage.get_revision("never/written") is None
    assert await storage.journal("never/written", limit=10) == []


async def test_every_write_advances_the_revision(storage: StorageBackend) -> None:
    """set, update and commit each advance the key's revision by one; commit's fn sees the
    value and revision the writes before it made; describe reports the revision."""
    await storage.set("k", {"a": 1})
    assert await storage.get_revision("k") == Revision({"a": 1}, 1)
    await storage.update("k", lambda current: {**current, "b": 2})
    assert await storage.get_revision("k") == Revision({"a": 1, "b": 2}, 2)
    seen: list[Revision] = []

    def fn(current: Revision) -> Commit:
        seen.append(current)
        return Commit({**current.value, "c": 3}, {"added": "c"})

    assert await storage.commit("k", fn, keep=5) == Revision({"a": 1, "b": 2, "c": 3}, 3)
    assert seen == [Revision({"a": 1, "b": 2}, 2)]
    await storage.set("k", "replaced")
    assert await storage.get_revision("k") == Revision("replaced", 4)
    await storage.set("other", 1)
    infos = {info.key: info.revision for info in await storage.describe()}
    assert infos == {"k": 4, "other": 1}
    # Writes that are not journaled leave the journal as it was.
    assert [(row.revision, row.entry) for row in await storage.journal("k", limit=5)] == [
        (3, {"added": "c"})
    ]


async def test_the_journal_is_newest_first_and_trimmed_to_keep(storage: StorageBackend) -> None:
    """With keep=3, ten commits leave the three newest rows; limit cuts the read; a larger
    keep later keeps more from then on (what was trimmed stays trimmed), a smaller one
    trims at once."""
    for _ in range(10):
        await storage.commit("k", step(), keep=3)
    rows = await storage.journal("k", limit=100)
    assert [(row.revision, row.entry) for row in rows] == [
        (10, {"made": 10}),
        (9, {"made": 9}),
        (8, {"made": 8}),
    ], "a commit trims the key's journal to its keep newest rows, read newest first"
    assert rows[0].written_at >= rows[1].written_at >= rows[2].written_at
    assert await revisions(storage, "k", limit=2) == [10, 9]
    assert await storage.journal("k", limit=0) == []
    await storage.commit("k", step(), keep=5)
    await storage.commit("k", step(), keep=5)
    assert await revisions(storage, "k") == [12, 11, 10, 9, 8]
    await storage.commit("k", step(), keep=2)
    assert await revisions(storage, "k") == [13, 12]
    assert await storage.get_revision("k") == Revision({"n": 13}, 13)


async def test_keep_0_or_no_entry_journals_nothing(storage: StorageBackend) -> None:
    """A commit with keep=0, or whose entry is None, still writes the value and advances
    the revision, and adds no journal row (nor trims the rows there)."""
    await storage.commit("k", step(), keep=0)
    assert await storage.get_revision("k") == Revision({"n": 1}, 1)
    assert await storage.journal("k", limit=10) == []
    await storage.commit("k", step(), keep=2)
    await storage.commit("k", lambda current: Commit({"n": 3}), keep=2)
    await storage.commit("k", step(), keep=0)
    assert await storage.get_revision("k") == Revision({"n": 4}, 4)
    assert await revisions(storage, "k") == [2], "keep=0 or entry=None journals nothing"


async def test_revisions_never_journaled_count_toward_keep(storage: StorageBackend) -> None:
    """A journaled commit at revision r keeps the rows of the key's last ``keep``
    revisions, above r - keep: a revision written without an entry (or by ``set``) takes
    a place in that window without a row, so fewer than ``keep`` rows stay."""
    for _ in range(3):
        await storage.commit("k", step(), keep=3)
    await storage.commit("k", lambda current: Commit({"n": 4}), keep=3)
    await storage.set("k", {"n": 5})
    await storage.commit("k", step(), keep=3)
    assert await revisions(storage, "k") == [6], "rows at or below 6 - 3 are trimmed"
    await storage.commit("k", step(), keep=3)
    await storage.commit("k", step(), keep=3)
    assert await revisions(storage, "k") == [8, 7, 6]


@pytest.mark.parametrize("seed", range(3))
async def test_the_journal_holds_what_the_model_holds_whatever_the_history(
    storage: StorageBackend, seed: int
) -> None:
    """Random histories of commits with an entry or without, sets and deletes on two
    keys, keeps changing now and then: after every write each key's journal is the
    model's (``JournalModel`` in helpers.py), the same on every backend."""
    model = JournalModel()
    for write in random_writes(random.Random(seed), 120):
        await model_write(storage, write)
        model.apply(write)
        assert await journals(storage) == model.rows, write


async def test_delete_removes_the_key_and_its_journal_but_its_revisions_never_return(
    storage: StorageBackend,
) -> None:
    """After delete, the key reads as missing with no journal. A later commit sees
    ``Revision(None, 0)`` like any missing key's, but is stored above every revision the
    key had before (a revision names one value of a key forever: ``expected_revision``
    and a reader that knows a revision can trust it), with a journal of its own; other
    keys keep theirs."""
    for _ in range(3):
        await storage.commit("k", step(), keep=10)
    await storage.commit("other", step(), keep=10)
    await storage.delete("k")
    assert await storage.get_revision("k") is None
    assert await storage.journal("k", limit=10) == []
    assert [info.key for info in await storage.describe()] == ["other"]
    seen: list[Revision] = []

    def again(current: Revision) -> Commit:
        seen.append(current)
        return Commit({"n": "again"}, {"again": True})

    assert await storage.commit("k", again, keep=10) == Revision({"n": "again"}, 4), (
        "the write that re-creates a deleted key continues above its last revision"
    )
    assert seen == [Revision(None, 0)]
    assert [(row.revision, row.entry) for row in await storage.journal("k", limit=10)] == [
        (4, {"again": True})
    ]
    assert await revisions(storage, "other") == [1]


@pytest.mark.parametrize("write", ["set", "update", "commit"])
async def test_no_write_after_a_delete_repeats_a_revision(
    storage: StorageBackend, write: str
) -> None:
    """Every kind of write that re-creates a deleted key continues above its old
    revisions, through several deletes; a key never written starts at 1."""
    seen: list[int] = []
    for round_ in range(3):
        for _ in range(2):
            if write == "set":
                await storage.set("k", {"round": round_})
            elif write == "update":
                await storage.update("k", lambda current, r=round_: {"round": r})
            else:
                await storage.commit("k", step(value={"round": round_}), keep=5)
            found = await storage.get_revision("k")
            assert found is not None
            seen.append(found.revision)
        await storage.delete("k")
    assert seen == [1, 2, 3, 4, 5, 6], "a key's revisions never repeat, across deletes"
    await storage.delete("never/written")  # deleting a missing key changes nothing
    await storage.set("never/written", 1)
    assert await storage.get_revision("never/written") == Revision(1, 1)


async def test_deletes_racing_writes_never_repeat_a_revision(storage: StorageBackend) -> None:
    """Commits and deletes of one key racing on one loop: each revision a commit returns
    names one value only, whatever deletes came between."""
    named: dict[int, Any] = {}

    async def committer(writer: int) -> None:
        for i in range(15):
            value = {"writer": writer, "i": i}
            done = await storage.commit("k", step(value=value), keep=3)
            assert named.setdefault(done.revision, value) == value, done.revision

    async def deleter() -> None:
        for _ in range(10):
            await storage.delete("k")
            await asyncio.sleep(0)

    await asyncio.gather(*(committer(w) for w in range(4)), deleter())
    assert len(named) == 60


async def test_a_commit_whose_fn_raises_writes_nothing(storage: StorageBackend) -> None:
    """The exception propagates; neither the value, the revision nor the journal of an
    existing key changes, and a missing key stays missing."""

    class Boom(Exception):
        pass

    def fail(current: Revision) -> Commit:
        raise Boom("no")

    await storage.commit("k", step(), keep=5)
    with pytest.raises(Boom):
        await storage.commit("k", fail, keep=5)
    with pytest.raises(Boom):
        await storage.commit("fresh", fail, keep=5)
    assert await storage.get_revision("k") == Revision({"n": 1}, 1)
    assert await revisions(storage, "k") == [1]
    assert await storage.get_revision("fresh") is None
    assert await storage.journal("fresh", limit=5) == []
    assert await storage.list() == ["k"]
    assert await storage.commit("k", step(), keep=5) == Revision({"n": 2}, 2)


@pytest.mark.parametrize("part", ["value", "entry"])
async def test_a_commit_of_what_json_cannot_hold_writes_nothing(
    storage: StorageBackend, part: str
) -> None:
    """A value or entry JSON cannot hold is a ValueError, and nothing is written: not the
    value, not the revision, not a journal row."""
    await storage.commit("k", step(), keep=5)
    bad = {"bad": {1, 2}}
    fn = step(value=bad) if part == "value" else step(entry=bad)
    with pytest.raises(ValueError, match="JSON"):
        await storage.commit("k", fn, keep=5)
    assert await storage.get_revision("k") == Revision({"n": 1}, 1)
    assert await revisions(storage, "k") == [1]


async def test_journal_entries_round_trip_and_are_copies(storage: StorageBackend) -> None:
    """An entry reads back equal, whatever JSON it holds, and changing the entry after the
    commit, or a row read back, changes nothing stored."""
    entry: dict[str, Any] = {
        "update": {"big": 2**70, "text": "ünï — 日本 — 🚀", "list": [1, None, 2.5]},
        "prior": {"missing": ["x"]},
    }
    await storage.commit("k", step(entry), keep=5)
    entry["update"]["text"] = "changed"
    (row,) = await storage.journal("k", limit=5)
    assert row.entry == {
        "update": {"big": 2**70, "text": "ünï — 日本 — 🚀", "list": [1, None, 2.5]},
        "prior": {"missing": ["x"]},
    }
    row.entry["prior"]["missing"].append("y")
    (again,) = await storage.journal("k", limit=5)
    assert again.entry["prior"] == {"missing": ["x"]}


async def test_journal_entries_keep_their_numbers_as_written(storage: StorageBackend) -> None:
    """An entry's numbers read back as written: -0.0 stays -0.0, the float 1e20 a float,
    1.0 a float beside the integer 1 (a revert rebuilds states from these entries)."""
    entry = {"update": {"z": -0.0, "e": 1e20, "f": [1.5e300, 5e-324, 1.0, 1, 2**70]}}
    await storage.commit("k", step(entry), keep=5)
    (row,) = await storage.journal("k", limit=5)
    assert_identical(row.entry, entry, "the journal entry")


async def test_concurrent_commits_of_one_key_get_consecutive_revisions(
    storage: StorageBackend,
) -> None:
    """50 concurrent commits of one key, every fifth failing: the 40 that land get the
    revisions 1..40, each once, and the journal row of each revision is the entry of the
    commit that got it; the failures use up no revision."""

    def writer(n: int) -> Any:
        def fn(current: Revision) -> Commit:
            if n % 5 == 4:
                raise KeyError(f"refused {n}")
            return Commit({"last": n, "count": (current.value or {}).get("count", 0) + 1}, n)

        return fn

    outcomes = await asyncio.gather(
        *(storage.commit("k", writer(n), keep=100) for n in range(50)), return_exceptions=True
    )
    landed = {n: outcome for n, outcome in enumerate(outcomes) if n % 5 != 4}
    assert all(isinstance(outcomes[n], KeyError) for n in range(4, 50, 5))
    assert sorted(result.revision for result in landed.values()) == list(range(1, 41))
    journal = {row.revision: row.entry for row in await storage.journal("k", limit=100)}
    assert journal == {result.revision: n for n, result in landed.items()}
    stored = await storage.get_revision("k")
    assert stored is not None
    assert stored.revision == 40
    assert stored.value["count"] == 40
    assert stored.value["last"] == journal[40]
