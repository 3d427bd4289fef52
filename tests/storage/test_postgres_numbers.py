"""Values as JSON text on PostgreSQL: new tables keep every number as written (json), and
tables of earlier versions (jsonb) keep working, are reported once at open with the
statements that convert them, and read back exactly once converted."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from noetic_scratchpad import open_storage
from noetic_scratchpad.storage import StorageBackend
from noetic_scratchpad.storage.base import Commit, Revision

from . import test_postgres_journal
from .test_contract import assert_identical
from .test_postgres_journal import Tables, make_tables_of_the_previous_version

pytestmark = [pytest.mark.postgres, pytest.mark.asyncio]

tables = test_postgres_journal.tables  # the fixture: a test's own tables

NUMBERS = {"z": -0.0, "e": 1e20, "big": 1.5e300, "one": 1.0, "n": [1, 2**70, 5e-324]}


async def write_and_read(storage: StorageBackend, prefix: str) -> list[Any]:
    """Write NUMBERS through set, update and commit (keys under ``prefix``); what get,
    get_many, get_revision and the journal read back."""
    await storage.set(f"{prefix}/set", NUMBERS)
    await storage.update(f"{prefix}/update", lambda _current: NUMBERS)
    await storage.commit(f"{prefix}/commit", lambda _c: Commit(NUMBERS, NUMBERS), keep=5)
    found = await storage.get_revision(f"{prefix}/commit")
    assert found is not None
    (row,) = await storage.journal(f"{prefix}/commit", limit=5)
    many = await storage.get_many([f"{prefix}/update"])
    return [await storage.get(f"{prefix}/set"), many[f"{prefix}/update"], found.value, row.entry]


async def test_new_tables_store_the_json_text_as_sent(tables: Tables) -> None:
    """The row holds the very text the backend sent: numbers and key order as written."""
    async with await open_storage(tables.url) as storage:
        await storage.set("k", {"z": -0.0, "a": 1e20, "one": 1.0})
        await storage.commit("k", lambda _c: Commit({"e": 1.5e300}, {"z": -0.0}), keep=5)
    (value,) = await tables.run(f"SELECT value::text FROM {tables.table} WHERE key = 'k'")
    (entry,) = await tables.run(f"SELECT entry::text FROM {tables.journal} WHERE key = 'k'")
    assert (value[0], entry[0]) == ('{"e":1.5e+300}', '{"z":-0.0}')


async def test_jsonb_tables_of_an_earlier_version_keep_working_and_are_reported(
    tables: Tables, caplog: pytest.LogCaptureFixture
) -> None:
    """Tables whose value and entry are jsonb open with one warning that names what jsonb
    changes and the statements that convert them; every read and write works on them, as
    jsonb stores numbers. Once converted, the old rows read as before and every number
    reads back as written, with no warning."""
    await make_tables_of_the_previous_version(tables)  # value and entry jsonb
    await tables.run(
        f"INSERT INTO {tables.table} (key, value, revision) VALUES ('old', '{{\"b\": 2.50}}', 1)"
    )
    await tables.run(f"INSERT INTO {tables.journal} (key, revision, entry) VALUES ('old', 1, '1')")
    with caplog.at_level(logging.WARNING, logger="noetic_scratchpad.storage.postgres"):
        async with await open_storage(tables.url) as storage:
            assert await storage.get_revision("old") == Revision({"b": 2.5}, 1)
            # As jsonb keeps numbers: the float 1e20 an integer, -0.0 zero.
            for got in await write_and_read(storage, "before"):
                assert got["e"] == 10**20
                assert str(got["z"]) == "0.0"
            assert await storage.commit("old", lambda c: Commit(c.value, 2), keep=5) == Revision(
                {"b": 2.5}, 2
            )
            assert [row.entry for row in await storage.journal("old", limit=5)] == [2, 1]
            await storage.delete("before/set")
            assert await storage.update("before/set", lambda current: current) is None
    (record,) = [r for r in caplog.records if r.levelno == logging.WARNING]
    message = record.getMessage()
    assert "jsonb" in message
    assert "-0.0 reads back as 0.0" in message
    converts = [
        f"ALTER TABLE {tables.table} ALTER COLUMN value TYPE json USING value::json",
        f"ALTER TABLE {tables.journal} ALTER COLUMN entry TYPE json USING entry::json",
    ]
    assert f"run as the tables' owner: {'; '.join(converts)}" in message

    for statement in converts:
        await tables.run(statement)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="noetic_scratchpad.storage.postgres"):
        async with await open_storage(tables.url) as storage:
            assert await storage.get_revision("old") == Revision({"b": 2.5}, 2)
            assert [row.entry for row in await storage.journal("old", limit=5)] == [2, 1]
            for got in await write_and_read(storage, "after"):
                assert_identical(got, NUMBERS)
    assert not caplog.records
