"""What only the SQLite backend does: URLs, pragmas, paths, locks held by other processes,
group commit and durability across reopen and process exit."""

from __future__ import annotations

import asyncio
import os
import shutil
import sqlite3
import subprocess
import textwrap
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiosqlite
import pytest
import pytest_asyncio
from pydantic import BaseModel

from noetic_scratchpad import (
    ExecutionContext,
    ScopedStorage,
    StorageBusyError,
    StorageConfigError,
    StorageError,
    UpdateRejected,
    open_storage,
    scratchpad,
)
from noetic_scratchpad.storage.base import Commit, Revision
from noetic_scratchpad.storage.sqlite import SqliteStorage, parse_sqlite_url
from noetic_scratchpad.storage.sqlite import writer as writer_module
from noetic_scratchpad.testing import capture_events

from .helpers import (
    BatchSpy,
    finish,
    in_one_transaction,
    python,
    write_lock_held_by_another_process,
)


def url_of(path: Path, query: str = "") -> str:
    return f"sqlite:///{path}" + (f"?{query}" if query else "")


@pytest_asyncio.fixture
async def db(tmp_path: Path) -> AsyncIterator[SqliteStorage]:
    storage = await SqliteStorage.open(url_of(tmp_path / "db.sqlite"))
    try:
        yield storage
    finally:
        await storage.aclose()


async def pragma(storage: SqliteStorage, name: str) -> Any:
    """A PRAGMA's value as the writer connection sees it (run in that connection's thread)."""
    writer = storage._writer
    return await writer.call(lambda: writer.conn.execute(f"PRAGMA {name}").fetchone()[0])


# -- URLs and options -----------------------------------------------------------------------


@pytest.mark.asyncio
async def test_relative_url_is_relative_to_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """sqlite:///name.db and sqlite:///dir/name.db name files under the working directory."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sub").mkdir()
    for url, expected in [
        ("sqlite:///rel.db", tmp_path / "rel.db"),
        ("sqlite:///sub/nested.db", tmp_path / "sub" / "nested.db"),
    ]:
        async with await open_storage(url) as storage:
            assert isinstance(storage, SqliteStorage)
            assert storage.path == str(expected)
            await storage.set("k", url)
        assert expected.is_file()


@pytest.mark.asyncio
async def test_absolute_url(tmp_path: Path) -> None:
    """sqlite:////abs/path.db (four slashes) names an absolute path; %20 decodes to a space."""
    target = tmp_path / "with space" / "abs.db"
    target.parent.mkdir()
    url = "sqlite:///" + str(target).replace(" ", "%20")
    assert url.startswith("sqlite:////")
    async with await open_storage(url) as storage:
        assert storage.path == str(target)  # type: ignore[attr-defined]
        await storage.set("k", 1)
    assert target.is_file()


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("sqlite:///:memory:", "use memory://"),
        ("sqlite://", "has no file path"),
        ("sqlite:///", "has no file path"),
        ("sqlite://host/x.db", "names a host"),
        ("sqlite:///x.db?synchronous=off", "synchronous=normal"),
        ("sqlite:///x.db?synchronous=sometimes", "not a durability level"),
        ("sqlite:///x.db?busy_timeout=-1", "busy_timeout='-1' must be an integer of at least 0"),
        ("sqlite:///x.db?busy_timeout=soon", "busy_timeout='soon' must be an integer"),
        ("sqlite:///x.db?max_batch=0", "max_batch='0' must be an integer of at least 1"),
        ("sqlite:///x.db?table=kv;drop", "not a plain SQL identifier"),
        ("sqlite:///x.db?journal=delete", "unknown SQLite option(s) journal"),
    ],
)
@pytest.mark.asyncio
async def test_bad_urls_and_options(url: str, message: str) -> None:
    """Unusable URLs and options raise StorageConfigError naming the problem and the fix."""
    with pytest.raises(StorageConfigError) as caught:
        await open_storage(url)
    assert message in str(caught.value)


def test_options_from_query_and_keywords() -> None:
    """Options parse from the query string; keyword arguments override them."""
    parsed = parse_sqlite_url("sqlite:///a.db?synchronous=FULL&busy_timeout=250&table=t1")
    assert (parsed.path, parsed.synchronous, parsed.busy_timeout, parsed.table) == (
        "a.db",
        "full",
        250,
        "t1",
    )
    parsed = parse_sqlite_url("sqlite:///a.db?synchronous=full", synchronous="normal")
    assert parsed.synchronous == "normal"
    defaults = parse_sqlite_url("sqlite:////abs/a.db")
    assert (defaults.path, defaults.synchronous, defaults.busy_timeout) == (
        "/abs/a.db",
        "normal",
        5000,
    )


@pytest.mark.parametrize(
    ("query", "options", "synchronous", "busy"),
    [
        ("", {}, 1, 5000),
        ("synchronous=full", {}, 2, 5000),
        ("synchronous=extra&busy_timeout=1234", {}, 3, 1234),
        ("synchronous=full", {"synchronous": "normal", "busy_timeout": 77}, 1, 77),
    ],
)
@pytest.mark.asyncio
async def test_pragmas_applied(
    tmp_path: Path, query: str, options: dict[str, Any], synchronous: int, busy: int
) -> None:
    """The database is in WAL mode; synchronous and busy_timeout follow the options
    (SQLite reports NORMAL as 1, FULL as 2, EXTRA as 3)."""
    async with await SqliteStorage.open(url_of(tmp_path / "p.db", query), **options) as storage:
        assert await pragma(storage, "journal_mode") == "wal"
        assert await pragma(storage, "synchronous") == synchronous
        assert await pragma(storage, "busy_timeout") == busy
    with sqlite3.connect(tmp_path / "p.db") as other:  # WAL is a property of the file
        assert other.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


@pytest.mark.asyncio
async def test_table_created_on_first_open(tmp_path: Path) -> None:
    """Opening a new file creates the key-value table; the table name is an option."""
    async with await SqliteStorage.open(url_of(tmp_path / "t.db", "table=my_pad")) as storage:
        await storage.set("k", {"v": 1})
    with sqlite3.connect(tmp_path / "t.db") as conn:
        rows = conn.execute("SELECT key, value FROM my_pad").fetchall()
    assert rows == [("k", '{"v":1}')]


# -- bad paths ------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_missing_directory(tmp_path: Path) -> None:
    """A path in a directory that does not exist names the directory and how to create it."""
    missing = tmp_path / "nope" / "deeper"
    with pytest.raises(StorageConfigError) as caught:
        await open_storage(url_of(missing / "x.db"))
    message = str(caught.value)
    assert f"the directory {missing} does not exist" in message
    assert f"mkdir -p {missing}" in message
    assert not missing.exists()


@pytest.mark.asyncio
async def test_directory_instead_of_file(tmp_path: Path) -> None:
    """A path that is a directory is refused with a suggestion of a file inside it."""
    with pytest.raises(StorageConfigError) as caught:
        await open_storage(url_of(tmp_path))
    assert f"{tmp_path}: it is a directory" in str(caught.value)
    assert f"sqlite:///{tmp_path / 'scratchpad.db'}" in str(caught.value)


@pytest.mark.asyncio
async def test_parent_is_a_file(tmp_path: Path) -> None:
    """A path whose parent is a regular file says that it is not a directory."""
    (tmp_path / "file").write_text("x")
    with pytest.raises(StorageConfigError, match="is not a directory"):
        await open_storage(url_of(tmp_path / "file" / "x.db"))


@pytest.mark.asyncio
async def test_not_a_database(tmp_path: Path) -> None:
    """A file that is not a SQLite database is refused with its path and what to check."""
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not a database, just some text" * 100)
    with pytest.raises(StorageConfigError) as caught:
        await open_storage(url_of(junk))
    assert str(junk) in str(caught.value)
    assert "names a SQLite database file" in str(caught.value)
    assert junk.read_bytes().startswith(b"this is not a database")


@pytest.fixture
def unwritable_dir(tmp_path: Path) -> Iterator[tuple[Path, bool]]:
    """A directory this process cannot create files in, and whether it is immutable rather
    than read-only.

    As root, permissions do not bind, so the directory is made immutable (``chattr +i``),
    which binds root too.
    """
    locked = tmp_path / "locked"
    locked.mkdir()
    if os.geteuid() != 0:
        locked.chmod(0o555)
        yield locked, False
        locked.chmod(0o755)
        return
    chattr = shutil.which("chattr")
    if chattr is None or subprocess.run([chattr, "+i", str(locked)]).returncode != 0:
        pytest.skip("running as root on a file system without chattr +i")
    try:
        yield locked, True
    finally:
        subprocess.run([chattr, "-i", str(locked)], check=True)


@pytest.mark.asyncio
async def test_unwritable_directory(unwritable_dir: tuple[Path, bool]) -> None:
    """A directory where the database cannot be created is refused with its path and the fix."""
    locked, _ = unwritable_dir
    with pytest.raises(StorageConfigError) as caught:
        await open_storage(url_of(locked / "x.db"))
    assert f"the directory {locked} is not writable" in str(caught.value)
    assert "fix its permissions or choose another path" in str(caught.value)
    assert not (locked / "x.db").exists()


@pytest.mark.asyncio
async def test_missing_private_api_is_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An aiosqlite without Connection._execute fails at open with a message that says why
    it is needed and what to install, not later at the first write."""
    monkeypatch.delattr(aiosqlite.Connection, "_execute")
    with pytest.raises(StorageConfigError) as caught:
        await open_storage(url_of(tmp_path / "x.db"))
    assert "Connection._execute" in str(caught.value)
    assert "pip install" in str(caught.value)


# -- another process holds the lock ----------------------------------------------------------


@pytest.mark.slow
@pytest.mark.asyncio
async def test_locked_by_another_process_is_busy_error(tmp_path: Path) -> None:
    """While another process holds the write lock past busy_timeout and the retries, an
    update fails with StorageBusyError naming the file and the fix; reads still work, the
    prior state is intact, and writes succeed once the lock is released."""
    path = tmp_path / "busy.db"
    async with await open_storage(url_of(path, "busy_timeout=150&busy_retries=1")) as storage:
        await storage.set("k", {"v": "prior"})
        with write_lock_held_by_another_process(path):
            started = time.monotonic()
            with pytest.raises(StorageBusyError) as caught:
                await storage.update("k", lambda current: {"v": "new"})
            waited = time.monotonic() - started
            assert await storage.get("k") == {"v": "prior"}
        message = str(caught.value)
        assert str(path) in message
        assert "2 attempt(s) of busy_timeout=150 ms" in message
        assert "busy_timeout=30000" in message
        assert waited >= 0.25  # two attempts of 150 ms each
        assert await storage.get("k") == {"v": "prior"}
        assert await storage.update("k", lambda current: {"v": "after"}) == {"v": "after"}


@pytest.mark.slow
@pytest.mark.asyncio
async def test_busy_write_retries_until_the_lock_is_released(tmp_path: Path) -> None:
    """A write that outlasts one busy_timeout tries again (busy_retries) and commits as
    soon as the other process lets the lock go; the write is not lost or duplicated."""
    path = tmp_path / "retry.db"
    async with await open_storage(url_of(path, "busy_timeout=100&busy_retries=20")) as storage:
        await storage.set("k", [0])
        with write_lock_held_by_another_process(path) as release:
            loop = asyncio.get_running_loop()
            timer = loop.call_later(0.35, release)  # well past the first 100 ms attempt
            started = time.monotonic()
            result = await storage.update("k", lambda current: [*current, 1])
            waited = time.monotonic() - started
            timer.cancel()
        assert result == [0, 1]
        assert await storage.get("k") == [0, 1]
        assert 0.3 <= waited < 2.1


@pytest.mark.slow
@pytest.mark.asyncio
async def test_locked_database_through_the_layer(tmp_path: Path) -> None:
    """Through the layer handle a locked database raises StorageBusyError, emits an
    UpdateRejected event with reason "storage", and leaves the stored state as it was."""
    path = tmp_path / "busy.db"
    layer = scratchpad()
    async with await open_storage(url_of(path, "busy_timeout=100&busy_retries=0")) as storage:
        scoped = ScopedStorage(storage, "scratchpad", "t1")
        ctx = ExecutionContext(thread_id="t1")
        await layer.init(storage=scoped, scope_key="t1", ctx=ctx)
        handle = ctx.context["scratchpad"]
        await handle.update({"goal": "prior"})
        with (
            capture_events(ctx.events) as events,
            write_lock_held_by_another_process(path),
            pytest.raises(StorageBusyError),
        ):
            await handle.update({"goal": "lost?"})
        (rejected,) = events.of(UpdateRejected)
        assert (rejected.hook, rejected.reason, rejected.scope_key) == ("api", "storage", "t1")
        assert str(path) in rejected.message
        assert await scoped.get("state") == {"goal": "prior"}
        assert handle.snapshot == {"goal": "prior"}


# -- transactions -----------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_concurrent_writes_share_transactions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Writes that wait while a transaction runs are committed together (group commit), each
    sees the result of the one before it, and a failing one spoils none of its neighbours."""
    spy = BatchSpy(monkeypatch)
    async with await SqliteStorage.open(url_of(tmp_path / "g.db")) as storage:

        def add(n: int) -> Any:
            def fn(current: Any) -> Any:
                if n % 10 == 3:
                    raise KeyError(f"refused {n}")
                return [*(current or []), n]

            return fn

        results = await asyncio.gather(
            *(storage.update("list", add(n)) for n in range(100)), return_exceptions=True
        )
        kept = [n for n in range(100) if n % 10 != 3]
        assert await storage.get("list") == kept
        for n, result in enumerate(results):
            if n % 10 == 3:
                assert isinstance(result, KeyError)
            else:
                assert result == [k for k in kept if k <= n]
    assert sum(spy.sizes) == 100
    assert len(spy.sizes) < 20  # combined: far fewer transactions than writes
    assert max(spy.sizes) > 1


@pytest.mark.asyncio
async def test_mixed_jobs_in_one_batch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """set, delete and update on the same key inside one transaction apply in order."""
    spy = BatchSpy(monkeypatch)
    async with await SqliteStorage.open(url_of(tmp_path / "m.db")) as storage:
        await storage.set("k", [0])
        spy.sizes.clear()
        outcomes = await in_one_transaction(
            storage,
            storage.update("k", lambda current: [*current, 1]),
            storage.set("k", ["reset"]),
            storage.update("k", lambda current: [*current, 2]),
            storage.delete("k"),
            storage.update("k", lambda current: {"was": current}),
            storage.set("other", "x"),
        )
        assert outcomes == [[0, 1], None, ["reset", 2], None, {"was": None}, None]
        assert await storage.get_many(["k", "other"]) == {"k": {"was": None}, "other": "x"}
    assert spy.sizes == [1, 6]


@pytest.mark.asyncio
async def test_set_then_failing_update_in_one_batch_keeps_the_set(tmp_path: Path) -> None:
    """A failing update after a set of the same key in one transaction writes the set."""

    def fail(current: Any) -> Any:
        raise ValueError("refused")

    async with await SqliteStorage.open(url_of(tmp_path / "s.db")) as storage:
        outcomes = await asyncio.gather(
            storage.set("k", {"set": 1}), storage.update("k", fail), return_exceptions=True
        )
        assert outcomes[0] is None
        assert isinstance(outcomes[1], ValueError)
        assert await storage.get("k") == {"set": 1}


@pytest.mark.asyncio
async def test_update_sees_a_row_another_connection_rewrote(tmp_path: Path) -> None:
    """The writer reuses values it committed itself only while the row's text is unchanged:
    a row rewritten by another connection (another process) is read afresh."""
    path = tmp_path / "r.db"
    seen: list[Any] = []

    def record(current: Any) -> Any:
        seen.append(current)
        return {**current, "n": current["n"] + 1}

    async with await SqliteStorage.open(url_of(path)) as storage:
        await storage.update("k", lambda current: {"n": 1, "by": "us"})
        await storage.update("k", record)
        other = sqlite3.connect(path)
        with other:
            other.execute(
                "UPDATE scratchpad_kv SET value = ? WHERE key = ?", ('{"n": 10, "by": "them"}', "k")
            )
        other.close()
        assert await storage.update("k", record) == {"n": 11, "by": "them"}
        assert seen == [{"n": 1, "by": "us"}, {"n": 10, "by": "them"}]


@pytest.mark.asyncio
async def test_rows_it_committed_are_not_read_again_until_another_connection_writes(
    tmp_path: Path,
) -> None:
    """While no other connection has committed (PRAGMA data_version unchanged), the writer
    takes a row it committed from memory without reading the table; once another
    connection writes anything, it reads rows again."""
    path = tmp_path / "v.db"
    async with await SqliteStorage.open(url_of(path)) as storage:
        statements: list[str] = []
        writer = storage._writer
        await writer.call(writer.conn.set_trace_callback, statements.append)

        def reads() -> int:
            return sum(1 for sql in statements if sql.startswith("SELECT CAST(value"))

        await storage.update("k", lambda current: {"n": 1})
        first_reads = reads()
        for n in range(2, 6):
            await storage.update("k", lambda current, n=n: {**current, "n": n})
        assert reads() == first_reads

        other = sqlite3.connect(path)
        with other:
            other.execute(
                "INSERT INTO scratchpad_kv (key, value, updated_at) VALUES ('elsewhere', '1', 0)"
            )
        other.close()
        assert await storage.update("k", lambda current: {**current, "n": 6}) == {"n": 6}
        assert reads() == first_reads + 1


@pytest.mark.asyncio
async def test_update_hands_fn_the_value_it_committed_without_parsing_again(
    tmp_path: Path,
) -> None:
    """An unchanged row is handed to the next update as the very object last committed,
    which is what lets the layer skip validating a state it wrote itself."""
    async with await SqliteStorage.open(url_of(tmp_path / "o.db")) as storage:
        first = await storage.update("k", lambda current: {"n": 1})
        handed: list[Any] = []
        await storage.update("k", lambda current: handed.append(current) or {"n": 2})
        assert handed[0] is first
        assert await storage.get("k") == {"n": 2}


class KnowingCommit:
    """A commit function that says which value its caller holds as stored (the
    ``known`` a backend may hand back instead of parsing the row), and records what it
    was handed."""

    def __init__(self, held: Revision) -> None:
        self.known = (held.value, held.revision)
        self.handed: list[Revision] = []

    def __call__(self, current: Revision) -> Commit:
        self.handed.append(current)
        return Commit({**current.value, "n": current.value["n"] + 1})


@pytest.mark.asyncio
async def test_a_row_the_caller_holds_is_handed_back_unparsed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A row the writer has not cached (written by ``set``, or by another process) whose
    stored text is the known value's JSON is handed to ``fn`` as that very object: no
    parse in the writer's thread."""
    async with await SqliteStorage.open(url_of(tmp_path / "k.db")) as storage:
        await storage.set("k", {"n": 1, "notes": ["a", "b"]})
        held = await storage.get_revision("k")
        assert held is not None
        parsed: list[bytes] = []
        parse = writer_module.decode_row
        monkeypatch.setattr(
            writer_module, "decode_row", lambda *args: parsed.append(args[2]) or parse(*args)
        )
        fn = KnowingCommit(held)
        assert (await storage.commit("k", fn, keep=0)).value == {"n": 2, "notes": ["a", "b"]}
        assert fn.handed[0].value is held.value
        assert fn.handed[0].revision == held.revision
        assert parsed == []


@pytest.mark.asyncio
async def test_a_known_value_is_not_trusted_on_its_revision_alone(tmp_path: Path) -> None:
    """Another program that stores a different value under the same revision (the
    contract forbids it, but a store is shared): the row is parsed, and the write lands on
    what is stored, never on the stale value the caller held."""
    path = tmp_path / "s.db"
    async with await SqliteStorage.open(url_of(path)) as storage:
        await storage.set("k", {"n": 1, "by": "us"})
        held = await storage.get_revision("k")
        assert held is not None
        other = sqlite3.connect(path)
        with other:
            other.execute(
                "UPDATE scratchpad_kv SET value = ? WHERE key = ?", ('{"n": 10, "by": "them"}', "k")
            )
        other.close()
        fn = KnowingCommit(held)
        committed = await storage.commit("k", fn, keep=0)
        assert fn.handed[0].revision == held.revision
        assert fn.handed[0].value == {"n": 10, "by": "them"}
        assert committed.value == {"n": 11, "by": "them"}
        assert await storage.get("k") == {"n": 11, "by": "them"}


@pytest.mark.asyncio
async def test_a_known_value_of_another_revision_is_not_used(tmp_path: Path) -> None:
    """The same text at another revision is still parsed: a value is known only at its
    own revision (the layer's checks of a state hang on it)."""
    path = tmp_path / "o.db"
    async with await SqliteStorage.open(url_of(path)) as storage:
        await storage.set("k", {"n": 1})
        held = await storage.get_revision("k")
        assert held is not None
        other = sqlite3.connect(path)
        with other:
            other.execute("UPDATE scratchpad_kv SET revision = revision + 1 WHERE key = 'k'")
        other.close()
        fn = KnowingCommit(held)
        await storage.commit("k", fn, keep=0)
        assert fn.handed[0].revision == held.revision + 1
        assert fn.handed[0].value == held.value
        assert fn.handed[0].value is not held.value


class Step(BaseModel):
    goal: str = ""
    done: list[str] = []


@pytest.mark.asyncio
@pytest.mark.parametrize("stored", ["fits", "fails the schema"])
async def test_the_layer_first_write_parses_only_a_state_it_did_not_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stored: str
) -> None:
    """A scope's first write after ``init`` hands the writer the state ``init`` loaded,
    which the writer then need not parse; a stored state ``init`` discarded (it fails
    the schema) is not that state, and the write starts over from the initial one."""
    layer = scratchpad(schema=Step)
    seed = {"goal": "ship", "done": ["plan"]} if stored == "fits" else {"goal": 7}
    async with await open_storage(url_of(tmp_path / "l.db")) as storage:
        scoped = ScopedStorage(storage, "scratchpad", "t1")
        await scoped.set("state", seed)
        ctx = ExecutionContext(thread_id="t1")
        await layer.init(storage=scoped, scope_key="t1", ctx=ctx)
        parsed: list[bytes] = []
        parse = writer_module.decode_row
        monkeypatch.setattr(
            writer_module, "decode_row", lambda *args: parsed.append(args[2]) or parse(*args)
        )
        await ctx.context["scratchpad"].update({"done": ["plan", "build"]})
        if stored == "fits":
            assert parsed == []
            assert await scoped.get("state") == {"goal": "ship", "done": ["plan", "build"]}
        else:
            assert len(parsed) == 1
            assert await scoped.get("state") == {"done": ["plan", "build"]}


@pytest.mark.asyncio
async def test_a_row_sqlite_refuses_fails_only_its_own_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When SQLite refuses one row of a transaction (here a trigger), only the writes of
    that key fail, with StorageError naming the file and the cause; the other writes of
    the same transaction commit, and the storage keeps working."""
    path = tmp_path / "t.db"
    spy = BatchSpy(monkeypatch)
    async with await SqliteStorage.open(url_of(path)) as storage:
        await storage.set("a", "prior")
        with sqlite3.connect(path) as conn:
            conn.execute(
                "CREATE TRIGGER poison BEFORE INSERT ON scratchpad_kv WHEN NEW.key = 'poison' "
                "BEGIN SELECT RAISE(ABORT, 'poisoned key'); END"
            )
        spy.sizes.clear()
        outcomes = await in_one_transaction(
            storage,
            storage.update("a", lambda current: "changed"),
            storage.update("poison", lambda current: 1),
            storage.update("poison", lambda current: (current or 0) + 1),
            storage.update("b", lambda current: "new"),
            return_exceptions=True,
        )
        assert spy.sizes == [1, 4]  # one transaction (after the write before it)
        assert outcomes[0] == "changed"
        assert outcomes[3] == "new"
        for error in outcomes[1:3]:
            assert isinstance(error, StorageError)
            assert "poisoned key" in str(error)
            assert str(path) in str(error)
        assert await storage.get_many(["a", "b", "poison"]) == {"a": "changed", "b": "new"}
        assert await storage.update("a", lambda current: current + "!") == "changed!"


@pytest.mark.asyncio
async def test_a_failed_commit_fails_the_whole_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When the transaction itself fails (here: COMMIT refused by a deferred foreign key),
    it is rolled back and every write of the batch fails with StorageError; nothing is
    half-applied, and the storage keeps working."""
    path = tmp_path / "t.db"
    async with await SqliteStorage.open(url_of(path)) as storage:
        await storage.set("a", "prior")

        def fail_commit(conn: sqlite3.Connection) -> None:
            conn.execute("PRAGMA foreign_keys = ON")
            conn.execute(
                "CREATE TABLE child (k TEXT REFERENCES missing(k) DEFERRABLE INITIALLY DEFERRED)"
            )
            conn.execute("CREATE TABLE missing (k TEXT PRIMARY KEY)")
            conn.execute(
                "CREATE TRIGGER orphan AFTER UPDATE ON scratchpad_kv WHEN NEW.key = 'a' "
                "BEGIN INSERT INTO child VALUES ('nobody'); END"
            )

        await storage._writer.call(fail_commit, storage._writer.conn)
        outcomes = await in_one_transaction(
            storage,
            storage.update("a", lambda current: "changed"),
            storage.update("b", lambda current: "new"),
            return_exceptions=True,
        )
        for error in outcomes:
            assert isinstance(error, StorageError)
            assert str(path) in str(error)
        assert await storage.get_many(["a", "b"]) == {"a": "prior"}
        assert await storage.update("b", lambda current: "later") == "later"


@pytest.mark.asyncio
async def test_failed_read_inside_a_transaction_is_a_storage_error(tmp_path: Path) -> None:
    """When SQLite fails the read of an update (here: the table was dropped behind the
    storage's back), the caller gets StorageError naming the file, not a raw sqlite3 error."""
    path = tmp_path / "dropped.db"
    async with await SqliteStorage.open(url_of(path)) as storage:
        await storage.set("k", 1)
        with sqlite3.connect(path) as conn:
            conn.execute("DROP TABLE scratchpad_kv")
        with pytest.raises(StorageError) as caught:
            await storage.update("k", lambda current: 2)
        assert "no such table" in str(caught.value)
        assert str(path) in str(caught.value)
        assert not isinstance(caught.value, sqlite3.Error)


@pytest.mark.asyncio
async def test_aclose_waits_for_queued_writes(tmp_path: Path) -> None:
    """aclose lets every write already submitted commit before closing; later calls raise."""
    path = tmp_path / "c.db"
    storage = await SqliteStorage.open(url_of(path))
    writes = [
        asyncio.ensure_future(storage.update(f"k{n}", lambda current, n=n: n)) for n in range(50)
    ]
    await asyncio.sleep(0)  # the writes are submitted, most still queued
    await storage.aclose()
    assert [w.result() for w in writes] == list(range(50))
    with pytest.raises(StorageError, match="is closed"):
        await storage.get("k0")
    with pytest.raises(StorageError, match="is closed"):
        await storage.set("k0", 1)
    async with await SqliteStorage.open(url_of(path)) as reopened:
        assert await reopened.get_many(f"k{n}" for n in range(50)) == {
            f"k{n}": n for n in range(50)
        }


# -- durability -------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_data_survives_reopen(tmp_path: Path) -> None:
    """What was written is there after closing and opening the file again."""
    url = url_of(tmp_path / "r.db", "synchronous=full")
    async with await open_storage(url) as storage:
        await storage.set("a", {"n": 2**70, "s": "ü"})
        await storage.update("b", lambda current: [current])
        await storage.set("gone", 1)
        await storage.delete("gone")
    async with await open_storage(url) as storage:
        assert await storage.get_many(["a", "b", "gone"]) == {
            "a": {"n": 2**70, "s": "ü"},
            "b": [None],
        }


@pytest.mark.slow
@pytest.mark.asyncio
async def test_committed_update_survives_process_exit(tmp_path: Path) -> None:
    """An update that returned survives its process dying without closing the storage
    (the default synchronous=normal is durable against process crashes)."""
    path = tmp_path / "crash.db"
    code = textwrap.dedent(
        """
        import asyncio, os, sys
        from noetic_scratchpad import open_storage

        async def main():
            storage = await open_storage("sqlite:///" + sys.argv[1])
            await storage.update("k", lambda current: {"written": "before the crash"})
            os._exit(0)  # no close, no flush, no atexit

        asyncio.run(main())
        """
    )
    proc = python(code, str(path))
    _, err = await asyncio.to_thread(finish, proc, 60)
    assert proc.returncode == 0, err
    async with await open_storage(url_of(path)) as storage:
        assert await storage.get("k") == {"written": "before the crash"}


@pytest.mark.slow
@pytest.mark.asyncio
async def test_unclosed_storage_does_not_hang_the_exit(tmp_path: Path) -> None:
    """A process that never closes its storage (kept in a global) still exits, and what it
    wrote is stored: the connection threads do not hold the interpreter open."""
    path = tmp_path / "unclosed.db"
    code = textwrap.dedent(
        """
        import asyncio, sys
        from noetic_scratchpad import open_storage

        KEEP = []

        async def main():
            storage = await open_storage("sqlite:///" + sys.argv[1])
            await storage.set("k", "written")
            KEEP.append(storage)  # never closed

        asyncio.run(main())
        """
    )
    proc = python(code, str(path))
    _, err = await asyncio.to_thread(finish, proc, 30)
    assert proc.returncode == 0, err
    async with await open_storage(url_of(path)) as storage:
        assert await storage.get("k") == "written"


@pytest.mark.slow
@pytest.mark.asyncio
async def test_a_watch_left_running_does_not_hang_the_exit(tmp_path: Path) -> None:
    """A process whose loop is stopped and closed while a watch of other processes'
    changes still runs (``run_forever``, no ``asyncio.run`` to cancel its tasks), its
    storage never closed, still exits: the watch's polls run on threads that never hold
    the interpreter open. Polled from anyio's worker threads, it hung at exit every time:
    such a thread stops only when the task it is bound to ends, and this one never does."""
    code = textwrap.dedent(
        """
        import asyncio, sys
        from noetic_scratchpad import open_storage

        async def main():
            storage = await open_storage("sqlite:///" + sys.argv[1])

            async def follow():
                async for _ in storage.watch_changes():
                    pass

            asyncio.get_running_loop().create_task(follow())
            await storage.set("k", "written")
            await asyncio.sleep(0.3)  # several polls

        loop = asyncio.new_event_loop()
        loop.create_task(main())
        loop.call_later(0.5, loop.stop)
        loop.run_forever()
        loop.close()
        print("closed", flush=True)
        """
    )
    proc = python(code, str(tmp_path / "watched.db"))
    out, err = await asyncio.to_thread(finish, proc, 30)
    assert (proc.returncode, out) == (0, "closed\n"), err


@pytest.mark.asyncio
async def test_a_lock_met_while_preparing_a_new_file_is_retried_within_busy_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Processes opening a new file together race to switch it to WAL and create its
    tables; SQLite answers some of those lock upgrades with SQLITE_BUSY at once, without
    waiting (to avoid a deadlock), so the preparation is tried again until busy_timeout."""
    from noetic_scratchpad.storage.sqlite import connection

    prepare = connection._prepare_writer
    refusals = iter([True, True])

    def busy_twice(conn: Any, options: Any) -> Any:
        if next(refusals, False):
            raise sqlite3.OperationalError("database is locked")
        return prepare(conn, options)

    monkeypatch.setattr(connection, "_prepare_writer", busy_twice)
    storage = await open_storage(f"sqlite:///{tmp_path / 'new.db'}?busy_timeout=2000")
    async with storage:
        await storage.set("k", 1)
        assert await storage.get("k") == 1

    refusals = iter([True] * 1000)
    with pytest.raises(StorageBusyError, match="locked"):
        await open_storage(f"sqlite:///{tmp_path / 'other.db'}?busy_timeout=200")
