"""open_storage: backends by URL, the environment default, and errors that name the fix."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest

import noetic_scratchpad.storage as storage_module
from noetic_scratchpad import StorageConfigError, open_storage
from noetic_scratchpad.storage import (
    ENV_VAR,
    MemoryStorage,
    StorageBackend,
    check_storage_url,
    register_backend,
    resolve_storage_url,
)
from noetic_scratchpad.storage.base import CommitFn, Revision
from noetic_scratchpad.storage.sqlite import SqliteStorage


@pytest.mark.asyncio
async def test_memory_url() -> None:
    """memory:// opens a fresh, empty MemoryStorage each time."""
    first = await open_storage("memory://")
    await first.set("k", 1)
    second = await open_storage("memory://")
    assert isinstance(first, MemoryStorage)
    assert isinstance(second, MemoryStorage)
    assert await second.get("k") is None
    await first.aclose()
    await second.aclose()


@pytest.mark.asyncio
async def test_sqlite_urls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """sqlite:///relative.db and sqlite:////absolute.db open SqliteStorage on those files,
    with options from the URL and from keyword arguments."""
    monkeypatch.chdir(tmp_path)
    async with await open_storage("sqlite:///relative.db?busy_timeout=900") as relative:
        assert isinstance(relative, SqliteStorage)
        assert relative.path == str(tmp_path / "relative.db")
        assert relative.options.busy_timeout == 900
    absolute = tmp_path / "absolute.db"
    async with await open_storage(f"sqlite:///{absolute}", synchronous="full") as opened:
        assert isinstance(opened, SqliteStorage)
        assert opened.path == str(absolute)
        assert opened.options.synchronous == "full"
    assert absolute.is_file()


@pytest.mark.asyncio
async def test_env_var_used_when_no_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a URL, NOETIC_SCRATCHPAD_STORAGE is opened; an explicit URL wins over it."""
    target = tmp_path / "from-env.db"
    monkeypatch.setenv(ENV_VAR, f"sqlite:///{target}")
    assert ENV_VAR == "NOETIC_SCRATCHPAD_STORAGE"
    async with await open_storage() as from_env:
        assert isinstance(from_env, SqliteStorage)
        assert from_env.path == str(target)
    async with await open_storage("memory://") as explicit:
        assert isinstance(explicit, MemoryStorage)


def test_default_without_env() -> None:
    """With neither a URL nor the environment variable, the default is memory://."""
    assert resolve_storage_url() == "memory://"
    assert resolve_storage_url(default="sqlite:///x.db") == "sqlite:///x.db"


@pytest.mark.asyncio
async def test_unknown_scheme() -> None:
    """An unknown scheme names itself, the known schemes and how to register a new one."""
    with pytest.raises(StorageConfigError) as caught:
        await open_storage("mongodb://localhost/0")
    message = str(caught.value)
    assert "unknown storage scheme 'mongodb'" in message
    known = message.split("known schemes: ")[1].split(" (")[0].split(", ")
    assert {"memory", "postgres", "postgresql", "redis", "rediss", "sqlite"} <= set(known)
    assert known == sorted(known)
    assert "register_backend" in message


@pytest.mark.asyncio
async def test_no_scheme() -> None:
    """A bare path is refused with the URL forms to use instead."""
    with pytest.raises(StorageConfigError, match=r"has no scheme; use memory://, sqlite:///"):
        await open_storage("scratchpad.db")


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "url",
    [
        "mongodb://admin:hunter2-secret@cache:6379/0",  # an unknown scheme
        "//admin:hunter2-secret@db/pads",  # no scheme
        "postgresql://admin:hunter2-secret@[::1/pads",  # cannot be parsed
    ],
)
async def test_a_refused_url_is_shown_without_its_password(url: str) -> None:
    with pytest.raises(StorageConfigError) as caught:
        await open_storage(url)
    assert "hunter2-secret" not in str(caught.value)
    assert "admin:***@" in str(caught.value)


@pytest.mark.parametrize(
    ("url", "driver", "module", "hint"),
    [
        (
            "postgresql://user@localhost/db",
            "asyncpg",
            "noetic_scratchpad.storage.postgres",
            'pip install "noetic-scratchpad[postgres]"',
        ),
        (
            "redis://localhost:6379/0",
            "redis",
            "noetic_scratchpad.storage.redis",
            'pip install "noetic-scratchpad[redis]"',
        ),
        (
            "sqlite:///x.db",
            "aiosqlite",
            "noetic_scratchpad.storage.sqlite",
            "pip install aiosqlite",
        ),
    ],
)
@pytest.mark.asyncio
async def test_missing_driver_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, url: str, driver: str, module: str, hint: str
) -> None:
    """When a backend's driver is not installed, the error names the driver and the exact
    install command, instead of an ImportError from deep inside."""
    monkeypatch.setitem(sys.modules, driver, None)  # makes ``import driver`` fail
    monkeypatch.delitem(sys.modules, module, raising=False)
    with pytest.raises(StorageConfigError) as caught:
        await open_storage(url)
    message = str(caught.value)
    assert f"needs {driver}, which is not installed" in message
    assert f"run: {hint}" in message
    assert isinstance(caught.value.__cause__, ImportError)


@pytest.mark.asyncio
async def test_register_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    """register_backend makes open_storage call the opener with the URL and the options;
    the scheme matches case-insensitively."""
    monkeypatch.setattr(storage_module, "_REGISTERED", {})
    calls: list[tuple[str, dict[str, Any]]] = []

    async def opener(url: str, **options: Any) -> StorageBackend:
        calls.append((url, options))
        return MemoryStorage()

    register_backend("Custom", opener)
    opened = await open_storage("custom://bucket/prefix", region="eu")
    assert isinstance(opened, MemoryStorage)
    assert calls == [("custom://bucket/prefix", {"region": "eu"})]
    with pytest.raises(StorageConfigError, match="custom"):
        await open_storage("other://x")


@pytest.mark.asyncio
async def test_registered_backend_can_replace_a_builtin(monkeypatch: pytest.MonkeyPatch) -> None:
    """A backend registered for a built-in scheme takes precedence over the built-in one."""
    monkeypatch.setattr(storage_module, "_REGISTERED", {})
    opened: list[str] = []

    async def opener(url: str, **options: Any) -> StorageBackend:
        opened.append(url)
        return MemoryStorage()

    register_backend("sqlite", opener)
    backend = await open_storage("sqlite:///never-created.db")
    assert isinstance(backend, MemoryStorage)
    assert opened == ["sqlite:///never-created.db"]


class _CountedCommit(MemoryStorage):
    """A third-party backend whose ``commit`` is its own: the layer writes through it, and
    through neither ``update`` nor ``set``."""

    def __init__(self) -> None:
        super().__init__()
        self.commits = 0

    async def commit(self, key: str, fn: CommitFn, *, keep: int) -> Revision:
        self.commits += 1
        return await super().commit(key, fn, keep=keep)

    async def update(self, key: str, fn: Any) -> Any:
        raise AssertionError("the layer writes with commit")

    async def set(self, key: str, value: Any) -> None:
        raise AssertionError("the layer writes with commit")


@pytest.mark.asyncio
async def test_the_layer_writes_through_a_third_party_backends_commit() -> None:
    from noetic_scratchpad import ExecutionContext, ScopedStorage, scratchpad

    backend = _CountedCommit()
    layer = scratchpad()
    ctx = ExecutionContext(thread_id="t1")
    storage = ScopedStorage(backend, layer.id, "t1")
    await layer.init(storage=storage, scope_key="t1", ctx=ctx)
    await ctx.context[layer.id].update({"goal": "ship", "steps": {"a": 1}})
    await ctx.context[layer.id].update({"steps": {"b": 2}})
    assert backend.commits == 2
    assert await storage.get_revision("state") == Revision(
        {"goal": "ship", "steps": {"a": 1, "b": 2}}, 2
    )


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "path",
    [
        "a" * 5000 + ".db",  # one name longer than any file system allows
        "d/" * 2100 + "notes.db",  # short names, the whole longer than a path may be
    ],
)
async def test_a_sqlite_path_too_long_is_a_configuration_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, path: str
) -> None:
    """The system refuses the path (``File name too long``): a configuration error that
    says so and what to do, with the path shortened so the message stays readable."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(StorageConfigError) as caught:
        await open_storage(f"sqlite:///{path}")

    message = str(caught.value)
    assert "cannot open the SQLite database" in message
    assert "too long" in message
    assert "choose a shorter path" in message
    assert f"{len(str(tmp_path / path)):,} characters" in message
    assert len(message) < 400
    assert os.listdir(tmp_path) == []  # nothing created on the way


@pytest.mark.asyncio
@pytest.mark.parametrize("url", ["sqlite:/x.db", "sqlite:x.db"])
async def test_a_sqlite_url_without_its_slashes_is_refused(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``sqlite:/x.db`` reads as the absolute ``/x.db`` and used to open ``x.db`` in the
    working directory: it is refused, with the forms that say which file is meant."""
    monkeypatch.chdir(tmp_path)
    message = (
        f"sqlite URL {url!r} is malformed: write sqlite:/// and then the file's path, as in "
        "sqlite:///relative/path.db or sqlite:////absolute/path.db"
    )
    with pytest.raises(StorageConfigError) as refused:
        await open_storage(url)
    assert str(refused.value) == message
    with pytest.raises(StorageConfigError) as checked:
        check_storage_url(url)
    assert str(checked.value) == message
    assert not (tmp_path / "x.db").exists()


def test_check_storage_url_opens_nothing_and_says_what_open_storage_would(
    tmp_path: Path,
) -> None:
    """The scheme of a URL that can be opened; the error ``open_storage`` would raise for
    one that cannot, before anything is opened or created."""
    db = tmp_path / "pad.db"
    assert check_storage_url(f"sqlite:///{db}") == "sqlite"
    assert check_storage_url("memory://") == "memory"
    assert check_storage_url("postgresql://app:secret@db/notes") == "postgresql"
    assert not db.exists()
    with pytest.raises(StorageConfigError, match="unknown storage scheme 'nope'"):
        check_storage_url("nope://x")
    with pytest.raises(StorageConfigError, match="has no scheme"):
        check_storage_url("scratchpad.db")
    with pytest.raises(StorageConfigError, match=r"the directory .* does not exist"):
        check_storage_url(f"sqlite:///{tmp_path / 'nodir' / 'pad.db'}")
    assert list(tmp_path.iterdir()) == []
