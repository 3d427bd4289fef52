"""The concurrency checker (``python -m tests.reliability.checker``): a short seeded run on
every backend finds no violation, and the check itself reports each kind of violation it
is fed.

The long run is ``.venv/bin/python -m tests.reliability.checker --backend sqlite
--processes 4 --tasks 20 --seconds 60 --seed 7`` (see docs/reliability.md);
``NOETIC_CHECKER_SEED`` changes the seed of the short runs here.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from conftest import require_postgres, require_redis, run_python

from .checker.check import check
from .checker.log import LogWriter, Record, read_records
from .checker.scenario import Scope, make_uid, uid_scope

ROOT = Path(__file__).resolve().parents[2]
SEED = os.environ.get("NOETIC_CHECKER_SEED", "7")
SHORT_RUN = ["--tasks", "8", "--seconds", "3", "--seed", SEED, "--min-ops", "150"]


def run_checker(*args: str) -> tuple[dict[str, Any], str]:
    """The checker's summary and its progress output (stderr)."""
    result = run_python("-m", "tests.reliability.checker", *args, cwd=ROOT, timeout=300)
    assert result.stdout.strip(), f"no summary (exit {result.returncode}):\n{result.stderr}"
    summary: dict[str, Any] = json.loads(result.stdout)
    assert result.returncode == (0 if summary["ok"] else 1), result.stderr
    return summary, result.stderr


@pytest.mark.slow
@pytest.mark.parametrize(
    ("backend", "processes"),
    [
        ("memory", "1"),
        ("sqlite", "4"),
        pytest.param("postgres", "4", marks=pytest.mark.postgres),
        pytest.param("redis", "4", marks=pytest.mark.redis),
    ],
)
def test_no_acknowledged_update_is_lost_and_no_scope_is_crossed(
    backend: str, processes: str
) -> None:
    """Workers write six overlapping scopes through the tool, api and own-loop paths, with
    bad updates, cancellations, tiny write timeouts, CLI resets and SIGKILLs: every
    acknowledged update is stored unless a later reset deleted it, no reset note comes
    back, no key lands in another scope, and every outcome has its event."""
    if backend == "postgres":
        require_postgres()
    if backend == "redis":
        require_redis()
    summary, progress = run_checker("--backend", backend, "--processes", processes, *SHORT_RUN)
    examples = "\n".join(json.dumps(v) for v in summary["violations"][:12])
    assert summary["violations"] == [], (
        f"{summary['violations_total']} violation(s) {summary['violation_counts']} "
        f"(seed {summary['seed']}, worker seeds {summary['worker_seeds']}), for example:\n"
        f"{examples}\n{progress}"
    )
    assert summary["acknowledged"] > 200, summary
    assert summary["acknowledged_seen_stored"] > 100, summary  # the reads checked them
    assert summary["refusals"] > 0, summary
    assert summary["resets"] > 0, summary
    if backend != "memory":
        assert summary["kills"] >= 1, summary
        assert summary["unknown"] > 0, summary  # cancellations and timeouts did strike


# -- the check itself, on synthetic logs -----------------------------------------------------

T1, R1, AB = Scope("thread", "u1"), Scope("resource", "u1"), Scope("thread", "a/b")


def op(
    scope: Scope,
    seq: int,
    start: float,
    end: float,
    *,
    outcome: str = "acked",
    via: str = "api",
    bad: bool = False,
    spurious: bool = False,
) -> Record:
    return {
        "t": "op",
        "w": "w0",
        "uid": make_uid("w0", 0, seq, scope),
        "kind": scope.kind,
        "scope": scope.id,
        "via": via,
        "bad": bad,
        "channel": f"{'handle' if via == 'handle' else 'harness'}:{scope.kind}",
        "cancel": "none",
        "outcome": outcome,
        "reason": "",
        "error": "",
        "spurious": spurious,
        "unexpected": False,
        "start": start,
        "end": end,
    }


def reset(scope: Scope, start: float, end: float) -> Record:
    return {"t": "reset", "kind": scope.kind, "scope": scope.id, "start": start, "end": end}


def final(scope: Scope, *records: Record, extra: dict[str, Any] | None = None) -> Record:
    """The read at the end (a read with no times is read after everything else)."""
    acks = {record["uid"]: 1 for record in records}
    return {
        "t": "read",
        "kind": scope.kind,
        "scope": scope.id,
        "state": {"acks": acks | (extra or {})},
    }


def kinds(records: list[Record]) -> list[tuple[str, str, str | None]]:
    return [(v.kind, v.scope, v.uid) for v in check(records).violations]


def test_a_clean_log_has_no_violation() -> None:
    """Acknowledged updates stored, one deleted by a later reset, unknown ones either way."""
    kept, deleted = op(T1, 0, 1.0, 2.0), op(T1, 1, 1.5, 2.5)  # before the reset
    maybe = op(T1, 2, 2.6, 3.5)  # overlaps the reset: may be present or not
    lost_maybe = op(T1, 3, 5.0, 6.0, outcome="unknown")
    after = op(T1, 4, 6.0, 7.0)
    records = [kept, deleted, maybe, lost_maybe, after, reset(T1, 3.0, 4.0), final(T1, after)]
    assert kinds(records) == []
    assert check(records).stats["acknowledged"] == 4


def test_a_lost_update_is_reported() -> None:
    """An update acknowledged after the last reset of its scope that is not stored."""
    stored, lost = op(T1, 0, 5.0, 6.0), op(T1, 1, 5.5, 6.5, via="tool")
    records = [reset(T1, 1.0, 2.0), stored, lost, final(T1, stored)]
    assert sorted(kinds(records)) == [
        ("lost_update", "thread:u1", lost["uid"]),
        ("missing_applied_event", "thread:u1", lost["uid"]),  # the tool call had no event
    ]
    assert check(records).stats["lost"] == 1


def test_a_lost_update_names_the_other_scopes_reset_meanwhile() -> None:
    """A reset of ``thread:a`` must leave ``thread:a/b`` alone; the violation names the
    other scopes reset meanwhile, as suspects."""
    lost = op(AB, 0, 1.0, 2.0)
    report = check([lost, reset(Scope("thread", "a"), 3.0, 4.0), final(AB)])
    [violation] = report.violations
    assert (violation.kind, violation.scope, violation.uid) == (
        "lost_update",
        "thread:a/b",
        lost["uid"],
    )
    assert "thread:a" in violation.detail


def test_a_resurrected_key_is_reported() -> None:
    """An update acknowledged before a reset of its scope started is still stored."""
    back = op(T1, 0, 1.0, 2.0)
    later = op(T1, 1, 5.0, 6.0)
    records = [back, later, reset(T1, 3.0, 4.0), final(T1, back, later)]
    assert kinds(records) == [("resurrected", "thread:u1", back["uid"])]


def read(scope: Scope, start: float, *records: Record) -> Record:
    """A read while the workers run, taking 0.1 s."""
    return {**final(scope, *records), "start": start, "end": start + 0.1, "final": False}


def test_reads_during_the_run_are_checked_too() -> None:
    """A later reset hides nothing: a read between the update and the reset must show it,
    and a read between the reset and the next write must not show what the reset deleted."""
    early, late = op(T1, 0, 1.0, 2.0), op(T1, 1, 1.0, 1.5)
    resets = [reset(T1, 5.0, 6.0), reset(T1, 9.0, 10.0)]
    reads = [read(T1, 3.0, late), read(T1, 7.0, early), final(T1)]
    report = check([early, late, *resets, *reads])
    assert [(v.kind, v.uid) for v in report.violations] == [
        ("lost_update", early["uid"]),  # the read at 3.0 missed it
        ("resurrected", early["uid"]),  # the read at 7.0 shows it after the reset at 5.0
    ]
    assert "missing from the read at 3.000" in report.violations[0].detail
    assert report.stats["acknowledged_seen_stored"] == 2
    assert report.stats["acknowledged_seen_deleted"] == 2


def test_a_read_overlapping_a_reset_may_or_may_not_show_an_update() -> None:
    written = op(T1, 0, 1.0, 2.0)
    resets = [reset(T1, 3.0, 4.0)]
    assert kinds([written, *resets, read(T1, 3.5, written), read(T1, 3.6)]) == []


def test_a_crossed_scope_is_reported() -> None:
    """Thread ``u1`` and resource ``u1`` are two scopes: a key sent to one, found in the
    other, is reported where it was found."""
    sent = op(T1, 0, 1.0, 2.0)
    records = [sent, final(T1, sent), final(R1, sent)]
    assert kinds(records) == [("crossed_scope", "resource:u1", sent["uid"])]


def test_a_refused_update_that_is_stored_is_reported() -> None:
    bad = op(T1, 0, 1.0, 2.0, outcome="refused", bad=True)
    records = [bad, final(T1, extra={bad["uid"]: "not-an-int"})]
    assert sorted(kinds(records)) == [
        ("bad_value", "thread:u1", bad["uid"]),
        ("refused_present", "thread:u1", bad["uid"]),
    ]


def test_wrong_answers_to_the_caller_are_reported() -> None:
    accepted = op(T1, 0, 1.0, 2.0, bad=True)
    refused = op(T1, 1, 1.0, 2.0, outcome="refused")
    spurious = op(T1, 2, 1.0, 2.0, outcome="unknown", spurious=True)
    records = [accepted, refused, spurious, final(T1, accepted)]
    assert sorted(kinds(records)) == [
        ("bad_update_accepted", "thread:u1", accepted["uid"]),
        ("good_update_refused", "thread:u1", refused["uid"]),
        ("refused_present", "thread:u1", accepted["uid"]),
        ("spurious_cancel", "thread:u1", spurious["uid"]),
    ]


def test_a_key_nobody_sent_is_reported() -> None:
    records = [final(T1, extra={"w9.0.0@thread:u1": 1, "stray": 1})]
    assert kinds(records) == [
        ("foreign_key", "thread:u1", "w9.0.0@thread:u1"),
        ("foreign_key", "thread:u1", "stray"),
    ]


def event(
    kind: str, scope: Scope, hook: str, *, call_id: str | None = None, reason: str = ""
) -> Record:
    return {
        "t": "event",
        "w": "w0",
        "channel": f"harness:{scope.kind}",
        "event": kind,
        "scope_key": scope.id,
        "hook": hook,
        "call_id": call_id,
        "reason": reason,
    }


def test_events_are_matched_to_what_the_caller_saw() -> None:
    """Tool calls by call id (and the event must name the call's scope); api writes by
    count per channel and scope, in a worker that ran to its end."""
    done = {"t": "worker", "w": "w0", "status": "done"}
    tool_ok = op(T1, 0, 1.0, 2.0, via="tool")
    tool_refused = op(T1, 1, 1.0, 2.0, via="tool", outcome="refused", bad=True)
    api_ok = op(T1, 2, 1.0, 2.0)
    api_refused = op(T1, 3, 1.0, 2.0, outcome="refused", bad=True)
    writes = [tool_ok, tool_refused, api_ok, api_refused, final(T1, tool_ok, api_ok)]
    events = [
        event("update_applied", T1, "tool", call_id=tool_ok["uid"]),
        event("update_rejected", T1, "tool", call_id=tool_refused["uid"], reason="schema"),
        event("update_applied", T1, "api"),
        event("update_rejected", T1, "api", reason="schema"),
    ]
    assert kinds([*writes, *events, done]) == []
    crossed = {**events[0], "scope_key": "a"}
    assert kinds([*writes, crossed, *events[1:], done]) == [
        ("event_scope_mismatch", "thread:u1", tool_ok["uid"])
    ]
    assert sorted(kinds([*writes, *events[2:], done])) == [
        ("missing_applied_event", "thread:u1", tool_ok["uid"]),
        ("missing_rejected_event", "thread:u1", tool_refused["uid"]),
    ]
    assert kinds([*writes, *events[:3], done]) == [("rejected_event_count", "thread:u1", None)]
    assert kinds([*writes, *events[:3]]) == []  # a worker killed before its end: not counted


def test_a_revision_named_by_two_applied_writes_of_one_scope_is_reported() -> None:
    """Revisions of one scope never repeat, a reset between the writes included; the
    same number in another scope, or of the other kind, is another revision."""
    resource = Scope("resource", T1.id)
    writes = [
        {**event("update_applied", T1, "api"), "revision": 1},
        {**event("update_applied", T1, "tool", call_id="c1"), "revision": 2},
        {**event("update_applied", resource, "api"), "revision": 1},
    ]
    assert kinds(writes) == []
    after_reset = {**event("update_applied", T1, "api"), "w": "w1", "revision": 1}
    assert kinds([*writes, after_reset]) == [("repeated_revision", "thread:u1", None)]


def test_the_state_is_checked_as_read() -> None:
    """A state the schema gate discarded (at the end or during the run) is reported."""
    discarded = {**final(T1), "discarded": "stored state does not fit the schema"}
    assert kinds([discarded]) == [("state_discarded", "thread:u1", None)]
    assert kinds([event("state_discarded", R1, "")]) == [("state_discarded", "resource:u1", None)]
    assert kinds([{**final(T1), "state": {"acks": []}}]) == [("bad_state", "thread:u1", None)]


def test_uids_name_their_scope_even_with_tricky_ids() -> None:
    for scope in (Scope("thread", "a/b"), Scope("thread", "x%2Fy"), Scope("resource", "u1:@")):
        assert uid_scope(make_uid("w3", 2, 17, scope)) == scope
    assert uid_scope("stray") is None


def test_the_log_skips_a_torn_last_line_only(tmp_path: Path) -> None:
    """A kill can cut the last line short; a torn line anywhere else is an error."""
    path = tmp_path / "w0.jsonl"
    writer = LogWriter(path)
    writer.write({"t": "begin", "uid": "x"})
    writer.close()
    with path.open("ab") as stream:
        stream.write(b'{"t": "op", "ui')
    assert list(read_records(path)) == [{"t": "begin", "uid": "x"}]
    with path.open("ab") as stream:
        stream.write(b"\n" + b'{"t": "end"}\n')
    with pytest.raises(ValueError, match="not JSON"):
        list(read_records(path))


def test_help_prints_the_options_and_their_defaults() -> None:
    """``--help`` works: the default scopes hold ``%2F``, which argparse must not read as
    a format directive."""
    from .checker.scenario import SCOPES, format_scopes

    wide = {**os.environ, "COLUMNS": "400"}  # argparse would split the scopes' long word
    result = run_python("-m", "tests.reliability.checker", "--help", cwd=ROOT, env=wide)

    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert "--scopes" in result.stdout
    assert f"(default {format_scopes(SCOPES)})" in result.stdout
