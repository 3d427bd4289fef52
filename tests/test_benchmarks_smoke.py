"""The benchmark suite runs end to end in quick mode and computes every comparison."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import IN_CI, postgres_available, redis_available, run_python

ROOT = Path(__file__).resolve().parent.parent
EXPECTED = {
    "overhead_memory",
    "sqlite_single",
    "sqlite_concurrent_one_scope",
    "sqlite_concurrent_many_scopes",
    "peer_langgraph",
    "state_size_update_on_memory",
    "state_size_recall",
    "state_size_update_on_sqlite",
    "memory_growth_memory",
    "memory_growth_sqlite",
    "postgres_single",
    "postgres_concurrent_one_scope",
    "postgres_concurrent_many_scopes",
    "redis_single",
    "redis_concurrent_one_scope",
    "redis_concurrent_many_scopes",
    "http_load",
    "journal_sqlite_single",
    "journal_sqlite_concurrent_one_scope",
    "journal_sqlite_concurrent_many_scopes",
    "journal_peer_workload",
    "journal_postgres_single",
    "journal_storage",
    "prompt_cache_harness_responses",
    "prompt_cache_harness_chat",
    "prompt_cache_harness_anthropic",
    "prompt_cache_pydantic_ai",
    "prompt_cache_agents_sdk",
}
# Where threads can be pinned, (2) and the journal's (2) also report the unpinned run.
UNPINNED = {"sqlite_single_unpinned", "journal_sqlite_single_unpinned"}


def _peer_missing() -> str | None:
    try:
        import langgraph.store.sqlite.aio  # noqa: F401
    except ImportError as exc:
        return f"langgraph-checkpoint-sqlite is not installed ({exc})"
    return None


@pytest.mark.slow
def test_quick_benchmarks_compute_every_comparison(tmp_path: Path) -> None:
    """`python -m benchmarks --quick --json FILE` exits 0 and writes every comparison with
    numbers: a positive median for every variant and a finite ratio. Only the peer (without
    langgraph-checkpoint-sqlite) and PostgreSQL and Redis (without a server, outside CI) may be
    skipped,
    and then with a reason."""
    out = tmp_path / "quick.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("NOETIC_SCRATCHPAD_STORAGE", None)
    completed = run_python(
        "-m", "benchmarks", "--quick", "--json", str(out), cwd=ROOT, env=env, timeout=240
    )
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-3000:]
    document = json.loads(out.read_text())
    assert document["quick"] is True
    assert document["errors"] == []
    assert document["machine"]["cpus"] >= 1
    by_key = {c["key"]: c for c in document["comparisons"]}
    assert set(by_key) - UNPINNED == EXPECTED

    allowed_skips: dict[str, str | None] = {"peer_langgraph": _peer_missing()}
    pg_missing = None if IN_CI else postgres_available()
    for key in EXPECTED:
        if "postgres" in key:
            allowed_skips[key] = pg_missing
    redis_missing = None if IN_CI else redis_available()
    for key in EXPECTED:
        if key.startswith("redis"):
            allowed_skips[key] = redis_missing
    for key, comparison in sorted(by_key.items()):
        if comparison["skipped"]:
            reason = allowed_skips.get(key)
            assert reason is not None, f"{key} skipped without cause: {comparison['skipped']}"
            print(f"{key} skipped: {reason}")
            continue
        assert comparison["results"], key
        for name, stats in comparison["results"].items():
            assert stats["median"] > 0, (key, name)
            assert stats["min"] <= stats["median"] <= stats["max"], (key, name)
        assert comparison["candidate"] in comparison["results"], key
        assert comparison["baseline"] in comparison["results"], key
        assert comparison["ratio"] is not None, key
        assert 0 < comparison["ratio"] < float("inf"), key
        if comparison["informational"]:
            assert comparison["met"] is None, key
        else:
            assert isinstance(comparison["met"], bool), key
        if "lost" in comparison["extra"]:
            assert all(isinstance(v, int) for v in comparison["extra"]["lost"].values()), key


def test_the_hop_count_follows_one_tool_call_from_the_parse_to_its_event() -> None:
    """``python -m benchmarks.hops`` traces one update from the adapter to UpdateApplied."""
    result = run_python("-m", "benchmarks.hops", "--verbose", cwd=ROOT)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split()[1] == "noetic_scratchpad.adapters.openai"  # the parse comes first
    assert lines[-3].endswith("noetic_scratchpad.events.bus.emit")  # the event comes last
    assert lines[-2].endswith(" modules")
    assert int(lines[-2].split()[0]) == len(lines) - 2
    # Issue 24: at most half of the 59 hops the issue counted before the redesign.
    assert int(lines[-2].split()[0]) <= 29, result.stdout


def test_a_core_lending_its_group_costs_no_more_calls_than_the_fast_path() -> None:
    """``python -m benchmarks.calls``: a write through a core, its worker a task of the
    core's group woken per burst, makes no more Python calls than a write on a backend
    alone (a task per burst); an anyio task per burst would make about 30% more."""
    result = run_python("-m", "benchmarks.calls", "--updates", "50", cwd=ROOT)
    assert result.returncode == 0, result.stderr
    figures = {
        line.rsplit(None, 1)[0].strip(): float(line.rsplit(None, 1)[1])
        for line in result.stdout.splitlines()[1:]
    }
    through_core = figures["through an open ScratchpadCore"]
    assert through_core <= figures["on a backend, no group lent"], result.stdout


@pytest.mark.parametrize(
    "args",
    [["--quick"], ["--only", "prompt_cache"], ["--history-limit", "0", "--only", "prompt_cache"]],
    ids=["quick", "only", "history-limit"],
)
def test_a_partial_run_leaves_the_committed_full_run_alone(
    args: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`benchmarks/results/latest.json` holds the last full run, which the docs quote: a
    run of a subset, in quick mode or with another journal writes it only when `--json`
    names it, and says so."""
    import benchmarks.__main__ as bench

    monkeypatch.setenv(bench.HISTORY_LIMIT_ENV, "")
    monkeypatch.delenv(bench.HISTORY_LIMIT_ENV)  # what main sets goes at the end
    latest = tmp_path / "latest.json"
    latest.write_text("the full run\n")
    monkeypatch.setattr(bench, "DEFAULT_JSON", latest)
    monkeypatch.setattr(bench, "MODULES", {"prompt_cache": bench.MODULES["prompt_cache"]})
    monkeypatch.setattr(bench, "run_all", _no_comparisons)
    assert bench.main(args) == 0
    assert latest.read_text() == "the full run\n"
    assert (
        f"not saved: {latest} keeps the last full run; --json PATH saves" in capsys.readouterr().out
    )
    assert bench.main([*args, "--json", str(tmp_path / "mine.json")]) == 0
    assert json.loads((tmp_path / "mine.json").read_text())["comparisons"] == []


def test_a_full_run_is_saved_as_the_latest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import benchmarks.__main__ as bench

    latest = tmp_path / "latest.json"
    monkeypatch.setattr(bench, "DEFAULT_JSON", latest)
    monkeypatch.setattr(bench, "run_all", _no_comparisons)
    assert bench.main([]) == 0
    assert json.loads(latest.read_text())["command"] == "python -m benchmarks "


async def _no_comparisons(names: list[str], cfg: object) -> tuple[list[object], list[str]]:
    return [], []
