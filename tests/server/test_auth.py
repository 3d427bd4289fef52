"""The token, the inspector's session cookie, trusted hosts and CORS."""

from __future__ import annotations

import logging

import httpx
import pytest

from noetic_scratchpad import scratchpad
from noetic_scratchpad.server import create_app
from noetic_scratchpad.server.guard import COOKIE_NAME

from .helpers import AUTH, TOKEN, api_client, served, sse


@pytest.mark.asyncio
async def test_every_endpoint_needs_the_token_but_the_inspector_page() -> None:
    pad = create_app("memory://", token=TOKEN)
    async with api_client(pad) as client:
        for method, path in [
            ("GET", "/api/scopes"),
            ("GET", "/api/scopes/thread/t1"),
            ("PATCH", "/api/scopes/thread/t1"),
            ("DELETE", "/api/scopes/thread/t1"),
            ("GET", "/api/scopes/thread/t1/history"),
            ("POST", "/api/scopes/thread/t1/revert"),
            ("GET", "/api/scopes/thread/t1/events"),
            ("GET", "/api/events"),
            ("GET", "/openapi.json"),
            ("POST", "/api/session"),
            ("GET", "/no/such/path"),
        ]:
            for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN}):
                response = await client.request(method, path, headers=headers, json={"a": 1})
                assert response.status_code == 401, (method, path, headers)
                assert response.headers["www-authenticate"].startswith("Bearer")
                assert response.json()["type"].endswith(":unauthorized")
        page = await client.get("/")
        assert page.status_code == 200
        assert "Scratchpad inspector" in page.text
        assert TOKEN not in page.text

        ok = await client.patch("/api/scopes/thread/t1", json={"a": 1}, headers=AUTH)
        assert ok.status_code == 200
        history = await client.get("/api/scopes/thread/t1/history", headers=AUTH)
        assert history.json()["revision"] == 1
        revert = "/api/scopes/thread/t1/revert"
        reverted = await client.post(revert, json={"revision": 0}, headers=AUTH)
        assert reverted.json()["revision"] == 2
        lower = {"authorization": f"bearer {TOKEN}"}
        assert (await client.get("/api/scopes/thread/t1", headers=lower)).status_code == 200
        document = (await client.get("/openapi.json", headers=AUTH)).json()
        assert document["security"] == [{"bearer": []}, {"session": []}]


@pytest.mark.asyncio
async def test_the_session_cookie_stands_in_for_the_token_and_is_not_the_token() -> None:
    pad = create_app("memory://", token=TOKEN)
    async with api_client(pad) as client:
        started = await client.post("/api/session", headers=AUTH)
        assert started.status_code == 204
        cookie = started.headers["set-cookie"]
        assert cookie.startswith(f"{COOKIE_NAME}=")
        assert "HttpOnly" in cookie
        assert "SameSite=strict" in cookie
        assert "Path=/" in cookie
        assert TOKEN not in cookie
        # httpx keeps the cookie: no header needed any more.
        assert (await client.get("/api/scopes")).status_code == 200
        ended = await client.delete("/api/session")
        assert ended.status_code == 204
        assert (await client.get("/api/scopes")).status_code == 401
        client.cookies.set(COOKIE_NAME, "forged")
        assert (await client.get("/api/scopes")).status_code == 401


@pytest.mark.asyncio
async def test_event_stream_works_with_the_cookie_an_event_source_sends() -> None:
    pad = create_app("memory://", token=TOKEN)
    async with served(pad) as server, httpx.AsyncClient(base_url=server.url) as client:
        assert (await client.get("/api/events")).status_code == 401
        await client.post("/api/session", headers=AUTH)
        async with sse(client, "/api/events") as reader:
            await client.patch("/api/scopes/thread/t1", json={"a": 1})
            await reader.wait_for(lambda r: len(r.events) == 1)


@pytest.mark.asyncio
async def test_the_token_is_never_logged(caplog: pytest.LogCaptureFixture) -> None:
    pad = create_app("memory://", layers=[scratchpad(read_only=True)], token=TOKEN)
    with caplog.at_level(logging.DEBUG):
        async with served(pad) as server, httpx.AsyncClient(base_url=server.url) as client:
            await client.get("/api/scopes", headers=AUTH)
            await client.get("/api/scopes", headers={"Authorization": "Bearer nope"})
            await client.post("/api/session", headers=AUTH)
            await client.patch("/api/scopes/thread/t1", json={"a": 1}, headers=AUTH)
    messages = [record.getMessage() for record in caplog.records]
    assert any("GET /api/scopes" in message for message in messages)  # the access log
    assert any("update_rejected" in message for message in messages)
    for record in caplog.records:
        assert TOKEN not in record.getMessage()


def test_unusable_tokens_are_refused_at_once() -> None:
    for token in ("", "has space", "tab\tin", "naïve"):
        with pytest.raises(ValueError, match="token"):
            create_app("memory://", token=token)


@pytest.mark.asyncio
async def test_trusted_hosts_refuse_other_host_headers() -> None:
    """DNS rebinding: a page of evil.example resolving to 127.0.0.1 sends its own Host."""
    pad = create_app("memory://", trusted_hosts=["127.0.0.1", "localhost"])
    async with api_client(pad) as client:
        assert (await client.get("/api/scopes")).status_code == 200
        ok = await client.get("/api/scopes", headers={"Host": "localhost:8000"})
        assert ok.status_code == 200
        refused = await client.get("/api/scopes", headers={"Host": "evil.example:8000"})
        assert refused.status_code == 400
        assert refused.json()["type"].endswith(":untrusted-host")
        assert (await client.get("/", headers={"Host": "evil.example"})).status_code == 400


@pytest.mark.asyncio
async def test_no_cors_unless_configured() -> None:
    preflight = {
        "Origin": "http://other.example",
        "Access-Control-Request-Method": "PATCH",
        "Access-Control-Request-Headers": "authorization, content-type, if-match",
    }
    closed = create_app("memory://", token=TOKEN)
    async with api_client(closed) as client:
        response = await client.options("/api/scopes/thread/t1", headers=preflight)
        assert "access-control-allow-origin" not in response.headers
        simple = await client.get("/api/scopes", headers={**AUTH, "Origin": "http://x.example"})
        assert "access-control-allow-origin" not in simple.headers
    opened = create_app("memory://", token=TOKEN, cors_origins=["http://other.example"])
    async with api_client(opened) as client:
        response = await client.options("/api/scopes/thread/t1", headers=preflight)
        assert response.status_code == 200
        assert response.headers["access-control-allow-origin"] == "http://other.example"
        assert "PATCH" in response.headers["access-control-allow-methods"]
        assert "if-match" in response.headers["access-control-allow-headers"].lower()
        read = await client.get("/api/scopes", headers={**AUTH, "Origin": "http://other.example"})
        assert read.headers["access-control-expose-headers"] == "ETag"
        refused = await client.options(
            "/api/scopes/thread/t1", headers={**preflight, "Origin": "http://evil.example"}
        )
        assert refused.status_code == 400


@pytest.mark.asyncio
async def test_the_inspector_page_allows_only_its_own_inline_code() -> None:
    pad = create_app("memory://")
    async with api_client(pad) as client:
        page = await client.get("/")
    policy = page.headers["content-security-policy"]
    assert "default-src 'none'" in policy
    assert "script-src 'sha256-" in policy
    assert "unsafe-inline" not in policy
    assert "connect-src 'self'" in policy
    assert page.headers["x-content-type-options"] == "nosniff"
    # The page shows state as text: nothing it renders goes through innerHTML.
    assert "innerHTML" not in page.text
