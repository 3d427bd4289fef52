"""(9) What the journal costs: every write journaled (``history_limit=50``) against none (0).

Each write is journaled in the same transaction as the state (docs/history.md). Every
comparison runs the full path twice, interleaved, on ONE backend (the same connections,
writer thread and file): scopes of ``scratchpad(schema=TaskNotes, history_limit=50)`` (the
default) against scopes of the same layer with ``history_limit=0``. Candidate: journal on;
baseline: journal off; target: an update costs at most 1.3x, so every figure is a cost
(µs per update; under concurrency, the sample's wall time over the updates it made).

- (2) one uncontended ``handle.update`` on SQLite: every thread pinned to one CPU (judged),
  then unpinned (shown: a hop between CPUs, paid alike on and off, dilutes the ratio);
- (3) 100 concurrent writers on one scope and on 100 scopes, SQLite;
- (4) the peer comparison's workload: 100 writers on one document (our side only: the peer
  keeps no journal);
- (7) one uncontended update on PostgreSQL (skipped, with the reason, when no server answers);
- storage: one scope in a file of its own after 1,000, 5,000 and 10,000 updates, journal on
  and off: the file's bytes after a checkpoint, and the bytes of the stored values and
  journal entries, which must stay flat.

Every sample also checks the journal against the state: the newest entry is the state's
revision, and ``min(50, writes)`` entries are kept (none with the journal off).
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from noetic_scratchpad import open_storage, scratchpad
from noetic_scratchpad.keys import state_key

from ._harness import (
    WRITERS,
    Comparison,
    Config,
    Counter,
    EventTally,
    Stats,
    TaskNotes,
    Throughput,
    backend_available,
    count_lost,
    interleaved,
    make_document,
    micros_per_op,
    one_cpu,
    open_scope,
    run_writers,
    skipped,
    turn_update,
    writer_update,
)
from ._journal_storage import storage
from .postgres import server_missing, with_table

Sample = Callable[[], Awaitable[float]]

KEEP = 50
TARGET = 1.3
ON, OFF = f"journal on (history_limit={KEEP})", "journal off (history_limit=0)"
TITLE = "Journal on vs off"
SQLITE_KEYS = (
    "journal_sqlite_single",
    "journal_sqlite_concurrent_one_scope",
    "journal_sqlite_concurrent_many_scopes",
    "journal_peer_workload",
    "journal_storage",
)


def layers() -> dict[str, Any]:
    """The two layers compared: identical but for ``history_limit``."""
    return {
        name: scratchpad(schema=TaskNotes, max_state_bytes=1024 * 1024, history_limit=keep)
        for name, keep in ((ON, KEEP), (OFF, 0))
    }


def comparison(key: str, title: str, results: dict[str, Stats], **fields: Any) -> Comparison:
    return Comparison(
        question=9,
        key=key,
        title=f"{TITLE}: {title}",
        unit="µs/update",
        candidate=ON,
        baseline=OFF,
        results=results,
        target_ratio=TARGET,
        target=f"journal on <= {TARGET}x journal off",
        **fields,
    )


async def journal_consistent(backend: Any, keys: Sequence[str], keep: int) -> bool:
    """Each key's newest journal entry is its revision, and its newest ``keep`` writes
    (all but the seed, which ``set`` wrote unjournaled) are kept."""
    for key in keys:
        stored = await backend.get_revision(key)
        rows = await backend.journal(key, limit=keep + 1)
        if stored is None or len(rows) != min(keep, stored.revision - 1):
            return False
        if rows and rows[0].revision != stored.revision:
            return False
    return True


async def run(cfg: Config) -> list[Comparison]:
    missing = backend_available("sqlite")
    if missing:
        return [skipped(9, key, TITLE, missing) for key in SQLITE_KEYS]
    workdir = cfg.workdir / "journal"
    workdir.mkdir(parents=True, exist_ok=True)
    backend = await open_storage(f"sqlite:///{workdir / 'journal.db'}")
    try:
        comparisons = await single(cfg, backend, "sqlite")
        comparisons += await concurrent(cfg, backend)
    finally:
        await backend.aclose()
    comparisons += await postgres_single(cfg)
    comparisons.append(await storage(cfg, workdir, layers(), KEEP, TITLE))
    return comparisons


# -- (2) and (7): one uncontended update ------------------------------------------------------


async def single(cfg: Config, backend: Any, where: str) -> list[Comparison]:
    doc, tally, counter = make_document(5_500), EventTally(), Counter()
    n = cfg.scale(400, 60) if where == "sqlite" else cfg.scale(200, 30)
    variants, keys = {}, {}
    for name, layer in layers().items():
        scope = f"single-{layer.config.history_limit}"
        handle = await open_scope(backend, layer, scope, tally, doc)
        variants[name] = sampler(handle, n, counter)
        keys[name] = [state_key("scratchpad", "thread", scope)]

    async def checks() -> dict[str, bool]:
        return {
            "journal matches the state": await journal_consistent(backend, keys[ON], KEEP),
            "no journal with history_limit=0": await journal_consistent(backend, keys[OFF], 0),
        }

    extra = {"ops_per_sample": n}
    if where == "postgres":
        results = await interleaved(variants, cfg.reps(11, 3))
        title = "(7) one uncontended update on PostgreSQL"
        ok = await checks()
        return [comparison("journal_postgres_single", title, results, checks=ok, extra=extra)]
    with one_cpu() as cpu:
        pinned = await interleaved(variants, cfg.reps(15, 3))
    free = await interleaved(variants, cfg.reps(15, 3))
    ok, title = await checks(), "(2) one uncontended update on SQLite"
    unpinned = comparison(
        "journal_sqlite_single_unpinned", f"{title} (threads where the OS puts them)", free
    )
    unpinned.checks, unpinned.extra = ok, extra
    if cpu is None:  # threads cannot be pinned here: judge what there is
        unpinned.key = "journal_sqlite_single"
        return [unpinned]
    unpinned.informational = (
        "shown: a hop between CPUs, paid alike on and off, dilutes the ratio; the pinned "
        "figure is judged"
    )
    judged = comparison("journal_sqlite_single", f"{title} (all threads on CPU {cpu})", pinned)
    judged.checks, judged.extra = ok, extra
    return [judged, unpinned]


def sampler(handle: Any, n: int, counter: Counter) -> Sample:
    """Microseconds per ``handle.update`` over ``n`` realistic updates."""

    async def sample() -> float:
        return await micros_per_op(lambda i: handle.update(turn_update(i)), n, counter.next(n))

    return sample


async def postgres_single(cfg: Config) -> list[Comparison]:
    title = f"{TITLE}: (7) one uncontended update on PostgreSQL"
    missing = backend_available("postgres") or await server_missing(cfg.postgres_url)
    if missing:
        return [skipped(9, "journal_postgres_single", title, missing)]
    table = f"bench_journal_{uuid.uuid4().hex[:10]}"
    backend = await open_storage(with_table(cfg.postgres_url, table))
    try:
        return await single(cfg, backend, "postgres")
    finally:
        await backend.aclose()
        await drop_tables(cfg.postgres_url, (table, f"{table}_journal"))


async def drop_tables(url: str, tables: Sequence[str]) -> None:
    import asyncpg  # type: ignore[import-untyped]

    conn = await asyncpg.connect(url, timeout=10)
    try:
        for table in tables:
            await conn.execute(f"DROP TABLE IF EXISTS {table}")
    finally:
        await conn.close()


# -- (3) and (4): 100 concurrent writers ------------------------------------------------------


CONCURRENT = (  # key, title, many scopes, (updates per writer, reps): full, quick
    ("journal_sqlite_concurrent_one_scope", "ONE scope", False, (3, 15), (2, 3)),
    ("journal_sqlite_concurrent_many_scopes", "100 scopes", True, (3, 15), (2, 3)),
    (
        "journal_peer_workload",
        "one document (the peer comparison's workload; ours only)",
        False,
        (3, 9),
        (1, 3),
    ),
)


async def concurrent(cfg: Config, backend: Any) -> list[Comparison]:
    comparisons = []
    for key, scopes, many, full, quick in CONCURRENT:
        per_writer, reps = quick if cfg.quick else full
        results, checks, extra = await writers(backend, key, many, per_writer, reps)
        question = "(4)" if key == "journal_peer_workload" else "(3)"
        title = f"{question} 100 concurrent writers on {scopes}, SQLite"
        comparisons.append(comparison(key, title, results, checks=checks, extra=extra))
    return comparisons


async def writers(
    backend: Any, tag: str, many: bool, per_writer: int, reps: int
) -> tuple[dict[str, Stats], dict[str, bool], dict[str, Any]]:
    """Interleaved samples of 100 writers, journal on and off, on fresh scopes each time."""
    doc, tally, samples = make_document(5_500), EventTally(), iter(range(1_000_000))
    throughput = {name: Throughput() for name in (ON, OFF)}
    consistent: list[bool] = []

    def variant(name: str, layer: Any) -> Sample:
        async def sample() -> float:
            prefix = f"{tag}-{layer.config.history_limit}-{next(samples)}"
            scopes = [f"{prefix}-{w}" if many else prefix for w in range(WRITERS)]
            handles = [
                await open_scope(backend, layer, scope, tally, doc if many or w == 0 else None)
                for w, scope in enumerate(scopes)
            ]

            async def write(w: int, j: int) -> None:
                await handles[w].update(writer_update(w, j))

            seconds, acked = await run_writers(write, per_writer)
            keys = sorted({state_key("scratchpad", "thread", scope) for scope in scopes})
            finals = await backend.get_many(keys)
            throughput[name].record(seconds, acked, count_lost(list(finals.values()), acked))
            keep = layer.config.history_limit
            consistent.append(await journal_consistent(backend, keys, keep))
            return seconds / acked * 1e6  # wall time per update: a cost, like the others

        return sample

    results = await interleaved({name: variant(name, lay) for name, lay in layers().items()}, reps)
    checks = {
        "0 lost": not any(t.lost for t in throughput.values()),
        "journal matches the state": all(consistent),
    }
    extra = {
        "writers": WRITERS,
        "updates_per_writer": per_writer,
        "updates_per_s": {name: 1e6 / stats.median for name, stats in results.items()},
        "lost": {name: t.lost for name, t in throughput.items()},
        "acknowledged": {name: t.acked for name, t in throughput.items()},
    }
    return results, checks, extra
