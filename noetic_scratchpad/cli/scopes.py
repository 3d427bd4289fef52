"""``show``, ``list`` and ``reset``: the commands on stored scopes."""

from __future__ import annotations

import argparse
import json
from typing import Any

from ..keys import (
    LEGACY_ROOT,
    Scope,
    layer_prefix,
    legacy_state_key,
    parse_legacy_state_key,
    parse_state_key,
    scope_prefix,
    state_key,
)
from ..render import render_block
from ..storage import KeyInfo, StorageBackend, open_storage
from .common import PROG, CliError, shown_url
from .stored import confirm, human_size, iso, scope_of, sqlite_file_missing, stored_url

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
        shown = shown_url(url)
        raise CliError(f"no {args.layer} stored for {kind} {scope_key!r} in {shown}; {hint}")
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
    rows: list[tuple[str, str, KeyInfo]] = []
    for info in infos:
        ref = parse_state_key(info.key)
        if ref is not None:
            rows.append((ref.kind, ref.scope_id, info))
    for info in legacy:
        scope_id = parse_legacy_state_key(info.key, layer_id)
        if scope_id is not None:
            rows.append(("legacy", scope_id, info))
    return [scope_row(kind, scope_id, layer_id, info) for kind, scope_id, info in rows]


def scope_row(kind: str, scope_id: str, layer_id: str, info: KeyInfo) -> dict[str, Any]:
    """One row of ``list --json``."""
    return {
        "scope": kind,
        "scope_key": scope_id,
        "layer_id": layer_id,
        "size": info.size,
        "updated_at": iso(info.updated_at),
    }


async def cmd_list(args: argparse.Namespace) -> int:
    url = stored_url(args)
    rows = await stored_scopes(url, args.layer)
    if args.json:
        print(json.dumps(rows, indent=2, ensure_ascii=False))
    elif not rows:
        print(f"No {args.layer} is stored in {shown_url(url)}.")
    else:
        print_table(rows, shown_url(url))
    return 0


def print_table(rows: list[dict[str, Any]], shown: str) -> None:
    """The rows of ``list`` for a reader, with a line on any left in the legacy layout;
    ``shown`` is the storage URL as :func:`~.common.shown_url` shows it."""
    width = max(len("ID"), *(len(row["scope_key"]) for row in rows))
    print(f"{'SCOPE':<8}  {'ID':<{width}}  {'SIZE':>9}  LAST WRITE (UTC)")
    for row in rows:
        when = row["updated_at"].replace("T", " ").removesuffix("Z")
        size = human_size(row["size"])
        print(f"{row['scope']:<8}  {row['scope_key']:<{width}}  {size:>9}  {when}")
    print(f"{len(rows)} scope(s) in {shown}")
    legacy = sum(row["scope"] == "legacy" for row in rows)
    if legacy:
        print(
            f"{legacy} of them in the first release's layout, which the layer no longer "
            f"reads: run `{PROG} migrate` to move them"
        )


# -- reset ---------------------------------------------------------------------------------


async def cmd_reset(args: argparse.Namespace) -> int:
    url = stored_url(args)
    shown = shown_url(url)
    scope = None if args.all else scope_of(args)
    what = (
        f"every {args.layer} (all threads and resources)"
        if scope is None
        else f"the {args.layer} of {scope[0]} {scope[1]!r}"
    )
    if sqlite_file_missing(url) is not None:
        print(f"Nothing to reset: {shown} holds nothing yet.")
        return 0
    backend = await open_storage(url)
    try:
        keys = await keys_to_reset(backend, args.layer, scope)
        if not keys:
            print(f"Nothing to reset: no {what.removeprefix('the ')} in {shown}.")
            return 0
        if not args.yes:
            confirm(f"Delete {what} in {shown} ({len(keys)} key(s))? [y/N] ")
        for key in keys:
            await backend.delete(key)
    finally:
        await backend.aclose()
    print(f"Deleted {what} ({len(keys)} key(s)).")
    return 0


async def keys_to_reset(
    backend: StorageBackend, layer_id: str, scope: tuple[Scope, str] | None
) -> list[str]:
    """The keys of one scope, or (``scope`` ``None``) of every scope, legacy ones too."""
    if scope is None:
        keys = await backend.list(layer_prefix(layer_id))
        return keys + await backend.list(f"{LEGACY_ROOT}{layer_id}/")
    # The scope's own prefix: its encoded id is one segment no other id shares.
    return await backend.list(scope_prefix(layer_id, *scope))
