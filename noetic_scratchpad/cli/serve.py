"""``serve``: the HTTP API and the web inspector under uvicorn.

Binds 127.0.0.1 unless told otherwise; a bind beyond loopback needs a token (or
``--insecure``). Storage is opened before the server starts, so a bad URL or a port in
use is one line on stderr, not a traceback. SIGINT and SIGTERM stop it cleanly: the event
streams end, storage closes, the exit status is 0.

``--workers N`` runs N worker processes on one listening socket. Each is started fresh
(``spawn``) and given the options through multiprocessing's pipe, never argv or the
environment, so a token shows in no process list; each opens the storage itself, and
hears the others' writes through it (docs/events.md, "Events across processes").
"""

from __future__ import annotations

import argparse
import ipaddress
import logging
import math
import os
import socket
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .._extras import install_hint
from ..layer import ScratchpadLayer
from ..storage import open_storage
from .common import PROG, CliError, logger, shown_url, storage_url
from .schema import schema_layer

if TYPE_CHECKING:
    from ..server import ScratchpadApp
    from ..storage import StorageBackend

__all__ = ("READ_ONLY_TOKEN_ENV", "TOKEN_ENV", "AppOptions", "add_serve", "cmd_serve")

TOKEN_ENV = "NOETIC_SCRATCHPAD_TOKEN"
READ_ONLY_TOKEN_ENV = "NOETIC_SCRATCHPAD_READ_ONLY_TOKEN"
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1", "[::1]")


def add_serve(
    add_parser: Callable[..., argparse.ArgumentParser], storage: argparse.ArgumentParser
) -> None:
    """Register the ``serve`` command; ``storage`` is the parser holding ``--storage``."""
    parser = add_parser(
        "serve",
        parents=[storage],
        help="serve the HTTP API and the web inspector",
        description="Serve the scratchpads over HTTP (JSON API, server-sent events, "
        "OpenAPI at /openapi.json) with a web inspector at /, under uvicorn. Binds "
        "127.0.0.1 by default; stop with Ctrl+C or SIGTERM.",
    )
    parser.set_defaults(handler=cmd_serve)
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1)")
    parser.add_argument("--port", type=port, default=8000, help="port (default: 8000; 0: any)")
    parser.add_argument(
        "--token",
        help=f"require `Authorization: Bearer TOKEN` on every request (default: ${TOKEN_ENV}; "
        "prefer the variable: arguments show in the process list)",
    )
    parser.add_argument(
        "--read-only-token",
        metavar="TOKEN",
        help="also accept `Authorization: Bearer TOKEN` for reading only: every write with "
        f"it is refused 403 (default: ${READ_ONLY_TOKEN_ENV}; needs --token too; prefer the "
        "variable)",
    )
    parser.add_argument(
        "--insecure",
        action="store_true",
        help="allow a bind beyond loopback without a token (anyone who reaches the port "
        "can read and change every scratchpad)",
    )
    parser.add_argument(
        "--schema",
        metavar="MODULE:MODEL",
        help="the pydantic model of the scratchpads (for example myapp.notes:TaskNotes), "
        "so updates through the API are checked against it",
    )
    parser.add_argument(
        "--session-idle-timeout",
        type=seconds,
        metavar="SECONDS",
        help="end an inspector session unused this long (default: 3600)",
    )
    parser.add_argument(
        "--session-max-age",
        type=seconds,
        metavar="SECONDS",
        help="end an inspector session this long after sign-in, however busy (default: 28800)",
    )
    parser.add_argument(
        "--workers",
        type=workers,
        default=1,
        metavar="N",
        help="worker processes sharing the port (default: 1). More than one needs storage "
        "every process can open: SQLite on this machine, PostgreSQL or Redis (docs/deploy.md)",
    )
    parser.add_argument(
        "--cors-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="a browser origin allowed to call the API (repeatable; default: none)",
    )


async def cmd_serve(args: argparse.Namespace) -> int:
    try:
        from ..server.runner import WorkerExitedError, serve, serve_workers
    except ImportError as exc:
        raise CliError(
            f"serve needs the server extra ({exc.name} is missing): {install_hint('server')}"
        ) from None
    token = args.token or os.environ.get(TOKEN_ENV) or None
    read_only_token = args.read_only_token or os.environ.get(READ_ONLY_TOKEN_ENV) or None
    if read_only_token is not None and token is None:
        raise CliError(
            f"a read-only token needs the read-write one too: without it every request may "
            f"write. Set ${TOKEN_ENV} (or --token) as well"
        )
    loopback = is_loopback(args.host)
    if token is None and not loopback and not args.insecure:
        raise CliError(
            f"refusing to serve on {args.host} without a token: anyone who reaches it could "
            f"read and change every scratchpad. Set ${TOKEN_ENV} (or --token), or pass "
            "--insecure if the network is yours alone"
        )
    schema_layers(args.schema)  # a bad --schema is a usage error here, not in a worker
    url = storage_url(args)
    if args.workers > 1 and url.startswith("memory:"):
        raise CliError(
            "--workers needs storage every worker can open: memory:// is one process's own "
            "(use sqlite:///FILE, postgresql:// or redis://)"
        )
    options = AppOptions(
        url=url,
        schema=args.schema,
        token=token,
        read_only_token=read_only_token,
        cors_origins=tuple(args.cors_origin),
        trusted_hosts=(*LOOPBACK_NAMES, args.host) if loopback else None,
        lifetimes={
            name: value
            for name, value in (
                ("session_idle_timeout", args.session_idle_timeout),
                ("session_max_age", args.session_max_age),
            )
            if value is not None
        },
    )
    level = args.log_level or "warning"
    sock = bind(args.host, args.port)
    try:
        backend = await open_storage(url)
        try:
            app = build_app(options, backend)  # checks the options, also for the workers
            # uvicorn's start-up lines and access log show with --log-level info or debug.
            logging.getLogger("uvicorn").setLevel(level.upper())
            if args.workers == 1:
                print_banner(url, sock, token is not None, read_only=read_only_token is not None)
                await serve(app, sock, access_log=level in ("info", "debug"))
        finally:
            await backend.aclose()
        if args.workers > 1:
            print_banner(
                url,
                sock,
                token is not None,
                read_only=read_only_token is not None,
                workers=args.workers,
            )
            try:
                await serve_workers(run_worker, (options, sock, level), args.workers)
            except WorkerExitedError as exc:
                raise CliError(str(exc)) from None
    finally:
        sock.close()
    print(f"{PROG}: stopped", flush=True)
    return 0


@dataclass(frozen=True)
class AppOptions:
    """What ``serve`` makes its app from; a worker receives it pickled (tokens included)."""

    url: str
    schema: str | None = None
    token: str | None = field(default=None, repr=False)
    read_only_token: str | None = field(default=None, repr=False)
    cors_origins: tuple[str, ...] = ()
    trusted_hosts: tuple[str, ...] | None = None
    lifetimes: dict[str, Any] = field(default_factory=dict)


def build_app(options: AppOptions, storage: StorageBackend | str) -> ScratchpadApp:
    """The app ``serve`` runs, on an opened backend or (in a worker) on the URL, which
    the app's lifespan opens and closes."""
    from ..server import create_app

    try:
        return create_app(
            storage,
            layers=schema_layers(options.schema),
            token=options.token,
            read_only_token=options.read_only_token,
            cors_origins=options.cors_origins,
            trusted_hosts=options.trusted_hosts,
            **options.lifetimes,
        )
    except ValueError as exc:  # a lifetime past what a browser keeps, a token
        raise CliError(str(exc)) from None  # never shown in the message


def run_worker(options: AppOptions, sock: socket.socket, level: str) -> None:
    """One worker of ``serve --workers``: runs in a process of its own until SIGTERM."""
    from ..server.runner import serve_in_worker

    worker_logging(options, level)
    serve_in_worker(build_app(options, options.url), sock, access_log=level in ("info", "debug"))


def worker_logging(options: AppOptions, level: str) -> None:
    """A worker's logging, as ``main`` sets up the command's: records to stderr, which
    hides the secrets of the storage URL (the worker is a fresh interpreter)."""
    from .app import configure_logging
    from .stderr_filter import SecretFilter, invocation_secrets

    sys.stderr = SecretFilter(sys.stderr, invocation_secrets([options.url]))
    configure_logging(level)
    logging.getLogger("uvicorn").setLevel(level.upper())


def workers(text: str) -> int:
    """A number of worker processes, 1 to 64 (argparse's type: a usage error otherwise)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= 64:
        raise argparse.ArgumentTypeError(f"give a number of workers from 1 to 64, not {text!r}")
    return value


def seconds(text: str) -> float:
    """A positive, finite number of seconds (argparse's type: a usage error otherwise)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number of seconds")
    return value


def port(text: str) -> int:
    """A TCP port, 0 to 65535 (argparse's type: a usage error otherwise)."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"give a port from 0 to 65535, not {text!r}")
    return value


def is_loopback(host: str) -> bool:
    """Whether ``host`` is reachable from this machine only."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def bind(host: str, port: int) -> socket.socket:
    """A listening socket; a port in use or a bad address is one line, not a traceback."""
    if not 0 <= port <= 65535:
        raise CliError(f"--port must be from 0 to 65535, not {port}")
    try:
        infos = socket.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM)
        family, kind, proto, _, address = infos[0]
        sock = socket.socket(family, kind, proto)
    except OSError as exc:
        raise CliError(f"cannot bind {host}:{port}: {exc}") from None
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        raise CliError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    sock.setblocking(False)
    return sock


def schema_layers(spec: str | None) -> list[ScratchpadLayer]:
    """A thread-scoped and a resource-scoped layer, with the model ``spec`` names."""
    return [schema_layer(spec, "thread"), schema_layer(spec, "resource")]


def print_banner(
    url: str, sock: socket.socket, token: bool, *, read_only: bool = False, workers: int = 1
) -> None:
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    base = f"http://{shown}:{port}/"
    auth = (
        "a token is required: the inspector asks for it once"
        if token
        else "no token: anyone who can reach this address can read and write"
    )
    if read_only:
        auth += "; the read-only token may read, not write"
    print(
        f"{PROG} serving {shown_url(url)}\n"
        f"  inspector  {base}\n"
        f"  API        {base}api/scopes   (OpenAPI: {base}openapi.json)\n"
        f"  auth       {auth}\n"
        + (f"  workers    {workers} processes\n" if workers > 1 else "")
        + "Press Ctrl+C to stop.",
        flush=True,
    )
    logger.info("serving on %s", base)
