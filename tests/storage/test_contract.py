"""The backend contract, run once per backend through the ``storage`` fixture.

Every backend (memory, SQLite, PostgreSQL, the complete example of docs/storage.md, and
any third-party one) and every wrapper (``FaultyStorage``, healthy, around SQLite here)
must pass this file unchanged; backend quirks belong in their own test files. Each test's
name and docstring state the rule it checks, so a failing one tells a backend's author
which rule the backend breaks. The ``example`` backend implements only the primitives, so
here the helpers built on them (``get``, ``set``, ``update``, ``list``...) are tested too.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from noetic_scratchpad.storage import ScopedStorage, StorageBackend
from noetic_scratchpad.storage.base import Commit, Revision

from .helpers import CONTRACT_KINDS

pytestmark = pytest.mark.asyncio


@pytest.fixture(params=CONTRACT_KINDS)
def backend_kind(request: pytest.FixtureRequest) -> str:
    """The shared backends, two wrappers (a FaultyStorage, a namespace) and the example of
    docs/storage.md: each must keep the contract as the others do."""
    kind: str = request.param
    return kind


JSON_VALUES: list[Any] = [
    None,
    True,
    False,
    0,
    -7,
    2**63 - 1,
    -(2**63),
    2**80,
    3.25,
    "",
    "plain text",
    'ünïcødé — 日本語 — 🚀 — \t\n"\\ — \u2028',
    [],
    [1, "two", None, [3.5, {"four": 4}]],
    {},
    {"nested": {"deeper": {"list": [1, 2, {"x": None}]}}, "é": "ü", "n": 2**70},
]


async def test_get_missing_is_none(storage: StorageBackend) -> None:
    """A key that was never written reads as None."""
    assert await storage.get("never/written") is None


@pytest.mark.parametrize("value", JSON_VALUES, ids=repr)
async def test_set_get_round_trip(storage: StorageBackend, value: Any) -> None:
    """Every JSON type, unicode and integers past 64 bits included, reads back equal."""
    await storage.set("k", value)
    got = await storage.get("k")
    assert got == value
    assert type(got) is type(value)


# Numbers a database could store as another equal number: each must read back as written
# (-0.0 is not 0.0, the float 1e20 is not the integer 10**20, 1.0 is not 1).
EXACT_NUMBERS: list[Any] = [
    -0.0,
    1e20,
    1.5e300,
    5e-324,
    1.7976931348623157e308,
    -2.5e-10,
    0.1,
    1.0,
    1,
    2**70,
    -(2**70),
    {"neg_zero": -0.0, "big": 1e20, "one": 1.0, "int": 1, "huge": 2**70},
    [[-0.0, 1.5e300], {"tiny": 5e-324, "deep": [{"x": 1e20, "y": [1.0, 1]}]}],
]


def assert_identical(got: Any, expected: Any, where: str = "value") -> None:
    """``got`` is ``expected`` as JSON writes it: the same types all the way down, and
    floats equal to the bit (``==`` holds for -0.0 and 0.0, or 1e20 and 10**20)."""
    assert type(got) is type(expected), f"{where}: {got!r} is not {expected!r}"
    if isinstance(expected, float):
        assert got == expected, f"{where}: {got!r} is not {expected!r}"
        assert math.copysign(1, got) == math.copysign(1, expected), f"{where}: {got!r}"
    elif isinstance(expected, dict):
        assert sorted(got) == sorted(expected), f"{where}: keys {sorted(got)}"
        for key, item in expected.items():
            assert_identical(got[key], item, f"{where}[{key!r}]")
    elif isinstance(expected, list):
        assert len(got) == len(expected), f"{where}: {got!r} is not {expected!r}"
        for index, item in enumerate(expected):
            assert_identical(got[index], item, f"{where}[{index}]")
    else:
        assert got == expected, f"{where}: {got!r} is not {expected!r}"


@pytest.mark.parametrize("value", EXACT_NUMBERS, ids=repr)
async def test_numbers_read_back_as_written(storage: StorageBackend, value: Any) -> None:
    """A number reads back as the very JSON value written, through every read, whether
    ``set``, ``update`` or ``commit`` wrote it: the same state reads the same on every
    backend (and so has the same digest, as an HTTP ETag)."""
    await storage.set("set", value)
    assert_identical(await storage.update("update", lambda _current: value), value)
    committed = await storage.commit("commit", lambda _current: Commit(value, None), keep=0)
    assert_identical(committed.value, value)
    many = await storage.get_many(["set", "update", "commit"])
    for key in ("set", "update", "commit"):
        assert_identical(await storage.get(key), value, f"get({key!r})")
        assert_identical(many[key], value, f"get_many()[{key!r}]")
        found = await storage.get_revision(key)
        assert isinstance(found, Revision)
        assert_identical(found.value, value, f"get_revision({key!r})")
    # An update reads back what the one before it wrote, exactly, inside its transaction.
    seen: list[Any] = []
    await storage.update("update", lambda current: seen.append(current) or current)
    assert_identical(seen[0], value, "the value an update is handed")


async def test_nul_character_round_trips_or_is_refused(storage: StorageBackend) -> None:
    """A string holding U+0000 either reads back exactly or set raises ValueError and the
    previous value stays (PostgreSQL's jsonb cannot hold it); it is never altered."""
    await storage.set("k", "before")
    value = {"text": "a\u0000b"}
    try:
        await storage.set("k", value)
    except ValueError:
        assert await storage.get("k") == "before"
    else:
        assert await storage.get("k") == value


async def test_set_replaces(storage: StorageBackend) -> None:
    """A second set replaces the value entirely."""
    await storage.set("k", {"a": 1, "b": 2})
    await storage.set("k", {"c": 3})
    assert await storage.get("k") == {"c": 3}


async def test_values_read_are_copies(storage: StorageBackend) -> None:
    """Mutating what get or get_many returned, or what was passed to set, changes nothing stored."""
    original = {"list": [1, 2], "obj": {"x": 1}}
    await storage.set("k", original)
    original["list"].append(99)
    got = await storage.get("k")
    assert got == {"list": [1, 2], "obj": {"x": 1}}
    got["list"].append(3)
    got["obj"]["x"] = 2
    many = await storage.get_many(["k"])
    many["k"]["obj"]["y"] = 5
    assert await storage.get("k") == {"list": [1, 2], "obj": {"x": 1}}


async def test_delete(storage: StorageBackend) -> None:
    """Delete removes a key; deleting a missing key is a no-op that does not raise."""
    await storage.set("a", 1)
    await storage.set("b", 2)
    await storage.delete("a")
    await storage.delete("a")
    await storage.delete("never/written")
    assert await storage.get("a") is None
    assert await storage.list() == ["b"]


async def test_list_sorted_and_prefix_exact(storage: StorageBackend) -> None:
    """list(prefix) returns exactly the keys starting with prefix, sorted by code point."""
    keys = [
        "layers/x/b",
        "layers/x/a",
        "layers/x",
        "layers/xy/a",
        "layers/x/\U0010ffffz",
        "layers/x/é",
        "layers/w",
        "other",
        "layers/x0",
    ]
    for index, key in enumerate(keys):
        await storage.set(key, index)
    assert await storage.list("layers/x/") == sorted(
        ["layers/x/a", "layers/x/b", "layers/x/é", "layers/x/\U0010ffffz"]
    ), "describe/list: exactly the keys that start with the prefix, sorted by code point"
    assert await storage.list("layers/x") == sorted(
        [
            *["layers/x", "layers/x/a", "layers/x/b", "layers/x/é", "layers/x/\U0010ffffz"],
            *["layers/xy/a", "layers/x0"],
        ]
    )
    assert await storage.list("nothing/here") == []
    assert await storage.list() == sorted(keys)
    assert await storage.list("") == sorted(keys)


async def test_list_treats_wildcards_literally(storage: StorageBackend) -> None:
    """Characters that are wildcards in SQL (% _ * ? [) match only themselves in a prefix."""
    for key in ["a%b/1", "axb/1", "a_b/1", "a*b/1", "a?b/1", "a[b/1"]:
        await storage.set(key, 1)
    assert await storage.list("a%b") == ["a%b/1"]
    assert await storage.list("a_b") == ["a_b/1"]
    assert await storage.list("a*b") == ["a*b/1"]
    assert await storage.list("a[b") == ["a[b/1"]


async def test_get_many_omits_missing(storage: StorageBackend) -> None:
    """get_many returns the existing keys only: a missing key is absent, not None."""
    await storage.set("a", {"v": 1})
    await storage.set("b", None)
    got = await storage.get_many(["a", "missing", "b", "a"])
    assert got == {"a": {"v": 1}, "b": None}
    assert await storage.get_many([]) == {}


async def test_get_many_large(storage: StorageBackend) -> None:
    """get_many with more keys than one SQL statement takes still finds every key."""
    for index in range(0, 1500, 3):
        await storage.set(f"k{index}", index)
    got = await storage.get_many(f"k{index}" for index in range(1500))
    assert got == {f"k{index}": index for index in range(0, 1500, 3)}


async def test_update_missing_sees_none(storage: StorageBackend) -> None:
    """update on a missing key calls fn with None and stores its result."""
    seen: list[Any] = []

    def fn(current: Any) -> Any:
        seen.append(current)
        return {"created": True}

    assert await storage.update("k", fn) == {"created": True}
    assert seen == [None]
    assert await storage.get("k") == {"created": True}


async def test_update_sees_latest_and_persists(storage: StorageBackend) -> None:
    """update passes the stored value to fn and persists fn's result."""
    await storage.set("k", {"n": 1, "keep": "yes"})
    result = await storage.update("k", lambda current: {**current, "n": current["n"] + 1})
    assert result == {"n": 2, "keep": "yes"}
    assert await storage.get("k") == {"n": 2, "keep": "yes"}


async def test_update_that_raises_writes_nothing(storage: StorageBackend) -> None:
    """If fn raises, the exception propagates and neither an existing nor a new key changes."""

    class Boom(Exception):
        pass

    def fail(current: Any) -> Any:
        raise Boom("no")

    await storage.set("k", {"v": 1})
    with pytest.raises(Boom):
        await storage.update("k", fail)
    with pytest.raises(Boom):
        await storage.update("fresh", fail)
    assert await storage.get("k") == {"v": 1}
    assert await storage.get("fresh") is None
    assert await storage.list() == ["k"]


async def test_update_to_non_json_raises_value_error(storage: StorageBackend) -> None:
    """An update whose fn returns what JSON cannot hold raises ValueError and writes nothing."""
    await storage.set("k", [1])
    with pytest.raises(ValueError, match="JSON"):
        await storage.update("k", lambda current: {"bad": {1, 2}})
    assert await storage.get("k") == [1]


@pytest.mark.parametrize(
    "value",
    [{"s": {1, 2}}, object(), [b"bytes"], {1: "int key"}, {"ok": [{"deep": object()}]}],
    ids=["set", "object", "bytes", "int-key", "deep-object"],
)
async def test_set_non_json_raises_value_error(storage: StorageBackend, value: Any) -> None:
    """set of a value JSON cannot hold (non-string keys included) raises ValueError and
    stores nothing."""
    await storage.set("k", "before")
    with pytest.raises(ValueError, match="JSON"):
        await storage.set("k", value)
    assert await storage.get("k") == "before"


async def test_describe(storage: StorageBackend) -> None:
    """describe gives each key's JSON size in bytes and a last-write time, sorted, by prefix."""
    import time

    before = time.time()
    await storage.set("p/b", "é")  # '"é"' is 4 bytes of UTF-8
    await storage.set("p/a", {"k": [1, 2, 3]})
    await storage.set("q", 1)
    after = time.time()
    infos = await storage.describe("p/")
    assert [info.key for info in infos] == ["p/a", "p/b"], "describe: the prefix's keys, sorted"
    assert [info.size for info in infos] == [len(b'{"k":[1,2,3]}'), 4]
    for info in infos:
        assert before - 1 <= info.updated_at <= after + 1
    assert [info.key for info in await storage.describe()] == ["p/a", "p/b", "q"]


async def test_describe_tracks_updates(storage: StorageBackend) -> None:
    """After an update, describe reports the new size and a later or equal time."""
    await storage.set("k", "a")
    (first,) = await storage.describe("k")
    await storage.update("k", lambda current: current + "bcd")
    (second,) = await storage.describe("k")
    assert (first.size, second.size) == (3, 6)
    assert second.updated_at >= first.updated_at


async def test_aclose_twice(storage: StorageBackend) -> None:
    """Closing a backend twice does not raise."""
    await storage.set("k", 1)
    await storage.aclose()
    await storage.aclose()


async def test_async_with_closes(storage: StorageBackend) -> None:
    """``async with backend`` yields the backend itself and closes it on exit."""
    async with storage as opened:
        assert opened is storage
        await opened.set("k", 1)
        assert await opened.get("k") == 1
    await storage.aclose()  # already closed: still fine


async def test_scoped_storage_key_layout(storage: StorageBackend) -> None:
    """ScopedStorage keeps a scope's keys under scopes/{layer_id}/{kind}/{encoded id}/."""
    scoped = ScopedStorage(storage, "scratchpad", "thread-1")
    other = ScopedStorage(storage, "scratchpad", "thread-10")
    await scoped.set("state", {"goal": "g"})
    await other.set("state", "other")
    await scoped.update("extra", lambda current: [current])
    assert await storage.get("scopes/scratchpad/thread/thread-1/state") == {"goal": "g"}
    assert await storage.get("scopes/scratchpad/thread/thread-1/extra") == [None]
    assert await scoped.list() == ["extra", "state"], "a scope lists its own keys, sorted"
    assert await scoped.get_many(["state", "missing"]) == {"state": {"goal": "g"}}
    await scoped.delete("extra")
    assert await storage.list("scopes/") == [
        "scopes/scratchpad/thread/thread-1/state",
        "scopes/scratchpad/thread/thread-10/state",
    ]
    assert scoped.full_key("state") == "scopes/scratchpad/thread/thread-1/state"


async def test_thread_and_resource_scopes_never_share_keys(storage: StorageBackend) -> None:
    """Thread ``u42`` and resource (user) ``u42`` are two scopes, and so are ``a``, ``a/b``,
    ``a%2Fb`` and ``..``: no id reaches into another's keys, and listing (or deleting)
    one scope's prefix never touches another's."""
    ids = ["u42", "a", "a/b", "a%2Fb", "a/x/y", "..", ".", "a/", "%", "用户"]
    scopes = [
        ScopedStorage(storage, "scratchpad", scope_id, kind)
        for kind in ("thread", "resource")
        for scope_id in ids
    ]
    for scoped in scopes:
        await scoped.set("state", {"owner": [scoped.scope, scoped.scope_key]})
    assert len({scoped.prefix for scoped in scopes}) == len(scopes)
    for scoped in scopes:
        assert await scoped.get("state") == {"owner": [scoped.scope, scoped.scope_key]}
        assert await scoped.list() == ["state"], f"{scoped.prefix!r} reaches another's keys"
    thread_a = ScopedStorage(storage, "scratchpad", "a")
    for key in await storage.list(thread_a.prefix):
        await storage.delete(key)
    assert await thread_a.get("state") is None
    left = [scoped for scoped in scopes if scoped.prefix != thread_a.prefix]
    assert all([await scoped.get("state") is not None for scoped in left])


async def test_same_key_updates_chain(storage: StorageBackend) -> None:
    """Concurrent updates of one key each see the previous one's result: none is lost."""
    import asyncio

    await asyncio.gather(
        *(storage.update("counter", lambda current: (current or 0) + 1) for _ in range(50))
    )
    assert await storage.get("counter") == 50
