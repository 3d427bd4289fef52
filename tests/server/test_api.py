"""The JSON endpoints: list, read, update (the tool's write path), reset, and the problems
every bad request gets instead of a 500."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.routing import Mount

from noetic_scratchpad import UpdateApplied, UpdateRejected, open_storage, scratchpad
from noetic_scratchpad.keys import MAX_ID_BYTES
from noetic_scratchpad.server import create_app
from noetic_scratchpad.server.openapi import MAX_OFFSET
from noetic_scratchpad.testing import FaultyStorage, capture_events

from .helpers import TaskNotes, api_client

PROBLEM = "application/problem+json"


def assert_problem(
    response: httpx.Response, status: int, kind: str | None = None
) -> dict[str, Any]:
    """The response is an RFC 9457 document of ``status`` (and ``type`` ending in ``kind``)."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == PROBLEM
    body: dict[str, Any] = response.json()
    assert body["status"] == status
    assert body["title"]
    assert body["detail"]
    assert body["type"] == (f"urn:noetic-scratchpad:problem:{kind}" if kind else "about:blank")
    return body


@pytest.mark.asyncio
async def test_update_read_list_and_reset_a_scope() -> None:
    pad = create_app("memory://", layers=[scratchpad(schema=TaskNotes)])
    async with api_client(pad) as client:
        assert (await client.get("/api/scopes")).json() == {"scopes": [], "total": 0}

        first = await client.patch("/api/scopes/thread/t1", json={"currentGoal": "Ship v2"})
        assert first.status_code == 200
        assert first.json() == {
            "kind": "thread",
            "id": "t1",
            "layer": "scratchpad",
            "revision": 1,
            "state": {"currentGoal": "Ship v2"},
        }
        # A deep merge, as the tool does: keys not sent stay.
        second = await client.patch("/api/scopes/thread/t1", json={"blockers": ["CI red"]})
        assert second.json()["state"] == {"currentGoal": "Ship v2", "blockers": ["CI red"]}
        assert (await client.get("/api/scopes/thread/t1")).json() == second.json()
        assert second.json()["revision"] == 2

        listed = (await client.get("/api/scopes")).json()
        assert listed["total"] == 1
        (row,) = listed["scopes"]
        assert row["kind"] == "thread"
        assert row["id"] == "t1"
        assert row["layer"] == "scratchpad"
        assert row["revision"] == 2
        assert row["size"] > 20
        assert row["updated_at"].endswith("Z")

        assert (await client.delete("/api/scopes/thread/t1")).status_code == 204
        assert_problem(await client.get("/api/scopes/thread/t1"), 404, "not-found")
        assert_problem(await client.delete("/api/scopes/thread/t1"), 404, "not-found")


@pytest.mark.asyncio
async def test_a_patch_with_no_key_writes_nothing() -> None:
    """``{}`` makes no revision and no history entry; it answers the state as it is."""
    pad = create_app("memory://", layers=[scratchpad(schema=TaskNotes)])
    async with api_client(pad) as client:
        nothing = await client.patch("/api/scopes/thread/t1", json={})
        assert (nothing.status_code, nothing.json()["revision"]) == (200, 0)
        assert (await client.get("/api/scopes/thread/t1")).status_code == 404

        await client.patch("/api/scopes/thread/t1", json={"currentGoal": "Ship v2"})
        again = await client.patch("/api/scopes/thread/t1", json={})
        assert again.json()["revision"] == 1
        assert again.json()["state"] == {"currentGoal": "Ship v2"}
        history = (await client.get("/api/scopes/thread/t1/history")).json()
        assert [entry["revision"] for entry in history["entries"]] == [1]


@pytest.mark.asyncio
async def test_writes_take_the_tool_path_and_report_api_on_the_apps_bus() -> None:
    """Every write is one event on the app-wide bus, source or hook ``"api"``."""
    pad = create_app("memory://", layers=[scratchpad(schema=TaskNotes)])
    with capture_events(pad.events) as events:
        async with api_client(pad) as client:
            await client.patch("/api/scopes/thread/t1", json={"currentGoal": "A"})
            await client.patch("/api/scopes/thread/t2", json={"blockers": "not a list"})
    (applied,) = events.of(UpdateApplied)
    assert (applied.source, applied.scope_key, applied.keys) == ("api", "t1", ("currentGoal",))
    (rejected,) = events.of(UpdateRejected)
    assert (rejected.hook, rejected.reason, rejected.scope_key) == ("api", "schema", "t2")


@pytest.mark.asyncio
async def test_ids_are_one_encoded_segment_so_a_and_a_slash_b_stay_apart() -> None:
    pad = create_app("memory://")
    async with api_client(pad) as client:
        await client.patch("/api/scopes/thread/a", json={"n": 1})
        await client.patch("/api/scopes/thread/a%2Fb", json={"n": 2})
        await client.patch("/api/scopes/thread/a%2Fevents", json={"n": 3})
        await client.patch("/api/scopes/resource/a", json={"n": 4})
        assert (await client.get("/api/scopes/thread/a%2Fb")).json()["state"] == {"n": 2}
        # Not the event stream of "a": the scope whose id is "a/events".
        assert (await client.get("/api/scopes/thread/a%2Fevents")).json()["id"] == "a/events"
        assert (await client.delete("/api/scopes/thread/a%2Fb")).status_code == 204
        assert (await client.get("/api/scopes/thread/a")).json()["state"] == {"n": 1}
        assert (await client.get("/api/scopes/resource/a")).json()["state"] == {"n": 4}
        listed = (await client.get("/api/scopes", params={"kind": "thread"})).json()
        assert sorted(row["id"] for row in listed["scopes"]) == ["a", "a/events"]
        unencoded = await client.get("/api/scopes/thread/a/b")
        assert "%2F" in assert_problem(unencoded, 404)["detail"]


@pytest.mark.asyncio
async def test_schema_refusal_reads_for_a_developer_and_lists_the_errors() -> None:
    pad = create_app("memory://", layers=[scratchpad(schema=TaskNotes)])
    async with api_client(pad) as client:
        await client.patch("/api/scopes/thread/t1", json={"currentGoal": "Keep"})
        response = await client.patch("/api/scopes/thread/t1", json={"blockers": "one", "extra": 1})
        body = assert_problem(response, 422, "schema")
        assert body["reason"] == "schema"
        assert {tuple(error["loc"]) for error in body["errors"]} == {("blockers",), ("extra",)}
        assert all({"type", "loc", "msg"} <= set(error) for error in body["errors"])
        assert "blockers, extra" in body["detail"]
        assert "scratchpad/update" not in body["detail"]  # the model's hint is not shown
        state = (await client.get("/api/scopes/thread/t1")).json()["state"]
        assert state == {"currentGoal": "Keep"}  # nothing was written


@pytest.mark.parametrize(
    ("content", "headers", "status", "kind"),
    [
        (b"{not json", {"content-type": "application/json"}, 400, "malformed-body"),
        (b"", {"content-type": "application/json"}, 400, "malformed-body"),
        (b"\xff\xfe", {"content-type": "application/json"}, 400, "malformed-body"),
        (b'{"a": NaN}', {"content-type": "application/json"}, 400, "malformed-body"),
        (b"[" * 100_000, {"content-type": "application/json"}, 400, "malformed-body"),
        (b'["a list"]', {"content-type": "application/json"}, 422, "not-an-object"),
        (b'"text"', {"content-type": "application/json"}, 422, "not-an-object"),
        (b"goal=x", {"content-type": "application/x-www-form-urlencoded"}, 415, None),
        (b'{"a": 1}', {}, 415, None),
    ],
)
@pytest.mark.asyncio
async def test_bad_bodies_are_4xx_problems(
    content: bytes, headers: dict[str, str], status: int, kind: str | None
) -> None:
    pad = create_app("memory://")
    async with api_client(pad) as client:
        response = await client.patch("/api/scopes/thread/t1", content=content, headers=headers)
        assert_problem(response, status, kind or "unsupported-media-type")
        assert_problem(await client.get("/api/scopes/thread/t1"), 404, "not-found")


@pytest.mark.asyncio
async def test_oversized_body_and_state_are_refused() -> None:
    pad = create_app("memory://", layers=[scratchpad(max_state_bytes=100)], max_body_bytes=1000)
    async with api_client(pad) as client:
        big = await client.patch("/api/scopes/thread/t1", json={"text": "x" * 2000})
        assert_problem(big, 413, "body-too-large")
        grown = await client.patch("/api/scopes/thread/t1", json={"text": "x" * 500})
        body = assert_problem(grown, 422, "too-large")
        assert "max_state_bytes" in body["detail"]


@pytest.mark.asyncio
async def test_a_content_length_past_int_limits_is_a_413_not_a_500() -> None:
    """int() of over 4,300 digits raises: a declared length of 5,001 digits was a 500."""
    pad = create_app("memory://", max_body_bytes=1000)
    async with api_client(pad) as client:
        for declared in ("1" + "0" * 5000, "9" * 20, "0" * 30 + "1001"):
            huge = await client.patch(
                "/api/scopes/thread/t1",
                content=b'{"a": 1}',
                headers={"Content-Type": "application/json", "Content-Length": declared},
            )
            assert_problem(huge, 413, "body-too-large")
        # Not ASCII digits: not a length this server reads; the body itself is measured.
        arabic = await client.patch(
            "/api/scopes/thread/t1",
            content=b'{"a": 1}',
            headers={"Content-Type": "application/json", "Content-Length": "\u0663".encode()},
        )
        assert arabic.status_code == 200


@pytest.mark.asyncio
async def test_bad_ids_kinds_and_parameters_are_4xx_problems() -> None:
    pad = create_app("memory://", layers=[scratchpad()])  # thread scopes only
    async with api_client(pad) as client:
        long_id = "x" * (MAX_ID_BYTES + 1)
        assert_problem(await client.get(f"/api/scopes/thread/{long_id}"), 400, "invalid-scope-id")
        assert_problem(await client.get("/api/scopes/thread/%FF"), 400, "invalid-scope-id")
        assert_problem(await client.get("/api/scopes/resource/u1"), 404, "not-found")
        assert_problem(await client.get("/api/scopes/user/u1"), 404, "not-found")
        assert_problem(await client.get("/api/scopes/thread/"), 400, "invalid-scope-id")
        for query in ({"limit": "0"}, {"limit": "ten"}, {"offset": "-1"}, {"kind": "user"}):
            assert_problem(await client.get("/api/scopes", params=query), 400, "invalid-parameter")
        for offset, status in (
            (str(MAX_OFFSET), 200),
            (str(MAX_OFFSET + 1), 400),
            ("9" * 5000, 400),
        ):
            assert (
                await client.get("/api/scopes", params={"offset": offset})
            ).status_code == status
        assert_problem(
            await client.get("/api/events", params={"replay": "x"}), 400, "invalid-parameter"
        )
        assert_problem(await client.get("/no/such/path"), 404)


@pytest.mark.asyncio
async def test_unknown_methods_and_actions_name_what_is_allowed() -> None:
    pad = create_app("memory://")
    async with api_client(pad) as client:
        refused = await client.post("/api/scopes/thread/t1", json={})
        assert_problem(refused, 405)
        assert refused.headers["allow"] == "GET, PATCH, DELETE"
        assert_problem(await client.put("/api/scopes", json={}), 405)
        assert_problem(await client.get("/api/scopes/thread/t1/nothing"), 404)
        history = await client.post("/api/scopes/thread/t1/history", json={})
        assert history.headers["allow"] == "GET"
        assert_problem(await client.get("/api/scopes/thread/t1/revert"), 405)


@pytest.mark.asyncio
async def test_read_only_layer_refuses_updates_with_409() -> None:
    pad = create_app("memory://", layers=[scratchpad(read_only=True)])
    async with api_client(pad) as client:
        response = await client.patch("/api/scopes/thread/t1", json={"a": 1})
        assert assert_problem(response, 409, "read-only")["reason"] == "read_only"


@pytest.mark.asyncio
async def test_failing_storage_is_a_503_not_a_500() -> None:
    inner = await open_storage("memory://")
    faulty = FaultyStorage(
        inner, fail_on=("get", "get_revision", "update", "commit", "describe", "delete", "list")
    )
    pad = create_app(faulty)
    async with api_client(pad) as client:
        for response in (
            await client.get("/api/scopes"),
            await client.get("/api/scopes/thread/t1"),
            await client.patch("/api/scopes/thread/t1", json={"a": 1}),
            await client.delete("/api/scopes/thread/t1"),
        ):
            body = assert_problem(response, 503, "storage-unavailable")
            assert "injected" not in body["detail"]  # backend details go to the log
            assert response.headers["retry-after"] == "1"
    await inner.aclose()


@pytest.mark.asyncio
async def test_a_write_past_write_timeout_is_a_503_saying_it_may_have_landed() -> None:
    """Storage that does not answer within ``write_timeout``: the update may or may not
    have landed, and the client is told so, not that nothing was changed."""
    inner = await open_storage("memory://")
    faulty = FaultyStorage(inner, stall_on=("commit",), stall_at="after")
    pad = create_app(faulty, layers=[scratchpad(write_timeout=0.05)])
    async with api_client(pad) as client:
        response = await client.patch("/api/scopes/thread/t1", json={"a": 1})
        body = assert_problem(response, 503, "outcome-unknown")
        assert "may have landed or not" in body["detail"]
        assert response.headers["retry-after"] == "1"
    faulty.release()
    await inner.aclose()


@pytest.mark.asyncio
async def test_url_storage_is_opened_by_the_lifespan_and_requests_before_it_are_503() -> None:
    pad = create_app("memory://")
    transport = httpx.ASGITransport(app=pad)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        body = assert_problem(await client.get("/api/scopes"), 503, "not-started")
        assert "lifespan" in body["detail"]
        with pytest.raises(RuntimeError, match="lifespan"):
            _ = pad.storage
        async with pad.lifespan():
            assert (await client.get("/api/scopes")).status_code == 200
        assert_problem(await client.get("/api/scopes"), 503, "not-started")


@pytest.mark.asyncio
async def test_writes_before_the_lifespan_are_503_and_the_core_opens_nothing() -> None:
    """The app's core (``pad.core``) owns its storage and bus; a write before the lifespan
    is a 503 rather than a lazy open of the URL by the core."""
    pad = create_app("memory://")
    transport = httpx.ASGITransport(app=pad)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        patch = await client.patch("/api/scopes/thread/t1", json={"a": 1})
        assert_problem(patch, 503, "not-started")
        revert = await client.post("/api/scopes/resource/u1/revert", json={"revision": 1})
        assert_problem(revert, 503, "not-started")
        assert pad.core.opened is None
        async with pad.lifespan():
            assert pad.storage is pad.core.backend
            assert pad.events is pad.core.events
            assert (await client.patch("/api/scopes/thread/t1", json={"a": 1})).status_code == 200
        assert pad.core.opened is None


@pytest.mark.asyncio
async def test_mounted_in_a_host_app_sharing_its_lifespan() -> None:
    """As in FastAPI: ``app.mount("/scratchpad", pad)`` with ``lifespan=pad.lifespan``; the
    paths, the OpenAPI server URL and the cookie path follow the mount point."""
    pad = create_app("memory://")
    host = Starlette(routes=[Mount("/scratchpad", app=pad)], lifespan=pad.lifespan)
    async with host.router.lifespan_context(host):
        transport = httpx.ASGITransport(app=host)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            updated = await client.patch("/scratchpad/api/scopes/thread/a%2Fb", json={"n": 1})
            assert updated.json()["id"] == "a/b"
            document = (await client.get("/scratchpad/openapi.json")).json()
            assert document["servers"] == [{"url": "/scratchpad"}]
            page = await client.get("/scratchpad/")
            assert page.headers["content-type"].startswith("text/html")
            missing = await client.get("/scratchpad/api/scopes/thread/zz")
            assert (
                assert_problem(missing, 404, "not-found")["instance"]
                == "/scratchpad/api/scopes/thread/zz"
            )


@pytest.mark.asyncio
async def test_openapi_describes_the_layers_update_body() -> None:
    pad = create_app("memory://", layers=[scratchpad(schema=TaskNotes)])
    async with api_client(pad) as client:
        document = (await client.get("/openapi.json")).json()
    assert document["openapi"].startswith("3.1")
    assert set(document["paths"]) == {
        "/api/scopes",
        "/api/events",
        "/api/session",
        "/api/scopes/thread/{scope_id}",
        "/api/scopes/thread/{scope_id}/events",
        "/api/scopes/thread/{scope_id}/history",
        "/api/scopes/thread/{scope_id}/revert",
        "/api/scopes/thread/{scope_id}/export",
        "/api/scopes/thread/{scope_id}/erase",
        "/api/scopes/thread/{scope_id}/view",
    }
    update = document["components"]["schemas"]["thread_update"]
    assert set(update["properties"]) == {"currentGoal", "completedSteps", "blockers"}
    assert "security" not in document  # no token, no auth
    scope = document["paths"]["/api/scopes/thread/{scope_id}"]
    assert "ETag" in scope["get"]["responses"]["200"]["headers"]
    assert "412" in scope["patch"]["responses"]
    revert = document["paths"]["/api/scopes/thread/{scope_id}/revert"]["post"]
    assert set(revert["responses"]) >= {"200", "404", "409", "412", "422"}


def test_bad_arguments_fail_at_once() -> None:
    with pytest.raises(ValueError, match="two layers serve thread"):
        create_app("memory://", layers=[scratchpad(), scratchpad()])
    with pytest.raises(TypeError, match="scratchpad layers"):
        create_app("memory://", layers=["scratchpad"])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="max_body_bytes"):
        create_app("memory://", max_body_bytes=0)
    with pytest.raises(ValueError, match="keepalive"):
        create_app("memory://", keepalive=0)
    with pytest.raises(TypeError, match="storage"):
        create_app(42)  # type: ignore[arg-type]


@pytest.mark.asyncio
async def test_a_client_gone_mid_body_is_not_a_server_error() -> None:
    pad = create_app("memory://")
    scope = {
        "type": "http",
        "method": "PATCH",
        "path": "/api/scopes/thread/t1",
        "raw_path": b"/api/scopes/thread/t1",
        "root_path": "",
        "query_string": b"",
        "headers": [(b"content-type", b"application/json"), (b"host", b"127.0.0.1")],
        "scheme": "http",
        "server": ("127.0.0.1", 8000),
    }
    messages = [
        {"type": "http.request", "body": b'{"a": ', "more_body": True},
        {"type": "http.disconnect"},
    ]
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return messages.pop(0)

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    async with pad.lifespan():
        await pad(scope, receive, send)
    assert sent[0]["status"] == 400
