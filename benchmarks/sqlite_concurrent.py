"""(3) 100 concurrent writers on SQLite, on one scope and on 100 scopes.

Every writer makes ``k`` updates, each writing a key of its own under ``acks`` (and the
turn), and counts those acknowledged. A lost update is an acknowledged key missing from the
final stored state. Candidate: the full path on ``sqlite:///...`` (each writer its own
execution context and handle, as concurrent agent runs have). Baseline: the raw
per-operation read-modify-write by plain sqlite3 on the calling thread, run by the same 100
tasks. For reference, the same transaction as one aiosqlite job per operation (1 hop).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from noetic_scratchpad import open_storage
from noetic_scratchpad.keys import state_key

from ._harness import (
    WRITERS,
    Comparison,
    Config,
    EventTally,
    Stats,
    Throughput,
    backend_available,
    batcher_entries,
    bench_layer,
    count_lost,
    interleaved,
    make_document,
    open_scope,
    run_writers,
    skipped,
    writer_update,
)
from .sqlite_single import aio_job, aio_open, aio_rmw_1hop, raw_open, raw_read, raw_rmw, raw_seed


async def run(cfg: Config) -> list[Comparison]:
    missing = backend_available("sqlite")
    title_one = "100 concurrent writers on ONE scope, SQLite: updates/s and lost"
    title_many = "100 concurrent writers on 100 scopes, SQLite: updates/s and lost"
    if missing:
        return [
            skipped(3, "sqlite_concurrent_one_scope", title_one, missing),
            skipped(3, "sqlite_concurrent_many_scopes", title_many, missing),
        ]
    doc = make_document(5_500)
    workdir = cfg.workdir / "concurrent"
    workdir.mkdir(parents=True, exist_ok=True)
    # Each update adds a key under acks, so the document grows by ~10 bytes an update;
    # 3 per writer keeps it near 8.5 KB at the end of a sample.
    per_writer = cfg.scale(3, 2)
    reps = cfg.reps(15, 3)

    backend = await open_storage(f"sqlite:///{workdir / 'ours.db'}")
    layer = bench_layer()
    raw = raw_open(workdir / "raw.db")
    aio = await aio_open(workdir / "aio1.db")
    tally = EventTally()
    samples = iter(range(1_000_000))
    tallies: dict[str, Throughput] = {}
    leftovers: list[int] = []

    def ours(many: bool) -> Callable[[], Awaitable[float]]:
        name = f"ours many={many}"
        tallies[name] = Throughput()

        async def sample() -> float:
            tag = f"c{next(samples)}"
            scopes = [f"{tag}-{w}" if many else tag for w in range(WRITERS)]
            handles = []
            for w, scope in enumerate(scopes):
                seed = doc if w == 0 or many else None
                handles.append(await open_scope(backend, layer, scope, tally, seed=seed))

            async def write(w: int, j: int) -> None:
                await handles[w].update(writer_update(w, j))

            seconds, acked = await run_writers(write, per_writer)
            keys = sorted({state_key("scratchpad", "thread", scope) for scope in scopes})
            finals = await backend.get_many(keys)
            leftovers.append(batcher_entries(backend) or 0)
            lost = count_lost(list(finals.values()), acked)
            return tallies[name].record(seconds, acked, lost)

        return sample

    def raw_variant(many: bool) -> Callable[[], Awaitable[float]]:
        name = f"raw many={many}"
        tallies[name] = Throughput()

        async def sample() -> float:
            tag = f"r{next(samples)}"
            keys = [f"{tag}-{w}" if many else tag for w in range(WRITERS)]
            for key in set(keys):
                raw_seed(raw, key, doc)

            async def write(w: int, j: int) -> None:
                raw_rmw(raw, keys[w], writer_update(w, j))
                await asyncio.sleep(0)  # let the other writers in between operations

            seconds, acked = await run_writers(write, per_writer)
            lost = count_lost([raw_read(raw, key) for key in set(keys)], acked)
            return tallies[name].record(seconds, acked, lost)

        return sample

    def aio_variant(many: bool) -> Callable[[], Awaitable[float]]:
        name = f"aio many={many}"
        tallies[name] = Throughput()

        async def sample() -> float:
            tag = f"a{next(samples)}"
            keys = [f"{tag}-{w}" if many else tag for w in range(WRITERS)]
            for key in set(keys):
                await aio_job(aio, raw_seed, key, doc)

            async def write(w: int, j: int) -> None:
                await aio_rmw_1hop(aio, keys[w], writer_update(w, j))

            seconds, acked = await run_writers(write, per_writer)
            finals = [await aio_job(aio, raw_read, key) for key in set(keys)]
            lost = count_lost(finals, acked)
            return tallies[name].record(seconds, acked, lost)

        return sample

    comparisons = []
    try:
        for many, key, title in (
            (False, "sqlite_concurrent_one_scope", title_one),
            (True, "sqlite_concurrent_many_scopes", title_many),
        ):
            results: dict[str, Stats] = await interleaved(
                {
                    "ours: full path on SQLite": ours(many),
                    "plain sqlite3 RMW per op": raw_variant(many),
                    "aiosqlite RMW per op, 1 hop": aio_variant(many),
                },
                reps,
            )
            mine = tallies[f"ours many={many}"]
            comparisons.append(
                Comparison(
                    question=3,
                    key=key,
                    title=title,
                    unit="updates/s",
                    candidate="ours: full path on SQLite",
                    baseline="plain sqlite3 RMW per op",
                    results=results,
                    higher_is_better=True,
                    target_ratio=1.0,
                    target=">= 1.0x plain sqlite3 per-op RMW, 0 lost",
                    checks={
                        "0 lost": mine.lost == 0,
                        "0 lock registry entries left": not any(leftovers),
                    },
                    extra={
                        "writers": WRITERS,
                        "updates_per_writer": per_writer,
                        "lost": {
                            "ours": mine.lost,
                            "plain sqlite3": tallies[f"raw many={many}"].lost,
                            "aiosqlite 1 hop": tallies[f"aio many={many}"].lost,
                        },
                        "acknowledged": {
                            "ours": mine.acked,
                            "plain sqlite3": tallies[f"raw many={many}"].acked,
                            "aiosqlite 1 hop": tallies[f"aio many={many}"].acked,
                        },
                        "lock_registry_entries_after": max(leftovers, default=0),
                    },
                )
            )
            leftovers.clear()
    finally:
        await backend.aclose()
        await aio.close()
        raw.close()
    return comparisons
