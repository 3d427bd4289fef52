"""The storage contract is small and complete: a wrapper cannot miss a method.

Every public coroutine of ``StorageBackend`` is abstract, so a wrapper (``FaultyStorage``,
a user's caching or metrics wrapper) that forgets one cannot even be built, instead of
silently inheriting a default that bypasses it. (``get_encoded`` and ``update_encoded``
once had such defaults: the fault tests wrapped ``update``, while production's SQLite path
called ``update_encoded``.)
"""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from noetic_scratchpad.storage import MemoryStorage, StorageBackend
from noetic_scratchpad.storage.base import Commit, Revision
from noetic_scratchpad.testing import FaultyStorage, InjectedFault

CONTRACT = {
    *("get", "set", "delete", "list", "get_many", "update", "describe", "aclose"),
    *("commit", "get_revision", "journal", "journal_view", "commit_with_journal"),
}


def test_every_public_coroutine_of_the_contract_is_abstract() -> None:
    public = {
        name
        for name, member in inspect.getmembers(StorageBackend)
        if not name.startswith("_") and inspect.iscoroutinefunction(member)
    }
    assert public == CONTRACT
    assert StorageBackend.__abstractmethods__ == frozenset(CONTRACT)


def test_a_wrapper_that_forgets_a_method_cannot_be_built() -> None:
    class Forgetful(StorageBackend):
        async def update(self, key: str, fn: Any) -> Any:
            return None

    with pytest.raises(TypeError, match="abstract"):
        Forgetful()  # type: ignore[abstract]


@pytest.mark.asyncio
async def test_the_layer_writes_through_a_method_a_wrapper_intercepts() -> None:
    """A scratchpad write on a FaultyStorage failing ``update`` and ``commit`` fails: the
    layer uses no other write method that could slip past the wrapper."""
    from noetic_scratchpad import ExecutionContext, ScopedStorage, StorageError, scratchpad

    faulty = FaultyStorage(MemoryStorage(), fail_on={"update", "commit"})
    layer = scratchpad()
    ctx = ExecutionContext(thread_id="t1")
    scoped = ScopedStorage.for_layer(faulty, layer, ctx)
    await layer.hooks.init(storage=scoped, scope_key=scoped.scope_key, ctx=ctx)
    with pytest.raises(StorageError) as caught:
        await ctx.context["scratchpad"].update({"n": 1})
    assert isinstance(caught.value.__cause__, InjectedFault)
    assert faulty.calls["update"] + faulty.calls["commit"] == 1
    assert await faulty.inner.list() == []


@pytest.mark.asyncio
async def test_a_failing_commit_fails_inside_the_write_and_writes_nothing() -> None:
    """FaultyStorage fails a ``commit`` as it fails an ``update``: the inner backend has run
    the transition (value and entry computed), then the write breaks; neither the state nor
    the journal changes, and the next call goes through."""
    inner = MemoryStorage()
    faulty = FaultyStorage(inner, faults=1)
    await faulty.commit("k", lambda current: Commit({"n": 1}, {"set": 1}), keep=5)
    faulty.fail_on = {"commit"}
    seen: list[Revision] = []

    def record(current: Revision) -> Commit:
        seen.append(current)
        return Commit({"n": 2}, {"set": 2})

    with pytest.raises(InjectedFault):
        await faulty.commit("k", record, keep=5)
    assert seen == [Revision({"n": 1}, 1)]  # the transition ran inside the write
    assert await inner.get_revision("k") == Revision({"n": 1}, 1)
    assert [row.entry for row in await inner.journal("k", limit=5)] == [{"set": 1}]
    assert await faulty.commit("k", record, keep=5) == Revision({"n": 2}, 2)
    assert faulty.calls["commit"] == 3
    assert faulty.injected == 1


@pytest.mark.asyncio
async def test_faulty_storage_fails_and_stalls_the_journal_reads() -> None:
    """``get_revision`` and ``journal`` are operations a FaultyStorage can fail or stall
    like any read, and they pass through to the inner backend otherwise."""
    inner = MemoryStorage()
    await inner.commit("k", lambda current: Commit(1, {"e": 1}), keep=3)
    faulty = FaultyStorage(inner, fail_on={"get_revision", "journal"})
    with pytest.raises(InjectedFault):
        await faulty.get_revision("k")
    with pytest.raises(InjectedFault):
        await faulty.journal("k", limit=3)
    faulty.heal()
    assert await faulty.get_revision("k") == Revision(1, 1)
    assert [row.revision for row in await faulty.journal("k", limit=3)] == [1]
    faulty.stall_on = {"journal"}
    faulty.stall_for = 0.01
    assert [row.entry for row in await faulty.journal("k", limit=3)] == [{"e": 1}]
    assert faulty.calls["journal"] == 3
