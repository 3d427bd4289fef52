"""(8) 200 concurrent HTTP clients against the app under uvicorn on a real port.

The server is a child process: ``create_app`` on a SQLite file, mounted at ``/pad`` in a
host Starlette app that also has ``POST /noop`` (the same uvicorn, framework and JSON body
parsing, no storage: the baseline). 200 clients, each on a keep-alive connection of its
own, start together: 100 write to one scope, 100 to ten scopes (ten each). Every client
sends ``k`` ``PATCH /pad/api/scopes/thread/{id}``, each writing a key of its own under
``acks``; a lost update is an acknowledged key missing from the final state, read back
through the API. The same clients then send ``k`` ``POST /noop`` with the same body.
Reported: p99 latency of each (ms), with p50 and throughput beside; checked: 0 lost, no
error. The client is a minimal HTTP/1.1 client on asyncio streams, so that it costs little
next to the server it measures.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from ._harness import Comparison, Config, Stats, interleaved

CLIENTS = 200
HOT = 100  # clients on one scope; the other 100 spread over SPREAD scopes
SPREAD = 10
ROOT = Path(__file__).resolve().parent.parent


class Connection:
    """One keep-alive HTTP/1.1 connection; responses must carry a Content-Length."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, port: int) -> Connection:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        return cls(reader, writer)

    async def request(self, method: str, path: str, body: bytes = b"") -> tuple[int, bytes]:
        head = (
            f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        )
        self.writer.write(head.encode() + body)
        status = int((await self.reader.readline()).split(b" ", 2)[1])
        length = 0
        while (line := await self.reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        return status, await self.reader.readexactly(length) if length else b""

    def close(self) -> None:
        self.writer.close()


@dataclass
class Phase:
    """What one phase of 200 clients measured."""

    latencies: list[float] = field(default_factory=list)
    errors: int = 0
    acked: int = 0
    seconds: float = 0.0

    def percentile(self, q: float) -> float:
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def scope_of(tag: str, client: int) -> str:
    return f"{tag}-hot" if client < HOT else f"{tag}-s{client % SPREAD}"


async def run_phase(
    connections: list[Connection],
    per_client: int,
    path_of: Callable[[str, int], tuple[str, str]],
    tag: str,
) -> Phase:
    """Every client sends ``per_client`` requests in turn; all clients start together."""
    phase = Phase()
    start = asyncio.Event()

    async def client(n: int, conn: Connection) -> None:
        await start.wait()
        for j in range(per_client):
            body = orjson.dumps({"acks": {f"c{n}.{j}": j}})
            begin = time.perf_counter()
            method, path = path_of(tag, n)
            status, _ = await conn.request(method, path, body)
            phase.latencies.append(time.perf_counter() - begin)
            if status == 200:
                phase.acked += 1
            else:
                phase.errors += 1

    tasks = [asyncio.create_task(client(n, conn)) for n, conn in enumerate(connections)]
    await asyncio.sleep(0)
    begin = time.perf_counter()
    start.set()
    await asyncio.gather(*tasks)
    phase.seconds = time.perf_counter() - begin
    return phase


def update_path(tag: str, client: int) -> tuple[str, str]:
    return "PATCH", f"/pad/api/scopes/thread/{scope_of(tag, client)}"


def noop_path(tag: str, client: int) -> tuple[str, str]:
    return "POST", "/noop"


async def count_lost(conn: Connection, tag: str, acked: int) -> int:
    present = 0
    for scope in {scope_of(tag, n) for n in range(CLIENTS)}:
        status, body = await conn.request("GET", f"/pad/api/scopes/thread/{scope}")
        if status == 200:
            present += len(orjson.loads(body)["state"].get("acks", {}))
    return acked - present


def start_server(workdir: Path) -> tuple[subprocess.Popen[bytes], int]:
    """The server child on a socket bound here (so the port is known and free)."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(2048)
    url = f"sqlite:///{workdir / 'http_load.db'}"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    child = subprocess.Popen(
        [sys.executable, "-m", "benchmarks.http_load", str(sock.fileno()), url],
        pass_fds=[sock.fileno()],
        cwd=ROOT,
        env=env,
    )
    port: int = sock.getsockname()[1]
    sock.close()  # the child holds its own copy
    return child, port


async def wait_ready(port: int, child: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if child.poll() is not None:
            raise RuntimeError(f"the server exited with status {child.returncode}")
        with contextlib.suppress(OSError):
            conn = await Connection.open(port)
            status, _ = await conn.request("GET", "/pad/api/scopes?limit=1")
            conn.close()
            if status == 200:
                return
        await asyncio.sleep(0.1)
    raise RuntimeError("the server did not answer within 30 s")


async def run(cfg: Config) -> list[Comparison]:
    per_client = cfg.scale(10, 2)
    reps = cfg.reps(5, 2)
    child, port = start_server(cfg.workdir)
    try:
        await wait_ready(port, child)
        connections = [await Connection.open(port) for _ in range(CLIENTS)]
        phases: dict[str, list[Phase]] = {"update": [], "noop": []}
        lost: list[int] = []
        tags = iter(range(1_000_000))

        async def updates() -> float:
            tag = f"h{next(tags)}"
            phase = await run_phase(connections, per_client, update_path, tag)
            lost.append(await count_lost(connections[0], tag, phase.acked))
            phases["update"].append(phase)
            return phase.percentile(0.99)

        async def noops() -> float:
            phase = await run_phase(connections, per_client, noop_path, "")
            phases["noop"].append(phase)
            return phase.percentile(0.99)

        candidate = "PATCH update (full write path, SQLite)"
        baseline = "POST no-op (same server, no storage)"
        results: dict[str, Stats] = await interleaved({candidate: updates, baseline: noops}, reps)
        for conn in connections:
            conn.close()
    finally:
        child.terminate()
        child.wait(10)
    return [_comparison(candidate, baseline, results, phases, lost, per_client)]


def _comparison(
    candidate: str,
    baseline: str,
    results: dict[str, Stats],
    phases: dict[str, list[Phase]],
    lost: list[int],
    per_client: int,
) -> Comparison:
    def summary(kind: str) -> dict[str, float]:
        runs = phases[kind]
        hot = [p.percentile(0.99) for p in runs]
        return {
            "p50_ms": statistics.median(p.percentile(0.5) for p in runs),
            "p99_ms": statistics.median(hot),
            "requests_per_s": statistics.median(len(p.latencies) / p.seconds for p in runs),
            "errors": sum(p.errors for p in runs),
        }

    errors = sum(p.errors for runs in phases.values() for p in runs)
    return Comparison(
        question=8,
        key="http_load",
        title=f"{CLIENTS} concurrent HTTP clients ({HOT} on one scope, {CLIENTS - HOT} over "
        f"{SPREAD}), uvicorn + SQLite: p99 latency",
        unit="ms (p99)",
        candidate=candidate,
        baseline=baseline,
        results=results,
        target="0 lost, no errors; p99 reported beside the no-op's",
        checks={"0 lost": not any(lost), "no errors": errors == 0},
        extra={
            "clients": CLIENTS,
            "requests_per_client": per_client,
            "lost": {"ours": sum(lost)},
            "acknowledged": {"ours": sum(p.acked for p in phases["update"])},
            "update": summary("update"),
            "noop": summary("noop"),
        },
    )


def _serve(fd: int, url: str) -> None:
    """The child: the app at /pad beside POST /noop, under uvicorn, until terminated."""
    import uvicorn
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Mount, Route

    from noetic_scratchpad.server import create_app

    pad = create_app(url)

    async def noop(request: Request) -> Response:
        orjson.loads(await request.body())  # parse the body, as the update endpoint does
        return Response(b"{}", media_type="application/json")

    host = Starlette(
        routes=[Route("/noop", noop, methods=["POST"]), Mount("/pad", app=pad)],
        lifespan=pad.lifespan,
    )
    sock = socket.socket(fileno=fd)
    config = uvicorn.Config(host, log_config=None, access_log=False, lifespan="on")
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    _serve(int(sys.argv[1]), sys.argv[2])
