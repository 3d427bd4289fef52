"""The verdict: a pure function of the log records.

The states are read many times while the workers run (``read`` records, each with its
start and end) and once at the end. Against the resets of each scope (start and end
times; CLOCK_MONOTONIC is one clock for every process of a Linux machine):

``lost_update``
    a read that started after an update was acknowledged, with no reset of its scope that
    could have run in between, does not show it;
``resurrected``
    a read that started after a (successful) reset that itself started after an update was
    acknowledged still shows it: a deleted note came back;
``crossed_scope``
    a key names another scope than the one it is stored in;
``refused_present`` / ``bad_value`` / ``foreign_key``
    a refused update is stored, a stored value is not ``1``, a stored key was never sent;
``bad_update_accepted`` / ``good_update_refused``
    the caller was told the opposite of what the schema says;
``spurious_cancel`` / ``unexpected_error``
    a write failed with ``CancelledError`` in a task that no one cancelled (another task's
    cancellation leaked into it), or with an exception the contract does not name;
``missing_applied_event`` / ``missing_rejected_event`` / ``event_scope_mismatch``
    on the tool path (matched by call id): an acknowledged call without ``UpdateApplied``,
    a refused one without ``UpdateRejected``, or an event naming another scope;
``applied_event_count`` / ``rejected_event_count``
    on the api path (``update_state`` and own-loop handles, matched by count per channel
    and scope, in workers that ran to their end): acknowledged writes against
    ``UpdateApplied`` events, refusals against ``UpdateRejected`` events;
``repeated_revision``
    two ``UpdateApplied`` events of one scope name the same revision: a revision must name
    one state of a scope for good, across resets too;
``state_discarded`` / ``bad_state``
    a stored state failed the schema when it was read (by a worker or a checker read), or
    a read state is not ``{"acks": {...}}``.

Updates whose outcome is ``unknown`` (cancelled, timed out, unconfirmed, in flight at a
kill) may be present or absent, but must still be in their own scope. Each violation is
reported once, at the first read that shows it.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from .log import Record
from .scenario import Scope, uid_scope

#: Rejection reasons that mean "the update itself is wrong" (nothing was written).
REFUSAL_REASONS = frozenset({"schema", "malformed", "too_large", "read_only"})


@dataclass(frozen=True, slots=True)
class Violation:
    kind: str
    scope: str
    uid: str | None
    detail: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


Add = Callable[[Violation], None]


@dataclass(slots=True)
class Report:
    violations: list[Violation] = field(default_factory=list)
    stats: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.violations

    def counts(self) -> dict[str, int]:
        return dict(Counter(violation.kind for violation in self.violations))


def _scope(record: Mapping[str, Any]) -> Scope:
    return Scope("thread" if record["kind"] == "thread" else "resource", str(record["scope"]))


@dataclass(slots=True)
class _Log:
    """The records of a run, sorted by what they are."""

    ops: dict[str, Record] = field(default_factory=dict)
    begun: dict[str, Record] = field(default_factory=dict)
    events: list[Record] = field(default_factory=list)
    resets: defaultdict[Scope, list[Record]] = field(default_factory=lambda: defaultdict(list))
    reads: defaultdict[Scope, list[Record]] = field(default_factory=lambda: defaultdict(list))
    killed: set[str] = field(default_factory=set)
    done: set[str] = field(default_factory=set)

    @classmethod
    def sort(cls, records: Iterable[Mapping[str, Any]]) -> _Log:
        log = cls()
        for raw in records:
            record = dict(raw)
            kind = record.get("t")
            if kind == "op":
                log.ops[record["uid"]] = record
            elif kind == "begin":
                log.begun[record["uid"]] = record
            elif kind == "event":
                log.events.append(record)
            elif kind == "reset":
                log.resets[_scope(record)].append(record)
            elif kind == "read":
                log.reads[_scope(record)].append(record)
            elif kind == "kill":
                log.killed.add(record["w"])
            elif kind == "worker" and record.get("status") == "done":
                log.done.add(record["w"])
        return log


def check(records: Iterable[Mapping[str, Any]]) -> Report:
    """Every violation the records show, and the figures of the run."""
    log = _Log.sort(records)
    report = Report()
    add = report.violations.append
    stored, coverage = _check_reads(log, add)
    _check_outcomes(log, add)
    _check_discarded(log, add)
    _check_tool_events(log, add)
    _check_api_events(log, add)
    _check_revisions(log, add)
    report.stats = _stats(log, report, stored, coverage)
    return report


@dataclass(slots=True)
class _Coverage:
    """The acknowledged updates some read was required to show, or required not to show."""

    present: set[str] = field(default_factory=set)
    absent: set[str] = field(default_factory=set)
    lost: set[str] = field(default_factory=set)  # reported already
    resurrected: set[str] = field(default_factory=set)


def _check_reads(log: _Log, add: Add) -> tuple[dict[Scope, Any], _Coverage]:
    """Every read of every scope; each violation reported once, at the first read showing it.
    Returns the last read of each scope and what the reads covered."""
    reported: set[tuple[str, str, str | None]] = set()

    def once(violation: Violation) -> None:
        key = (violation.kind, violation.scope, violation.uid)
        if key not in reported:
            reported.add(key)
            add(violation)

    acked = _acknowledged(log)
    last: dict[Scope, Any] = {}
    coverage = _Coverage()
    checked: set[tuple[Scope, str]] = set()  # keys stored as 1 that a read showed already
    for scope, reads in sorted(log.reads.items()):
        for read in sorted(reads, key=lambda read: read.get("start", math.inf)):
            acks = _acks(read, scope, once)
            if acks is None:
                continue
            last[scope] = acks
            fresh = {
                uid: value
                for uid, value in acks.items()
                if value != 1 or (scope, uid) not in checked
            }
            checked.update((scope, uid) for uid, value in fresh.items() if value == 1)
            _check_keys(log, scope, fresh, once)
            _check_against_resets(log, acked[scope], read, acks, coverage, add)
    return last, coverage


#: An acknowledged update: its end, uid, when a reset that may have deleted it started,
#: when a reset that surely deleted it ended (see :func:`_reset_window`), its record.
_Acked = tuple[float, str, float, float, Record]


def _acknowledged(log: _Log) -> defaultdict[Scope, list[_Acked]]:
    """The acknowledged good updates of each scope, by the time they were acknowledged."""
    acked: defaultdict[Scope, list[_Acked]] = defaultdict(list)
    for op in log.ops.values():
        if op["outcome"] == "acked" and not op["bad"]:
            may_delete, deleted = _reset_window(log, op)
            acked[_scope(op)].append((op["end"], op["uid"], may_delete, deleted, op))
    for updates in acked.values():
        updates.sort(key=lambda update: update[0])
    return acked


def _acks(read: Record, scope: Scope, add: Add) -> dict[str, Any] | None:
    """The ``acks`` of a read state, or ``None`` (reported) when it has no usable shape."""
    if read.get("discarded"):
        add(Violation("state_discarded", str(scope), None, str(read["discarded"])))
    state = read.get("state")
    acks = state.get("acks", {}) if isinstance(state, dict) else None
    if not isinstance(acks, dict):
        add(Violation("bad_state", str(scope), None, f"not {{'acks': {{...}}}}: {state!r:.200}"))
        return None
    return acks


def _check_keys(log: _Log, scope: Scope, acks: Mapping[str, Any], add: Add) -> None:
    """Each stored key: sent to this scope, by an operation that was not refused, as 1."""
    where = str(scope)
    for uid, value in acks.items():
        sent_to = uid_scope(uid)
        if sent_to is None:
            add(Violation("foreign_key", where, uid, "not a checker key"))
            continue
        if sent_to != scope:
            add(Violation("crossed_scope", where, uid, f"sent to {sent_to}, found in {scope}"))
        if value != 1:
            add(Violation("bad_value", where, uid, f"stored value {value!r}"))
        op = log.ops.get(uid) or log.begun.get(uid)
        if op is None:
            add(Violation("foreign_key", where, uid, "no operation sent this key"))
        elif op["bad"] or op.get("outcome") == "refused":
            add(Violation("refused_present", where, uid, f"refused via {op['via']}"))


def _reset_window(log: _Log, op: Record) -> tuple[float, float]:
    """For an acknowledged update: when the first reset of its scope that could have
    deleted it started (one that ended after the update started), and when the first reset
    that surely deleted it ended (one that started after the update was acknowledged)."""
    resets = log.resets.get(_scope(op), [])
    may_delete = min((r["start"] for r in resets if r["end"] > op["start"]), default=math.inf)
    deleted = min(
        (r["end"] for r in resets if r.get("ok", True) and r["start"] > op["end"]),
        default=math.inf,
    )
    return may_delete, deleted


def _check_against_resets(
    log: _Log,
    acked: list[_Acked],
    read: Record,
    acks: Mapping[str, Any],
    coverage: _Coverage,
    add: Add,
) -> None:
    """A read that began after an update was acknowledged, with no reset of its scope in
    between, must show it; a read that began after a reset that followed it must not.
    Each update is reported once, at the first read that shows the fault. (The hot loop of
    the check: a long run has thousands of reads and tens of thousands of updates.)"""
    read_start, read_end = read.get("start", math.inf), read.get("end", math.inf)
    for end, uid, may_delete, deleted, op in acked:
        if end >= read_start:
            break  # acknowledged after the read began: this read need not show it
        if may_delete >= read_end:
            coverage.present.add(uid)
            if uid not in acks and uid not in coverage.lost:
                coverage.lost.add(uid)
                add(Violation("lost_update", str(_scope(op)), uid, _lost_detail(log, op, read)))
        if deleted < read_start:
            coverage.absent.add(uid)
            if uid in acks and uid not in coverage.resurrected:
                coverage.resurrected.add(uid)
                detail = (
                    f"acked via {op['via']} at {end:.3f}; a reset of {_scope(op)} ended at "
                    f"{deleted:.3f}; still stored in the read at {_when(read)}"
                )
                add(Violation("resurrected", str(_scope(op)), uid, detail))


def _lost_detail(log: _Log, op: Record, read: Record) -> str:
    """Where a lost update was acknowledged, which read missed it, and which *other* scopes
    were reset meanwhile: a hint, not a verdict (a reset must delete its own scope only, so
    one of them may have taken the update with it; or two writers lost it)."""
    scope = _scope(op)
    detail = (
        f"acked via {op['via']} ({op['channel']}) at [{op['start']:.3f}, {op['end']:.3f}], "
        f"missing from the read at {_when(read)}"
    )
    read_end = read.get("end", math.inf)
    suspects = sorted(
        {
            str(other)
            for other, resets in log.resets.items()
            if other != scope
            for reset in resets
            if reset["end"] > op["start"] and reset["start"] < read_end
        }
    )
    if suspects:
        detail += f"; other scopes reset meanwhile: {', '.join(suspects)}"
    return detail


def _when(read: Record) -> str:
    return "the end" if read.get("final", "start" not in read) else f"{read['start']:.3f}"


def _check_outcomes(log: _Log, add: Add) -> None:
    for uid, op in log.ops.items():
        where = str(_scope(op))
        if op["bad"] and op["outcome"] == "acked":
            add(Violation("bad_update_accepted", where, uid, f"via {op['via']}"))
        if not op["bad"] and op["outcome"] == "refused":
            add(Violation("good_update_refused", where, uid, f"{op['reason']}: {op['error']}"))
        if op.get("spurious"):
            add(
                Violation(
                    "spurious_cancel",
                    where,
                    uid,
                    f"via {op['via']} ({op['channel']}, cancel={op['cancel']}): {op['error']}",
                )
            )
        if op.get("unexpected"):
            add(Violation("unexpected_error", where, uid, f"via {op['via']}: {op['error']}"))


def _check_discarded(log: _Log, add: Add) -> None:
    """A stored state the schema gate threw away while the workers ran."""
    for event in log.events:
        if event["event"] == "state_discarded":
            where = f"{event['channel'].split(':')[1]}:{event['scope_key']}"
            add(Violation("state_discarded", where, None, f"read by {event['w']} during the run"))


def _check_tool_events(log: _Log, add: Add) -> None:
    """Tool calls against the events carrying their call id."""
    by_call: defaultdict[tuple[str, str], list[Record]] = defaultdict(list)
    for event in log.events:
        if event.get("call_id"):
            by_call[event["w"], event["call_id"]].append(event)
    for uid, op in log.ops.items():
        if op["via"] != "tool" or op["outcome"] == "unknown":
            continue
        where = str(_scope(op))
        wanted = "update_applied" if op["outcome"] == "acked" else "update_rejected"
        found = [e for e in by_call.get((op["w"], uid), []) if e["event"] == wanted]
        if not found:
            kind = (
                "missing_applied_event" if wanted == "update_applied" else "missing_rejected_event"
            )
            add(Violation(kind, where, uid, f"{op['outcome']} tool call without {wanted}"))
        for event in found:
            if event["scope_key"] != op["scope"]:
                add(
                    Violation(
                        "event_scope_mismatch",
                        where,
                        uid,
                        f"{event['event']} names scope key {event['scope_key']!r}",
                    )
                )


def _check_api_events(log: _Log, add: Add) -> None:
    """``update_state`` and handle writes against the api events of their channel, counted
    per scope, in workers that ran to their end (a killed one may have emitted the event of
    a write whose end it never logged)."""
    seen: Counter[tuple[str, str, str, str]] = Counter()
    emitted: Counter[tuple[str, str, str, str]] = Counter()
    for op in log.ops.values():
        if op["via"] == "tool" or op["w"] not in log.done or op["w"] in log.killed:
            continue
        if op["outcome"] in ("acked", "refused"):
            seen[op["w"], op["channel"], op["scope"], op["outcome"]] += 1
    for event in log.events:
        if event.get("hook") != "api" or event["w"] not in log.done or event["w"] in log.killed:
            continue
        if event["event"] == "update_applied":
            outcome = "acked"
        elif event["event"] == "update_rejected" and event.get("reason") in REFUSAL_REASONS:
            outcome = "refused"
        else:
            continue
        emitted[event["w"], event["channel"], event["scope_key"], outcome] += 1
    for key in sorted(set(seen) | set(emitted)):
        if seen[key] != emitted[key]:
            worker, channel, scope_key, outcome = key
            kind = "applied_event_count" if outcome == "acked" else "rejected_event_count"
            expected = "UpdateApplied" if outcome == "acked" else "UpdateRejected"
            add(
                Violation(
                    kind,
                    f"{channel.split(':')[1]}:{scope_key}",
                    None,
                    f"worker {worker} {channel}: {seen[key]} {outcome} write(s), "
                    f"{emitted[key]} {expected} event(s)",
                )
            )


def _check_revisions(log: _Log, add: Add) -> None:
    """The revisions ``UpdateApplied`` reports, across every worker: one write each."""
    applied: Counter[tuple[str, int]] = Counter()
    for event in log.events:
        if event["event"] == "update_applied" and event.get("revision") is not None:
            where = f"{event['channel'].split(':')[1]}:{event['scope_key']}"
            applied[where, event["revision"]] += 1
    for (where, revision), count in sorted(applied.items()):
        if count > 1:
            add(
                Violation(
                    "repeated_revision",
                    where,
                    None,
                    f"{count} UpdateApplied events name revision {revision}",
                )
            )


def _stats(
    log: _Log, report: Report, stored: Mapping[Scope, dict[str, Any]], coverage: _Coverage
) -> dict[str, Any]:
    ops = list(log.ops.values())
    outcomes = Counter(op["outcome"] for op in ops)
    resets = [reset for scope_resets in log.resets.values() for reset in scope_resets]
    return {
        "operations": len(ops),
        "operations_by_path": dict(Counter(op["via"] for op in ops)),
        "operations_by_cancel": dict(Counter(op["cancel"] for op in ops)),
        "operations_bad": sum(1 for op in ops if op["bad"]),
        "outcomes": dict(outcomes),
        "acknowledged": outcomes["acked"],
        "refusals": outcomes["refused"],
        "unknown": outcomes["unknown"],
        "in_flight_at_kill": len(set(log.begun) - set(log.ops)),
        "unknown_reasons": dict(Counter(op["reason"] for op in ops if op["outcome"] == "unknown")),
        "resets": len(resets),
        "resets_failed": sum(1 for reset in resets if not reset.get("ok", True)),
        "kills": len(log.killed),
        "events": len(log.events),
        "reads": sum(len(reads) for reads in log.reads.values()),
        "acknowledged_seen_stored": len(coverage.present),
        "acknowledged_seen_deleted": len(coverage.absent),
        "stored_keys_at_end": {str(scope): len(acks) for scope, acks in sorted(stored.items())},
        "lost": len(coverage.lost),
    }
