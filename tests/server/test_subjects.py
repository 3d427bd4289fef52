"""A data subject over HTTP: GET .../export, DELETE .../erase, POST api/scopes (import)."""

from __future__ import annotations

import pytest

from noetic_scratchpad import scratchpad
from noetic_scratchpad.server import create_app

from .helpers import AUTH, TOKEN, api_client
from .test_api import assert_problem

pytestmark = pytest.mark.asyncio


def served() -> list[object]:
    return [scratchpad(), scratchpad(scope="resource")]


async def test_export_erase_and_import_a_subject_over_http() -> None:
    pad = create_app("memory://", layers=served(), token=TOKEN)
    async with api_client(pad, AUTH) as client:
        await client.patch("/api/scopes/resource/alice", json={"name": "Alice"})
        await client.patch("/api/scopes/resource/alice", json={"city": "Lyon"})
        await client.patch("/api/scopes/thread/t%2F1", json={"goal": "trip"})
        await client.patch("/api/scopes/thread/t2", json={"goal": "bob's"})

        exported = await client.get("/api/scopes/resource/alice/export?thread=t/1")
        assert exported.status_code == 200
        document = exported.json()
        assert document["subject"] == {"resource": "alice", "threads": ["t/1"]}
        assert {(s["kind"], s["id"]) for s in document["scopes"]} == {
            ("resource", "alice"),
            ("thread", "t/1"),
        }

        erased = await client.delete("/api/scopes/resource/alice/erase?thread=t/1")
        assert erased.status_code == 200
        assert erased.json()["keys_deleted"] == 2
        assert erased.json()["complete"] is True
        listed = (await client.get("/api/scopes")).json()["scopes"]
        assert [(row["kind"], row["id"]) for row in listed] == [("thread", "t2")]
        again = await client.delete("/api/scopes/resource/alice/erase?thread=t/1")
        assert again.json()["keys_deleted"] == 0  # safe to repeat

        loaded = await client.post("/api/scopes", json=document)
        assert loaded.status_code == 200, loaded.text
        assert len(loaded.json()["imported"]) == 2
        alice = (await client.get("/api/scopes/resource/alice")).json()
        assert alice["state"] == {"name": "Alice", "city": "Lyon"}
        history = (await client.get("/api/scopes/resource/alice/history")).json()
        assert len(history["entries"]) == 2

        await client.patch("/api/scopes/resource/alice", json={"city": "Paris"})
        conflict = await client.post("/api/scopes", json=document)
        body = assert_problem(conflict, 409, "import-conflict")
        assert body["conflicts"][0]["id"] == "alice"
        assert "replace=true" in body["detail"]
        replaced = await client.post("/api/scopes?replace=true", json=document)
        assert replaced.status_code == 200
        assert [row["id"] for row in replaced.json()["replaced"]] == ["alice"]

        # A thread id in the path is the subject's first thread.
        thread = await client.get("/api/scopes/thread/t2/export")
        assert thread.json()["subject"] == {"resource": None, "threads": ["t2"]}


async def test_the_token_guards_the_subject_endpoints() -> None:
    pad = create_app("memory://", layers=served(), token=TOKEN)
    async with api_client(pad) as client:
        assert_problem(await client.get("/api/scopes/resource/alice/export"), 401, "unauthorized")
        assert_problem(await client.delete("/api/scopes/resource/alice/erase"), 401, "unauthorized")
        assert_problem(await client.post("/api/scopes", json={}), 401, "unauthorized")


async def test_bad_requests_are_problems() -> None:
    pad = create_app("memory://", layers=served())
    async with api_client(pad) as client:
        assert_problem(
            await client.get("/api/scopes/thread/t/export?thread="), 400, "invalid-scope-id"
        )
        assert_problem(
            await client.post("/api/scopes", json={"format": "x"}), 422, "invalid-export"
        )
        assert_problem(
            await client.post("/api/scopes?replace=yes", json={}), 400, "invalid-parameter"
        )
        other_layer = {
            "format": "noetic-scratchpad/export",
            "version": 1,
            "scopes": [
                {"layer": "notes", "kind": "thread", "id": "t", "keys": {"state": {"value": 1}}}
            ],
        }
        body = assert_problem(
            await client.post("/api/scopes", json=other_layer), 422, "invalid-export"
        )
        assert "does not serve" in body["detail"]
        assert_problem(await client.post("/api/scopes/thread/t/erase"), 405)


async def test_a_read_only_app_refuses_an_import() -> None:
    pad = create_app("memory://", layers=[scratchpad(read_only=True)])
    document = {
        "format": "noetic-scratchpad/export",
        "version": 1,
        "scopes": [
            {"layer": "scratchpad", "kind": "thread", "id": "t", "keys": {"state": {"value": "x"}}}
        ],
    }
    async with api_client(pad) as client:
        assert_problem(await client.post("/api/scopes", json=document), 409, "read-only")


async def test_the_openapi_document_describes_them() -> None:
    pad = create_app("memory://", layers=served(), token=TOKEN)
    async with api_client(pad, AUTH) as client:
        paths = (await client.get("/openapi.json")).json()["paths"]
    assert set(paths["/api/scopes"]) == {"get", "post"}
    for kind in ("thread", "resource"):
        assert "get" in paths[f"/api/scopes/{kind}/{{scope_id}}/export"]
        assert "delete" in paths[f"/api/scopes/{kind}/{{scope_id}}/erase"]


async def test_an_import_report_of_a_long_multibyte_id_matches_its_schema() -> None:
    """An id the server accepts (at most MAX_ID_BYTES of UTF-8) may have more characters
    than a request's conservative limit: the report's schema allows every accepted id."""
    import jsonschema

    from noetic_scratchpad.keys import MAX_ID_BYTES

    scope_id = "é" * (MAX_ID_BYTES // 2)  # two bytes a character: exactly the byte limit
    pad = create_app("memory://", layers=served())
    async with api_client(pad) as client:
        await client.patch(f"/api/scopes/thread/{scope_id}", json={"goal": "x"})
        document = (await client.get(f"/api/scopes/thread/{scope_id}/export")).json()
        await client.delete(f"/api/scopes/thread/{scope_id}/erase")
        loaded = await client.post("/api/scopes", json=document)
        schema = (await client.get("/openapi.json")).json()
    assert loaded.status_code == 200, loaded.text
    assert [row["id"] for row in loaded.json()["imported"]] == [scope_id]
    report = {**schema["components"]["schemas"]["ImportReport"], "components": schema["components"]}
    jsonschema.validate(loaded.json(), report)


async def test_an_import_naming_a_layer_not_served_is_refused_even_without_keys() -> None:
    """A scope with no keys is checked too: the document is refused or taken whole (the
    fuzz test's schema-violating layer was accepted when its scope held no keys)."""
    pad = create_app("memory://", layers=served())
    document = {
        "format": "noetic-scratchpad/export",
        "version": 1,
        "scopes": [
            {"layer": "elsewhere", "kind": "thread", "id": "t1", "keys": {}},
            {"layer": "scratchpad", "kind": "thread", "id": "t2", "keys": {}},
        ],
    }
    async with api_client(pad) as client:
        refused = await client.post("/api/scopes", json=document)
    body = assert_problem(refused, 422, "invalid-export")
    assert "'elsewhere'" in body["detail"]
