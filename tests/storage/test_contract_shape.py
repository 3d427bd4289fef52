"""The shape of the storage contract: a few primitives a stranger can implement, and
helpers built on them that a wrapper cannot be bypassed by.

Exactly the primitives are abstract: a backend (or a wrapper: ``FaultyStorage``, a user's
caching or metrics wrapper) that forgets one cannot even be built. Every other public
coroutine is a helper that reaches the backend only through the primitives, so a wrapper
that forwards the primitives intercepts every call, instead of a helper with a default
that bypasses it. (``get_encoded`` and ``update_encoded`` once had such defaults: the
fault tests wrapped ``update``, while production's SQLite path called ``update_encoded``.)
"""

from __future__ import annotations

import inspect
from collections import Counter
from typing import Any

import pytest

from noetic_scratchpad.storage import MemoryStorage, StorageBackend
from noetic_scratchpad.storage.base import (
    Commit,
    JournalCommitFn,
    JournalRow,
    JournalView,
    KeyInfo,
    Revision,
)
from noetic_scratchpad.testing import FaultyStorage, InjectedFault

from .example_backend import example_backend

PRIMITIVES = frozenset({"journal_view", "commit_with_journal", "describe", "delete", "aclose"})
HELPERS = frozenset(
    {"get", "get_revision", "journal", "list", "get_many", "commit", "update", "set"}
)


def test_exactly_the_primitives_are_abstract() -> None:
    """The rule a backend is held to: five abstract methods (at most six, as a contract a
    stranger can implement), and every other public coroutine a helper with a body."""
    public = {
        name
        for name, member in inspect.getmembers(StorageBackend)
        if not name.startswith("_") and inspect.iscoroutinefunction(member)
    }
    assert public == PRIMITIVES | HELPERS, "a new contract method must be a primitive or a helper"
    assert StorageBackend.__abstractmethods__ == PRIMITIVES
    assert len(PRIMITIVES) <= 6


def test_a_backend_that_forgets_a_primitive_cannot_be_built() -> None:
    class Forgetful(StorageBackend):
        async def journal_view(self, key: str, *, limit: int) -> Any:
            return None

    with pytest.raises(TypeError, match="abstract"):
        Forgetful()  # type: ignore[abstract]


class PrimitivesOnly(StorageBackend):
    """A wrapper that forwards the primitives and nothing else, counting them."""

    def __init__(self, inner: StorageBackend) -> None:
        self.inner = inner
        self.calls: Counter[str] = Counter()

    async def journal_view(self, key: str, *, limit: int) -> JournalView:
        self.calls["journal_view"] += 1
        return await self.inner.journal_view(key, limit=limit)

    async def commit_with_journal(
        self, key: str, fn: JournalCommitFn, *, keep: int, after: int
    ) -> Revision:
        self.calls["commit_with_journal"] += 1
        return await self.inner.commit_with_journal(key, fn, keep=keep, after=after)

    async def describe(self, prefix: str = "") -> list[KeyInfo]:
        self.calls["describe"] += 1
        return await self.inner.describe(prefix)

    async def delete(self, key: str) -> None:
        self.calls["delete"] += 1
        await self.inner.delete(key)

    async def aclose(self) -> None:
        self.calls["aclose"] += 1
        await self.inner.aclose()


#: Each helper called once, with the primitive it must reach the backend through.
HELPER_CALLS: dict[str, tuple[str, Any]] = {
    "set": ("commit_with_journal", lambda s: s.set("k", {"n": 1})),
    "update": ("commit_with_journal", lambda s: s.update("k", lambda v: {"n": v["n"] + 1})),
    "commit": (
        "commit_with_journal",
        lambda s: s.commit("k", lambda c: Commit({"n": c.revision + 1}, "e"), keep=5),
    ),
    "get": ("journal_view", lambda s: s.get("k")),
    "get_revision": ("journal_view", lambda s: s.get_revision("k")),
    "journal": ("journal_view", lambda s: s.journal("k", limit=5)),
    "get_many": ("journal_view", lambda s: s.get_many(["k", "missing"])),
    "list": ("describe", lambda s: s.list("")),
}


def timeless(answer: Any) -> Any:
    """``answer`` with the journal rows' write times left out (two stores, two clocks)."""
    if isinstance(answer, list):
        return [(row.revision, row.entry) if isinstance(row, JournalRow) else row for row in answer]
    return answer


@pytest.mark.asyncio
@pytest.mark.parametrize("helper", sorted(HELPERS))
async def test_every_helper_reaches_the_backend_through_a_primitive(helper: str) -> None:
    """A helper that a wrapper leaves alone goes through the wrapper's primitives: the
    wrapper sees the call, and the answer is the wrapped backend's own."""
    assert set(HELPER_CALLS) == HELPERS
    primitive, call = HELPER_CALLS[helper]
    reference, inner = MemoryStorage(), MemoryStorage()
    wrapper = PrimitivesOnly(inner)
    for backend in (reference, wrapper):
        await backend.set("k", {"n": 1})
        await backend.commit("k", lambda c: Commit({"n": 2}, "made 2"), keep=5)
    wrapper.calls.clear()
    got, expected = await call(wrapper), await call(reference)
    assert timeless(got) == timeless(expected), f"{helper} answers as the backend's own"
    assert wrapper.calls[primitive] >= 1, f"{helper} bypassed the wrapper's {primitive}"
    assert await inner.get_revision("k") == await reference.get_revision("k")


def test_faulty_storage_forwards_every_primitive() -> None:
    """The package's wrapper overrides every primitive (and every helper, so that its
    faults by operation name reach the wrapped backend's own fast paths)."""
    own = set(vars(FaultyStorage))
    assert own >= PRIMITIVES
    assert own >= HELPERS


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


def test_the_docs_example_backend_implements_the_primitives_only() -> None:
    """docs/storage.md's ``DictStorage`` overrides no helper, so the contract suite, which
    runs it, checks the helpers themselves on a backend a stranger wrote."""
    example = example_backend()
    assert {name for name in vars(example) if name in PRIMITIVES | HELPERS} == PRIMITIVES
