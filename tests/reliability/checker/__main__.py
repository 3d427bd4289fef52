"""``python -m tests.reliability.checker``: run the concurrency checker.

Progress goes to stderr, the summary (JSON) to stdout; the exit code is 1 when a
violation was found, 0 otherwise.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

from .run import Config, run
from .scenario import SCOPES, format_scopes, parse_scopes


def parse_args(argv: list[str] | None = None) -> Config:
    parser = argparse.ArgumentParser(
        prog="python -m tests.reliability.checker",
        description="Randomized, seeded concurrency checker: no acknowledged scratchpad "
        "update is lost, no scope crossed, no reset note comes back.",
    )
    parser.add_argument(
        "--backend", choices=("memory", "sqlite", "postgres", "redis"), default="sqlite"
    )
    parser.add_argument("--processes", type=int, default=4, help="worker processes (default 4)")
    parser.add_argument("--tasks", type=int, default=20, help="asyncio tasks per worker")
    parser.add_argument("--seconds", type=float, default=60.0, help="how long the workers write")
    parser.add_argument("--seed", type=int, default=7, help="master seed of every random choice")
    parser.add_argument(
        "--url", help="an empty store to use instead of a fresh temporary one (kept afterwards)"
    )
    parser.add_argument(
        "--kills", type=int, help="workers to SIGKILL (default 2, or 1 with one process)"
    )
    parser.add_argument("--no-replace", action="store_true", help="no replacement after a kill")
    parser.add_argument("--no-resets", action="store_true", help="no CLI resets")
    parser.add_argument(
        "--scopes",
        type=parse_scopes,
        default=SCOPES,
        # argparse %-formats help texts, and a default scope holds "%2F".
        help=f"the scopes to write, kind:id,... (default {format_scopes(SCOPES)})".replace(
            "%", "%%"
        ),
    )
    parser.add_argument(
        "--min-ops",
        type=int,
        default=0,
        help="each worker goes on past --seconds (up to 3x) until it has done this many "
        "operations, so a loaded machine still checks something (default 0)",
    )
    parser.add_argument(
        "--log-dir", type=Path, help="keep the logs (and a SQLite file) in this directory"
    )
    args = parser.parse_args(argv)
    if args.processes < 1 or args.tasks < 1 or args.seconds <= 0:
        parser.error("--processes and --tasks must be at least 1, --seconds positive")
    return Config(
        backend=args.backend,
        processes=args.processes,
        tasks=args.tasks,
        seconds=args.seconds,
        seed=args.seed,
        url=args.url,
        kills=args.kills,
        replace=not args.no_replace,
        resets=not args.no_resets,
        scopes=args.scopes,
        log_dir=args.log_dir,
        min_ops=args.min_ops,
    )


def main(argv: list[str] | None = None) -> int:
    config = parse_args(argv)
    began = time.monotonic()

    def progress(text: str) -> None:
        print(f"[checker {time.monotonic() - began:6.1f} s] {text}", file=sys.stderr, flush=True)

    summary = asyncio.run(run(config, progress))
    print(json.dumps(summary, indent=2, ensure_ascii=False))
    counts = summary["violation_counts"]
    progress(
        f"{summary['acknowledged']} acknowledged updates, {summary['resets']} resets, "
        f"{summary['kills']} kills: "
        + ("no violation" if summary["ok"] else f"VIOLATIONS {counts}")
    )
    return 0 if summary["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
