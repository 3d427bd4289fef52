"""An ETag names a revision's stored value: the tag a PATCH answers is the tag a GET of the
same revision gives, on every backend, whatever numbers the state holds."""

from __future__ import annotations

import httpx
import pytest

from noetic_scratchpad.server import create_app
from noetic_scratchpad.storage import StorageBackend

from .helpers import api_client

T1 = "/api/scopes/thread/t1"

# Numbers a database could store as other, equal ones (PostgreSQL's jsonb did: -0.0 as
# 0.0, the floats 1e20 and 1.5e300 as integers).
NUMBERS = {"z": -0.0, "e": 1e20, "big": 1.5e300, "tiny": 5e-324, "one": 1.0, "n": [1, 2**70]}


async def etag_of_get(client: httpx.AsyncClient) -> str:
    response = await client.get(T1)
    assert response.status_code == 200, response.text
    return response.headers["etag"]


@pytest.mark.asyncio
async def test_a_patch_of_such_numbers_answers_the_etag_a_get_gives(
    storage: StorageBackend,
) -> None:
    async with api_client(create_app(storage)) as client:
        patched = await client.patch(T1, json={"numbers": NUMBERS})
        assert patched.status_code == 200, patched.text
        assert patched.headers["etag"] == await etag_of_get(client)

        # The client writes on with the tag its PATCH answered: no spurious 412.
        again = await client.patch(
            T1,
            json={"numbers": {"z": -0.0, "e": 2e20}},
            headers={"If-Match": patched.headers["etag"]},
        )
        assert again.status_code == 200, again.text
        assert again.json()["revision"] == 2
        assert again.headers["etag"] == await etag_of_get(client)
        third = await client.patch(
            T1, json={"done": True}, headers={"If-Match": again.headers["etag"]}
        )
        assert third.status_code == 200, third.text

        stored = (await client.get(T1)).json()["state"]["numbers"]
        assert str(stored["z"]) == "-0.0"
        assert isinstance(stored["e"], float)
        assert isinstance(stored["big"], float)
        assert stored == {**NUMBERS, "e": 2e20}
