"""A scope whose stored row cannot be read back (written by another program, or damaged):
a permanent fault, answered as such (409 ``storage-corrupt``, no ``Retry-After``), that a
``DELETE`` of the scope clears so writes work again."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import pytest_asyncio

from noetic_scratchpad import open_storage, scratchpad
from noetic_scratchpad.keys import state_key
from noetic_scratchpad.server import create_app
from noetic_scratchpad.storage import StorageBackend
from tests.conftest import backend_url
from tests.storage.corrupt import CORRUPT_ROWS, corrupt_row

from .helpers import api_client
from .test_api import assert_problem

pytestmark = pytest.mark.asyncio

SCOPE = "/api/scopes/thread/t1"


@pytest_asyncio.fixture
async def client_and_storage(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[tuple[httpx.AsyncClient, StorageBackend]]:
    """A client of an app on a backend of the test's kind, and that backend."""
    kind, how = request.param
    url = backend_url(kind, tmp_path)
    async with await open_storage(url) as storage:
        try:
            async with api_client(create_app(storage, layers=[scratchpad()])) as client:
                written = await client.patch(SCOPE, json={"goal": "ship"})
                assert written.status_code == 200, written.text
                await corrupt_row(storage, state_key("scratchpad", "thread", "t1"), how)
                yield client, storage
        finally:
            if hasattr(storage, "drop_table"):
                await storage.drop_table()


def assert_corrupt(response: httpx.Response) -> None:
    body = assert_problem(response, 409, "storage-corrupt")
    assert "Retry-After" not in response.headers  # retrying cannot help
    assert "DELETE" in body["detail"]
    assert "will not help" in body["detail"]


@pytest.mark.parametrize("client_and_storage", CORRUPT_ROWS, indirect=True)
async def test_reading_or_writing_a_corrupt_scope_is_a_409_without_retry_after(
    client_and_storage: tuple[httpx.AsyncClient, StorageBackend],
) -> None:
    client, _ = client_and_storage
    assert_corrupt(await client.get(SCOPE))
    assert_corrupt(await client.patch(SCOPE, json={"goal": "again"}))
    assert_corrupt(await client.get(f"{SCOPE}/history"))
    assert_corrupt(await client.get(f"{SCOPE}/view"))
    assert_corrupt(await client.post(f"{SCOPE}/revert", json={"revision": 1}))
    # Other scopes are served as usual.
    assert (await client.patch("/api/scopes/thread/t2", json={"goal": "other"})).status_code == 200


@pytest.mark.parametrize("client_and_storage", CORRUPT_ROWS, indirect=True)
async def test_delete_resets_a_corrupt_scope_and_writes_work_again(
    client_and_storage: tuple[httpx.AsyncClient, StorageBackend],
) -> None:
    client, _ = client_and_storage
    deleted = await client.delete(SCOPE)
    assert deleted.status_code == 204, deleted.text

    assert_problem(await client.get(SCOPE), 404, "not-found")
    rewritten = await client.patch(SCOPE, json={"goal": "fresh"})
    assert rewritten.status_code == 200, rewritten.text
    assert rewritten.json()["revision"] > 1  # revisions never repeat, a reset included
    read = await client.get(SCOPE)
    assert read.json()["state"] == {"goal": "fresh"}
    assert read.headers["etag"] == rewritten.headers["etag"]
