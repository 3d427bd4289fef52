"""Hostile request headers against every route: never a 5xx, never a slow answer, never
a subscription left behind.

The headers the app reads (``Last-Event-ID``, ``If-Match``, ``Cookie``, ``Authorization``,
``Host``, ``Content-Length``) get long values (100,000 bytes), malformed and hostile ones
(non-ASCII, control characters, huge numbers, many commas, ``*``, weak tags), from a table
and from hypothesis. The app is called directly (``asgi.py``), with the bytes as they are:
uvicorn refuses some of them first, other servers pass them on. Two apps: one with a
token and trusted hosts (the guard reads the headers first), one open (the routes do).
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from noetic_scratchpad.server import ScratchpadApp, create_app
from noetic_scratchpad.server.guard import COOKIE_NAME

from .asgi import call
from .helpers import TOKEN

pytestmark = pytest.mark.slow

LONG = 100_000
#: An answer that took more CPU than this held the event loop: a header read in more than
#: linear time. CPU time of this process, not wall time: other processes' load on a shared
#: machine stretched a session's answer to 1.00 s of wall time.
SLOW = 1.0
BEARER = f"Bearer {TOKEN}".encode()
COOKIE = COOKIE_NAME.encode()

#: Read by every header: empty, long, malformed, hostile.
HOSTILE: tuple[bytes, ...] = (
    *(b"", b" ", b"*", b",", b"-", b"=", b";", b'"', b"W/", b"\\"),
    *(b"a" * LONG, b"," * LONG, b";" * LONG, b"-" * LONG, b"*, " * (LONG // 3)),
    *(b" " * LONG + b"x", b"x" + b" " * LONG + b"x", b"\t" * LONG + b"x"),
    *(b"9" * LONG, b"1" + b"0" * 5000, b"-1", b"1e308", b"NaN", b"0x10", "٣".encode()),
    *("é".encode(), "é".encode("latin-1"), b"\xff\xfe", "🙂".encode(), "\u202e".encode()),
    *(b"\x00", b"a\x00b", b"\r\n", b"a\nb", b"\x7f", b"\x1b[31m", b"\t"),
    *(b'W/"x"', b'"x"', b'"x", W/"y", *', b'"' + b"\\" * LONG + b'"', b'""' * (LONG // 2)),
    *(b'"a",' * (LONG // 4), b'"' * LONG, b"W/" * LONG, b"%00", b"../../../etc/passwd"),
    *(b"<script>alert(1)</script>", b"${jndi:ldap://x}", b"() { :; }; echo x"),
)
#: Made for one header each: ``{epoch}`` is the event stream's run, ``{session}`` the id
#: of a session started for the value.
SPECIFIC: dict[bytes, tuple[bytes, ...]] = {
    b"last-event-id": (
        *(b"{epoch}-" + b"9" * 5000, b"{epoch}-" + b"9" * LONG, b"{epoch}-" + "٣".encode()),
        *(b"{epoch}-", b"{epoch}--1", b"{epoch}-0", b"{epoch}-1", b"{epoch}-1e3"),
        *(b"{epoch}-18446744073709551616", b"{epoch}" * 1000 + b"-1", b"-1", b"{epoch}"),
        *(b" {epoch}-1 ", b"{epoch}-1\x00", b"{epoch}-" + "\uff11".encode()),
    ),
    b"if-match": (
        *(b'"a"' + b" " * LONG + b"x", b'"a",' + b" " * LONG + b'"b"', b'W/"a", ' * 10_000),
        *(b'"a" , junk', b"*, *", b'*, "a"', b'"\x00"', b'"a"\r\n"b"', b"W/*"),
        *(b'"' + b"a" * LONG + b'"', b'"r1-', b'"r' + b"9" * 5000 + b'-x"'),
    ),
    b"cookie": (
        *(COOKIE + b"=", COOKIE + b"=" + b"a" * LONG, COOKIE + b'="' + b"\\\\" * LONG + b'"'),
        *(b"=;" * LONG, COOKIE + b"=;" * 10_000, b"a=b; " * 20_000, COOKIE + b"={session}"),
        *(b"junk; " + COOKIE + b"={session}", COOKIE + b"={session}; " + COOKIE + b"=junk"),
        *(COOKIE + b'="{session}"', COOKIE + b"={session}\x00", COOKIE + b" = {session} "),
        *(COOKIE.upper() + b"={session}", b"\xff" + COOKIE + b"={session}"),
    ),
    b"authorization": (
        *(b"Bearer", b"Bearer ", b"Bearer " + b"a" * LONG, b"Basic dXNlcjpwYXNz", TOKEN.encode()),
        *(BEARER + b"\x00", BEARER + b" extra", b"bearer\t" + TOKEN.encode(), b"Bearer  " * LONG),
        *(b"Bearer " + "é".encode() * 1000, BEARER.lower(), BEARER + b", " + BEARER),
    ),
    b"host": (
        *(b"[", b"[::1", b"[::1]:", b"]", b"localhost:", b"localhost:" + b"9" * 5000, b"a:b:c"),
        *(b"user@127.0.0.1", b"127.0.0.1/x", b"127.0.0.1#x", b"127.0.0.1?x", b"LOCALHOST"),
        *(b"127.0.0.1.", b"127.0.0.1:80:80", b"127.0.0.1:-1", b"[::1]" * 10_000, b":" * LONG),
        *(b"127.0.0.1:8000", b"127.0.0.1:" + b"9" * LONG, b"127.0.0.1:\xff"),
    ),
    b"content-length": (
        *(b"1" + b"0" * 5000, b"9" * LONG, "٣".encode(), b"-1", b"1, 1", b"0", b"3"),
        *(b"18446744073709551616", b" 7 ", b"7\x00"),
    ),
}
HEADERS = tuple(SPECIFIC)

#: Every route, with a body where it takes one; the reset comes after what reads the scope.
ROUTES: tuple[tuple[str, str, bytes], ...] = (
    ("GET", "/", b""),
    ("GET", "/index.html", b""),
    ("GET", "/openapi.json", b""),
    ("GET", "/api/scopes", b""),
    ("GET", "/api/events?replay=1", b""),
    *(
        route
        for kind in ("thread", "resource")
        for route in (
            ("PATCH", f"/api/scopes/{kind}/t1", b'{"a": 1}'),
            ("GET", f"/api/scopes/{kind}/t1", b""),
            ("GET", f"/api/scopes/{kind}/t1/history", b""),
            ("POST", f"/api/scopes/{kind}/t1/revert", b'{"revision": 1}'),
            ("GET", f"/api/scopes/{kind}/t1/events?replay=1", b""),
            ("DELETE", f"/api/scopes/{kind}/t1", b""),
        )
    ),
    ("GET", "/api/session", b""),
    ("POST", "/api/session", b""),
    ("DELETE", "/api/session", b""),
    ("GET", "/no/such/path", b""),
)


@dataclass
class Target:
    """An app under test, started, and what a well-behaved request to it sends."""

    pad: ScratchpadApp
    guarded: bool
    epoch: bytes = b""

    def headers(self, name: bytes, value: bytes) -> list[tuple[bytes, bytes]]:
        """The usual headers, with ``name`` set to ``value``. With a token, the hostile
        cookie goes without the token, so that the guard reads it."""
        usual = [(b"host", b"127.0.0.1"), (b"content-type", b"application/json")]
        if self.guarded and name != b"cookie":
            usual.append((b"authorization", BEARER))
        return [*(pair for pair in usual if pair[0] != name), (name, value)]

    async def start_session(self) -> bytes:
        started = await call(self.pad, "POST", "/api/session", self.headers(b"x", b""))
        cookie = started.headers.get(b"set-cookie", b"")
        return cookie.partition(b"=")[2].partition(b";")[0]


def _apps() -> Iterator[tuple[str, ScratchpadApp]]:
    yield "guarded", create_app("memory://", token=TOKEN, trusted_hosts=["127.0.0.1"])
    yield "open", create_app("memory://")


@contextmanager
def _no_slow_answer(failures: list[str], what: str) -> Iterator[None]:
    began = time.process_time()
    yield
    seconds = time.process_time() - began
    if seconds > SLOW:
        failures.append(f"{what}: {seconds:.2f} s of CPU")


async def _fuzz(
    target: Target,
    name: bytes,
    values: tuple[bytes, ...],
    routes: tuple[tuple[str, str, bytes], ...] = ROUTES,
    statuses: Counter[int] | None = None,
) -> list[str]:
    """Every value of header ``name`` on every route: what went wrong, if anything (the
    statuses answered are counted in ``statuses``)."""
    failures: list[str] = []
    statuses = Counter() if statuses is None else statuses
    for template in values:
        value = template.replace(b"{epoch}", target.epoch)
        if b"{session}" in value:
            value = value.replace(b"{session}", await target.start_session())
        for method, path, body in routes:
            what = f"{method} {path} {name.decode()}: {value[:40]!r} ({len(value):,} bytes)"
            with _no_slow_answer(failures, what):
                answer = await call(target.pad, method, path, target.headers(name, value), body)
            statuses[answer.status] += 1
            if answer.status >= 500:
                failures.append(f"{what}: {answer.status} {answer.body[:200]!r}")
    return failures


async def _started(pad: ScratchpadApp, guarded: bool) -> Target:
    target = Target(pad, guarded)
    usual = target.headers(b"x", b"")
    await call(pad, "PATCH", "/api/scopes/thread/t1", usual, b'{"a": 0}')
    first = await call(pad, "GET", "/api/events?replay=1", usual)
    target.epoch = first.body.partition(b"\nid: ")[2].partition(b"-")[0]
    assert len(target.epoch) == 8, first.body
    return target


@pytest.mark.asyncio
@pytest.mark.parametrize("name", HEADERS, ids=[name.decode() for name in HEADERS])
async def test_hostile_header_values_on_every_route(name: bytes) -> None:
    for label, pad in _apps():
        async with pad.lifespan():
            target = await _started(pad, guarded=label == "guarded")
            statuses: Counter[int] = Counter()
            failures = await _fuzz(target, name, HOSTILE + SPECIFIC[name], statuses=statuses)
            assert not failures, f"{label} app:\n" + "\n".join(failures[:20])
            assert pad.open_streams == 0
            # Some values got past the guard to the routes: the fuzz reached them.
            assert statuses[200] > len(ROUTES), statuses


@pytest.mark.parametrize("label", ["guarded", "open"])
def test_random_header_values_on_every_route(label: str) -> None:
    """Whatever hypothesis makes of each header's bytes (with the run's id and a real
    session mixed in at times), on a route it picks."""
    pad = dict(_apps())[label]
    loop = asyncio.new_event_loop()
    lifespan = pad.lifespan()
    loop.run_until_complete(lifespan.__aenter__())
    try:
        target = loop.run_until_complete(_started(pad, guarded=label == "guarded"))
        pieces = st.sampled_from(
            [b"{epoch}", b"{session}", b"-", b",", b'"', b"W/", b"*", b";", b"=", b":", b"["]
        )
        chunks = st.one_of(st.binary(max_size=20), pieces, st.just(COOKIE + b"="))
        values = st.lists(chunks, max_size=12).map(b"".join)

        @given(name=st.sampled_from(HEADERS), value=values, route=st.sampled_from(ROUTES))
        @settings(
            max_examples=400,
            deadline=None,
            database=None,
            suppress_health_check=[HealthCheck.too_slow],
        )
        def check(name: bytes, value: bytes, route: tuple[str, str, bytes]) -> None:
            failures = loop.run_until_complete(_fuzz(target, name, (value,), (route,)))
            assert not failures, failures

        check()
        assert pad.open_streams == 0
    finally:
        loop.run_until_complete(lifespan.__aexit__(None, None, None))
        loop.close()
