"""``noetic-scratchpad``: run the demo and inspect or reset stored scratchpads.

Exit codes: 0 success, 1 a runtime error (one line on stderr), 2 a usage error.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict

from . import __version__
from .errors import ScratchpadError
from .events import ScratchpadEvent, UpdateApplied, UpdateRejected
from .items import FunctionCall, Item, LLMResponse, Message
from .keys import (
    LEGACY_ROOT,
    Scope,
    kind_prefix,
    layer_prefix,
    legacy_state_key,
    parse_legacy_state_key,
    parse_state_key,
    scope_prefix,
    state_key,
)
from .layer import scratchpad
from .render import render_block
from .runtime import Agent, AgentHarness, ModelRequest, ScriptedModel, Turn
from .storage import StorageBackend, open_storage, resolve_storage_url

__all__ = ("main",)

PROG = "noetic-scratchpad"
logger = logging.getLogger("noetic_scratchpad.cli")
DEFAULT_STORAGE = "sqlite:///scratchpad.db"


class CliError(Exception):
    """A failure to report as one line on stderr, exit code 1."""


# -- storage helpers -----------------------------------------------------------------------


def storage_url(args: argparse.Namespace) -> str:
    return resolve_storage_url(args.storage, default=DEFAULT_STORAGE)


def stored_url(args: argparse.Namespace) -> str:
    """The URL for a command that inspects stored data; refuses ``memory://``, which
    holds nothing outside the process that wrote it."""
    url = storage_url(args)
    if url.lower().startswith("memory:"):
        raise CliError(
            f"{url} keeps data only inside the process that wrote it, so there is nothing "
            "to inspect here; use a sqlite:// or postgresql:// URL"
        )
    return url


def sqlite_file_missing(url: str) -> str | None:
    """The path of a ``sqlite://`` database that does not exist yet, else ``None``.

    Inspecting must not create an empty database as a side effect.
    """
    if not url.lower().startswith("sqlite:"):
        return None
    from .storage.sqlite import parse_sqlite_url

    path = parse_sqlite_url(url).path
    return None if os.path.exists(path) else path


def scope_of(args: argparse.Namespace) -> tuple[Scope, str]:
    """``("thread", id)`` or ``("resource", id)`` from ``--thread`` / ``--resource``;
    the id checked as the layer checks it."""
    kind: Scope = "thread" if args.thread is not None else "resource"
    scope_id = args.thread if args.thread is not None else args.resource
    try:
        scope_prefix(args.layer, kind, scope_id)
    except ValueError as exc:
        raise CliError(str(exc)) from None
    return kind, scope_id


# -- show ----------------------------------------------------------------------------------


async def cmd_show(args: argparse.Namespace) -> int:
    url = stored_url(args)
    kind, scope_key = scope_of(args)
    missing = sqlite_file_missing(url)
    if missing is not None:
        raise CliError(f"no database at {missing}; nothing is stored yet (try `{PROG} demo`)")
    backend = await open_storage(url)
    try:
        state = await backend.get(state_key(args.layer, kind, scope_key))
        legacy = state is None and await backend.get(legacy_state_key(args.layer, scope_key))
    finally:
        await backend.aclose()
    if state is None:
        hint = (
            f"it is stored in the first release's layout: run `{PROG} migrate` first"
            if legacy is not None
            else f"`{PROG} list` shows what is stored"
        )
        raise CliError(f"no {args.layer} stored for {kind} {scope_key!r} in {url}; {hint}")
    if args.json:
        print(json.dumps(state, indent=2, ensure_ascii=False))
    else:
        print(render_block(state) if isinstance(state, str | dict) else json.dumps(state))
    return 0


# -- list ----------------------------------------------------------------------------------


async def stored_scopes(url: str, layer_id: str) -> list[dict[str, Any]]:
    """Every stored scope of ``layer_id``; those of the first release's layout say
    ``"scope": "legacy"`` (``migrate`` moves them)."""
    if sqlite_file_missing(url) is not None:
        return []
    backend = await open_storage(url)
    try:
        infos = await backend.describe(layer_prefix(layer_id))
        legacy = await backend.describe(f"{LEGACY_ROOT}{layer_id}/")
    finally:
        await backend.aclose()
    rows: list[tuple[str, str, Any]] = []
    for info in infos:
        ref = parse_state_key(info.key)
        if ref is not None:
            rows.append((ref.kind, ref.scope_id, info))
    for info in legacy:
        scope_id = parse_legacy_state_key(info.key, layer_id)
        if scope_id is not None:
            rows.append(("legacy", scope_id, info))
    return [
        {
            "scope": kind,
            "scope_key": scope_id,
            "layer_id": layer_id,
            "size": info.size,
            "updated_at": _iso(info.updated_at),
        }
        for kind, scope_id, info in rows
    ]


async def cmd_list(args: argparse.Namespace) -> int:
    url = stored_url(args)
    rows = await stored_scopes(url, args.layer)
    if args.json:
        print(json.dumps(rows, indent=2, ensure_ascii=False))
        return 0
    if not rows:
        print(f"No {args.layer} is stored in {url}.")
        return 0
    width = max(len("ID"), *(len(row["scope_key"]) for row in rows))
    print(f"{'SCOPE':<8}  {'ID':<{width}}  {'SIZE':>9}  LAST WRITE (UTC)")
    for row in rows:
        when = row["updated_at"].replace("T", " ").removesuffix("Z")
        print(f"{row['scope']:<8}  {row['scope_key']:<{width}}  {_size(row['size']):>9}  {when}")
    print(f"{len(rows)} scope(s) in {url}")
    legacy = sum(row["scope"] == "legacy" for row in rows)
    if legacy:
        print(
            f"{legacy} of them in the first release's layout, which the layer no longer "
            f"reads: run `{PROG} migrate` to move them"
        )
    return 0


# -- reset ---------------------------------------------------------------------------------


async def cmd_reset(args: argparse.Namespace) -> int:
    url = stored_url(args)
    if args.all:
        what = f"every {args.layer} (all threads and resources)"
    else:
        kind, scope_key = scope_of(args)
        what = f"the {args.layer} of {kind} {scope_key!r}"
    if sqlite_file_missing(url) is not None:
        print(f"Nothing to reset: {url} holds nothing yet.")
        return 0
    backend = await open_storage(url)
    try:
        if args.all:
            keys = await backend.list(layer_prefix(args.layer))
            keys += await backend.list(f"{LEGACY_ROOT}{args.layer}/")
        else:
            # The scope's own prefix: its encoded id is one segment no other id shares.
            keys = await backend.list(scope_prefix(args.layer, kind, scope_key))
        if not keys:
            print(f"Nothing to reset: no {what.removeprefix('the ')} in {url}.")
            return 0
        if not args.yes:
            confirm(f"Delete {what} in {url} ({len(keys)} key(s))? [y/N] ")
        for key in keys:
            await backend.delete(key)
    finally:
        await backend.aclose()
    print(f"Deleted {what} ({len(keys)} key(s)).")
    return 0


# -- migrate -------------------------------------------------------------------------------


async def cmd_migrate(args: argparse.Namespace) -> int:
    url = stored_url(args)
    if sqlite_file_missing(url) is not None:
        print(f"Nothing to migrate: {url} holds nothing yet.")
        return 0
    backend = await open_storage(url)
    try:
        legacy = [
            (key, scope_id)
            for key in await backend.list(f"{LEGACY_ROOT}{args.layer}/")
            if (scope_id := parse_legacy_state_key(key, args.layer)) is not None
        ]
        if not legacy:
            print(f"Nothing to migrate: no {args.layer} in the first release's layout in {url}.")
            return 0
        if not args.yes:
            confirm(
                f"Move {len(legacy)} {args.layer}(s) of the first release's layout in {url} "
                f"to {args.scope} scopes? [y/N] "
            )
        counts = await migrate_legacy(backend, args.layer, args.scope, legacy)
    finally:
        await backend.aclose()
    moved, kept, skipped = counts
    print(f"Moved {moved} {args.layer}(s) to {kind_prefix(args.layer, args.scope)}.")
    if kept:
        print(f"{kept} had a newer state in the new layout already; that one was kept.")
    if skipped:
        print(f"{skipped} had an id the layer cannot use and were left in place.")
    return 0


async def migrate_legacy(
    backend: StorageBackend, layer_id: str, kind: Scope, legacy: list[tuple[str, str]]
) -> tuple[int, int, int]:
    """Move first-release state keys to ``kind`` scopes; ``(moved, kept, skipped)``.

    Each key is copied (unless the new layout already holds that scope, which wins) and
    only then deleted, so an interrupted run loses nothing and a second run finishes it.
    """
    moved = kept = skipped = 0
    for old_key, scope_id in legacy:
        try:
            new_key = state_key(layer_id, kind, scope_id)
        except ValueError as exc:
            logger.warning("not migrated: %s: %s", old_key, exc)
            skipped += 1
            continue
        value = await backend.get(old_key)
        if value is None:  # deleted meanwhile
            continue
        existing: list[bool] = []

        def keep_newer(current: Any, value: Any = value, existing: list[bool] = existing) -> Any:
            existing[:] = [current is not None]
            return value if current is None else current

        await backend.update(new_key, keep_newer)
        await backend.delete(old_key)
        if existing[0]:
            kept += 1
        else:
            moved += 1
    return moved, kept, skipped


def confirm(question: str) -> None:
    if not sys.stdin.isatty():
        raise CliError(
            "refusing to delete without confirmation: stdin is not a terminal; pass --yes"
        )
    try:
        answer = input(question)
    except EOFError:
        answer = ""
    if answer.strip().lower() not in ("y", "yes"):
        raise CliError("cancelled; nothing was deleted")


# -- demo ----------------------------------------------------------------------------------


class TaskNotes(BaseModel):
    """The demo's scratchpad schema (the seed's example)."""

    model_config = ConfigDict(extra="forbid")

    currentGoal: str
    completedSteps: list[str]
    blockers: list[str]


def call(call_id: str, **arguments: Any) -> FunctionCall:
    return FunctionCall(call_id=call_id, name="scratchpad/update", arguments=json.dumps(arguments))


def correct_blockers(request: ModelRequest) -> list[Item]:
    """The scripted model reads its rejected call's error and sends a list instead."""
    last = request.last_output
    if last is not None and last.is_error:
        return [call("call_4", blockers=["The staging database is read-only"])]
    return [Message(role="assistant", content="Noted.")]


DEMO_RUNS: list[tuple[str, list[Turn]]] = [
    (
        "We need to ship v2 of the billing service today.",
        [
            [
                Message(role="assistant", content="Let me write the plan down first."),
                call(
                    "call_1",
                    currentGoal="Ship billing service v2",
                    completedSteps=["Wrote the release notes"],
                ),
            ],
            "Plan noted. Next I'll run the database migration on staging.",
        ],
    ),
    (
        "The migration failed: the staging database is read-only.",
        [
            [call("call_3", blockers="The staging database is read-only")],
            correct_blockers,
            "Blocker recorded. Could someone grant write access to staging?",
        ],
    ),
    (
        "Done: the DBA granted write access and I re-ran the migration.",
        [
            [
                call(
                    "call_5",
                    completedSteps=["Wrote the release notes", "Ran the staging migration"],
                    blockers=[],
                )
            ],
            "Staging is migrated and nothing blocks us. Next: deploy to production.",
        ],
    ),
]


async def cmd_demo(args: argparse.Namespace) -> int:
    url = storage_url(args)
    out = Printer()
    turns = [turn for _, run_turns in DEMO_RUNS for turn in run_turns]
    scripted = ScriptedModel(turns)
    shown: list[str] = []

    async def model(request: ModelRequest) -> LLMResponse:
        block = next(
            (
                item.content
                for item in request.items
                if isinstance(item, Message) and item.content.startswith("<scratchpad>")
            ),
            None,
        )
        if block is None:
            out("   (the scratchpad is empty: no <scratchpad> block in the prompt)")
        elif shown and shown[-1] == block:
            out("   (the model sees the same <scratchpad> block as before)")
        else:
            out("   the model sees:")
            out("\n".join(f"     | {line}" for line in block.splitlines()))
        shown.append(block or "")
        response = await scripted(request)
        for item in response.items:
            if isinstance(item, FunctionCall):
                out(f"   assistant calls {item.name} {item.arguments}")
        return response

    harness = AgentHarness(
        name="demo",
        agent=Agent(model=model, instructions="You are a careful release engineer."),
        params={},
        context_layers=[scratchpad(schema=TaskNotes)],
        storage=url,
    )
    async with harness:
        await harness.storage.delete(state_key("scratchpad", "thread", args.thread))
        out(f"Scratchpad demo on {url}, thread {args.thread!r} (reset first).")
        out("Schema: TaskNotes {currentGoal: str, completedSteps: [str], blockers: [str]}")
        unsubscribe = harness.events.subscribe(out.event)
        try:
            for number, (text, _) in enumerate(DEMO_RUNS, start=1):
                out()
                out(f"[turn {number}] user: {text}")
                result = await harness.run(text, thread_id=args.thread)
                out(f"   assistant: {result.output}")
        finally:
            unsubscribe()
        final = await harness.read_state("scratchpad", thread_id=args.thread)
    out()
    out("Stored scratchpad:")
    out(json.dumps(final, indent=2, ensure_ascii=False))
    out()
    storage_flag = "" if args.storage is None else f" --storage {args.storage}"
    out(f"Inspect it: {PROG} show --thread {args.thread}{storage_flag}")
    return 0


class Printer:
    """Writes the demo's lines to stdout as they happen."""

    def __call__(self, text: str = "") -> None:
        print(text, flush=True)

    def event(self, event: ScratchpadEvent) -> None:
        if isinstance(event, UpdateApplied):
            self(f"   + scratchpad updated by {event.source}: {', '.join(event.keys) or '-'}")
        elif isinstance(event, UpdateRejected):
            self(f"   ! update rejected by the {event.hook} path ({event.reason}): {event.message}")


# -- the parser ------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="An agent's working memory: run the demo, inspect and reset scratchpads.",
        epilog=f"Storage: --storage URL, else $NOETIC_SCRATCHPAD_STORAGE, else {DEFAULT_STORAGE}.",
    )
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    parser.add_argument(
        "--log-level",
        choices=("debug", "info", "warning", "error"),
        help="library log messages on stderr at or above this level "
        "(default: warning; error for demo, which prints every diagnostic itself)",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    storage = argparse.ArgumentParser(add_help=False)
    storage.add_argument(
        "--storage",
        metavar="URL",
        help=f"memory://, sqlite:///path.db or postgresql://... (default: {DEFAULT_STORAGE})",
    )
    layer = argparse.ArgumentParser(add_help=False)
    layer.add_argument("--layer", default="scratchpad", help="layer id (default: scratchpad)")

    demo = commands.add_parser(
        "demo",
        parents=[storage],
        help="run a scripted agent conversation and watch its scratchpad",
        description="Run a scripted three-turn conversation (no API key needed) with a "
        "TaskNotes scratchpad, printing each <scratchpad> block the model sees and each "
        "update or rejection as it happens. The demo thread is reset first.",
    )
    demo.add_argument("--thread", default="demo", help="thread id to use (default: demo)")
    demo.set_defaults(handler=cmd_demo)

    show = commands.add_parser(
        "show",
        parents=[storage, layer],
        help="print one stored scratchpad",
        description="Print the scratchpad of one thread or resource as the model sees it.",
    )
    add_scope(show, allow_all=False)
    show.add_argument("--json", action="store_true", help="print the stored state as JSON")
    show.set_defaults(handler=cmd_show)

    listing = commands.add_parser(
        "list",
        parents=[storage, layer],
        help="list stored scratchpads with their sizes and last writes",
        description="List every stored scope (thread or resource id), its size and last write.",
    )
    listing.add_argument("--json", action="store_true", help="print the list as JSON")
    listing.set_defaults(handler=cmd_list)

    reset = commands.add_parser(
        "reset",
        parents=[storage, layer],
        help="delete stored scratchpads",
        description="Delete the scratchpad of one thread or resource, or all of them. Asks "
        "first; without a terminal it refuses unless --yes is given.",
    )
    add_scope(reset, allow_all=True)
    reset.add_argument("-y", "--yes", action="store_true", help="do not ask for confirmation")
    reset.set_defaults(handler=cmd_reset)

    migrate = commands.add_parser(
        "migrate",
        parents=[storage, layer],
        help="move scratchpads stored by the first release to the current key layout",
        description="The first release kept threads and resources in one namespace "
        "(layers/{layer}/{id}/state); the layer now keeps each kind apart and no longer "
        "reads that layout. This moves every such scratchpad to a scope of the kind you "
        "name (thread by default, resource for resource-scoped apps). Safe to run twice.",
    )
    migrate.add_argument(
        "--as",
        dest="scope",
        choices=("thread", "resource"),
        default="thread",
        help="the kind of scope the old scratchpads become (default: thread)",
    )
    migrate.add_argument("-y", "--yes", action="store_true", help="do not ask for confirmation")
    migrate.set_defaults(handler=cmd_migrate)
    return parser


def add_scope(parser: argparse.ArgumentParser, *, allow_all: bool) -> None:
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--thread", metavar="ID", help="a thread id (thread-scoped scratchpads)")
    group.add_argument(
        "--resource", metavar="ID", help="a resource id, such as a user (resource scope)"
    )
    if allow_all:
        group.add_argument("--all", action="store_true", help="every thread and resource")


def configure_logging(level: str) -> None:
    """Log records go to stderr, so stdout carries only the command's output.

    The library's loggers (``noetic_scratchpad.*``) show ``level`` and up; other libraries'
    warnings and up. Calling it again replaces the handler an earlier call installed.
    """
    threshold = getattr(logging, level.upper())
    root = logging.getLogger()
    for previous in [h for h in root.handlers if h.get_name() == PROG]:
        root.removeHandler(previous)
    handler = logging.StreamHandler(sys.stderr)
    handler.set_name(PROG)
    handler.setFormatter(
        logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s", "%Y-%m-%d %H:%M:%S")
    )
    root.addHandler(handler)
    root.setLevel(max(threshold, logging.WARNING))
    logging.getLogger("noetic_scratchpad").setLevel(threshold)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)  # exits with 2 on a usage error
    configure_logging(args.log_level or ("error" if args.command == "demo" else "warning"))
    handler: Callable[[argparse.Namespace], Coroutine[Any, Any, int]] = args.handler
    try:
        return asyncio.run(handler(args))
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # one line, no traceback: the message says what to do
        message = str(exc)
        if not isinstance(exc, CliError | ScratchpadError | OSError | ValueError):
            message = f"{type(exc).__name__}: {message}"
        print(f"{PROG}: error: {message}", file=sys.stderr)
        return 1


def _iso(timestamp: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(timestamp))


def _size(size: int) -> str:
    return f"{size} B" if size < 1024 else f"{size / 1024:.1f} KiB"
