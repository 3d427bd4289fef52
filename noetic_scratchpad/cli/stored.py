"""Helpers of the commands on stored data (``show``, ``list``, ``reset``, ``migrate``)."""

from __future__ import annotations

import argparse
import sys
import time

from ..keys import Scope, scope_prefix
from .common import CliError, shown_url, storage_url


def stored_url(args: argparse.Namespace) -> str:
    """The URL for a command that inspects stored data; refuses ``memory://``, which
    holds nothing outside the process that wrote it."""
    url = storage_url(args)
    if url.lower().startswith("memory:"):
        raise CliError(
            f"{shown_url(url)} keeps data only inside the process that wrote it, so there is "
            "nothing to inspect here; use a sqlite:// or postgresql:// URL"
        )
    return url


def sqlite_file_missing(url: str) -> str | None:
    """The path of a ``sqlite://`` database that does not exist yet, else ``None``.

    Inspecting must not create an empty database as a side effect. A path the system
    refuses (too long) is a :class:`~noetic_scratchpad.StorageConfigError`, not "missing".
    """
    if not url.lower().startswith("sqlite:"):
        return None
    from ..storage.sqlite.options import database_exists, parse_sqlite_url

    path = parse_sqlite_url(url).path
    return None if database_exists(path) else path


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


def confirm(question: str) -> None:
    """Ask ``question`` on the terminal; raise :class:`CliError` unless the answer is yes."""
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


def iso(timestamp: float) -> str:
    """A Unix time as ``YYYY-MM-DDTHH:MM:SSZ``."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(timestamp))


def human_size(size: int) -> str:
    """``123 B`` or ``4.5 KiB``."""
    return f"{size} B" if size < 1024 else f"{size / 1024:.1f} KiB"
