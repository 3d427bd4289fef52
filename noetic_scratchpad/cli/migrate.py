"""``migrate``: move scratchpads stored by the first release to the current key layout."""

from __future__ import annotations

import argparse
from typing import Any, Literal

from ..keys import LEGACY_ROOT, Scope, kind_prefix, parse_legacy_state_key, state_key
from ..storage import StorageBackend, open_storage
from .common import logger, shown_url
from .stored import confirm, sqlite_file_missing, stored_url


async def cmd_migrate(args: argparse.Namespace) -> int:
    url = stored_url(args)
    shown = shown_url(url)
    if sqlite_file_missing(url) is not None:
        print(f"Nothing to migrate: {shown} holds nothing yet.")
        return 0
    backend = await open_storage(url)
    try:
        legacy = await legacy_keys(backend, args.layer)
        if not legacy:
            print(f"Nothing to migrate: no {args.layer} in the first release's layout in {shown}.")
            return 0
        if not args.yes:
            confirm(
                f"move {len(legacy)} {args.layer}(s) of the first release's layout in {shown} "
                f"to {args.scope} scopes",
                change="moved",
            )
        counts = await migrate_legacy(backend, args.layer, args.scope, legacy)
    finally:
        await backend.aclose()
    report(args.layer, args.scope, *counts)
    return 0


async def legacy_keys(backend: StorageBackend, layer_id: str) -> list[tuple[str, str]]:
    """``(key, scope id)`` of each state ``layer_id`` holds in the first release's layout."""
    return [
        (key, scope_id)
        for key in await backend.list(f"{LEGACY_ROOT}{layer_id}/")
        if (scope_id := parse_legacy_state_key(key, layer_id)) is not None
    ]


def report(layer_id: str, kind: Scope, moved: int, kept: int, skipped: int) -> None:
    print(f"Moved {moved} {layer_id}(s) to {kind_prefix(layer_id, kind)}.")
    if kept:
        print(f"{kept} had a newer state in the new layout already; that one was kept.")
    if skipped:
        print(f"{skipped} had an id the layer cannot use and were left in place.")


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
        outcome = await move_key(backend, old_key, new_key)
        moved += outcome == "moved"
        kept += outcome == "kept"
    return moved, kept, skipped


async def move_key(
    backend: StorageBackend, old_key: str, new_key: str
) -> Literal["moved", "kept", "gone"]:
    """Copy ``old_key`` to ``new_key`` unless that holds a state already, then delete
    ``old_key``: ``"moved"``, ``"kept"`` (the newer state) or ``"gone"`` (deleted meanwhile)."""
    value = await backend.get(old_key)
    if value is None:
        return "gone"
    existed = False

    def keep_newer(current: Any) -> Any:
        nonlocal existed
        existed = current is not None
        return value if current is None else current

    await backend.update(new_key, keep_newer)
    await backend.delete(old_key)
    return "kept" if existed else "moved"
