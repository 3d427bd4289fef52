"""``show``, ``list`` and ``reset``: the commands on stored scopes."""

from __future__ import annotations

import argparse
import json
from typing import Any

from .._time import iso_time
from ..keys import (
    LEGACY_ROOT,
    Scope,
    layer_prefix,
    parse_legacy_state_key,
    parse_state_key,
    scope_prefix,
    state_key,
)
from ..render import render_block
from ..storage import KeyInfo, StorageBackend, open_storage
from .common import PROG, CliError, shown_url
from .stored import (
    confirm,
    human_size,
    not_stored,
    nothing_stored,
    scope_of,
    sqlite_file_missing,
    stored_url,
    where,
)

# -- show ----------------------------------------------------------------------------------


async def cmd_show(args: argparse.Namespace) -> int:
    url = stored_url(args)
    kind, scope_key = scope_of(args)
    if sqlite_file_missing(url) is not None:
        raise CliError("; ".join(nothing_stored(url, args.layer)))
    async with await open_storage(url) as backend:
        state = await backend.get(state_key(args.layer, kind, scope_key))
        if state is None:
            raise await not_stored(backend, url, args.layer, kind, scope_key)
    if args.json:
        print(json.dumps(state, indent=2, ensure_ascii=False))
    else:
        print(render_block(state) if isinstance(state, str | dict) else json.dumps(state))
    return 0


# -- list ----------------------------------------------------------------------------------


async def stored_scopes(url: str, layer_id: str) -> list[dict[str, Any]]:
    """Every stored scope of ``layer_id``, the latest write first, as the HTTP API lists
    them (``GET /api/scopes``); those of the first release's layout say ``"kind":
    "legacy"`` (``migrate`` moves them)."""
    if sqlite_file_missing(url) is not None:
        return []
    async with await open_storage(url) as backend:
        infos = await backend.describe(layer_prefix(layer_id))
        legacy = await backend.describe(f"{LEGACY_ROOT}{layer_id}/")
    rows: list[tuple[str, str, KeyInfo]] = []
    for info in infos:
        ref = parse_state_key(info.key)
        if ref is not None:
            rows.append((ref.kind, ref.scope_id, info))
    for info in legacy:
        scope_id = parse_legacy_state_key(info.key, layer_id)
        if scope_id is not None:
            rows.append(("legacy", scope_id, info))
    listed = [scope_row(kind, scope_id, layer_id, info) for kind, scope_id, info in rows]
    listed.sort(key=lambda row: (row["updated_at"], row["kind"], row["id"]), reverse=True)
    return listed


def scope_row(kind: str, scope_id: str, layer_id: str, info: KeyInfo) -> dict[str, Any]:
    """One row of ``list --json``: the keys of a row of the HTTP API's scope list."""
    return {
        "kind": kind,
        "id": scope_id,
        "layer": layer_id,
        "revision": info.revision,
        "size": info.size,
        "updated_at": iso_time(info.updated_at),
    }


async def cmd_list(args: argparse.Namespace) -> int:
    url = stored_url(args)
    rows = await stored_scopes(url, args.layer)
    if args.json:
        print(json.dumps(rows, indent=2, ensure_ascii=False))
    elif not rows:
        found, why = nothing_stored(url, args.layer)
        print(f"{found[0].upper()}{found[1:]}.\n{why}.")
    else:
        print_table(rows, where(url))
    return 0


def print_table(rows: list[dict[str, Any]], shown: str) -> None:
    """The rows of ``list`` for a reader, with a line on any left in the legacy layout;
    ``shown`` names the storage as :func:`~.stored.where` does."""
    width = max(len("ID"), *(len(row["id"]) for row in rows))
    print(f"{'KIND':<8}  {'ID':<{width}}  {'REVISION':>8}  {'SIZE':>9}  LAST WRITE")
    for row in rows:
        size = human_size(row["size"])
        print(
            f"{row['kind']:<8}  {row['id']:<{width}}  {row['revision']:>8}  {size:>9}  "
            f"{row['updated_at']}"
        )
    print(f"{len(rows)} scope(s) in {shown}")
    legacy = sum(row["kind"] == "legacy" for row in rows)
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
        if scope is not None:  # a scope named and not found, as show and the API say
            raise CliError("; ".join(nothing_stored(url, args.layer)))
        print(f"Nothing to reset: {shown} holds nothing yet.")
        return 0
    backend = await open_storage(url)
    try:
        keys = await keys_to_reset(backend, args.layer, scope)
        if not keys and scope is not None:
            raise await not_stored(backend, url, args.layer, *scope)
        if not keys:
            print(f"Nothing to reset: no {args.layer} in {shown}.")
            return 0
        if not args.yes:
            confirm(f"delete {what} in {shown} ({len(keys)} key(s))")
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
