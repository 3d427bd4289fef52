"""``python -m benchmarks [--quick] [--json PATH] [--only NAME,...]``: run, print, save.

Exit status: 0 when every comparison was computed (or skipped for a stated reason: no
PostgreSQL server, a benchmark-only dependency missing), 1 when one failed to run, and with
``--strict`` also 1 when a target was missed. Speed targets are reported, never asserted,
unless ``--strict`` is given.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
import traceback
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from . import (
    http_load,
    journal,
    memory_growth,
    overhead_memory,
    peer_langgraph,
    postgres,
    prompt_cache,
    redis_concurrent,
    redis_single,
    sqlite_concurrent,
    sqlite_single,
    state_size,
)
from ._harness import (
    DEFAULT_POSTGRES_URL,
    DEFAULT_REDIS_URL,
    HISTORY_LIMIT_ENV,
    Comparison,
    Config,
    machine,
)

MODULES = {
    "overhead_memory": overhead_memory,
    "sqlite_single": sqlite_single,
    "sqlite_concurrent": sqlite_concurrent,
    "peer_langgraph": peer_langgraph,
    "state_size": state_size,
    "memory_growth": memory_growth,
    "postgres": postgres,
    "redis": redis_single,
    "redis_concurrent": redis_concurrent,
    "http_load": http_load,
    "journal": journal,
    "prompt_cache": prompt_cache,
}
DEFAULT_JSON = Path(__file__).resolve().parent / "results" / "latest.json"
POSTGRES_ENV = "NOETIC_SCRATCHPAD_BENCH_POSTGRES_URL"
REDIS_ENV = "NOETIC_SCRATCHPAD_BENCH_REDIS_URL"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description="Measure noetic-scratchpad against the physical limit and a peer.",
    )
    parser.add_argument(
        "--quick", action="store_true", help="small samples: a smoke test for CI (seconds)"
    )
    parser.add_argument(
        "--json",
        type=Path,
        help=f"where to write results (default: {DEFAULT_JSON} after a full run; a run with "
        "--quick, --only or --history-limit writes only where this says)",
    )
    parser.add_argument(
        "--only", default="", help=f"comma-separated subset of: {', '.join(MODULES)}"
    )
    parser.add_argument(
        "--postgres-url",
        default=os.environ.get(POSTGRES_ENV, DEFAULT_POSTGRES_URL),
        help=f"server for the PostgreSQL benchmark (${POSTGRES_ENV})",
    )
    parser.add_argument(
        "--redis-url",
        default=os.environ.get(REDIS_ENV, DEFAULT_REDIS_URL),
        help=f"server for the Redis benchmark (${REDIS_ENV})",
    )
    parser.add_argument(
        "--strict", action="store_true", help="exit 1 when a target is missed as well"
    )
    parser.add_argument(
        "--history-limit",
        type=int,
        metavar="N",
        help="the layer's history_limit in every comparison but 'journal' (default: the "
        "layer's own, 50; 0 measures without the journal)",
    )
    return parser.parse_args(argv)


def fmt(value: float) -> str:
    if value >= 100:
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def print_comparison(comparison: Comparison) -> None:
    print(f"\n({comparison.question}) {comparison.title}")
    if comparison.skipped:
        print(f"    skipped: {comparison.skipped}")
        return
    width = max(len(name) for name in comparison.results)
    for name, stats in comparison.results.items():
        mark = (
            "*" if name == comparison.candidate else ("=" if name == comparison.baseline else " ")
        )
        print(
            f"  {mark} {name:<{width}}  {fmt(stats.median):>10} {comparison.unit:<12}"
            f" [{fmt(stats.min)} - {fmt(stats.max)}]"
        )
    ratio, ratio_stats = comparison.ratio, comparison.ratio_stats()
    spread = (
        "" if ratio_stats is None else f" (per rep {ratio_stats.min:.2f}-{ratio_stats.max:.2f})"
    )
    verdict = {True: "MET", False: "MISSED", None: "n/a"}[comparison.met]
    if comparison.informational:
        verdict += f" ({comparison.informational})"
    print(f"    ratio * / = : {ratio:.2f}x{spread}  target: {comparison.target}  -> {verdict}")
    failed = [name for name, ok in comparison.checks.items() if not ok]
    if failed:
        print(f"    failed checks: {', '.join(failed)}")
    lost = comparison.extra.get("lost")
    if lost:
        print(f"    lost updates: {lost}")


async def run_all(names: list[str], cfg: Config) -> tuple[list[Comparison], list[str]]:
    comparisons: list[Comparison] = []
    errors: list[str] = []
    for name in names:
        print(f"running {name} ...", flush=True)
        begin = time.perf_counter()
        try:
            produced = await MODULES[name].run(cfg)
        except Exception:
            errors.append(f"{name}: {traceback.format_exc()}")
            print(f"  FAILED:\n{traceback.format_exc()}", file=sys.stderr, flush=True)
            continue
        for comparison in produced:
            comparison.extra.setdefault("module_seconds", time.perf_counter() - begin)
            print_comparison(comparison)
        comparisons.extend(produced)
    return comparisons, errors


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    names = [name.strip() for name in args.only.split(",") if name.strip()] or list(MODULES)
    unknown = [name for name in names if name not in MODULES]
    if unknown:
        print(f"unknown benchmark(s): {', '.join(unknown)}; known: {', '.join(MODULES)}")
        return 2
    if args.history_limit is not None:
        if args.history_limit < 0:
            print(f"--history-limit must be >= 0, not {args.history_limit}")
            return 2
        os.environ[HISTORY_LIMIT_ENV] = str(args.history_limit)
    started = datetime.now(UTC)
    begin = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="noetic-bench-") as workdir:
        cfg = Config(
            quick=args.quick,
            workdir=Path(workdir),
            postgres_url=args.postgres_url,
            redis_url=args.redis_url,
        )
        info = machine()
        comparisons, errors = asyncio.run(run_all(names, cfg))
    document: dict[str, Any] = {
        "started_at": started.isoformat(timespec="seconds"),
        "seconds": time.perf_counter() - begin,
        "quick": args.quick,
        "history_limit": args.history_limit,
        "command": "python -m benchmarks " + " ".join(sys.argv[1:] if argv is None else argv),
        "machine": info,
        "comparisons": [comparison.as_json() for comparison in comparisons],
        "errors": errors,
    }
    # The committed latest.json is the last full run, which the docs quote: a partial
    # run writes only where --json says.
    partial = args.quick or args.only or args.history_limit is not None
    target = args.json or (None if partial else DEFAULT_JSON)
    if target is None:
        saved = f"not saved: {DEFAULT_JSON} keeps the last full run; --json PATH saves this one"
    else:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n")
        saved = f"results in {target}"
    missed = [c.key for c in comparisons if c.met is False]
    print(
        f"\n{len(comparisons)} comparisons in {document['seconds']:.0f} s; "
        f"targets missed: {', '.join(missed) or 'none'}; {saved}"
    )
    if errors:
        return 1
    return 1 if args.strict and missed else 0


if __name__ == "__main__":
    sys.exit(main())
