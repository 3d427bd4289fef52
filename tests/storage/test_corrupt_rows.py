"""A row the library cannot read back (not UTF-8, not JSON, nested past the parser) is a
permanent fault of that key: a ``StorageCorruptError`` on every read and write of it, never
an availability error to retry; other keys are unaffected, and deleting the key clears it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from noetic_scratchpad.errors import StorageBusyError, StorageCorruptError, StorageError
from noetic_scratchpad.storage import StorageBackend
from noetic_scratchpad.storage.base import Commit, Revision

from .corrupt import CORRUPT_ROWS, corrupt_row

pytestmark = pytest.mark.asyncio

Call = Callable[[StorageBackend], Awaitable[Any]]


def _journaled(value: Any) -> Callable[[Revision], Commit]:
    return lambda current: Commit(value, {"wrote": value})


CALLS_ON_THE_KEY: dict[str, Call] = {
    "get": lambda s: s.get("bad"),
    "get_revision": lambda s: s.get_revision("bad"),
    "get_many": lambda s: s.get_many(["good", "bad"]),
    "update": lambda s: s.update("bad", lambda current: {"n": 2}),
    "commit": lambda s: s.commit("bad", _journaled({"n": 2}), keep=5),
}


@pytest.mark.parametrize(("backend_kind", "how"), CORRUPT_ROWS)
@pytest.mark.parametrize("call", CALLS_ON_THE_KEY)
async def test_an_unreadable_row_is_a_corrupt_error_not_an_outage(
    storage: StorageBackend, how: str, call: str
) -> None:
    await storage.set("good", {"n": 1})
    await storage.commit("bad", _journaled({"n": 1}), keep=5)
    await corrupt_row(storage, "bad", how)

    with pytest.raises(StorageCorruptError) as caught:
        await CALLS_ON_THE_KEY[call](storage)

    assert isinstance(caught.value, StorageError)  # callers catching StorageError still do
    assert not isinstance(caught.value, StorageBusyError | ValueError)
    message = str(caught.value)
    assert "cannot be read" in message
    assert "retrying will not help" in message
    assert "reset" in message
    assert await storage.get("good") == {"n": 1}  # other keys are unaffected


@pytest.mark.parametrize(("backend_kind", "how"), CORRUPT_ROWS)
async def test_deleting_an_unreadable_row_clears_it_and_the_key_can_be_written_again(
    storage: StorageBackend, how: str
) -> None:
    await storage.commit("bad", _journaled({"n": 1}), keep=5)
    await corrupt_row(storage, "bad", how)

    assert await storage.list("bad") == ["bad"]  # listing does not read values
    await storage.delete("bad")

    assert await storage.get("bad") is None
    written = await storage.commit("bad", _journaled({"n": 3}), keep=5)
    assert written.value == {"n": 3}
    assert written.revision > 1  # revisions never repeat, a reset included
    assert await storage.get_revision("bad") == written


@pytest.mark.parametrize(("backend_kind", "how"), CORRUPT_ROWS)
async def test_an_unreadable_row_leaves_the_listing_of_its_neighbours_whole(
    storage: StorageBackend, how: str
) -> None:
    """Listing the keys (what ``GET api/scopes`` and ``noetic-scratchpad list`` show) never
    reads a value back, so one bad row cannot hide the others, nor itself: it is listed,
    with the size it takes, so that it can be found and reset."""
    await storage.set("good", {"n": 1})
    await storage.commit("bad", _journaled({"n": 1}), keep=5)
    await corrupt_row(storage, "bad", how)

    infos = await storage.describe()

    assert [info.key for info in infos] == ["bad", "good"]
    assert infos[0].size > 0
    assert infos[1].size == len(b'{"n":1}')
    assert await storage.list() == ["bad", "good"]
