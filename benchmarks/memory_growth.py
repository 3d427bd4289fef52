"""(6) Memory after writes to many distinct scopes: lock registry entries and process RSS.

Each scope gets what an agent run does: ``layer.init`` on its ``ScopedStorage`` and one
update (a goal and a turn number). Afterwards no handle is kept, so whatever the process
still holds is either the storage's own data or a leak. Each backend is measured in a fresh
child process (``python -m benchmarks.memory_growth --child ...``) so earlier benchmarks
cannot blur the RSS figures.

- memory://: the storage holds the states as Python objects, so RSS growth per scope is
  compared with the bytes those objects occupy (a deep ``sys.getsizeof`` of the store).
- sqlite:// (full mode): the storage holds the states on disk, so RSS growth per scope is
  compared with the stored bytes per scope (file size / scopes); it should stay far below.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import subprocess
import sys
import time
from collections import deque
from pathlib import Path
from typing import Any

from noetic_scratchpad.keys import layer_prefix, state_key

from ._harness import (
    Comparison,
    Config,
    Stats,
    backend_available,
    batcher_entries,
    bench_layer,
    open_scope,
    rss_bytes,
    skipped,
)

TITLE = "Memory after writes to {n:,} distinct scopes ({backend})"
CHUNK = 100


def deep_sizeof(root: Any) -> int:
    """Bytes of ``root`` and everything it reaches through dicts, lists, tuples, deques and
    the attributes of slotted objects (memory storage keeps each key as a ``Revision``)."""
    seen: set[int] = set()
    total = 0
    stack = [root]
    while stack:
        obj = stack.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        total += sys.getsizeof(obj)
        if isinstance(obj, dict):
            stack.extend(obj.keys())
            stack.extend(obj.values())
        elif isinstance(obj, list | tuple | deque):  # deque: the journal of each key
            stack.extend(obj)
        else:
            slots = getattr(type(obj), "__slots__", ())
            for name in (slots,) if isinstance(slots, str) else slots:
                if hasattr(obj, name):
                    stack.append(getattr(obj, name))
    return total


async def child(backend_kind: str, scopes: int, workdir: Path) -> dict[str, Any]:
    from noetic_scratchpad import open_storage

    url = "memory://" if backend_kind == "memory" else f"sqlite:///{workdir / 'growth.db'}"
    layer = bench_layer()
    backend = await open_storage(url)

    async def touch(i: int) -> None:
        handle = await open_scope(backend, layer, f"scope-{i}", None)
        await handle.update({"currentGoal": f"answer the question of user {i}", "turn": i})

    # Warm up allocator, caches and lazily built objects on scopes that are then removed.
    await asyncio.gather(*(touch(-1 - i) for i in range(CHUNK)))
    for i in range(CHUNK):
        await backend.delete(state_key("scratchpad", "thread", f"scope-{-1 - i}"))
    gc.collect()
    before = rss_bytes()
    begin = time.perf_counter()
    for start in range(0, scopes, CHUNK):
        await asyncio.gather(*(touch(i) for i in range(start, min(start + CHUNK, scopes))))
    seconds = time.perf_counter() - begin
    gc.collect()
    after = rss_bytes()
    infos = await backend.describe(layer_prefix("scratchpad"))
    stored_json = sum(info.size for info in infos)
    entries = batcher_entries(backend)
    if backend_kind == "memory":
        held = deep_sizeof(vars(backend))
    else:
        db = workdir / "growth.db"
        held = sum(p.stat().st_size for p in db.parent.glob(db.name + "*"))
    await backend.aclose()
    return {
        "backend": backend_kind,
        "scopes": scopes,
        "stored_keys": len(infos),
        "seconds": seconds,
        "rss_growth_bytes": after - before,
        "held_by_storage_bytes": held,
        "stored_json_bytes": stored_json,
        "lock_registry_entries": entries,
    }


def measure(backend_kind: str, scopes: int, workdir: Path) -> dict[str, Any]:
    workdir.mkdir(parents=True, exist_ok=True)
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.memory_growth",
            "--child",
            backend_kind,
            "--scopes",
            str(scopes),
            "--workdir",
            str(workdir),
        ],
        capture_output=True,
        text=True,
        check=False,
        cwd=Path(__file__).resolve().parent.parent,
    )
    if completed.returncode != 0:
        raise RuntimeError(f"memory_growth child failed:\n{completed.stderr}")
    result: dict[str, Any] = json.loads(completed.stdout.strip().splitlines()[-1])
    return result


async def run(cfg: Config) -> list[Comparison]:
    kinds = ["memory", "sqlite"]
    comparisons = []
    for kind in kinds:
        scopes = cfg.scale(100_000, 5_000 if kind == "memory" else 2_000)
        title = TITLE.format(n=scopes, backend=kind)
        key = f"memory_growth_{kind}"
        if kind == "sqlite" and (missing := backend_available("sqlite")):
            comparisons.append(skipped(6, key, title, missing))
            continue
        result = await asyncio.to_thread(measure, kind, scopes, cfg.workdir / f"growth-{kind}")
        rss_per_scope = result["rss_growth_bytes"] / scopes
        held_per_scope = result["held_by_storage_bytes"] / scopes
        entries = result["lock_registry_entries"] or 0
        held_name = (
            "held by storage (Python objects)" if kind == "memory" else "held by storage (on disk)"
        )
        comparisons.append(
            Comparison(
                question=6,
                key=key,
                title=title,
                unit="bytes/scope",
                candidate="RSS growth",
                baseline=held_name,
                results={
                    "RSS growth": Stats.of([rss_per_scope]),
                    held_name: Stats.of([held_per_scope]),
                    "stored JSON": Stats.of([result["stored_json_bytes"] / scopes]),
                },
                target_ratio=1.25 if kind == "memory" else 1.0,
                target="0 registry entries; RSS growth bounded by what storage holds"
                + (" (<= 1.25x, allocator slack)" if kind == "memory" else " (<= 1x)"),
                checks={
                    "0 lock registry entries": entries == 0,
                    "every scope stored": result["stored_keys"] == scopes,
                },
                extra=result,
            )
        )
    return comparisons


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--child", choices=["memory", "sqlite"], required=True)
    parser.add_argument("--scopes", type=int, required=True)
    parser.add_argument("--workdir", type=Path, required=True)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(child(args.child, args.scopes, args.workdir))))


if __name__ == "__main__":
    main()
