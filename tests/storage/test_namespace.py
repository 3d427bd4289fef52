"""``with_namespace``: a backend seen under a prefix, as litestar's stores have it. (The
contract suite runs a namespace over SQLite as one of its backends.)"""

from __future__ import annotations

from typing import Any

import pytest

from noetic_scratchpad.storage import MemoryStorage, NamespacedStorage, ScopedStorage
from noetic_scratchpad.storage.base import Commit, Revision

pytestmark = pytest.mark.asyncio


async def test_a_namespace_keeps_its_keys_under_its_prefix() -> None:
    """Every write lands under the prefix in the backend; reads, scans and deletes see only
    the namespace's keys, named without the prefix."""
    backend = MemoryStorage()
    await backend.set("outside", 0)
    users = backend.with_namespace("users/")
    await users.set("ann", {"n": 1})
    await users.commit("bob", lambda current: Commit({"n": 2}, "made"), keep=5)
    assert await backend.list() == ["outside", "users/ann", "users/bob"]
    assert await users.list() == ["ann", "bob"]
    assert [info.key for info in await users.describe()] == ["ann", "bob"]
    assert await users.get_many(["ann", "outside"]) == {"ann": {"n": 1}}
    assert await users.get_revision("bob") == Revision({"n": 2}, 1)
    assert [row.entry for row in (await users.journal_view("bob", limit=5)).rows] == ["made"]
    await users.delete("ann")
    assert await backend.list() == ["outside", "users/bob"]


async def test_namespaces_nest_and_closing_one_leaves_the_backend_open() -> None:
    backend = MemoryStorage()
    inner = backend.with_namespace("a/").with_namespace("b/")
    assert isinstance(inner, NamespacedStorage)
    assert inner.backend is backend  # one level of forwarding, however deep the nesting
    async with inner:
        await inner.set("k", 1)
    assert await backend.get("a/b/k") == 1
    await backend.set("after", 2)  # still open


async def test_a_scope_is_a_namespace_named_by_its_scope() -> None:
    backend = MemoryStorage()
    scoped = ScopedStorage(backend, "scratchpad", "t1")
    assert isinstance(scoped, NamespacedStorage)
    await scoped.set("state", {"goal": "g"})
    assert await backend.list() == ["scopes/scratchpad/thread/t1/state"]
    assert [info.key for info in await scoped.describe()] == ["state"]


async def test_a_committer_commits_one_key_under_the_prefix_and_honours_a_subclass() -> None:
    """``committer(key)`` is ``commit`` of that key bound once: the backend's own under the
    full key, or the subclass's ``commit`` where a subclass changed it."""
    backend = MemoryStorage()
    commit = backend.with_namespace("users/").committer("ann")
    first = await commit(lambda current: Commit({"n": current.revision + 1}), keep=0)
    second = await commit(lambda current: Commit({"n": current.revision + 1}), keep=0)
    assert (first.revision, second.revision) == (1, 2)
    assert await backend.get("users/ann") == {"n": 2}

    class Counting(NamespacedStorage):
        commits = 0

        def commit(self, key: str, fn: Any, *, keep: int) -> Any:
            Counting.commits += 1
            return super().commit(key, fn, keep=keep)

    counted = Counting(backend, "other/").committer("k")
    await counted(lambda current: Commit("v"), keep=0)
    assert Counting.commits == 1
    assert await backend.get("other/k") == "v"
