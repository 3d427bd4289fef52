"""``python -m benchmarks.report [results.json]``: the results as Markdown tables.

Used to refresh the figures in ``docs/benchmarks.md`` after a full run. With several runs
(``--runs A.json B.json C.json``) it prints each comparison's median ratio over the runs,
which is what a target is judged on; with ``--before X.json ...`` too, the old code's runs
beside them (see :func:`side_by_side`).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Sequence
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


# -- several runs ------------------------------------------------------------------------


class RunRatios:
    """One comparison over several runs: each run's ratio of medians, and the verdict on
    their median (a check, such as nothing lost, must hold in every run)."""

    def __init__(self, comparisons: Sequence[dict[str, Any]]) -> None:
        first = comparisons[0]
        self.question = first["question"]
        self.title = first["title"]
        self.target = first["target"]
        self.ratios = [c["ratio"] for c in comparisons if c["ratio"] is not None]
        self.median = statistics.median(self.ratios) if self.ratios else None
        self.informational = first.get("informational")
        self.met: bool | None = None
        if self.median is not None and not self.informational:
            checks = all(all(c["checks"].values()) for c in comparisons)
            target = first["target_ratio"]
            if target is None:
                self.met = checks
            elif first["higher_is_better"]:
                self.met = checks and self.median >= target
            else:
                self.met = checks and self.median <= target

    def cell(self) -> str:
        if self.median is None:
            return "skipped"
        runs = " / ".join(f"{ratio:.2f}" for ratio in self.ratios)
        return f"**{self.median:.2f}x** ({runs})"

    def verdict(self) -> str:
        if self.met is None:
            return "n/a" if self.median is not None else ""
        return "yes" if self.met else "**no**"


def over_runs(documents: Sequence[dict[str, Any]]) -> dict[str, RunRatios]:
    """Every comparison of the runs ``documents``, by key, in the first run's order."""
    by_key: dict[str, list[dict[str, Any]]] = {}
    for document in documents:
        for comparison in document["comparisons"]:
            if not comparison["skipped"]:
                by_key.setdefault(comparison["key"], []).append(comparison)
    return {key: RunRatios(comparisons) for key, comparisons in by_key.items()}


def median_table(documents: Sequence[dict[str, Any]]) -> str:
    """The median ratio of every comparison over ``documents`` (full runs)."""
    lines = [
        "| # | comparison | ratio: median (each run) | target | met |",
        "|---|---|---|---|---|",
    ]
    for ratios in over_runs(documents).values():
        lines.append(
            f"| {ratios.question} | {ratios.title} | {ratios.cell()} | {ratios.target} "
            f"| {ratios.verdict()} |"
        )
    return "\n".join(lines)


def side_by_side(before: Sequence[dict[str, Any]], after: Sequence[dict[str, Any]]) -> str:
    """The median ratios of the old code's runs (``before``) beside the new code's."""
    old, new = over_runs(before), over_runs(after)
    lines = [
        "| # | comparison | target | before: median (each run) | after: median (each run) "
        "| met before | met after |",
        "|---|---|---|---|---|---|---|",
    ]
    for key, ratios in new.items():
        was = old.get(key)
        lines.append(
            f"| {ratios.question} | {ratios.title} | {ratios.target} "
            f"| {was.cell() if was else 'not measured'} | {ratios.cell()} "
            f"| {was.verdict() if was else ''} | {ratios.verdict()} |"
        )
    return "\n".join(lines)


def _read(path: Path) -> dict[str, Any]:
    try:
        document: dict[str, Any] = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise SystemExit(f"cannot read the results {path}: {exc}") from None
    return document


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.report",
        description="Print the Markdown tables of docs/benchmarks.md from a run's JSON.",
    )
    parser.add_argument(
        "json", nargs="?", type=Path, default=DEFAULT_JSON, help=f"a run's JSON ({DEFAULT_JSON})"
    )
    parser.add_argument(
        "--runs",
        nargs="+",
        type=Path,
        metavar="JSON",
        help="several full runs: print each comparison's median ratio over them",
    )
    parser.add_argument(
        "--before",
        nargs="+",
        type=Path,
        metavar="JSON",
        help="with --runs: the old code's runs, printed beside them",
    )
    args = parser.parse_args(argv)
    if args.before and not args.runs:
        parser.error("--before needs --runs (the new code's runs)")
    try:
        if args.runs:
            after = [_read(path) for path in args.runs]
            if args.before:
                print(side_by_side([_read(path) for path in args.before], after))
            else:
                print(median_table(after))
            return 0
        document = _read(args.json)
    except SystemExit as exc:
        print(exc, file=sys.stderr)
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
