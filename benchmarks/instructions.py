"""``python -m benchmarks.instructions [--ops N] [--library PATH] [--only CASE,...]``:
CPU instructions per operation, counted by valgrind's callgrind.

Unlike wall time, an instruction count does not move with the machine's load, so two trees
can be compared on a busy machine. Each case runs in a fresh interpreter under
``valgrind --tool=callgrind`` twice, once with ``N`` operations and once with ``2N``, after
the same set-up and warm-up; the difference divided by ``N`` is the cost of one operation,
start-up and imports cancelled out. Every thread of the process is counted (SQLite's too);
a database server's own work is not.

The cases are those of the suite's first comparisons, on the same 5.5 KB document and
``TaskNotes`` schema, with the journal at the layer's default: ``bare`` (a path-copying
merge and an orjson render, the baseline of (1)), ``turn_memory`` ((1): a recall and an
update through the full path on ``memory://``), ``update_memory``, ``recall_memory``,
``update_sqlite`` ((2), one uncontended update on a file) and ``update_postgres`` ((7),
skipped without a server).

``--library PATH`` runs the cases against the library in another checkout (the old code in
a worktree, say): its ``noetic_scratchpad`` and ``benchmarks._harness`` are imported.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from .__main__ import POSTGRES_ENV
from ._harness import DEFAULT_POSTGRES_URL
from .postgres import server_missing

ROOT = Path(__file__).resolve().parent.parent

#: The workload of one case, run in the child; ``OPS`` and ``URL`` are set before it.
CHILD = """
import asyncio, uuid
from benchmarks._harness import (
    BIG_BUDGET, EventTally, bare_merge, bare_render, bench_layer, make_document,
    open_scope, turn_update,
)
from noetic_scratchpad import open_storage

CASE, OPS, URL = {case!r}, {ops}, {url!r}
WARM = 200

async def main():
    doc = make_document(5_500)
    if CASE == "bare":
        state = dict(doc)
        for i in range(WARM + OPS):
            bare_render(state)
            state = bare_merge(state, turn_update(i))
        return
    layer = bench_layer()
    backend = await open_storage(URL)
    scope = "instructions-" + uuid.uuid4().hex[:8]
    handle = await open_scope(backend, layer, scope, EventTally(), seed=doc)
    ctx = handle.ctx

    async def op(i):
        if CASE != "update":
            await layer.recall(state=handle.state, budget=BIG_BUDGET, ctx=ctx)
        if CASE != "recall":
            await handle.update(turn_update(i))

    for i in range(WARM + OPS):
        await op(i)
    await backend.aclose()

asyncio.run(main())
"""

#: name: (the child's case, its storage URL or None for the PostgreSQL URL, what it is)
CASES = {
    "bare": ("bare", "memory://", "(1)'s baseline: path-copying merge + orjson render"),
    "turn_memory": ("turn", "memory://", "(1): recall + update, full path, memory://"),
    "update_memory": ("update", "memory://", "update alone, full path, memory://"),
    "recall_memory": ("recall", "memory://", "recall alone, full path, memory://"),
    "update_sqlite": ("update", "sqlite:///{workdir}/i.db", "(2): update, full path, SQLite"),
    "update_postgres": ("update", None, "(7): update, full path, PostgreSQL (client side)"),
}

_COLLECTED = re.compile(r"Collected : (\d+)")


def count(case: str, ops: int, url: str, library: Path) -> int:
    """Instructions callgrind counts in a child running ``ops`` operations of ``case``."""
    env = dict(os.environ, PYTHONPATH=str(library), PYTHONHASHSEED="0")
    code = CHILD.format(case=case, ops=ops, url=url)
    callgrind = ("valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null")
    done = subprocess.run(
        [*callgrind, sys.executable, "-c", code],
        env=env,
        cwd=library,
        capture_output=True,
        text=True,
        check=False,
    )
    found = _COLLECTED.search(done.stderr)
    if done.returncode != 0 or found is None:
        tail = "\n".join(done.stderr.splitlines()[-15:])
        raise RuntimeError(f"the {case} child failed (exit {done.returncode}):\n{tail}")
    return int(found.group(1))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.instructions",
        description="CPU instructions per operation under valgrind's callgrind "
        "(load-independent); each case runs with N and 2N operations and is differenced.",
    )
    parser.add_argument("--ops", type=int, default=500, help="N (default 500)")
    parser.add_argument(
        "--library",
        type=Path,
        default=ROOT,
        help="checkout whose noetic_scratchpad is measured (default: this one)",
    )
    parser.add_argument(
        "--only", default="", help=f"comma-separated cases: {', '.join(CASES)} (default: all)"
    )
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    if shutil.which("valgrind") is None:
        print("valgrind is not installed: apt-get install -y valgrind", file=sys.stderr)
        return 1
    wanted = [name for name in args.only.split(",") if name] or list(CASES)
    unknown = [name for name in wanted if name not in CASES]
    if unknown:
        parser.error(f"unknown case {', '.join(unknown)}; the cases are {', '.join(CASES)}")
    results: dict[str, float | str] = {}
    with tempfile.TemporaryDirectory() as workdir:
        for name in wanted:
            case, url, what = CASES[name]
            if url is None:
                url = os.environ.get(POSTGRES_ENV, DEFAULT_POSTGRES_URL)
                missing = asyncio.run(server_missing(url))
                if missing is not None:
                    results[name] = f"skipped: {missing}"
                    print(f"{name}: {results[name]}", file=sys.stderr)
                    continue
            url = url.format(workdir=workdir)
            print(f"{name}: {what} ...", file=sys.stderr, flush=True)
            low = count(case, args.ops, url, args.library.resolve())
            high = count(case, 2 * args.ops, url, args.library.resolve())
            results[name] = (high - low) / args.ops
    if args.json:
        print(json.dumps({"library": str(args.library), "ops": args.ops, "per_op": results}))
        return 0
    for name, value in results.items():
        shown = value if isinstance(value, str) else f"{value:,.0f} instructions/op"
        print(f"{name:16} {shown}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
