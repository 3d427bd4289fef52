"""What only the SQLite backend does for revisions and the journal: the upgrade of a 0.1
file, the journal table, batches that mix writes of one key, per-key isolation of journal
rows, rows another program wrote, and durability across reopen."""

from __future__ import annotations

import logging
import shutil
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

from noetic_scratchpad import StorageConfigError, StorageError
from noetic_scratchpad.storage.base import Commit, JournalRow, Revision
from noetic_scratchpad.storage.sqlite import SqliteStorage

from .helpers import BatchSpy, in_one_transaction

pytestmark = pytest.mark.asyncio

LEGACY = Path(__file__).parents[1] / "data" / "legacy-0.1.0.db"


def url_of(path: Path) -> str:
    return f"sqlite:///{path}"


def journaled(entry: Any, value: Any = None) -> Any:
    """A commit function storing ``value`` (default: the entry) and journaling ``entry``."""
    return lambda current: Commit(entry if value is None else value, entry)


def raw(path: Path, sql: str, *args: Any) -> list[Any]:
    """Run ``sql`` on a connection of another program and commit."""
    with sqlite3.connect(path) as conn:
        return conn.execute(sql, args).fetchall()


async def test_a_file_of_version_0_1_is_upgraded_at_open(tmp_path: Path) -> None:
    """The 0.1 file opens: its rows read as before, at revision 1, the table gains its
    revision column (default 0) and the journal table exists; commits then journal."""
    path = tmp_path / "legacy.db"
    shutil.copy(LEGACY, path)
    key = "layers/scratchpad/t1/state"
    async with await SqliteStorage.open(url_of(path)) as storage:
        assert await storage.get(key) == {"goal": "thread t1"}
        assert await storage.get_revision(key) == Revision({"goal": "thread t1"}, 1)
        assert {info.revision for info in await storage.describe()} == {1}
        result = await storage.commit(key, lambda c: Commit({"goal": "new"}, {"was": 1}), keep=3)
        assert result == Revision({"goal": "new"}, 2)
        assert [row.entry for row in await storage.journal(key, limit=3)] == [{"was": 1}]
    info = raw(path, "PRAGMA table_info(scratchpad_kv)")
    columns = {row[1]: (row[2], row[3], row[4]) for row in info}
    assert columns["revision"] == ("INTEGER", 1, "0")
    journal = raw(path, "PRAGMA table_info(scratchpad_kv_journal)")
    assert [(row[1], row[5]) for row in journal] == [
        ("key", 1),
        ("keep", 2),
        ("slot", 3),
        ("revision", 0),
        ("written_at", 0),
        ("entry", 0),
    ]
    # Opening again finds everything in place and changes nothing.
    async with await SqliteStorage.open(url_of(path)) as storage:
        assert await storage.get_revision(key) == Revision({"goal": "new"}, 2)


@pytest.mark.parametrize("without_rowid", [False, True], ids=["rowid", "without-rowid"])
async def test_a_journal_keyed_by_revision_moves_into_the_ring_at_open(
    tmp_path: Path, without_rowid: bool
) -> None:
    """A journal as releases up to 0.2 made it, keyed by (key, revision), with or without
    rowid: opening moves its rows into the ring's table, history intact, and the next
    writes trim it to their keep."""
    path = tmp_path / "earlier.db"
    raw(
        path,
        "CREATE TABLE scratchpad_kv (key TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL, "
        "updated_at REAL NOT NULL, revision INTEGER NOT NULL DEFAULT 0)",
    )
    raw(
        path,
        "CREATE TABLE scratchpad_kv_journal (key TEXT NOT NULL, revision INTEGER NOT NULL, "
        "written_at REAL NOT NULL, entry TEXT NOT NULL, PRIMARY KEY (key, revision))"
        + (" WITHOUT ROWID" if without_rowid else ""),
    )
    key = "layers/scratchpad/t1/state"
    raw(path, "INSERT INTO scratchpad_kv VALUES (?, '{\"n\": 4}', 0, 4)", key)
    for n in range(1, 5):
        entry = f'{{"n": {n}}}'
        raw(path, "INSERT INTO scratchpad_kv_journal VALUES (?, ?, ?, ?)", key, n, n, entry)
    async with await SqliteStorage.open(url_of(path)) as storage:
        rows = await storage.journal(key, limit=10)
        assert [(row.revision, row.written_at, row.entry) for row in rows] == [
            (n, float(n), {"n": n}) for n in (4, 3, 2, 1)
        ]
        for n in range(5, 8):
            await storage.commit(key, journaled({"n": n}), keep=3)
        rows = await storage.journal(key, limit=10)
    assert [row.revision for row in rows] == [7, 6, 5]
    assert [row.entry for row in rows] == [{"n": 7}, {"n": 6}, {"n": 5}]
    ddl = raw(path, "SELECT sql FROM sqlite_master WHERE name = 'scratchpad_kv_journal'")
    assert "WITHOUT ROWID" not in ddl[0][0].upper()
    assert raw(path, "SELECT keep, slot, revision FROM scratchpad_kv_journal ORDER BY slot") == [
        (3, 0, 6),
        (3, 1, 7),
        (3, 2, 5),
    ]


async def test_a_table_in_the_way_of_the_journals_move_fails_the_open_and_keeps_both(
    tmp_path: Path,
) -> None:
    """The move into the ring goes through a table named ``{journal}_upgrade``; one that
    another program keeps there fails the open, and neither table loses a row."""
    path = tmp_path / "earlier.db"
    raw(
        path,
        "CREATE TABLE scratchpad_kv_journal (key TEXT NOT NULL, revision INTEGER NOT NULL, "
        "written_at REAL NOT NULL, entry TEXT NOT NULL, PRIMARY KEY (key, revision))",
    )
    raw(path, "INSERT INTO scratchpad_kv_journal VALUES ('k', 1, 0, '1')")
    raw(path, "CREATE TABLE scratchpad_kv_journal_upgrade (note TEXT)")
    raw(path, "INSERT INTO scratchpad_kv_journal_upgrade VALUES ('theirs')")
    with pytest.raises(StorageConfigError) as refused:
        await SqliteStorage.open(url_of(path))
    assert str(refused.value) == (
        f"the journal in {path} has the shape of version 0.2 and moves, once, through a new "
        "table named 'scratchpad_kv_journal_upgrade', but "
        f"{path} already has a table of that name. Rename or drop that table, then open "
        "the file again"
    )
    assert raw(path, "SELECT key, revision FROM scratchpad_kv_journal") == [("k", 1)]
    assert raw(path, "SELECT note FROM scratchpad_kv_journal_upgrade") == [("theirs",)]


async def test_open_of_an_upgraded_file_takes_no_write_lock(tmp_path: Path) -> None:
    """Once the tables are in place, opening writes nothing: it succeeds while another
    connection holds the write lock."""
    path = tmp_path / "db.sqlite"
    async with await SqliteStorage.open(url_of(path)):
        pass
    holder = sqlite3.connect(path, isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")
        opened = await SqliteStorage.open(url_of(path) + "?busy_timeout=50&busy_retries=0")
        await opened.aclose()
    finally:
        holder.execute("ROLLBACK")
        holder.close()


@pytest.mark.parametrize(
    ("table", "refusal"),
    [
        ("scratchpad_kv_journal", "is not a scratchpad journal"),
        ("scratchpad_kv_retired", "is not a scratchpad table of deleted keys' revisions"),
    ],
)
async def test_a_side_table_of_another_shape_is_refused(
    tmp_path: Path, table: str, refusal: str
) -> None:
    path = tmp_path / "db.sqlite"
    raw(path, f"CREATE TABLE {table} (id INTEGER PRIMARY KEY, note TEXT)")
    with pytest.raises(Exception, match=refusal) as caught:
        await SqliteStorage.open(url_of(path))
    assert "id, note" in str(caught.value)


async def test_a_file_made_before_deleted_keys_kept_their_revisions_gets_the_table(
    tmp_path: Path,
) -> None:
    """A file with the key-value and journal tables but no table of deleted keys'
    revisions gains it at open; a key deleted from then on continues above its old
    revisions, with no write lock needed at the next open."""
    path = tmp_path / "earlier.db"
    raw(
        path,
        "CREATE TABLE scratchpad_kv (key TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL, "
        "updated_at REAL NOT NULL, revision INTEGER NOT NULL DEFAULT 0)",
    )
    raw(
        path,
        "CREATE TABLE scratchpad_kv_journal (key TEXT NOT NULL, revision INTEGER NOT NULL, "
        "written_at REAL NOT NULL, entry TEXT NOT NULL, PRIMARY KEY (key, revision))",
    )
    raw(path, "INSERT INTO scratchpad_kv VALUES ('k', '\"old\"', 0, 7)")
    async with await SqliteStorage.open(url_of(path)) as storage:
        await storage.delete("k")
        assert await storage.commit("k", journaled("new"), keep=3) == Revision("new", 8)
    assert raw(path, "SELECT key, revision FROM scratchpad_kv_retired") == [("k", 7)]


async def test_a_delete_from_another_connection_keeps_the_revisions_going(
    tmp_path: Path,
) -> None:
    """Two stores on one file: one deletes a key the other has cached, then each writes
    it again; no revision repeats, whichever connection wrote before."""
    path = tmp_path / "db.sqlite"
    async with (
        await SqliteStorage.open(url_of(path)) as first,
        await SqliteStorage.open(url_of(path)) as second,
    ):
        for n in range(3):
            await first.commit("k", journaled({"n": n}), keep=5)  # first caches revision 3
        await second.delete("k")
        assert await first.commit("k", journaled("after"), keep=5) == Revision("after", 4)
        await first.delete("k")
        await second.set("k", "set by second")  # a set on a row second never read
        assert await second.get_revision("k") == Revision("set by second", 5)
        await second.delete("k")
        await first.update("k", lambda current: [current, "updated"])
        assert await first.get_revision("k") == Revision([None, "updated"], 6)


async def test_a_key_deleted_by_another_program_starts_from_what_it_last_had(
    tmp_path: Path,
) -> None:
    """A row deleted by a program that knows no table of deleted keys leaves no trace:
    the key starts again at 1 (the one case a revision can repeat; the library's own
    deletes never lose it)."""
    path = tmp_path / "db.sqlite"
    async with await SqliteStorage.open(url_of(path)) as storage:
        await storage.set("k", 1)
        await storage.set("k", 2)
        raw(path, "DELETE FROM scratchpad_kv WHERE key = 'k'")
        await storage.set("k", 3)
        assert await storage.get_revision("k") == Revision(3, 1)


async def test_journal_rows_survive_reopen(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    async with await SqliteStorage.open(url_of(path)) as storage:
        for n in range(5):
            await storage.commit("k", journaled({"n": n}), keep=3)
    async with await SqliteStorage.open(url_of(path)) as storage:
        assert await storage.get_revision("k") == Revision({"n": 4}, 5)
        rows = await storage.journal("k", limit=10)
        assert [(row.revision, row.entry) for row in rows] == [
            (5, {"n": 4}),
            (4, {"n": 3}),
            (3, {"n": 2}),
        ]
        assert await storage.commit("k", journaled({"n": 5}), keep=3) == Revision({"n": 5}, 6)


async def test_writes_of_one_key_mixed_in_one_transaction(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """set, commit, update, delete and commit of one key in one transaction apply in
    order: each commit sees the revision the writes before it made, the delete drops the
    journal rows made before it (the commit after it sees a missing key, and continues
    above the revisions before), and the stored row and journal are the last ones."""
    spy = BatchSpy(monkeypatch)
    path = tmp_path / "db.sqlite"
    async with await SqliteStorage.open(url_of(path)) as storage:
        await storage.commit("k", journaled("first"), keep=10)
        spy.sizes.clear()
        outcomes = await in_one_transaction(
            storage,
            storage.set("k", "set"),
            storage.commit("k", lambda c: Commit([c.value, c.revision], "after set"), keep=10),
            storage.update("k", lambda current: [*current, "updated"]),
            storage.commit("k", lambda c: Commit(c.value, c.revision), keep=10),
            storage.delete("k"),
            storage.commit("k", lambda c: Commit([c.value, c.revision], "reborn"), keep=10),
            storage.set("k", "last"),
        )
        assert spy.sizes == [1, 7]
        assert outcomes == [
            None,
            Revision(["set", 2], 3),
            ["set", 2, "updated"],
            Revision(["set", 2, "updated"], 5),
            None,
            Revision([None, 0], 6),
            None,
        ]
        assert await storage.get_revision("k") == Revision("last", 7)
        assert [(r.revision, r.entry) for r in await storage.journal("k", limit=10)] == [
            (6, "reborn")
        ]


async def test_a_set_on_a_row_the_writer_never_read_counts_from_its_revision(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Sets of a row another connection wrote, then a commit in the same transaction: the
    revisions continue from the stored one, not from 0."""
    spy = BatchSpy(monkeypatch)
    path = tmp_path / "db.sqlite"
    async with await SqliteStorage.open(url_of(path)) as storage:
        raw(
            path,
            "INSERT INTO scratchpad_kv (key, value, updated_at, revision) VALUES ('k', '1', 0, 7)",
        )
        outcomes = await in_one_transaction(
            storage,
            storage.set("k", 2),
            storage.set("k", 3),
            storage.commit("k", lambda c: Commit(c.value * 10, c.revision), keep=5),
            storage.set("j", 1),
            storage.set("j", 2),
        )
        assert spy.sizes == [1, 5]
        assert outcomes[2] == Revision(30, 10)
        assert await storage.get_revision("k") == Revision(30, 10)
        assert [row.entry for row in await storage.journal("k", limit=5)] == [9]
        assert await storage.get_revision("j") == Revision(2, 2)
        # Sets alone on a row of another connection advance its stored revision.
        raw(path, "UPDATE scratchpad_kv SET revision = 40 WHERE key = 'j'")
        await storage.set("j", 3)
        assert await storage.get_revision("j") == Revision(3, 41)


@pytest.mark.parametrize(
    ("then", "expected"),
    [
        ("commit", Revision(["reborn", 0], 10)),  # 7, the sets' 8 and 9, the delete: 10
        ("set", Revision("again", 10)),
        ("nothing", None),
    ],
)
async def test_sets_then_a_delete_of_a_row_never_read_keep_their_revisions(
    tmp_path: Path, then: str, expected: Revision | None
) -> None:
    """Two sets of a row the writer never read, then its delete, in one transaction: the
    sets made revisions 8 and 9, so the key's next write is 10, whether it comes in the
    same transaction (a commit, a set) or after it; no revision repeats."""
    path = tmp_path / "db.sqlite"
    async with await SqliteStorage.open(url_of(path)) as storage:
        raw(
            path,
            "INSERT INTO scratchpad_kv (key, value, updated_at, revision) VALUES ('k', '1', 0, 7)",
        )
        writes = [storage.set("k", 2), storage.set("k", 3), storage.delete("k")]
        if then == "commit":
            writes.append(storage.commit("k", lambda c: Commit(["reborn", c.revision]), keep=5))
        elif then == "set":
            writes.append(storage.set("k", "again"))
        await in_one_transaction(storage, *writes)
        assert await storage.get_revision("k") == expected
        after = await storage.commit("k", lambda c: Commit("next"), keep=5)
        assert after == Revision("next", 11 if expected else 10)


async def test_a_commit_sees_the_revision_another_connection_wrote(tmp_path: Path) -> None:
    """The writer's cache of rows it committed is dropped when another connection writes:
    the next commit builds on the other connection's value and revision."""
    path = tmp_path / "db.sqlite"
    async with await SqliteStorage.open(url_of(path)) as storage:
        await storage.commit("k", journaled({"by": "us"}), keep=5)
        raw(path, 'UPDATE scratchpad_kv SET value = \'{"by":"them"}\', revision = 9')
        seen: list[Revision] = []

        def fn(current: Revision) -> Commit:
            seen.append(current)
            return Commit({"by": "us again"}, "e")

        assert await storage.commit("k", fn, keep=5) == Revision({"by": "us again"}, 10)
        assert seen == [Revision({"by": "them"}, 9)]


async def test_a_refused_journal_row_fails_only_the_writes_of_its_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When SQLite refuses a journal row (here a trigger) the writes of that key fail with
    StorageError and nothing of that key changes, its state included; the other keys of
    the same transaction commit with their journal rows."""
    path = tmp_path / "db.sqlite"
    spy = BatchSpy(monkeypatch)
    async with await SqliteStorage.open(url_of(path)) as storage:
        await storage.commit("a", journaled("a1"), keep=5)
        await storage.commit("poison", journaled("p1"), keep=5)
        raw(
            path,
            "CREATE TRIGGER poison BEFORE INSERT ON scratchpad_kv_journal "
            "WHEN NEW.key = 'poison' BEGIN SELECT RAISE(ABORT, 'poisoned journal'); END",
        )
        spy.sizes.clear()
        outcomes = await in_one_transaction(
            storage,
            storage.commit("a", journaled("a2"), keep=5),
            storage.commit("poison", journaled("p2"), keep=5),
            storage.update("poison", lambda current: "plain"),
            storage.commit("b", journaled("b1"), keep=5),
            return_exceptions=True,
        )
        assert spy.sizes == [1, 4]
        assert outcomes[0] == Revision("a2", 2)
        assert outcomes[3] == Revision("b1", 1)
        for error in outcomes[1:3]:
            assert isinstance(error, StorageError)
            assert "poisoned journal" in str(error)
        assert await storage.get_revision("poison") == Revision("p1", 1)
        assert [row.entry for row in await storage.journal("poison", limit=5)] == ["p1"]
        assert [row.entry for row in await storage.journal("a", limit=5)] == ["a2", "a1"]
        assert [row.entry for row in await storage.journal("b", limit=5)] == ["b1"]
        # Plain updates of that key write no journal row: they go through.
        assert await storage.update("poison", lambda current: "plain") == "plain"
        assert await storage.get_revision("poison") == Revision("plain", 2)


async def test_an_unreadable_journal_row_is_skipped_and_reported(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A journal row that is not JSON text (written by another program) is left out of the
    read with a warning naming the key and revision; the other rows and the state read."""
    path = tmp_path / "db.sqlite"
    async with await SqliteStorage.open(url_of(path)) as storage:
        for n in range(3):
            await storage.commit("k", journaled(n), keep=5)
        raw(path, "UPDATE scratchpad_kv_journal SET entry = CAST(X'FF' AS TEXT) WHERE revision = 2")
        with caplog.at_level(logging.WARNING, logger="noetic_scratchpad.storage.sqlite"):
            rows = await storage.journal("k", limit=5)
        assert [(row.revision, row.entry) for row in rows] == [(3, 2), (1, 0)]
        (record,) = caplog.records
        assert "'k'" in record.getMessage()
        assert "revision 2" in record.getMessage()
        assert await storage.get_revision("k") == Revision(2, 3)
        view = await storage.journal_view("k", limit=5)
        assert (view.current, view.rows) == (Revision(2, 3), rows)
        handed: list[list[int]] = []

        def commit(current: Revision, rows: list[JournalRow]) -> Commit:
            handed.append([row.revision for row in rows])
            return Commit(3, 3)

        assert await storage.commit_with_journal("k", commit, keep=5, after=0) == Revision(3, 4)
        assert handed == [[3, 1]]


async def test_journal_rows_left_by_a_writer_without_journal_are_dropped(
    tmp_path: Path,
) -> None:
    """Rows of a key that a 0.1 writer deleted (leaving its journal) never show as the
    history of a new key of that name, and never block its writes."""
    path = tmp_path / "db.sqlite"
    async with await SqliteStorage.open(url_of(path)) as storage:
        for n in range(3):
            await storage.commit("k", journaled(n), keep=5)
        raw(path, "DELETE FROM scratchpad_kv WHERE key = 'k'")  # the journal stays
        assert await storage.commit("k", journaled("new"), keep=5) == Revision("new", 1)
        assert [(r.revision, r.entry) for r in await storage.journal("k", limit=5)] == [(1, "new")]
        raw(path, "DELETE FROM scratchpad_kv WHERE key = 'k'")
        await storage.set("k", "set")  # a set makes revision 1; the next commit is 2
        assert await storage.commit("k", journaled("two"), keep=5) == Revision("two", 2)
        assert (await storage.journal("k", limit=5))[0].entry == "two"


async def test_the_journal_stays_bounded(tmp_path: Path) -> None:
    """2,000 commits with keep=50 leave 50 journal rows, and the file stops growing once
    the journal is full (SQLite reuses the freed pages)."""
    path = tmp_path / "db.sqlite"
    entry = {"update": {"text": "x" * 300}}
    sizes = []
    for _ in range(2):
        # Closing checkpoints the WAL into the file, whose size is then all there is.
        async with await SqliteStorage.open(url_of(path)) as storage:
            for n in range(1000):
                await storage.commit("k", journaled(entry, {"n": n}), keep=50)
        sizes.append(path.stat().st_size)
    assert raw(path, "SELECT count(*), min(revision) FROM scratchpad_kv_journal") == [(50, 1951)]
    assert sizes[1] <= sizes[0] + 4096


def journal_rows(path: Path) -> list[tuple[int, int, str]]:
    """Every row of the journal table as (rowid, revision, entry), in the table's order."""
    return raw(path, "SELECT rowid, revision, entry FROM scratchpad_kv_journal ORDER BY rowid")


async def test_a_full_journal_rewrites_its_oldest_row_as_the_newest(tmp_path: Path) -> None:
    """Once a key's journal holds ``keep`` rows, each write turns the oldest row into
    the newest in place: the table gains no row (a page less written per commit), and
    the journal reads as if that row had been deleted and a new one added."""
    path = tmp_path / "db.sqlite"
    async with await SqliteStorage.open(url_of(path)) as storage:
        for n in range(1, 4):
            await storage.commit("k", journaled(f"e{n}"), keep=3)
        rowids = sorted(rowid for rowid, _, _ in journal_rows(path))
        for n in range(4, 9):
            await storage.commit("k", journaled(f"e{n}"), keep=3)
        assert sorted(rowid for rowid, _, _ in journal_rows(path)) == rowids
        assert [(r.revision, r.entry) for r in await storage.journal("k", limit=10)] == [
            (8, "e8"),
            (7, "e7"),
            (6, "e6"),
        ]


async def test_a_journal_with_revisions_never_journaled_keeps_the_newest(tmp_path: Path) -> None:
    """Revisions without a journal row (a commit without an entry) leave no row to
    rewrite at the trim's edge: the new row is then added and the older ones trimmed, so
    the journal holds the journaled revisions above ``revision - keep``, as always."""
    path = tmp_path / "db.sqlite"
    async with await SqliteStorage.open(url_of(path)) as storage:
        for n in range(1, 4):
            await storage.commit("k", journaled(f"e{n}"), keep=3)
        await storage.commit("k", lambda current: Commit("unjournaled"), keep=3)  # 4
        for n in range(5, 8):
            await storage.commit("k", journaled(f"e{n}"), keep=3)
            expected = [r for r in (n, n - 1, n - 2) if r != 4]
            assert [r.revision for r in await storage.journal("k", limit=10)] == expected
        assert sorted(revision for _, revision, _ in journal_rows(path)) == [5, 6, 7]


async def test_several_rows_of_one_key_in_one_transaction_leave_the_newest(
    tmp_path: Path,
) -> None:
    """Writes of one key batched into one transaction add their rows and trim the
    oldest: the batch leaves the newest ``keep`` rows and no other."""
    path = tmp_path / "db.sqlite"
    async with await SqliteStorage.open(url_of(path)) as storage:
        for n in range(1, 5):
            await storage.commit("k", journaled(f"e{n}"), keep=4)
        await in_one_transaction(
            storage, *(storage.commit("k", journaled(f"e{n}"), keep=4) for n in range(5, 8))
        )
        assert [(r.revision, r.entry) for r in await storage.journal("k", limit=10)] == [
            (7, "e7"),
            (6, "e6"),
            (5, "e5"),
            (4, "e4"),
        ]
        assert len(journal_rows(path)) == 4


async def test_a_rewritten_row_replaces_a_stray_row_of_its_revision(tmp_path: Path) -> None:
    """A row another program left in the slot a write takes, at that write's revision,
    gives way to the write's, as an added row would."""
    path = tmp_path / "db.sqlite"
    async with await SqliteStorage.open(url_of(path)) as storage:
        await storage.commit("k", journaled("e1"), keep=2)
        await storage.commit("k", journaled("e2"), keep=2)
        stray = "INSERT OR REPLACE INTO scratchpad_kv_journal VALUES ('k', 2, 1, 3, 0, '\"s\"')"
        raw(path, stray)  # (slot 1 held revision 1, the oldest)
        assert await storage.commit("k", journaled("e3"), keep=2) == Revision("e3", 3)
        assert [(r.revision, r.entry) for r in await storage.journal("k", limit=10)] == [
            (3, "e3"),
            (2, "e2"),
        ]


async def test_trimming_by_age_takes_each_keys_oldest_rows_first(tmp_path: Path) -> None:
    """The rewritten rows sit in the table out of revision order; a bounded trim by age
    still takes a key's oldest revision first, never leaving a gap in its history."""
    path = tmp_path / "db.sqlite"
    async with await SqliteStorage.open(url_of(path)) as storage:
        for n in range(1, 6):
            await storage.commit("k", journaled(f"e{n}"), keep=3)
        assert [revision for _, revision, _ in journal_rows(path)] == [4, 5, 3]
        later = time.time() + 60
        assert await storage.trim_journals("", later, limit=1) == 1
        assert [r.revision for r in await storage.journal("k", limit=10)] == [5, 4]
        assert await storage.trim_journals("", later, limit=1) == 1
        assert [r.revision for r in await storage.journal("k", limit=10)] == [5]
