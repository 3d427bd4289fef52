"""The token, the inspector's session cookie, trusted hosts and CORS."""

from __future__ import annotations

import hmac
import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest

from noetic_scratchpad import scratchpad
from noetic_scratchpad.server import ScratchpadApp, create_app
from noetic_scratchpad.server.guard import COOKIE_NAME
from noetic_scratchpad.server.sessions import Sessions

from .helpers import AUTH, TOKEN, FakeClock, api_client, served, sse


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


def _session_cookie(response: httpx.Response) -> str:
    cookie = response.headers["set-cookie"]
    assert cookie.startswith(f"{COOKIE_NAME}=")
    return cookie.partition("=")[2].partition(";")[0]


@asynccontextmanager
async def _with_cookie(pad: ScratchpadApp, value: str) -> AsyncIterator[httpx.AsyncClient]:
    """Another client sending only ``value`` as the session cookie, as a thief would."""
    transport = httpx.ASGITransport(app=pad)
    async with httpx.AsyncClient(
        transport=transport, base_url="http://127.0.0.1", cookies={COOKIE_NAME: value}
    ) as client:
        yield client


@pytest.mark.asyncio
async def test_logout_ends_the_session_for_whoever_holds_its_cookie() -> None:
    """The cookie was a fixed HMAC of the token: after DELETE api/session a captured copy
    still read and wrote. Now it names a session the server ended: 401 for everything."""
    pad = create_app("memory://", token=TOKEN)
    async with api_client(pad) as client:
        captured = _session_cookie(await client.post("/api/session", headers=AUTH))
        async with _with_cookie(pad, captured) as thief:
            assert (await thief.get("/api/scopes")).status_code == 200
            assert (await client.delete("/api/session")).status_code == 204
            refused = [
                await thief.get("/api/scopes"),
                await thief.patch("/api/scopes/thread/t1", json={"a": 1}),
                await thief.delete("/api/scopes/thread/t1"),
                await thief.post("/api/session"),
            ]
        assert [response.status_code for response in refused] == [401] * 4
        # The token still works, and starts a new session with a new cookie.
        assert (await client.get("/api/scopes", headers=AUTH)).status_code == 200
        again = _session_cookie(await client.post("/api/session", headers=AUTH))
        assert again != captured
        assert (await client.get("/api/scopes")).status_code == 200


@pytest.mark.asyncio
async def test_sessions_are_random_and_end_one_at_a_time() -> None:
    pad = create_app("memory://", token=TOKEN)
    async with api_client(pad) as client:
        first = _session_cookie(await client.post("/api/session", headers=AUTH))
        second = _session_cookie(await client.post("/api/session", headers=AUTH))
        assert first != second
        assert TOKEN not in first + second
        async with _with_cookie(pad, first) as one, _with_cookie(pad, second) as other:
            assert (await one.delete("/api/session")).status_code == 204
            assert (await one.get("/api/scopes")).status_code == 401
            assert (await other.get("/api/scopes")).status_code == 200


@pytest.mark.asyncio
async def test_sessions_expire_when_idle_and_at_their_max_age() -> None:
    clock = FakeClock()
    pad = create_app("memory://", token=TOKEN, session_max_age=600, session_idle_timeout=120)
    pad.sessions.clock = clock
    async with api_client(pad) as client:
        started = await client.post("/api/session", headers=AUTH)
        assert "Max-Age=600" in started.headers["set-cookie"]
        idle = _session_cookie(started)
        busy = _session_cookie(await client.post("/api/session", headers=AUTH))
        async with _with_cookie(pad, idle) as sleeper, _with_cookie(pad, busy) as worker:
            for _ in range(5):  # the worker uses its session every 100 s, the sleeper not
                clock.now += 100
                assert (await worker.get("/api/scopes")).status_code == 200
            assert (await sleeper.get("/api/scopes")).status_code == 401  # idle past 120 s
            clock.now += 99  # 599 s old
            assert (await worker.get("/api/scopes")).status_code == 200
            clock.now += 1  # 600 s: its max age, however busy
            assert (await worker.get("/api/scopes")).status_code == 401
        assert (await client.get("/api/scopes", headers=AUTH)).status_code == 200


@pytest.mark.asyncio
async def test_the_session_cookie_is_secure_over_https() -> None:
    pad = create_app("memory://", token=TOKEN)
    async with pad.lifespan():
        transport = httpx.ASGITransport(app=pad)
        async with httpx.AsyncClient(transport=transport, base_url="https://pad.example") as tls:
            cookie = (await tls.post("/api/session", headers=AUTH)).headers["set-cookie"]
    assert "Secure" in cookie
    assert "HttpOnly" in cookie
    assert "SameSite=strict" in cookie
    assert f"Max-Age={8 * 3600}" in cookie


def test_session_lifetimes_must_be_positive_and_bounded() -> None:
    for name in ("session_max_age", "session_idle_timeout"):
        for value in (0, -1, True, "600", float("inf"), float("nan"), 401 * 24 * 3600):
            with pytest.raises(ValueError, match=name):
                create_app("memory://", token=TOKEN, **{name: value})


def test_the_number_of_sessions_kept_is_bounded() -> None:
    """Started and never ended (a script posting its token in a loop): the least recently
    used session goes first; memory stays bounded."""
    clock = FakeClock()
    sessions = Sessions(max_age=600, idle_timeout=600, limit=3, clock=clock)
    ids = []
    for _ in range(3):
        ids.append(sessions.start())
        clock.now += 1
    assert sessions.check(ids[0])  # used: now the most recent
    ids.append(sessions.start())
    assert len(sessions) == 3
    assert [sessions.check(one) for one in ids] == [True, False, True, True]


@pytest.mark.asyncio
async def test_a_stream_opened_with_a_session_ends_when_the_session_ends() -> None:
    """An EventSource opened with the cookie before logout must not go on receiving."""
    pad = create_app("memory://", token=TOKEN, keepalive=0.2)
    async with served(pad) as server, httpx.AsyncClient(base_url=server.url) as client:
        await client.post("/api/session", headers=AUTH)
        async with sse(client, "/api/events") as reader:
            await client.patch("/api/scopes/thread/t1", json={"a": 1})
            await reader.wait_for(lambda r: len(r.events) == 1)
            assert (await client.delete("/api/session")).status_code == 204
            await client.patch("/api/scopes/thread/t1", json={"a": 2}, headers=AUTH)
            await reader.wait_for(lambda r: r.ended_cleanly, 2)
        assert len(reader.events) == 1
        again = await client.get("/api/events")  # the EventSource reconnecting
        assert again.status_code == 401


@pytest.mark.asyncio
async def test_a_hostile_cookie_header_is_read_in_linear_time() -> None:
    """``http.cookies`` (Python 3.11.7) unquotes a quoted run of backslashes in quadratic
    time: 40,000 characters held the event loop for 3.5 s per request."""
    pad = create_app("memory://", token=TOKEN)
    hostile = f'{COOKIE_NAME}="' + "\\\\" * 20_000 + '"'
    async with api_client(pad) as client:
        began = time.perf_counter()
        refused = await client.get("/api/scopes", headers={"Cookie": hostile})
        seconds = time.perf_counter() - began
    assert refused.status_code == 401
    assert seconds < 0.5


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


# -- the read-only token -----------------------------------------------------------------

READ_TOKEN = "read-only-token-fedcba9876543210"
READ = {"Authorization": f"Bearer {READ_TOKEN}"}


async def _written(client: httpx.AsyncClient) -> dict[str, object]:
    """What the read-write token wrote first: thread t1 at revision 2, resource alice."""
    await client.patch("/api/scopes/thread/t1", json={"goal": "one"}, headers=AUTH)
    await client.patch("/api/scopes/thread/t1", json={"goal": "two"}, headers=AUTH)
    await client.patch("/api/scopes/resource/alice", json={"likes": "tea"}, headers=AUTH)
    return await _everything(client)


async def _everything(client: httpx.AsyncClient) -> dict[str, object]:
    return {
        path: (await client.get(path, headers=AUTH)).json()
        for path in (
            "/api/scopes",
            "/api/scopes/thread/t1",
            "/api/scopes/thread/t1/history",
            "/api/scopes/resource/alice",
        )
    }


#: Every write the app has, as (method, path, JSON body).
WRITES: list[tuple[str, str, object]] = [
    ("PATCH", "/api/scopes/thread/t1", {"goal": "hijacked"}),
    ("DELETE", "/api/scopes/thread/t1", None),  # reset
    ("POST", "/api/scopes/thread/t1/revert", {"revision": 1}),
    ("DELETE", "/api/scopes/resource/alice/erase?thread=t1", None),
    ("POST", "/api/scopes", "the export document"),  # import
    ("PUT", "/api/scopes/thread/t1", {"goal": "hijacked"}),  # no such route: still 403
    ("PATCH", "/api/scopes/resource/alice", {"likes": "coffee"}),
]


def _app(**options: object) -> ScratchpadApp:
    return create_app("memory://", token=TOKEN, read_only_token=READ_TOKEN, **options)  # type: ignore[arg-type]


@pytest.mark.asyncio
@pytest.mark.parametrize(("method", "path", "body"), WRITES, ids=[f"{m} {p}" for m, p, _ in WRITES])
async def test_every_write_with_the_read_only_token_is_refused_and_changes_nothing(
    method: str, path: str, body: object
) -> None:
    pad = _app()
    async with api_client(pad) as client:
        before = await _written(client)
        if body == "the export document":
            exported = await client.get("/api/scopes/resource/alice/export?thread=t1", headers=READ)
            assert exported.status_code == 200  # an export is a read
            body = {**exported.json()}
        refused = await client.request(method, path, json=body, headers=READ)
        after = await _everything(client)
        # The read-write token still writes, the same request.
        if method != "PUT":
            allowed = await client.request(method, path, json=body, headers=AUTH)
            assert allowed.status_code in (200, 204), allowed.text

    assert refused.status_code == 403
    assert refused.headers["content-type"] == "application/problem+json"
    problem = refused.json()
    assert problem["type"] == "urn:noetic-scratchpad:problem:read-only-credentials"
    assert problem["title"] == "Read-only credentials"
    assert problem["detail"] == (
        f"This {method} would change the scratchpads, and it was sent with the read-only "
        "token (or an inspector session started with it), which may only read: nothing was "
        "changed. Send the read-write token to change them."
    )
    assert READ_TOKEN not in refused.text
    assert TOKEN not in refused.text
    assert after == before


@pytest.mark.asyncio
async def test_the_read_only_token_reads_everything() -> None:
    pad = _app()
    async with api_client(pad) as client:
        await _written(client)
        reads = {
            path: await client.get(path, headers=READ)
            for path in (
                "/api/scopes",
                "/api/scopes/thread/t1",
                "/api/scopes/thread/t1/view",
                "/api/scopes/thread/t1/history",
                "/api/scopes/resource/alice",
                "/api/scopes/resource/alice/export?thread=t1",
                "/openapi.json",
                "/api/session",
            )
        }
        head = await client.head("/api/scopes/thread/t1", headers=READ)
        wrong = await client.get("/api/scopes", headers={"Authorization": "Bearer nope"})

    assert {path: r.status_code for path, r in reads.items()} == dict.fromkeys(reads, 200)
    assert reads["/api/scopes/thread/t1"].json()["state"] == {"goal": "two"}
    assert reads["/api/session"].json() == {"token_required": True, "read_only": True}
    assert head.status_code in (200, 405)  # never a 403: HEAD writes nothing
    assert wrong.status_code == 401


@pytest.mark.asyncio
async def test_the_read_only_tokens_event_stream_sees_the_writes() -> None:
    pad = _app()
    async with served(pad) as server, httpx.AsyncClient(base_url=server.url) as client:
        async with sse(client, "/api/scopes/thread/t1/events", headers=READ) as reader:
            await client.patch("/api/scopes/thread/t1", json={"a": 1}, headers=AUTH)
            await reader.wait_for(lambda r: len(r.events) == 1)
        assert reader.events[0].event == "update_applied"


@pytest.mark.asyncio
async def test_a_session_started_with_the_read_only_token_is_read_only() -> None:
    pad = _app()
    async with api_client(pad) as client:
        assert (await client.post("/api/session", headers=READ)).status_code == 204
        # httpx keeps the cookie: no header from here on.
        assert (await client.get("/api/scopes")).status_code == 200
        assert (await client.get("/api/session")).json()["read_only"] is True
        refused = await client.patch("/api/scopes/thread/t1", json={"a": 1})
        assert refused.status_code == 403
        assert (await client.get("/api/scopes/thread/t1", headers=AUTH)).status_code == 404
        assert (await client.delete("/api/session")).status_code == 204  # its own logout
        assert (await client.get("/api/scopes")).status_code == 401
        # A session of the read-write token writes.
        assert (await client.post("/api/session", headers=AUTH)).status_code == 204
        assert (await client.get("/api/session")).json()["read_only"] is False
        assert (await client.patch("/api/scopes/thread/t1", json={"a": 1})).status_code == 200


@pytest.mark.asyncio
async def test_both_tokens_are_compared_in_constant_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each bearer is compared with both tokens by ``hmac.compare_digest``, so the time
    taken tells neither which token matched nor how much of one did."""
    from noetic_scratchpad.server import guard

    compared: list[tuple[bytes, bytes]] = []
    compare = hmac.compare_digest

    def spy(a: bytes, b: bytes) -> bool:
        compared.append((a, b))
        return compare(a, b)

    pad = _app()
    async with api_client(pad) as client:
        monkeypatch.setattr(guard.hmac, "compare_digest", spy)
        for sent in ("nope", READ_TOKEN, TOKEN):
            compared.clear()
            await client.get("/api/scopes", headers={"Authorization": f"Bearer {sent}"})
            assert sorted(b for _, b in compared) == sorted([TOKEN.encode(), READ_TOKEN.encode()])


def test_a_read_only_token_needs_a_token_beside_it_and_another_value() -> None:
    with pytest.raises(ValueError, match="read_only_token needs token") as alone:
        create_app("memory://", read_only_token=READ_TOKEN)
    with pytest.raises(ValueError, match="must differ from token") as same:
        create_app("memory://", token=TOKEN, read_only_token=TOKEN)
    with pytest.raises(ValueError, match="read_only_token: the token must be printable"):
        create_app("memory://", token=TOKEN, read_only_token="has space")
    assert READ_TOKEN not in str(alone.value)
    assert TOKEN not in str(same.value)


@pytest.mark.asyncio
async def test_the_openapi_document_lists_403_for_writes_only_with_a_read_only_token() -> None:
    async with api_client(_app()) as client:
        document = (await client.get("/openapi.json", headers=READ)).json()
    async with api_client(create_app("memory://", token=TOKEN)) as client:
        plain = (await client.get("/openapi.json", headers=AUTH)).json()

    def refused(doc: dict[str, Any]) -> set[tuple[str, str]]:
        return {
            (method, path)
            for path, operations in doc["paths"].items()
            for method, operation in operations.items()
            if isinstance(operation, dict) and "403" in operation.get("responses", {})
        }

    assert refused(document) == {
        ("patch", "/api/scopes/thread/{scope_id}"),
        ("delete", "/api/scopes/thread/{scope_id}"),
        ("post", "/api/scopes/thread/{scope_id}/revert"),
        ("delete", "/api/scopes/thread/{scope_id}/erase"),
        ("patch", "/api/scopes/resource/{scope_id}"),
        ("delete", "/api/scopes/resource/{scope_id}"),
        ("post", "/api/scopes/resource/{scope_id}/revert"),
        ("delete", "/api/scopes/resource/{scope_id}/erase"),
        ("post", "/api/scopes"),
    }
    assert refused(plain) == set()


@pytest.mark.asyncio
async def test_the_read_only_token_is_never_logged(caplog: pytest.LogCaptureFixture) -> None:
    pad = _app()
    with caplog.at_level(logging.DEBUG):
        async with served(pad) as server, httpx.AsyncClient(base_url=server.url) as client:
            await client.get("/api/scopes", headers=READ)
            await client.patch("/api/scopes/thread/t1", json={"a": 1}, headers=READ)
            await client.post("/api/session", headers=READ)
    messages = [record.getMessage() for record in caplog.records]
    assert any("PATCH /api/scopes/thread/t1" in message for message in messages)
    for message in messages:
        assert READ_TOKEN not in message
        assert TOKEN not in message
