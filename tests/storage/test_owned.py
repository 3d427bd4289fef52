"""``OwnedStorage``: a URL opened once, lazily, and closed here; a backend passed in is
borrowed and never closed. Under asyncio and trio."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest

import noetic_scratchpad.storage as storage_module
from noetic_scratchpad.errors import ScratchpadConfigError, StorageConfigError
from noetic_scratchpad.storage import MemoryStorage, OwnedStorage, register_backend
from noetic_scratchpad.storage.owned import StorageTypeError

pytestmark = pytest.mark.anyio

URL = "counted://here"


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


class Counted(MemoryStorage):
    """A memory backend that counts its closes."""

    def __init__(self) -> None:
        super().__init__()
        self.closes = 0
        self.close_fails = False
        self.closed = anyio.Event()

    async def aclose(self) -> None:
        self.closes += 1
        try:
            await anyio.lowlevel.checkpoint()  # where a cancellation could land
            if self.close_fails:
                raise OSError("the connection broke while closing")
            await super().aclose()
        finally:
            self.closed.set()


class Opener:
    """The opener of ``counted://``: counts its opens, each of which yields to the other
    tasks (so concurrent first users really overlap), and can be held or made to fail."""

    def __init__(self) -> None:
        self.opened: list[Counted] = []
        self.started = anyio.Event()
        self.release: anyio.Event | None = None
        self.fail = False

    async def __call__(self, url: str, **options: Any) -> Counted:
        self.started.set()
        if self.release is not None:
            await self.release.wait()
        else:
            await anyio.sleep(0.01)
        if self.fail:
            raise StorageConfigError("cannot open counted://")
        backend = Counted()
        self.opened.append(backend)
        return backend


@pytest.fixture
def opener(monkeypatch: pytest.MonkeyPatch) -> Opener:
    monkeypatch.setattr(storage_module, "_REGISTERED", {})
    counting = Opener()
    register_backend("counted", counting)
    return counting


async def test_twenty_concurrent_first_calls_open_the_url_once(opener: Opener) -> None:
    source = OwnedStorage(URL)
    got: list[Any] = []

    async def first_use() -> None:
        got.append(await source.backend())

    async with anyio.create_task_group() as tg:
        for _ in range(20):
            tg.start_soon(first_use)

    assert len(opener.opened) == 1
    assert got == opener.opened * 20
    assert source.opened is opener.opened[0]
    assert opener.opened[0].closes == 0  # no loser's copy opened and closed either


async def test_aclose_closes_what_it_opened_once_however_often_called(opener: Opener) -> None:
    source = OwnedStorage(URL)
    backend = await source.backend()

    for _ in range(3):
        await source.aclose()

    assert source.owned
    assert backend.closes == 1
    assert source.opened is None
    assert await source.backend() is opener.opened[1]  # used again: opened again
    assert len(opener.opened) == 2


async def test_a_backend_passed_in_is_borrowed_and_never_closed() -> None:
    backend = Counted()
    source = OwnedStorage(backend)

    assert not source.owned
    assert source.opened is backend  # open from the start
    assert await source.backend() is backend
    await source.aclose()
    await source.aclose()

    assert backend.closes == 0
    assert source.opened is backend
    await backend.set("k", 1)
    assert await backend.get("k") == 1


async def test_aclose_before_any_open_does_nothing(opener: Opener) -> None:
    source = OwnedStorage(URL)

    await source.aclose()

    assert opener.opened == []
    assert source.opened is None
    assert not opener.started.is_set()


async def test_aclose_racing_a_first_open_leaves_nothing_open(opener: Opener) -> None:
    source = OwnedStorage(URL)
    opener.release = anyio.Event()

    async with anyio.create_task_group() as tg:
        tg.start_soon(source.backend)
        await opener.started.wait()  # the open is under way, not finished
        tg.start_soon(source.aclose)
        await anyio.wait_all_tasks_blocked()
        opener.release.set()

    (backend,) = opener.opened
    assert backend.closes == 1
    assert source.opened is None


@pytest.mark.parametrize("cancel", ["task.cancel", "move_on_after"])
async def test_a_cancelled_aclose_waiting_for_an_open_still_closes_it(
    opener: Opener, anyio_backend: str, cancel: str
) -> None:
    """The caller of ``aclose`` is cancelled while an open it waits for is under way
    (asyncio's own ``task.cancel()``, or an anyio cancel scope): once the open finishes,
    the backend is closed all the same."""
    if cancel == "task.cancel" and anyio_backend != "asyncio":
        pytest.skip("task.cancel() is asyncio's")
    source = OwnedStorage(URL)
    opener.release = anyio.Event()

    async with anyio.create_task_group() as tg:
        tg.start_soon(source.backend)
        await opener.started.wait()  # the open is under way, holding the lock
        if cancel == "task.cancel":
            closing = asyncio.ensure_future(source.aclose())
            await anyio.wait_all_tasks_blocked()
            closing.cancel()
            with pytest.raises(asyncio.CancelledError):
                await closing
        else:
            with anyio.move_on_after(0.05) as scope:
                await source.aclose()
            assert scope.cancelled_caught
        opener.release.set()

    (backend,) = opener.opened
    with anyio.fail_after(5):
        await backend.closed.wait()
    assert backend.closes == 1
    assert source.opened is None


async def test_a_close_cancelled_midway_is_finished(opener: Opener) -> None:
    """Cancelled while the backend itself closes (past the lock), the close still ends."""
    source = OwnedStorage(URL)
    backend = await source.backend()

    with anyio.CancelScope() as scope:
        scope.cancel()  # lands on aclose's first checkpoint
        await source.aclose()

    with anyio.fail_after(5):
        await backend.closed.wait()
    assert source.opened is None
    assert backend.closes == 1


async def test_a_failing_close_raises_to_its_caller_or_is_logged_without_one(
    opener: Opener, caplog: pytest.LogCaptureFixture
) -> None:
    source = OwnedStorage(URL)
    (await source.backend()).close_fails = True  # type: ignore[attr-defined]

    with pytest.raises(OSError, match="broke while closing"):
        await source.aclose()
    assert source.opened is None  # forgotten all the same: the next use opens it again

    backend = await source.backend()
    backend.close_fails = True  # type: ignore[attr-defined]
    with caplog.at_level(logging.ERROR, logger="noetic_scratchpad.storage"):
        with anyio.CancelScope() as scope:
            scope.cancel()
            await source.aclose()
        with anyio.fail_after(5):
            await backend.closed.wait()  # type: ignore[attr-defined]
        await anyio.wait_all_tasks_blocked()  # the close's task has logged
    assert "closing storage counted://here failed" in caplog.text


async def test_a_failed_open_leaves_nothing_to_close_and_the_next_call_retries(
    opener: Opener,
) -> None:
    source = OwnedStorage(URL)
    opener.fail = True

    with pytest.raises(StorageConfigError, match="cannot open"):
        await source.backend()
    await source.aclose()
    assert source.opened is None

    opener.fail = False
    assert await source.backend() is opener.opened[0]


@pytest.mark.parametrize("wrong", [42, b"memory://", Path("notes.db"), ["memory://"]])
def test_a_storage_of_another_type_is_a_config_error(wrong: Any) -> None:
    with pytest.raises(ScratchpadConfigError, match="storage must be a URL") as caught:
        OwnedStorage(wrong)
    assert repr(wrong) in str(caught.value)
    assert isinstance(caught.value, ValueError)
    assert isinstance(caught.value, TypeError)  # as create_app documents
    assert isinstance(caught.value, StorageTypeError)


def test_none_is_the_environments_url_else_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    assert OwnedStorage(None).url == "memory://"
    assert OwnedStorage("").url == "memory://"
    monkeypatch.setenv("NOETIC_SCRATCHPAD_STORAGE", "sqlite:///from-env.db")
    assert OwnedStorage(None).url == "sqlite:///from-env.db"
    assert OwnedStorage("memory://").url == "memory://"


def test_the_url_shown_hides_passwords_and_query_values() -> None:
    url = "postgresql://app:s3cr%40t@db.internal:5432/notes?sslpassword=k3y&table=pads"
    source = OwnedStorage(url)

    assert source.url == "postgresql://app:***@db.internal:5432/notes?sslpassword=***&table=***"
    assert "s3cr" not in repr(source)
    assert OwnedStorage("sqlite:///var/notes.db").url == "sqlite:///var/notes.db"
    assert OwnedStorage(MemoryStorage()).url == "memory://"
