"""No secret of a storage URL in anything the CLI writes, whatever the command.

Every command (``demo``, ``show``, ``list``, ``history``, ``revert``, ``reset``,
``migrate``, ``serve``, ``mcp``, with ``--json``, ``--yes``, a refused and an answered
confirmation prompt, the storage given by ``--storage`` or the environment, the URL put
where argparse refuses it) runs against the live PostgreSQL server with the password in
the user info, in ``?password=``, in ``?sslpassword=`` and percent-encoded; the server
trusts local connections, so any password is accepted and the commands really run. Then
each command runs against a server that cannot be reached, for the failure messages.
Stdout and stderr never hold the password, as written or decoded; every command runs
with ``--log-level debug``, so every log record is checked too.
"""

from __future__ import annotations

import asyncio
import json
import os
import pty
import re
import signal
import subprocess
import sys
import urllib.request
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from conftest import POSTGRES_URL, require_postgres

from noetic_scratchpad import open_storage
from noetic_scratchpad.keys import legacy_state_key

pytestmark = [pytest.mark.slow, pytest.mark.postgres]

SERVER = urlsplit(POSTGRES_URL)
USER = SERVER.username or "postgres"
WHERE = f"{SERVER.hostname or '127.0.0.1'}:{SERVER.port or 5432}{SERVER.path or '/test'}"
UNREACHABLE = "127.0.0.1:1/test"  # nothing listens on port 1: refused at once


@dataclass(frozen=True)
class Secret:
    """A password placed in a URL: ``url(where, table)`` and every form it must not show in."""

    name: str
    template: str  # {user}, {where}, {table}
    forms: tuple[str, ...]  # as written, decoded, and a stem any partial leak would show

    def url(self, where: str, table: str) -> str:
        return self.template.format(user=USER, where=where, table=table)


SECRETS = [
    Secret("userinfo", "postgresql://{user}:SECRETPW@{where}?table={table}", ("SECRET",)),
    Secret(
        "password parameter",
        "postgresql://{user}@{where}?table={table}&password=SECRETPW",
        ("SECRET",),
    ),
    Secret(
        "sslpassword parameter",
        "postgresql://{user}@{where}?sslpassword=SECRETPW&table={table}",
        ("SECRET",),
    ),
    Secret(
        "percent-encoded userinfo",
        "postgresql://{user}:%53ECRET%2FPW%40x@{where}?table={table}",
        ("%53ECRET", "SECRET", "ECRET%2FPW"),
    ),
    Secret(
        "percent-encoded parameters",
        "postgresql://{user}@{where}?password=%53ECRET%26PW&sslpassword=S3CR%45T&table={table}",
        ("%53ECRET", "SECRET", "ECRET%26PW", "S3CR%45T", "S3CRET"),
    ),
]


@dataclass
class Run:
    """One command as run: what it was given, its exit code and output."""

    what: str
    code: int
    stdout: str
    stderr: str

    def leaks(self, secret: Secret) -> list[str]:
        return [
            f"{self.what}: {stream} holds {form!r}:\n{text.strip()}"
            for stream, text in (("stdout", self.stdout), ("stderr", self.stderr))
            for form in secret.forms
            if form in text
        ]


class Cli:
    """Runs ``noetic-scratchpad --log-level debug ...`` in ``cwd`` and keeps every run."""

    def __init__(self, cwd: Path, url: str, secret: Secret) -> None:
        self.cwd = cwd
        self.url = url
        self.secret = secret
        self.runs: list[Run] = []

    def leaks(self) -> list[str]:
        return [
            f"[{self.secret.name}] {leak}" for run in self.runs for leak in run.leaks(self.secret)
        ]

    def name(self, args: tuple[str, ...], env_storage: str | None = None) -> str:
        """How a run is named in a failure: the URL as URL, so the name shows no secret."""
        named = " ".join(args).replace(self.url, "URL")
        return named if env_storage is None else f"{named} (URL in the environment)"

    def env(self, storage: str | None) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k != "NOETIC_SCRATCHPAD_STORAGE"}
        if storage is not None:
            env["NOETIC_SCRATCHPAD_STORAGE"] = storage
        return env

    def command(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "noetic_scratchpad", "--log-level", "debug", *args]

    def run(self, *args: str, code: int, env_storage: str | None = None, stdin: str = "") -> Run:
        """Run without a terminal; ``code`` is the exit code it must have."""
        done = subprocess.run(
            self.command(*args),
            cwd=self.cwd,
            env=self.env(env_storage),
            input=stdin,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        return self.keep(
            Run(self.name(args, env_storage), done.returncode, done.stdout, done.stderr), code
        )

    def answer(self, *args: str, answer: str, code: int) -> Run:
        """Run with a terminal on stdin that answers the confirmation prompt."""
        terminal, stdin = pty.openpty()
        try:
            process = subprocess.Popen(
                self.command(*args),
                cwd=self.cwd,
                env=self.env(None),
                stdin=stdin,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            os.close(stdin)
            os.write(terminal, f"{answer}\n".encode())
            out, err = process.communicate(timeout=60)
        finally:
            os.close(terminal)
        run = Run(f"{self.name(args)} (answered {answer!r})", process.returncode, out, err)
        return self.keep(run, code)

    def serve(self, storage: str) -> Run:
        """``serve`` until its banner, one API request, then SIGTERM: it must stop with 0."""
        process = subprocess.Popen(
            self.command("serve", "--port", "0", "--storage", storage),
            cwd=self.cwd,
            env=self.env(None),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert process.stdout is not None
        banner = "".join(iter(process.stdout.readline, "Press Ctrl+C to stop.\n"))
        base = re.search(r"inspector  (http://\S+/)", banner)
        if base is not None:
            with urllib.request.urlopen(f"{base.group(1)}api/scopes", timeout=10) as response:
                scopes = json.load(response)
            assert scopes, "the API lists the demo's scope"
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=30)
        return self.keep(Run("serve", process.returncode, banner + out, err), 0)

    def serve_failing(self, storage: str) -> Run:
        return self.run("serve", "--port", "0", "--storage", storage, code=1)

    def keep(self, run: Run, code: int) -> Run:
        self.runs.append(run)
        assert run.code == code, f"{run.what}: exit {run.code}, not {code}"
        return run


def mcp_session() -> str:
    """What an MCP client sends: the handshake, an update, a read; then it closes stdin."""
    messages = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "secrets-test", "version": "1"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "scratchpad_update", "arguments": {"update": {"goal": "g"}}},
        },
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {"name": "scratchpad_read", "arguments": {}},
        },
    ]
    return "".join(json.dumps(message) + "\n" for message in messages)


async def seed_legacy_scratchpad(url: str) -> None:
    """A scratchpad in the first release's layout, for ``migrate`` to move."""
    async with await open_storage(url) as backend:
        await backend.set(legacy_state_key("scratchpad", "old-thread"), {"goal": "old"})


async def drop_table(url: str) -> None:
    async with await open_storage(url) as backend:
        await backend.drop_table()  # type: ignore[attr-defined]


def run_every_command(cli: Cli, url: str) -> None:
    """Each command on a live server, in an order that gives each something to do."""
    cli.run("demo", "--storage", url, code=0)
    cli.run("demo", code=0, env_storage=url)
    scope = ("--thread", "demo", "--storage", url)
    for json_flag in ((), ("--json",)):
        cli.run("show", *scope, *json_flag, code=0)
        cli.run("list", "--storage", url, *json_flag, code=0)
        history = cli.run("history", *scope, *json_flag, code=0)
    cli.run("list", code=0, env_storage=url)
    cli.run("show", "--thread", "nobody", "--storage", url, code=1)
    newest, *_, oldest = (str(entry["revision"]) for entry in json.loads(history.stdout))
    cli.run("revert", *scope, "--to", oldest, code=1)  # no terminal: refused
    cli.answer("revert", *scope, "--to", oldest, answer="n", code=1)
    cli.answer("revert", *scope, "--to", oldest, answer="y", code=0)
    cli.run("revert", *scope, "--to", newest, "--yes", code=0)
    cli.run("revert", *scope, "--to", "999", "--yes", code=1)
    cli.run("migrate", "--storage", url, "--yes", code=0)  # nothing to migrate
    asyncio.run(seed_legacy_scratchpad(url))
    cli.run("list", "--storage", url, code=0)  # a legacy row: the migrate hint
    cli.run("migrate", "--storage", url, code=1)  # no terminal: refused
    cli.answer("migrate", "--storage", url, answer="n", code=1)
    cli.answer("migrate", "--storage", url, answer="y", code=0)
    cli.serve(url)
    mcp = cli.run("mcp", "--storage", url, code=0, stdin=mcp_session())
    assert '"id":1' in mcp.stdout.replace(" ", ""), mcp.stderr
    cli.answer("reset", *scope, answer="n", code=1)
    cli.run("reset", "--all", "--storage", url, code=1)  # no terminal: refused
    cli.answer("reset", "--all", "--storage", url, answer="y", code=0)
    cli.run("reset", "--all", "--storage", url, "--yes", code=0)  # nothing left to reset
    cli.run("reset", "--all", code=0, env_storage=url)
    cli.run("list", "--storage", url, code=0)  # "No scratchpad is stored in ..."
    cli.run("list", "--json", "--storage", url, code=0)
    cli.run("show", *scope, code=1)  # "no scratchpad stored ... in URL"
    # The URL where argparse refuses it: its usage errors quote the argument.
    cli.run(url, code=2)
    cli.run("list", url, code=2)
    cli.run("history", "--thread", "demo", "--limit", url, code=2)


def every_failure(cli: Cli, url: str) -> None:
    """Each command on a server that cannot be reached: one error line each, exit 1."""
    scope = ("--thread", "demo", "--storage", url)
    cli.run("demo", "--storage", url, code=1)
    cli.run("demo", code=1, env_storage=url)
    for json_flag in ((), ("--json",)):
        cli.run("show", *scope, *json_flag, code=1)
        cli.run("list", "--storage", url, *json_flag, code=1)
        cli.run("history", *scope, *json_flag, code=1)
    cli.run("revert", *scope, "--to", "1", "--yes", code=1)
    cli.answer("revert", *scope, "--to", "1", answer="y", code=1)
    cli.run("reset", "--all", "--storage", url, "--yes", code=1)
    cli.answer("reset", "--all", "--storage", url, answer="y", code=1)
    cli.run("migrate", "--storage", url, "--yes", code=1)
    cli.serve_failing(url)
    cli.run("mcp", "--storage", url, code=1, stdin=mcp_session())


def with_every_secret(where: str, tmp_path: Path, commands: Callable[[Cli], None]) -> list[Cli]:
    """``commands`` run with the URL of each secret, the secrets at once (a thread each,
    a table each), and the leaks of all their runs."""

    def run(secret: Secret) -> Cli:
        cwd = tmp_path / secret.name.replace(" ", "-")
        cwd.mkdir()
        cli = Cli(cwd, secret.url(where, f"test_{uuid.uuid4().hex[:12]}"), secret)
        commands(cli)
        return cli

    with ThreadPoolExecutor(len(SECRETS)) as pool:
        clis = list(pool.map(run, SECRETS))
    leaks = [leak for cli in clis for leak in cli.leaks()]
    runs = sum(len(cli.runs) for cli in clis)
    assert not leaks, f"{len(leaks)} leak(s) in {runs} runs:\n\n" + "\n\n".join(leaks)
    return clis


def test_no_command_shows_the_password_of_a_live_servers_url(tmp_path: Path) -> None:
    require_postgres()

    def every_command(cli: Cli) -> None:
        try:
            run_every_command(cli, cli.url)
        finally:
            asyncio.run(drop_table(cli.url))

    for cli in with_every_secret(WHERE, tmp_path, every_command):
        # Not vacuous: the URL is named where it used to leak, with its password hidden.
        listed = "\n".join(run.stdout for run in cli.runs if run.what.startswith("list --st"))
        assert f"1 scope(s) in postgresql://{USER}" in listed
        assert f"No scratchpad is stored in postgresql://{USER}" in listed
        assert "***" in listed
        assert "table=test_" in listed  # a parameter that is not a secret stays readable
        demo = cli.runs[0].stdout
        assert "Inspect it: noetic-scratchpad show --thread demo --storage 'postgresql://" in demo


def test_no_failure_message_shows_the_password(tmp_path: Path) -> None:
    clis = with_every_secret(UNREACHABLE, tmp_path, lambda cli: every_failure(cli, cli.url))

    for run in (run for cli in clis for run in cli.runs):
        assert "Traceback" not in run.stderr, run.stderr
        assert "noetic-scratchpad: error: " in run.stderr, run.stderr
