"""Thread and resource scopes never share notes, whatever the ids; bad ids fail clearly.

Every backend: the key layout is the layer's, not a backend's.
"""

from __future__ import annotations

import pytest

from noetic_scratchpad import Agent, AgentHarness, ScriptedModel, scratchpad
from noetic_scratchpad.keys import state_key
from noetic_scratchpad.storage import StorageBackend

pytestmark = pytest.mark.asyncio


def harness_of(storage: StorageBackend, scope: str) -> AgentHarness:
    return AgentHarness(
        name=scope,
        agent=Agent(model=ScriptedModel([])),
        params={},
        context_layers=[scratchpad(scope=scope)],
        storage=storage,
    )


async def test_user_u42_never_sees_thread_u42(storage: StorageBackend) -> None:
    """A resource scratchpad for user ``u42`` and a thread scratchpad for thread ``u42``
    are two scopes: each reads only its own notes (they used to be one state)."""
    users, threads = harness_of(storage, "resource"), harness_of(storage, "thread")
    await users.update_state("scratchpad", {"owner": "user"}, thread_id="t", resource_id="u42")
    await threads.update_state("scratchpad", {"owner": "thread"}, thread_id="u42")

    assert await users.read_state("scratchpad", thread_id="x", resource_id="u42") == {
        "owner": "user"
    }
    assert await threads.read_state("scratchpad", thread_id="u42") == {"owner": "thread"}
    assert await storage.get(state_key("scratchpad", "resource", "u42")) == {"owner": "user"}
    assert await storage.get(state_key("scratchpad", "thread", "u42")) == {"owner": "thread"}


@pytest.mark.parametrize(
    ("first", "second"),
    [("a", "a/b"), ("a/b", "a%2Fb"), ("..", "."), ("a", "a/"), ("a/../b", "b")],
)
async def test_ids_cannot_reach_into_each_others_keys(
    storage: StorageBackend, first: str, second: str
) -> None:
    """Ids with ``/``, ``%`` or dots are encoded: each names one scope of its own."""
    threads = harness_of(storage, "thread")
    await threads.update_state("scratchpad", {"id": first}, thread_id=first)
    await threads.update_state("scratchpad", {"id": second}, thread_id=second)
    assert await threads.read_state("scratchpad", thread_id=first) == {"id": first}
    assert await threads.read_state("scratchpad", thread_id=second) == {"id": second}
    assert len(await storage.list("scopes/")) == 2


async def test_a_resource_layer_without_a_resource_id_uses_the_thread_scope(
    storage: StorageBackend,
) -> None:
    """With no resource id, a resource scratchpad falls back to the thread's scope (the
    SPEC's fallback), never to a resource of the thread's name."""
    users = harness_of(storage, "resource")
    await users.update_state("scratchpad", {"n": 1}, thread_id="t1")
    assert await storage.list("scopes/") == [state_key("scratchpad", "thread", "t1")]


@pytest.mark.parametrize(
    ("thread_id", "message"),
    [
        ("\ud800", "lone surrogate"),
        ("x" * 10_000, "over the limit of 512"),
    ],
)
async def test_an_unusable_id_fails_clearly_before_storage(
    storage: StorageBackend, thread_id: str, message: str
) -> None:
    """A lone-surrogate id (once a raw UnicodeEncodeError) or a 10 KB id (once "try again
    later" from PostgreSQL) is a ValueError saying what is wrong, for runs, reads and
    writes alike; nothing is stored."""
    threads = harness_of(storage, "thread")
    with pytest.raises(ValueError, match=message):
        await threads.update_state("scratchpad", {"n": 1}, thread_id=thread_id)
    with pytest.raises(ValueError, match=message):
        await threads.read_state("scratchpad", thread_id=thread_id)
    with pytest.raises(ValueError, match=message):
        await threads.run("hi", thread_id=thread_id)
    assert await storage.list() == []
