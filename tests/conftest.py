"""Fixtures shared by the whole suite: backends by URL, one contract suite over all of them."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Mapping
from pathlib import Path

import pytest
import pytest_asyncio

from noetic_scratchpad import open_storage
from noetic_scratchpad.storage import StorageBackend
from noetic_scratchpad.testing import FaultyStorage

POSTGRES_URL = os.environ.get(
    "NOETIC_SCRATCHPAD_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)
REDIS_URL = os.environ.get("NOETIC_SCRATCHPAD_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def run_python(
    *args: str,
    cwd: Path,
    env: Mapping[str, str] | None = None,
    stdin: str = "",
    timeout: float = 60,
) -> subprocess.CompletedProcess[str]:
    """``python ARGS`` in a fresh interpreter, its output captured as text; a failure is
    returned (check ``returncode``), not raised."""
    return subprocess.run(
        [sys.executable, *args],
        cwd=cwd,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@pytest.fixture(autouse=True)
def _no_storage_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests choose their storage explicitly; a developer's environment must not leak in."""
    monkeypatch.delenv("NOETIC_SCRATCHPAD_STORAGE", raising=False)


def _server_available(name: str, url: str, default_port: int) -> str | None:
    """``None`` when the test server at ``url`` answers, else why not (a skip reason)."""
    import socket
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    try:
        with socket.create_connection(
            (parts.hostname or "127.0.0.1", parts.port or default_port), 2
        ):
            return None
    except OSError as exc:
        return f"no {name} server at {url} ({exc})"


def postgres_available() -> str | None:
    """``None`` when the test server answers, else why not (a skip reason)."""
    try:
        import asyncpg  # noqa: F401
    except ImportError:
        return "asyncpg is not installed (pip install 'noetic-scratchpad[postgres]')"
    return _server_available("PostgreSQL", POSTGRES_URL, 5432)


def redis_available() -> str | None:
    """``None`` when the test Redis server answers, else why not (a skip reason)."""
    try:
        import redis  # noqa: F401
    except ImportError:
        return "redis-py is not installed (pip install 'noetic-scratchpad[redis]')"
    return _server_available("Redis", REDIS_URL, 6379)


def _require(name: str, reason: str | None) -> None:
    """Skip without a server on a developer's machine; fail in CI, where one must run."""
    if reason is None:
        return
    if IN_CI:
        pytest.fail(f"{name} is required in CI: {reason}")
    pytest.skip(reason)


def require_postgres() -> None:
    """Skip without a server on a developer's machine; fail in CI, where one must run."""
    _require("PostgreSQL", postgres_available())


def require_redis() -> None:
    """Skip without a Redis server on a developer's machine; fail in CI."""
    _require("Redis", redis_available())


def redis_test_url() -> str:
    """The test Redis server's URL with a key prefix of its own, so tests never see each
    other's keys."""
    separator = "&" if "?" in REDIS_URL else "?"
    return f"{REDIS_URL}{separator}prefix=test-{uuid.uuid4().hex[:12]}:"


def postgres_test_url() -> str:
    """The test server's URL with a table of its own, so tests never see each other's keys."""
    separator = "&" if "?" in POSTGRES_URL else "?"
    return f"{POSTGRES_URL}{separator}table=test_{uuid.uuid4().hex[:12]}"


def backend_url(kind: str, tmp_path: Path) -> str:
    if kind == "memory":
        return "memory://"
    if kind == "sqlite":
        return f"sqlite:///{tmp_path / 'scratchpad.db'}"
    if kind == "redis":
        require_redis()
        return redis_test_url()
    require_postgres()
    return postgres_test_url()


@pytest.fixture(params=["memory", "sqlite", "postgres", "redis"])
def backend_kind(request: pytest.FixtureRequest) -> str:
    kind: str = request.param
    return kind


@pytest_asyncio.fixture
async def storage(backend_kind: str, tmp_path: Path) -> AsyncIterator[StorageBackend]:
    """Every backend in turn, opened by URL and closed afterwards (PostgreSQL: table dropped;
    Redis: its prefix's keys deleted).
    A kind ``faulty-X`` is backend X behind a healthy ``FaultyStorage``; ``example`` is the
    complete backend of docs/storage.md, which implements the primitives only;
    ``namespaced-X`` is backend X seen through ``with_namespace``."""
    if backend_kind == "example":
        from tests.storage.example_backend import example_backend

        async with example_backend()() as example:
            yield example
        return
    wrapper, _, kind = backend_kind.rpartition("-")
    url = backend_url(kind, tmp_path)
    inner = await open_storage(url)
    if wrapper == "faulty":
        backend: StorageBackend = FaultyStorage(inner)
    elif wrapper == "namespaced":
        backend = inner.with_namespace("namespace/")
    else:
        backend = inner
    try:
        yield backend
    finally:
        await backend.aclose()
        await inner.aclose()  # a namespace leaves its backend open
        if hasattr(inner, "drop_table"):
            # The test may have closed the backend itself: drop through a fresh one.
            async with await open_storage(url) as cleanup:
                await cleanup.drop_table()  # type: ignore[attr-defined]
        if hasattr(inner, "drop_keys"):
            await inner.drop_keys()
