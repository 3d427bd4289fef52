"""Export, import and erasure of a data subject, on every backend through the contract.

A subject is a resource id and the thread ids the application lists for it; every
layer's scope of each id is reached (see noetic_scratchpad/portability.py).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from noetic_scratchpad import scratchpad
from noetic_scratchpad.keys import scope_prefix, state_key
from noetic_scratchpad.portability import (
    FORMAT,
    ExportFormatError,
    ImportConflictError,
    Subject,
    erase_subject,
    export_subject,
    import_subject,
)
from noetic_scratchpad.storage import StorageBackend

pytestmark = pytest.mark.asyncio

ALICE = Subject("alice", ("t1",))


@pytest.fixture(
    params=["memory", "sqlite", "postgres", "redis", "namespaced-sqlite", "faulty-memory"]
)
def backend_kind(request: pytest.FixtureRequest) -> str:
    kind: str = request.param
    return kind


async def write_alice_and_bob(storage: StorageBackend) -> None:
    """alice: two writes to her resource scope, one to her thread t1, one in another
    layer; bob: a resource scope, thread t2, and a resource named like alice's prefix."""
    user = await scratchpad(scope="resource").open(storage, thread_id="t1", resource_id="alice")
    await user.update({"name": "Alice"})
    await user.update({"city": "Lyon"})
    thread = await scratchpad().open(storage, thread_id="t1")
    await thread.update({"goal": "plan a trip"})
    await storage.set(state_key("notes", "resource", "alice"), {"n": 1})  # another layer
    bob = await scratchpad(scope="resource").open(storage, thread_id="t2", resource_id="bob")
    await bob.update({"name": "Bob"})
    await (await scratchpad().open(storage, thread_id="t2")).update({"goal": "bob's"})
    lookalike = await scratchpad(scope="resource").open(
        storage, thread_id="x", resource_id="alice2"
    )
    await lookalike.update({"name": "not alice"})


async def test_an_export_holds_every_layers_state_and_journal_of_the_subject(
    storage: StorageBackend,
) -> None:
    await write_alice_and_bob(storage)
    document = await export_subject(storage, ALICE)
    json.dumps(document)  # plain JSON
    assert document["format"] == FORMAT
    assert document["version"] == 1
    assert document["subject"] == {"resource": "alice", "threads": ["t1"]}
    scopes = {(s["layer"], s["kind"], s["id"]): s["keys"] for s in document["scopes"]}
    assert set(scopes) == {
        ("scratchpad", "resource", "alice"),
        ("scratchpad", "thread", "t1"),
        ("notes", "resource", "alice"),
    }
    state = scopes[("scratchpad", "resource", "alice")]["state"]
    assert state["value"] == {"name": "Alice", "city": "Lyon"}
    assert state["revision"] == 2
    assert [row["revision"] for row in state["journal"]] == [2, 1]
    assert state["journal"][0]["entry"]["update"] == {"city": "Lyon"}
    assert scopes[("notes", "resource", "alice")]["state"]["value"] == {"n": 1}
    assert "Bob" not in json.dumps(document)
    assert "not alice" not in json.dumps(document)


async def test_the_layers_named_are_the_only_ones_exported(storage: StorageBackend) -> None:
    await write_alice_and_bob(storage)
    document = await export_subject(storage, ALICE, layers=["notes"])
    assert [(s["layer"], s["id"]) for s in document["scopes"]] == [("notes", "alice")]


async def test_erasure_leaves_nothing_of_the_subject_and_everything_of_others(
    storage: StorageBackend,
) -> None:
    await write_alice_and_bob(storage)
    before = {key: await storage.get(key) for key in await storage.list()}
    report = await erase_subject(storage, ALICE)
    assert report.keys_deleted == 3
    assert report.deleted_records is not None
    assert report.deleted_records >= 3
    assert report.as_json()["complete"] is True
    left = await storage.list()
    assert not any("/alice/" in key or "/t1/" in key for key in left)
    assert {key: before[key] for key in left} == {key: await storage.get(key) for key in left}
    assert len(left) == len(before) - 3  # bob's, t2's and alice2's stay
    assert (await export_subject(storage, ALICE))["scopes"] == []


async def test_an_erased_key_forgets_its_revisions_and_one_reset_earlier_too(
    storage: StorageBackend,
) -> None:
    """The records kept of deleted keys (their last revisions) name the scope too: an
    erasure forgets them, so the key written again starts over at revision 1. A scope
    that a reset deleted before the erasure is forgotten the same way."""
    key = state_key("scratchpad", "resource", "alice")
    reset_earlier = state_key("scratchpad", "thread", "t1")
    for _ in range(3):
        await storage.set(key, {"n": 1})
        await storage.set(reset_earlier, {"n": 1})
    await storage.delete(reset_earlier)  # a reset: only its retired revision is left
    await storage.set(state_key("scratchpad", "resource", "bob"), {"n": 1})
    await storage.delete(state_key("scratchpad", "resource", "bob"))

    report = await erase_subject(storage, ALICE)
    assert report.deleted_records == 2  # alice's key (deleted now) and t1's (before)

    await storage.set(key, {"n": 2})
    await storage.set(reset_earlier, {"n": 2})
    assert (await storage.get_revision(key)).revision == 1  # type: ignore[union-attr]
    assert (await storage.get_revision(reset_earlier)).revision == 1  # type: ignore[union-attr]
    await storage.set(state_key("scratchpad", "resource", "bob"), {"n": 2})
    bob = await storage.get_revision(state_key("scratchpad", "resource", "bob"))
    assert bob is not None
    assert bob.revision == 2


async def test_an_import_restores_state_and_history_after_an_erasure(
    storage: StorageBackend,
) -> None:
    await write_alice_and_bob(storage)
    document = await export_subject(storage, ALICE)
    await erase_subject(storage, ALICE)

    report = await import_subject(storage, json.loads(json.dumps(document)))
    assert len(report.imported) == 3
    assert not report.replaced
    assert not report.unchanged
    again = await export_subject(storage, ALICE)
    assert essentials(again) == essentials(document)  # revisions and times are the target's
    user = await scratchpad(scope="resource").open(storage, thread_id="t1", resource_id="alice")
    assert user.snapshot == {"name": "Alice", "city": "Lyon"}
    history = await user.history()
    assert [entry.update for entry in history] == [{"city": "Lyon"}, {"name": "Alice"}]
    await user.revert(history[-1].revision)  # the rebuilt history can be reverted to
    assert user.snapshot == {"name": "Alice"}


def essentials(document: dict[str, Any]) -> list[Any]:
    """Each key's value and journal entries, without revisions and times."""
    return [
        (
            scope["layer"],
            scope["kind"],
            scope["id"],
            name,
            stored["value"],
            [row["entry"] for row in stored["journal"]],
        )
        for scope in document["scopes"]
        for name, stored in scope["keys"].items()
    ]


async def test_importing_again_changes_nothing(storage: StorageBackend) -> None:
    await write_alice_and_bob(storage)
    document = await export_subject(storage, ALICE)
    report = await import_subject(storage, document)
    assert len(report.unchanged) == 3
    assert not report.imported
    assert not report.replaced
    assert (await storage.get_revision(state_key("scratchpad", "resource", "alice"))).revision == 2  # type: ignore[union-attr]


async def test_a_conflicting_import_writes_nothing_unless_told_to_replace(
    storage: StorageBackend,
) -> None:
    await write_alice_and_bob(storage)
    document = await export_subject(storage, ALICE)
    user = await scratchpad(scope="resource").open(storage, thread_id="t1", resource_id="alice")
    await user.update({"city": "Paris"})
    await erase_subject(storage, Subject(threads=("t1",)))  # t1 would import cleanly

    with pytest.raises(ImportConflictError) as refused:
        await import_subject(storage, document)
    assert refused.value.conflicts == [
        {"layer": "scratchpad", "kind": "resource", "id": "alice", "key": "state", "revision": 3}
    ]
    assert "replace" in str(refused.value)
    assert await storage.list(scope_prefix("scratchpad", "thread", "t1")) == []  # nothing written

    report = await import_subject(storage, document, replace=True)
    assert [row["id"] for row in report.replaced] == ["alice"]
    assert await storage.get(state_key("scratchpad", "resource", "alice")) == {
        "name": "Alice",
        "city": "Lyon",
    }
    history = await (
        await scratchpad(scope="resource").open(storage, thread_id="t1", resource_id="alice")
    ).history()
    assert [entry.update for entry in history] == [{"city": "Lyon"}, {"name": "Alice"}]


@pytest.mark.parametrize(
    ("document", "says"),
    [
        ({"format": "other"}, "not a noetic-scratchpad/export document"),
        ({"format": FORMAT, "version": 9}, "version 9"),
        ({"format": FORMAT, "version": 1, "scopes": {}}, "'scopes' list"),
        (
            {
                "format": FORMAT,
                "version": 1,
                "scopes": [{"layer": "scratchpad", "kind": "resource", "id": "", "keys": {}}],
            },
            "non-empty",
        ),
        (
            {
                "format": FORMAT,
                "version": 1,
                "scopes": [
                    {"layer": "scratchpad", "kind": "user", "id": "alice", "keys": {}},
                ],
            },
            "layer and kind",
        ),
        (
            {
                "format": FORMAT,
                "version": 1,
                "scopes": [
                    {"layer": "scratchpad", "kind": "thread", "id": "t", "keys": {"state": {}}},
                ],
            },
            "has no 'value'",
        ),
    ],
)
async def test_a_document_that_is_not_an_export_is_refused_before_any_write(
    storage: StorageBackend, document: dict[str, object], says: str
) -> None:
    with pytest.raises(ExportFormatError, match=says):
        await import_subject(storage, document)
    assert await storage.list() == []


async def test_a_subject_names_at_least_one_valid_id() -> None:
    with pytest.raises(ValueError, match="resource id, a thread id"):
        Subject()
    with pytest.raises(ValueError, match="non-empty"):
        Subject("")
    assert Subject("a", ("t", "t")).threads == ("t",)


async def test_a_backend_without_the_capability_is_reported_incomplete() -> None:
    from tests.storage.example_backend import example_backend

    async with example_backend()() as backend:
        await backend.set(state_key("scratchpad", "resource", "alice"), {"n": 1})
        report = await erase_subject(backend, ALICE)
    assert report.keys_deleted == 1
    assert report.deleted_records is None
    assert report.as_json()["complete"] is False
