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
from noetic_scratchpad.testing import FaultyStorage, InjectedFault

CONTRACT = {"get", "set", "delete", "list", "get_many", "update", "describe", "aclose"}


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
async def test_the_layer_writes_through_the_method_a_wrapper_intercepts() -> None:
    """A scratchpad write on a FaultyStorage failing ``update`` fails: the layer uses no
    other write method that could slip past the wrapper."""
    from noetic_scratchpad import ExecutionContext, ScopedStorage, StorageError, scratchpad

    faulty = FaultyStorage(MemoryStorage(), fail_on={"update"})
    layer = scratchpad()
    ctx = ExecutionContext(thread_id="t1")
    scoped = ScopedStorage.for_layer(faulty, layer, ctx)
    await layer.hooks.init(storage=scoped, scope_key=scoped.scope_key, ctx=ctx)
    with pytest.raises(StorageError) as caught:
        await ctx.context["scratchpad"].update({"n": 1})
    assert isinstance(caught.value.__cause__, InjectedFault)
    assert faulty.calls["update"] == 1
