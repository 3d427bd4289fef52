"""(4) The peer: LangGraph's ``AsyncSqliteStore`` doing read-merge-write of the same document.

The peer has no atomic read-modify-write, so an application does ``aget``, merges, then
``aput``. Under the same 100 concurrent writers as (3), one scope, we count its throughput
and the updates it loses, against ours on SQLite. The store batches concurrent gets and puts
into one call each, so unlocked it acknowledges writes fast and keeps about one in a hundred;
the baseline is therefore the peer made correct the only way an application can, with a
lock per document around aget+merge+aput, and the unlocked peer is reported beside it
(acknowledged/s, kept/s, lost). The peer runs in WAL with
synchronous=NORMAL (its fastest setting, and the same durability as ours by default).
``langgraph-checkpoint-sqlite`` is a benchmark-only dependency.
"""

from __future__ import annotations

import importlib
import statistics
from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from noetic_scratchpad import open_storage
from noetic_scratchpad.keys import state_key

from ._harness import (
    Comparison,
    Config,
    EventTally,
    Stats,
    Throughput,
    backend_available,
    bare_merge,
    bench_layer,
    count_lost,
    interleaved,
    make_document,
    open_scope,
    run_writers,
    skipped,
    writer_update,
)

Sample = Callable[[], Awaitable[float]]

TITLE = "The peer: LangGraph AsyncSqliteStore aget+merge+aput, 100 writers on one document"


def peer_missing() -> str | None:
    try:
        importlib.import_module("langgraph.store.sqlite.aio")
    except ImportError as exc:
        return (
            f"langgraph-checkpoint-sqlite is not installed ({exc}); "
            "pip install langgraph-checkpoint-sqlite"
        )
    return None


async def run(cfg: Config) -> list[Comparison]:
    missing = backend_available("sqlite") or peer_missing()
    if missing:
        return [skipped(4, "peer_langgraph", TITLE, missing)]
    from langgraph.store.sqlite.aio import AsyncSqliteStore  # type: ignore[import-untyped]

    doc = make_document(5_500)
    workdir = cfg.workdir / "peer"
    workdir.mkdir(parents=True, exist_ok=True)
    per_writer = cfg.scale(3, 1)
    reps = cfg.reps(9, 3)
    layer = bench_layer()
    tally = EventTally()
    ours_tally, peer_tally, locked_tally = Throughput(), Throughput(), Throughput()
    samples = iter(range(1_000_000))

    backend = await open_storage(f"sqlite:///{workdir / 'ours.db'}")
    try:
        async with AsyncSqliteStore.from_conn_string(str(workdir / "peer.db")) as store:
            await store.setup()
            await store.conn.execute("PRAGMA journal_mode=WAL")
            await store.conn.execute("PRAGMA synchronous=NORMAL")

            async def ours() -> float:
                scope = f"o{next(samples)}"
                handles = [
                    await open_scope(backend, layer, scope, tally, seed=doc if w == 0 else None)
                    for w in range(100)
                ]

                async def write(w: int, j: int) -> None:
                    await handles[w].update(writer_update(w, j))

                seconds, acked = await run_writers(write, per_writer)
                final = await backend.get(state_key("scratchpad", "thread", scope))
                return ours_tally.record(seconds, acked, count_lost([final], acked))

            def peer(locked: bool, tally: Throughput, kept_rates: list[float]) -> Sample:
                async def sample() -> float:
                    namespace = ("scratchpad", f"p{next(samples)}")
                    await store.aput(namespace, "state", dict(doc))
                    lock = anyio.Lock()

                    async def rmw(w: int, j: int) -> None:
                        item = await store.aget(namespace, "state")
                        current: dict[str, Any] = item.value if item is not None else {}
                        value = bare_merge(current, writer_update(w, j))
                        await store.aput(namespace, "state", value)

                    async def write(w: int, j: int) -> None:
                        if locked:
                            async with lock:
                                await rmw(w, j)
                        else:
                            await rmw(w, j)

                    seconds, acked = await run_writers(write, per_writer)
                    final = await store.aget(namespace, "state")
                    lost = count_lost([None if final is None else final.value], acked)
                    kept_rates.append((acked - lost) / seconds)
                    return tally.record(seconds, acked, lost)

                return sample

            unlocked_kept: list[float] = []
            variants: dict[str, Sample] = {
                "ours: full path on SQLite": ours,
                "LangGraph, app lock per document (0 lost)": peer(True, locked_tally, []),
                "LangGraph, no lock (acknowledged/s)": peer(False, peer_tally, unlocked_kept),
            }
            results = await interleaved(variants, reps)
    finally:
        await backend.aclose()
    ours_median = results["ours: full path on SQLite"].median
    return [
        Comparison(
            question=4,
            key="peer_langgraph",
            title=TITLE,
            unit="updates/s",
            candidate="ours: full path on SQLite",
            baseline="LangGraph, app lock per document (0 lost)",
            results=results,
            higher_is_better=True,
            target_ratio=10.0,
            target=">= 10x the peer's throughput, 0 lost",
            checks={
                "0 lost (ours)": ours_tally.lost == 0,
                ">= 10x the updates the unlocked peer keeps per second": ours_median
                >= 10 * statistics.median(unlocked_kept),
            },
            extra={
                "writers": 100,
                "updates_per_writer": per_writer,
                "lost": {
                    "ours": ours_tally.lost,
                    "peer, no lock": peer_tally.lost,
                    "peer, app lock": locked_tally.lost,
                },
                "acknowledged": {
                    "ours": ours_tally.acked,
                    "peer, no lock": peer_tally.acked,
                    "peer, app lock": locked_tally.acked,
                },
                "peer_no_lock_kept_per_s": Stats.of(unlocked_kept).as_json(),
                "peer_lost_fraction": peer_tally.lost / peer_tally.acked
                if peer_tally.acked
                else None,
            },
        )
    ]
