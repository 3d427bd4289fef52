"""Shared machinery: interleaved timing, statistics, comparisons, the test document.

Every comparison runs its candidate and its baselines in the same process, one sample of
each in turn (the order rotates every repetition), so a noisy neighbour slows all of them
alike and the ratio of medians stays meaningful even when absolute figures drift.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import math
import os
import platform
import statistics
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import orjson
from pydantic import BaseModel, ConfigDict

DEFAULT_POSTGRES_URL = "postgresql://postgres@127.0.0.1:5432/test"
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"
#: Set by ``--history-limit``; an environment variable, so the child processes see it too.
HISTORY_LIMIT_ENV = "NOETIC_SCRATCHPAD_BENCH_HISTORY_LIMIT"


@dataclass
class Config:
    """What one run of the suite may use."""

    quick: bool
    workdir: Path
    postgres_url: str
    redis_url: str = DEFAULT_REDIS_URL

    def reps(self, full: int, quick: int = 3) -> int:
        return quick if self.quick else full

    def scale(self, full: int, quick: int) -> int:
        return quick if self.quick else full


# -- statistics ------------------------------------------------------------------------------


@dataclass
class Stats:
    """Median and range of a list of samples."""

    median: float
    min: float
    max: float
    samples: list[float]

    @classmethod
    def of(cls, samples: list[float]) -> Stats:
        if not samples:
            raise ValueError("no samples")
        return cls(statistics.median(samples), min(samples), max(samples), list(samples))

    def as_json(self) -> dict[str, Any]:
        return {
            "median": self.median,
            "min": self.min,
            "max": self.max,
            "samples": self.samples,
        }


@dataclass
class Comparison:
    """A candidate against a baseline, with a target on their ratio (candidate / baseline).

    ``higher_is_better`` says whether the unit is a rate (ops/s) or a cost (µs/op); the
    target is ``ratio <= target_ratio`` for costs and ``ratio >= target_ratio`` for rates.
    ``checks`` are further pass/fail conditions (for example: nothing lost).
    """

    question: int
    key: str
    title: str
    unit: str
    candidate: str
    baseline: str
    results: dict[str, Stats]
    higher_is_better: bool = False
    target_ratio: float | None = None
    target: str = ""
    checks: dict[str, bool] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    skipped: str | None = None
    informational: str | None = None
    """Why the ratio is shown but not judged against the target (``met`` is then None)."""

    def ratio_stats(self) -> Stats | None:
        """The candidate/baseline ratio per repetition (pairs measured side by side)."""
        if self.skipped or self.candidate not in self.results or self.baseline not in self.results:
            return None
        cand = self.results[self.candidate].samples
        base = self.results[self.baseline].samples
        pairs = [c / b for c, b in zip(cand, base, strict=False) if b > 0]
        return Stats.of(pairs) if pairs else None

    @property
    def ratio(self) -> float | None:
        """Ratio of the medians: the headline figure."""
        if self.skipped or self.candidate not in self.results or self.baseline not in self.results:
            return None
        base = self.results[self.baseline].median
        return self.results[self.candidate].median / base if base > 0 else math.inf

    @property
    def met(self) -> bool | None:
        ratio = self.ratio
        if ratio is None or self.informational:
            return None
        ok = all(self.checks.values())
        if self.target_ratio is not None:
            ok = ok and (
                ratio >= self.target_ratio if self.higher_is_better else ratio <= self.target_ratio
            )
        return ok

    def as_json(self) -> dict[str, Any]:
        ratio_stats = self.ratio_stats()
        return {
            "question": self.question,
            "key": self.key,
            "title": self.title,
            "unit": self.unit,
            "candidate": self.candidate,
            "baseline": self.baseline,
            "higher_is_better": self.higher_is_better,
            "results": {name: stats.as_json() for name, stats in self.results.items()},
            "ratio": self.ratio,
            "ratio_range": None
            if ratio_stats is None
            else {"median": ratio_stats.median, "min": ratio_stats.min, "max": ratio_stats.max},
            "target": self.target,
            "target_ratio": self.target_ratio,
            "checks": self.checks,
            "met": self.met,
            "extra": self.extra,
            "skipped": self.skipped,
            "informational": self.informational,
        }


def skipped(question: int, key: str, title: str, reason: str) -> Comparison:
    print(f"  skipped {key}: {reason}", flush=True)
    return Comparison(question, key, title, "", "", "", {}, skipped=reason)


# -- timing ----------------------------------------------------------------------------------

Sample = Callable[[], Awaitable[float]]


async def interleaved(
    variants: Mapping[str, Sample], reps: int, *, warmup: int = 1
) -> dict[str, Stats]:
    """Take ``reps`` samples of every variant, one of each in turn, rotating the order."""
    names = list(variants)
    for _ in range(warmup):
        for name in names:
            await variants[name]()
    samples: dict[str, list[float]] = {name: [] for name in names}
    for rep in range(reps):
        shift = rep % len(names)
        for name in names[shift:] + names[:shift]:
            gc.collect()
            samples[name].append(await variants[name]())
    return {name: Stats.of(values) for name, values in samples.items()}


async def micros_per_op(op: Callable[[int], Awaitable[Any]], n: int, start: int = 0) -> float:
    """Average microseconds of ``await op(i)`` over ``n`` sequential calls."""
    begin = time.perf_counter()
    for i in range(start, start + n):
        await op(i)
    return (time.perf_counter() - begin) / n * 1e6


class Counter:
    """Hands out increasing integers, so every write carries new data."""

    def __init__(self) -> None:
        self.value = 0

    def next(self, n: int = 1) -> int:
        self.value += n
        return self.value - n


@contextlib.contextmanager
def one_cpu() -> Iterator[int | None]:
    """Run every thread of this process on one CPU inside the block; yields the CPU, or
    ``None`` where the platform cannot pin threads.

    A thread hop between CPUs costs several times a hop on one CPU on small virtual
    machines, and which CPU each thread lands on is a lottery: the same code on two
    connections measured 70 and 142 µs per update. Pinned, a hop is a hop.
    """
    tasks = "/proc/self/task"
    if not hasattr(os, "sched_setaffinity") or not os.path.isdir(tasks):
        yield None
        return
    before = os.sched_getaffinity(0)
    cpu = min(before)
    for tid in os.listdir(tasks):
        with contextlib.suppress(OSError):  # a thread that just ended
            os.sched_setaffinity(int(tid), {cpu})
    try:
        yield cpu
    finally:
        for tid in os.listdir(tasks):
            with contextlib.suppress(OSError):
                os.sched_setaffinity(int(tid), before)


# -- the document ----------------------------------------------------------------------------


class Step(BaseModel):
    model_config = ConfigDict(extra="forbid")

    step: str
    outcome: str
    files: list[str] = []


class TaskNotes(BaseModel):
    """A realistic scratchpad: the goal, what is done, what blocks, loose notes."""

    model_config = ConfigDict(extra="forbid")

    currentGoal: str
    completedSteps: list[Step] = []
    blockers: list[str] = []
    notes: dict[str, str] = {}
    turn: int = 0
    acks: dict[str, int] = {}


def make_document(target_bytes: int = 5_500) -> dict[str, Any]:
    """A scratchpad of about ``target_bytes`` of compact JSON that fits :class:`TaskNotes`."""
    doc: dict[str, Any] = {
        "currentGoal": "Migrate the billing service from the legacy invoice API to the new "
        "payments platform without downtime, keeping every customer's history intact.",
        "completedSteps": [],
        "blockers": [
            "Staging database credentials expire on Friday; ask ops to rotate them.",
            "The currency rounding in legacy invoices differs for JPY; confirm with finance.",
        ],
        "notes": {
            "owner": "payments team, on-call rotation B",
            "risk": "double charging if the webhook retries overlap the cut-over window",
            "decision": "feature flag billing.v2 gates the new path per customer cohort",
        },
        "turn": 0,
    }
    i = 0
    while len(orjson.dumps(doc)) < target_bytes:
        doc["completedSteps"].append(
            {
                "step": f"Step {i}: ported module invoice_{i} to the payments client and "
                "replayed last month's traffic against it",
                "outcome": "totals match to the cent; p95 latency unchanged",
                "files": [f"billing/invoice_{i}.py", f"tests/test_invoice_{i}.py"],
            }
        )
        i += 1
    return doc


def turn_update(i: int) -> dict[str, Any]:
    """What a model writes on turn ``i``: a nested note and the turn number (always new data)."""
    return {"turn": i, "notes": {"latest": f"turn {i}: replayed batch {i * 7 % 97}, all green"}}


def bare_merge(base: Mapping[str, Any], update: Mapping[str, Any]) -> dict[str, Any]:
    """The minimal path-copying merge: copy only the dicts on the changed path."""
    result = dict(base)
    for key, value in update.items():
        current = result.get(key)
        if isinstance(value, dict) and isinstance(current, dict):
            result[key] = bare_merge(current, value)
        else:
            result[key] = value
    return result


def bare_render(state: Mapping[str, Any]) -> str:
    return (
        "<scratchpad>\n"
        + orjson.dumps(state, option=orjson.OPT_INDENT_2).decode()
        + ("\n</scratchpad>")
    )


# -- raw SQLite ------------------------------------------------------------------------------

RAW_PRAGMAS = ("PRAGMA journal_mode=WAL", "PRAGMA synchronous=NORMAL")
RAW_SCHEMA = "CREATE TABLE IF NOT EXISTS kv (key TEXT PRIMARY KEY, value BLOB NOT NULL)"


def rss_bytes() -> int:
    """Resident set size of this process now."""
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:  # not Linux: peak RSS is the best the standard library offers
        import resource

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak if platform.system() == "Darwin" else peak * 1024


def machine() -> dict[str, Any]:
    """What the figures came from."""
    import sqlite3
    from importlib import metadata

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    versions: dict[str, str | None] = {}
    for package in (
        "noetic-scratchpad",
        "aiosqlite",
        "asyncpg",
        "orjson",
        "pydantic",
        "anyio",
        "langgraph-checkpoint-sqlite",
    ):
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = None
    return {
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "cpu": cpu,
        "cpus": os.cpu_count(),
        "loadavg": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        "sqlite": sqlite3.sqlite_version,
        "packages": versions,
    }


# -- the full path as users hit it -----------------------------------------------------------

BIG_BUDGET = 1_000_000
"""Recall budget that never cuts: the comparisons measure rendering, not truncation."""


def bench_layer(max_state_bytes: int = 1024 * 1024) -> Any:
    """``scratchpad(schema=TaskNotes)`` with room for the largest document measured, and
    ``history_limit`` from ``--history-limit`` when the run sets it (else the default)."""
    from noetic_scratchpad import scratchpad

    options: dict[str, Any] = {}
    if HISTORY_LIMIT_ENV in os.environ:
        options["history_limit"] = int(os.environ[HISTORY_LIMIT_ENV])
    return scratchpad(schema=TaskNotes, max_state_bytes=max_state_bytes, **options)


class EventTally:
    """A subscriber, so emitting events costs what it costs in a real app."""

    def __init__(self) -> None:
        self.applied = 0
        self.other = 0

    def __call__(self, event: Any) -> None:
        if event.kind == "update_applied":
            self.applied += 1
        else:
            self.other += 1


async def open_scope(
    backend: Any,
    layer: Any,
    scope_key: str,
    tally: EventTally | None = None,
    seed: Mapping[str, Any] | None = None,
) -> Any:
    """``layer.init`` on ``ScopedStorage(backend, ...)``; returns ``ctx.context["scratchpad"]``.

    ``seed`` is written first through the backend, as a previous session would have left it.
    """
    from noetic_scratchpad import ExecutionContext, ScopedStorage

    storage = ScopedStorage(backend, layer.id, scope_key)
    if seed is not None:
        await storage.set("state", dict(seed))
    ctx = ExecutionContext(thread_id=scope_key)
    if tally is not None:
        ctx.events.subscribe(tally)
    await layer.init(storage=storage, scope_key=scope_key, ctx=ctx)
    return ctx.context[layer.id]


def batcher_entries(backend: Any) -> int | None:
    """Keys in the backend's per-key lock registry (its ``KeyedBatcher``; SQLite's writer:
    1 while it works), or ``None``."""
    from noetic_scratchpad.locks import KeyedBatcher
    from noetic_scratchpad.storage.sqlite.writer import SqliteWriter

    found = None
    for value in vars(backend).values():
        if isinstance(value, KeyedBatcher | SqliteWriter):
            found = (found or 0) + len(value)
    return found


def backend_available(module: str) -> str | None:
    """``None`` when ``noetic_scratchpad.storage.<module>`` imports, else why not."""
    import importlib

    try:
        importlib.import_module(f"noetic_scratchpad.storage.{module}")
    except ImportError as exc:
        return f"noetic_scratchpad.storage.{module} is not available ({exc})"
    return None


# -- many concurrent writers -----------------------------------------------------------------

WRITERS = 100


def writer_update(writer: int, j: int) -> dict[str, Any]:
    return {"turn": j, "acks": {f"{writer}.{j}": j}}


async def run_writers(
    write: Callable[[int, int], Awaitable[None]], per_writer: int
) -> tuple[float, int]:
    """Run ``WRITERS`` tasks, each awaiting ``per_writer`` writes; return (seconds, acked)."""
    acked = 0

    async def writer(w: int) -> None:
        nonlocal acked
        for j in range(per_writer):
            await write(w, j)
            acked += 1

    begin = time.perf_counter()
    await asyncio.gather(*(writer(w) for w in range(WRITERS)))
    return time.perf_counter() - begin, acked


def count_lost(states: Sequence[Any], acked: int) -> int:
    present = sum(len(state.get("acks", {})) for state in states if isinstance(state, dict))
    return acked - present


class Throughput:
    """Samples updates/s and accumulates lost updates over the samples of one variant."""

    def __init__(self) -> None:
        self.lost = 0
        self.acked = 0

    def record(self, seconds: float, acked: int, lost: int) -> float:
        self.acked += acked
        self.lost += lost
        return acked / seconds


class RawStore(Protocol):
    """A raw client's read-modify-write of one JSON document per key: a shared baseline."""

    async def seed(self, key: str, doc: Mapping[str, Any]) -> None: ...

    async def read(self, key: str) -> Any: ...

    async def rmw(self, key: str, update: Mapping[str, Any]) -> None: ...


async def concurrent_against_raw(
    cfg: Config,
    *,
    question: int,
    family: str,
    titles: Mapping[str, str],
    ours: Mapping[str, tuple[str, Any]],
    raw: RawStore,
    raw_label: str,
    target: str,
    references: Mapping[str, tuple[str, RawStore]] | None = None,
) -> list[Comparison]:
    """``WRITERS`` writers on one scope (``<family>_concurrent_one_scope``, titled by
    ``titles``) and on ``WRITERS`` scopes (``..._many_scopes``): the full path on each
    backend of ``ours`` (short name -> (label, backend); the first is the candidate)
    against ``raw`` run by the same tasks.

    A sample opens fresh scopes (fresh keys for ``raw``), seeds them with the test
    document, runs the writers, then counts the acknowledged updates missing from the
    stored states. The target is ``>= 1.0x`` the raw updates/s with 0 lost and no entry
    left in the backend's lock registry. ``references`` (short name -> (label, raw store))
    are further raw variants measured beside them, for the record.
    """
    from noetic_scratchpad.keys import state_key

    doc = make_document(5_500)
    layer = bench_layer()
    tally = EventTally()
    per_writer = cfg.scale(3, 2)
    samples = iter(range(1_000_000))
    candidate = next(iter(ours.values()))[0]
    comparisons: list[Comparison] = []
    for many in (False, True):
        raws = {"raw": (raw_label, raw), **(references or {})}
        tallies = {name: Throughput() for name in [*ours, *raws]}
        leftovers: list[int] = []

        def full_path(
            name: str,
            store: Any,
            many: bool = many,
            leftovers: list[int] = leftovers,
            tallies: dict[str, Throughput] = tallies,
        ) -> Sample:
            async def sample() -> float:
                tag = f"c{next(samples)}"
                scopes = [f"{tag}-{w}" if many else tag for w in range(WRITERS)]
                seeds = [doc if many or w == 0 else None for w in range(WRITERS)]
                handles = [
                    await open_scope(store, layer, scope, tally, seed=seed)
                    for scope, seed in zip(scopes, seeds, strict=True)
                ]

                async def write(w: int, j: int) -> None:
                    await handles[w].update(writer_update(w, j))

                seconds, acked = await run_writers(write, per_writer)
                finals = await store.get_many(
                    sorted({state_key("scratchpad", "thread", scope) for scope in scopes})
                )
                leftovers.append(batcher_entries(store) or 0)
                lost = count_lost(list(finals.values()), acked)
                return tallies[name].record(seconds, acked, lost)

            return sample

        def raw_variant(
            name: str,
            store: RawStore,
            many: bool = many,
            tallies: dict[str, Throughput] = tallies,
        ) -> Sample:
            async def sample() -> float:
                tag = f"r{next(samples)}"
                keys = [f"{tag}-{w}" if many else tag for w in range(WRITERS)]
                for key in set(keys):
                    await store.seed(key, doc)

                async def write(w: int, j: int) -> None:
                    await store.rmw(keys[w], writer_update(w, j))

                seconds, acked = await run_writers(write, per_writer)
                finals = [await store.read(key) for key in set(keys)]
                return tallies[name].record(seconds, acked, count_lost(finals, acked))

            return sample

        variants: dict[str, Sample] = {
            label: full_path(name, store) for name, (label, store) in ours.items()
        }
        for name, (label, store) in raws.items():
            variants[label] = raw_variant(name, store)
        key = f"{family}_concurrent_{'many_scopes' if many else 'one_scope'}"
        first = next(iter(ours))
        comparisons.append(
            Comparison(
                question=question,
                key=key,
                title=titles[key],
                unit="updates/s",
                candidate=candidate,
                baseline=raw_label,
                results=await interleaved(variants, cfg.reps(9, 3)),
                higher_is_better=True,
                target_ratio=1.0,
                target=target,
                checks={
                    "0 lost": tallies[first].lost == 0,
                    "0 lock registry entries left": not any(leftovers),
                },
                extra={
                    "writers": WRITERS,
                    "updates_per_writer": per_writer,
                    "lost": {name: t.lost for name, t in tallies.items()},
                    "acknowledged": {name: t.acked for name, t in tallies.items()},
                },
            )
        )
    return comparisons
