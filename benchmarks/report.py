"""``python -m benchmarks.report [results.json]``: the results as Markdown tables.

Used to refresh the figures in ``docs/benchmarks.md`` after a full run.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from .__main__ import DEFAULT_JSON, fmt


def summary(document: dict[str, Any]) -> str:
    lines = [
        "| # | comparison | candidate | baseline | ratio (per-rep range) | target | met |",
        "|---|---|---|---|---|---|---|",
    ]
    for c in document["comparisons"]:
        if c["skipped"]:
            lines.append(f"| {c['question']} | {c['title']} | skipped: {c['skipped']} | | | | |")
            continue
        cand, base = c["results"][c["candidate"]], c["results"][c["baseline"]]
        spread = c["ratio_range"] or {}
        ratio = f"{c['ratio']:.2f}x ({spread.get('min', 0):.2f}-{spread.get('max', 0):.2f})"
        lines.append(
            f"| {c['question']} | {c['title']} | {c['candidate']}: {fmt(cand['median'])} "
            f"{c['unit']} | {c['baseline']}: {fmt(base['median'])} {c['unit']} | {ratio} "
            f"| {c['target']} | {_verdict(c)} |"
        )
    return "\n".join(lines)


def _verdict(comparison: dict[str, Any]) -> str:
    if comparison.get("informational"):
        return f"n/a: {comparison['informational']}"
    return "yes" if comparison["met"] else "**no**"


def details(document: dict[str, Any]) -> str:
    parts = []
    for c in document["comparisons"]:
        if c["skipped"]:
            continue
        parts.append(f"#### ({c['question']}) {c['title']}\n")
        parts.append(f"| variant | median {c['unit']} | min - max |")
        parts.append("|---|---|---|")
        for name, stats in c["results"].items():
            parts.append(
                f"| {name} | {fmt(stats['median'])} | {fmt(stats['min'])} - {fmt(stats['max'])} |"
            )
        extra = {k: v for k, v in c["extra"].items() if k in ("lost", "acknowledged")}
        if extra:
            parts.append(f"\n{json.dumps(extra)}")
        parts.append("")
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.report",
        description="Print the Markdown tables of docs/benchmarks.md from a run's JSON.",
    )
    parser.add_argument(
        "json", nargs="?", type=Path, default=DEFAULT_JSON, help=f"a run's JSON ({DEFAULT_JSON})"
    )
    path = parser.parse_args(argv).json
    try:
        document = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        print(f"cannot read the results {path}: {exc}", file=sys.stderr)
        return 1
    machine = document["machine"]
    print(
        f"Run {document['started_at']}, {document['seconds']:.0f} s, "
        f"{'quick' if document['quick'] else 'full'} mode; {machine['cpu']}, "
        f"{machine['cpus']} CPUs, load {machine['loadavg']}, Python {machine['python']}, "
        f"SQLite {machine['sqlite']}.\n"
    )
    print(summary(document))
    print()
    print(details(document))
    return 0


if __name__ == "__main__":
    sys.exit(main())
