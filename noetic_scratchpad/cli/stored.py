"""Helpers of the commands on stored data (``show``, ``list``, ``history``, ``revert``,
``reset``, ``migrate``, ``export``, ``erase``)."""

from __future__ import annotations

import argparse
import sys

from ..keys import Scope, legacy_state_key, scope_prefix
from ..storage import StorageBackend
from .common import EMPTY_STORE_HINT, PROG, CliError, UsageError, shown_url, storage_url


def stored_url(args: argparse.Namespace) -> str:
    """The checked URL for a command that inspects stored data (``memory://`` refused)."""
    return storage_url(args, inspecting=True)


def sqlite_file_missing(url: str) -> str | None:
    """The absolute path of a ``sqlite://`` database that does not exist yet, else ``None``.

    Inspecting must not create an empty database as a side effect. A path the system
    refuses (too long) is a :class:`~noetic_scratchpad.StorageConfigError`, not "missing".
    """
    if not url.lower().startswith("sqlite:"):
        return None
    from ..storage.sqlite.options import check_path, database_exists, parse_sqlite_url

    path = parse_sqlite_url(url).path
    return None if database_exists(path) else check_path(path)


def where(url: str) -> str:
    """The storage as a message names it: the URL, and a SQLite file's absolute path when
    the URL's is relative (the working directory decides which file that is)."""
    shown = shown_url(url)
    if not url.lower().startswith("sqlite:"):
        return shown
    from ..storage.sqlite.options import check_path, parse_sqlite_url

    path = parse_sqlite_url(url).path
    resolved = check_path(path)
    return shown if resolved == path else f"{shown} ({resolved})"


def nothing_stored(url: str, layer_id: str) -> tuple[str, str]:
    """What a command found at ``url`` holding no ``layer_id`` (a SQLite file there or not
    yet), and why that may be: one message, in two parts."""
    missing = sqlite_file_missing(url)
    if missing is None:
        return f"no {layer_id} is stored in {where(url)}", EMPTY_STORE_HINT
    found = f"the file {missing} does not exist yet"
    return f"no {layer_id} is stored in {shown_url(url)}: {found}", EMPTY_STORE_HINT


async def not_stored(
    backend: StorageBackend, url: str, layer_id: str, kind: Scope, scope_id: str
) -> CliError:
    """The error of ``show``, ``history`` and ``revert`` for a scope with nothing stored."""
    legacy = await backend.get(legacy_state_key(layer_id, scope_id))
    hint = (
        f"it is stored in the first release's layout: run `{PROG} migrate` first"
        if legacy is not None
        else f"`{PROG} list` shows what is stored"
    )
    return CliError(f"no {layer_id} stored for {kind} {scope_id!r} in {where(url)}; {hint}")


def scope_of(args: argparse.Namespace) -> tuple[Scope, str]:
    """``("thread", id)`` or ``("resource", id)`` from ``--thread`` / ``--resource``;
    the id checked as the layer checks it."""
    kind: Scope = "thread" if args.thread is not None else "resource"
    scope_id = args.thread if args.thread is not None else args.resource
    try:
        scope_prefix(args.layer, kind, scope_id)
    except ValueError as exc:
        raise UsageError(f"--{kind}: {exc}") from None
    return kind, scope_id


def confirm(action: str, *, change: str = "deleted") -> None:
    """Ask whether to do ``action`` (``"delete the scratchpad of thread 't1' in ..."``) on
    the terminal; a :class:`CliError` unless the answer is yes, and, without a terminal to
    ask, saying what would be done and how to confirm it (``--yes``). ``change``: the word
    for what the action does, in "nothing was deleted"."""
    if not sys.stdin.isatty():
        raise CliError(
            f"this would {action}; stdin is not a terminal to ask for confirmation, so "
            f"nothing was {change}: pass --yes to confirm"
        )
    try:
        answer = input(f"{action[0].upper()}{action[1:]}? [y/N] ")
    except EOFError:
        answer = ""
    if answer.strip().lower() not in ("y", "yes"):
        raise CliError(f"cancelled; nothing was {change}")


def human_size(size: int) -> str:
    """``123 B`` or ``4.5 KiB``."""
    return f"{size} B" if size < 1024 else f"{size / 1024:.1f} KiB"
