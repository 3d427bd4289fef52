"""``history`` and ``revert``: a scope's journaled writes, and undoing them."""

from __future__ import annotations

import argparse
import json
import logging
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

from .._time import iso_time
from ..core import RunScope, ScratchpadCore
from ..keys import state_key
from ..layer import HistoryEntry, ScratchpadHandle, scratchpad
from ..layer.journal import MISSING, caller_of, entry_json
from ..storage.base import JournalRow
from .common import PROG, CliError
from .stored import (
    confirm,
    not_stored,
    nothing_stored,
    scope_of,
    sqlite_file_missing,
    stored_url,
)

#: Journal rows a revert from the command line keeps at least: the layer's default.
_DEFAULT_KEEP = 50
#: How far back the command line looks to keep an app's longer journal whole.
_MAX_KEEP = 10_000


async def cmd_history(args: argparse.Namespace) -> int:
    async with _scope_handle(args) as (handle, rows):
        entries = await handle.history(limit=args.limit)
    if args.json:  # the entries as the HTTP API gives them (GET .../history)
        callers = {row.revision: caller_of(row) for row in rows}
        shown = [entry_json(entry, callers.get(entry.revision)) for entry in entries]
        print(json.dumps(shown, indent=2, ensure_ascii=False))
        return 0
    if not entries:
        print(f"no journaled writes for {_scope_name(args)} (revision {handle.revision})")
        return 0
    for entry in entries:
        print(describe(entry))
    return 0


async def cmd_revert(args: argparse.Namespace) -> int:
    async with _scope_handle(args) as (handle, _):
        if not args.yes:
            confirm(
                f"make the {args.layer} of {_scope_name(args)} what it was at revision "
                f"{args.to} (it is at revision {handle.revision})",
                change="changed",
            )
        with _unlogged_refusals():  # the command prints a refusal itself, once
            await handle.revert(args.to)
    print(
        f"{_scope_name(args)} is now at revision {handle.revision}: the state of revision {args.to}"
    )
    return 0


@contextmanager
def _unlogged_refusals() -> Iterator[None]:
    """Keep the log record of a refused write off stderr while the command runs the write:
    the command reports the refusal as its error line, and one line is enough."""

    def keep(record: logging.LogRecord) -> bool:
        event = getattr(record, "scratchpad_event", None)
        return getattr(event, "kind", None) != "update_rejected"

    events = logging.getLogger("noetic_scratchpad.events")
    events.addFilter(keep)
    try:
        yield
    finally:
        events.removeFilter(keep)


def describe(entry: HistoryEntry) -> str:
    """One journaled write as a few readable lines: a header, then a diff per key."""
    call = f" call {entry.call_id}" if entry.call_id else ""
    lines = [f"revision {entry.revision}  {iso_time(entry.written_at)}  {entry.source}{call}"]
    if entry.changes is None:
        lines.append(
            f"  wrote {', '.join(entry.keys) or 'the state'} (the diff is unknown: "
            "a newer journal entry could not be read)"
        )
        return "\n".join(lines)
    for key, (before, after) in entry.changes.items():
        name = key or "(the state)"
        if before is MISSING:
            lines.append(f"  + {name}: {_short(after)}")
        elif after is MISSING:
            lines.append(f"  - {name}: {_short(before)}")
        else:
            lines.append(f"  ~ {name}: {_short(before)} -> {_short(after)}")
    return "\n".join(lines)


def _short(value: Any, limit: int = 120) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 3] + "..."


@asynccontextmanager
async def _scope_handle(
    args: argparse.Namespace,
) -> AsyncIterator[tuple[ScratchpadHandle, list[JournalRow]]]:
    """A handle on the scope of ``--thread``/``--resource``, from a core that owns the
    storage while the command runs, and the scope's journal rows; a :class:`CliError` when
    nothing is stored for it, as the HTTP API's 404."""
    if args.layer != "scratchpad":
        raise CliError(f"history and revert know the scratchpad layer only, not {args.layer!r}")
    url = stored_url(args)
    kind, scope_id = scope_of(args)
    if sqlite_file_missing(url) is not None:
        raise CliError("; ".join(nothing_stored(url, args.layer)))
    async with ScratchpadCore(storage=url, remote_events=False) as core:  # one command
        # Keep an app's longer journal whole: a revert trims to the layer's history_limit,
        # so the layer is made once the journal's length is known.
        key = state_key(args.layer, kind, scope_id)
        if await core.backend.get(key) is None:
            raise await not_stored(core.backend, url, args.layer, kind, scope_id)
        found = await core.backend.journal(key, limit=_MAX_KEEP)
        layer = scratchpad(scope=kind, history_limit=max(_DEFAULT_KEEP, len(found) + 1))
        scope = RunScope(PROG, scope_id) if kind == "resource" else RunScope(scope_id)
        yield await core.handle(scope, layer=layer), found


def _scope_name(args: argparse.Namespace) -> str:
    kind, scope_id = scope_of(args)
    return f"{kind} {scope_id!r}"
