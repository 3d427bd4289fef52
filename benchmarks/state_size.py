"""(5) Cost against state size, 1 KB to 64 KB: update and recall through the full path.

For each size the document grows by more completed steps; the update is the same small
turn update, so anything the layer does per byte of *state* (validation, copies, encoding,
rendering) shows up here. The comparison is the cost at 64 KB against the cost at 1 KB:
no worse than linear means a ratio of at most 64. Per doubling ratios and the fitted
log-log slope (1.0 = linear) are reported with it.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import orjson

from noetic_scratchpad import open_storage

from ._harness import (
    BIG_BUDGET,
    Comparison,
    Config,
    Counter,
    EventTally,
    Stats,
    backend_available,
    bench_layer,
    interleaved,
    make_document,
    micros_per_op,
    open_scope,
    turn_update,
)

SIZES_KB = (1, 2, 4, 8, 16, 32, 64)


def slope(sizes: list[float], costs: list[float]) -> float:
    """Least-squares slope of log(cost) against log(size)."""
    xs = [math.log(s) for s in sizes]
    ys = [math.log(c) for c in costs]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum(
        (x - mx) ** 2 for x in xs
    )


async def run(cfg: Config) -> list[Comparison]:
    layer = bench_layer(max_state_bytes=1024 * 1024)
    tally = EventTally()
    counter = Counter()
    memory = await open_storage("memory://")
    sqlite_missing = backend_available("sqlite")
    sqlite = (
        None if sqlite_missing else await open_storage(f"sqlite:///{cfg.workdir / 'state_size.db'}")
    )
    docs = {kb: make_document(kb * 1024) for kb in SIZES_KB}
    handles: dict[tuple[str, int], Any] = {}
    for kb, doc in docs.items():
        handles["memory", kb] = await open_scope(memory, layer, f"m{kb}", tally, seed=doc)
        if sqlite is not None:
            handles["sqlite", kb] = await open_scope(sqlite, layer, f"s{kb}", tally, seed=doc)

    def ops_for(kb: int) -> int:
        return max(5, int(cfg.scale(300, 40) / math.sqrt(kb)))

    def update_sampler(where: str, kb: int) -> Any:
        handle = handles[where, kb]
        n = ops_for(kb)

        async def op(i: int) -> None:
            await handle.update(turn_update(i))

        async def sample() -> float:
            return await micros_per_op(op, n, counter.next(n))

        return sample

    def recall_sampler(kb: int) -> Any:
        handle = handles["memory", kb]
        n = ops_for(kb)

        async def op(i: int) -> None:
            await layer.recall(state=handle.state, budget=BIG_BUDGET, ctx=handle.ctx)

        async def sample() -> float:
            return await micros_per_op(op, n)

        return sample

    metrics: dict[str, dict[int, Any]] = {"update on memory": {}, "recall": {}}
    if sqlite is not None:
        metrics["update on SQLite"] = {}
    variants = {}
    for kb in SIZES_KB:
        variants[f"update on memory @ {kb} KB"] = update_sampler("memory", kb)
        variants[f"recall @ {kb} KB"] = recall_sampler(kb)
        if sqlite is not None:
            variants[f"update on SQLite @ {kb} KB"] = update_sampler("sqlite", kb)
    try:
        results = await interleaved(variants, cfg.reps(9, 3))
    finally:
        await memory.aclose()
        if sqlite is not None:
            await sqlite.aclose()

    comparisons = []
    actual_bytes = {kb: len(orjson.dumps(doc)) for kb, doc in docs.items()}
    for metric in metrics:
        per_size: dict[int, Stats] = {kb: results[f"{metric} @ {kb} KB"] for kb in SIZES_KB}
        medians = [per_size[kb].median for kb in SIZES_KB]
        doublings = [b / a for a, b in itertools.pairwise(medians)]
        fitted = slope([float(actual_bytes[kb]) for kb in SIZES_KB], medians)
        size_ratio = actual_bytes[SIZES_KB[-1]] / actual_bytes[SIZES_KB[0]]
        comparisons.append(
            Comparison(
                question=5,
                key=f"state_size_{metric.replace(' ', '_').lower()}",
                title=f"Cost vs state size, {metric}: 64 KB against 1 KB",
                unit="µs/op",
                candidate=f"{SIZES_KB[-1]} KB",
                baseline=f"{SIZES_KB[0]} KB",
                results={f"{kb} KB": per_size[kb] for kb in SIZES_KB},
                target_ratio=size_ratio,
                target=f"no worse than linear: 64 KB costs <= {size_ratio:.0f}x 1 KB "
                "(log-log slope <= 1)",
                checks={"log-log slope <= 1.0": fitted <= 1.0},
                extra={
                    "state_bytes": actual_bytes,
                    "ratio_per_doubling": doublings,
                    "loglog_slope": fitted,
                    "ops_per_sample": {kb: ops_for(kb) for kb in SIZES_KB},
                },
            )
        )
    return comparisons
