"""``python -m benchmarks.report --runs ... [--before ...]``: targets judged on the median of
several full runs, and the old code's runs beside the new code's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from conftest import run_python

ROOT = Path(__file__).resolve().parent.parent


def _run(tmp_path: Path, name: str, ratios: dict[str, float], lost: int = 0) -> Path:
    """A run's JSON with a cost comparison (target <= 1.5x) and a rate one (>= 1.0x)."""

    def comparison(key: str, higher: bool, target: float) -> dict[str, Any]:
        return {
            "question": 2 if not higher else 3,
            "key": key,
            "title": f"the {key} comparison",
            "target": f"target for {key}",
            "target_ratio": target,
            "higher_is_better": higher,
            "ratio": ratios[key],
            "checks": {"0 lost": lost == 0} if higher else {},
            "informational": None,
            "skipped": None,
        }

    path = tmp_path / f"{name}.json"
    document = {"comparisons": [comparison("cost", False, 1.5), comparison("rate", True, 1.0)]}
    path.write_text(json.dumps(document))
    return path


def _report(*args: str | Path) -> str:
    done = run_python("-m", "benchmarks.report", *map(str, args), cwd=ROOT)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_target_is_judged_on_the_median_of_the_runs(tmp_path: Path) -> None:
    runs = [
        _run(tmp_path, "a", {"cost": 1.4, "rate": 0.9}),
        _run(tmp_path, "b", {"cost": 1.7, "rate": 1.2}),  # one run's miss does not decide
        _run(tmp_path, "c", {"cost": 1.45, "rate": 1.1}),
    ]
    rows = {line.split(" | ")[1]: line for line in _report("--runs", *runs).splitlines()[2:]}
    assert "**1.45x** (1.40 / 1.70 / 1.45)" in rows["the cost comparison"]
    assert rows["the cost comparison"].endswith("| yes |")
    assert "**1.10x** (0.90 / 1.20 / 1.10)" in rows["the rate comparison"]
    assert rows["the rate comparison"].endswith("| yes |")


def test_a_check_must_hold_in_every_run(tmp_path: Path) -> None:
    runs = [
        _run(tmp_path, "a", {"cost": 1.0, "rate": 2.0}),
        _run(tmp_path, "b", {"cost": 1.0, "rate": 2.0}, lost=1),
        _run(tmp_path, "c", {"cost": 1.0, "rate": 2.0}),
    ]
    rate = [line for line in _report("--runs", *runs).splitlines() if "rate" in line]
    assert rate[0].endswith("| **no** |")


def test_before_and_after_side_by_side(tmp_path: Path) -> None:
    before = [_run(tmp_path, f"old{i}", {"cost": 3.0 + i / 10, "rate": 0.4}) for i in range(3)]
    after = [_run(tmp_path, f"new{i}", {"cost": 1.2, "rate": 1.05}) for i in range(3)]
    out = _report("--runs", *after, "--before", *before)
    cost = next(line for line in out.splitlines() if "cost" in line)
    old, new = "**3.10x** (3.00 / 3.10 / 3.20)", "**1.20x** (1.20 / 1.20 / 1.20)"
    assert f"| {old} | {new} | **no** | yes |" in cost


def test_before_without_runs_is_a_usage_error(tmp_path: Path) -> None:
    done = run_python(
        "-m",
        "benchmarks.report",
        "--before",
        str(_run(tmp_path, "a", {"cost": 1, "rate": 1})),
        cwd=ROOT,
    )
    assert done.returncode == 2
    assert "--before needs --runs" in done.stderr


def test_instructions_names_its_cases_when_asked_for_another() -> None:
    """`python -m benchmarks.instructions` (valgrind, minutes: not run here) refuses an
    unknown case with the list of cases, before starting any child."""
    done = run_python("-m", "benchmarks.instructions", "--only", "turn_memory,nope", cwd=ROOT)
    assert done.returncode == 2
    assert "unknown case nope; the cases are bare, turn_memory" in done.stderr
