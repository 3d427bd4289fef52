"""(1) Per-turn overhead on memory storage: recall plus one update, against the bare minimum.

Candidate: the full path as an application hits it, on ``memory://``: ``layer.recall`` of
the 5.5 KB state, then ``await ctx.context["scratchpad"].update({...})`` (read-modify-write,
schema gate, size limit, an ``UpdateApplied`` event delivered to a subscriber).
Baseline: what any implementation must do at least: a path-copying merge of the same update
and rendering the state as indented JSON with orjson.
Shown beside them: the baseline plus the C work the contract adds to every write, done by
hand (the new state encoded for the size limit and storage, the schema check of the
fields the update writes, the journal entry encoded), the floor of any implementation
that keeps the contract; the candidate's ratio to it is ``ratio_vs_contract_floor``.
"""

from __future__ import annotations

from typing import Any

import orjson

from noetic_scratchpad import open_storage
from noetic_scratchpad.keys import state_key
from noetic_scratchpad.schema import SchemaGate

from ._harness import (
    BIG_BUDGET,
    Comparison,
    Config,
    Counter,
    EventTally,
    TaskNotes,
    bare_merge,
    bare_render,
    bench_layer,
    interleaved,
    make_document,
    micros_per_op,
    open_scope,
    turn_update,
)

TITLE = "Per-turn overhead on memory: recall of a 5.5 KB state + one update"


async def run(cfg: Config) -> list[Comparison]:
    doc = make_document(5_500)
    layer = bench_layer()
    backend = await open_storage("memory://")
    tally = EventTally()
    handle = await open_scope(backend, layer, "overhead", tally, seed=doc)
    ctx = handle.ctx
    counter = Counter()
    n = cfg.scale(2_000, 300)
    bare_state: dict[str, Any] = dict(doc)
    floor_state: dict[str, Any] = dict(doc)
    gate = SchemaGate(TaskNotes)

    updates = 0

    async def full_turn(i: int) -> None:
        nonlocal updates
        await layer.recall(state=handle.state, budget=BIG_BUDGET, ctx=ctx)
        await handle.update(turn_update(i))
        updates += 1

    async def full_recall(i: int) -> None:
        await layer.recall(state=handle.state, budget=BIG_BUDGET, ctx=ctx)

    async def full_update(i: int) -> None:
        nonlocal updates
        await handle.update(turn_update(i))
        updates += 1

    async def bare_turn(i: int) -> None:
        nonlocal bare_state
        bare_render(bare_state)
        bare_state = bare_merge(bare_state, turn_update(i))

    async def floor_turn(i: int) -> None:
        nonlocal floor_state
        bare_render(floor_state)
        update = turn_update(i)
        merged = bare_merge(floor_state, update)
        orjson.dumps(merged)  # the size limit, and the bytes a store keeps
        gate.errors_after_update(merged, tuple(update))  # the fields the update writes
        undo = {"restore": [[[key], floor_state.get(key)] for key in update]}
        orjson.dumps({"keys": list(update), "update": update, "undo": undo})  # the journal's
        floor_state = merged

    def sampler(op: Any) -> Any:
        async def sample() -> float:
            return await micros_per_op(op, n, counter.next(n))

        return sample

    results = await interleaved(
        {
            "full path (recall + update)": sampler(full_turn),
            "bare (merge + orjson render)": sampler(bare_turn),
            "contract floor (bare + encode, schema check, journal entry)": sampler(floor_turn),
            "full path: recall only": sampler(full_recall),
            "full path: update only": sampler(full_update),
        },
        cfg.reps(15, 3),
    )
    stored = await backend.get(state_key("scratchpad", "thread", "overhead"))
    await backend.aclose()
    return [
        Comparison(
            question=1,
            key="overhead_memory",
            title=TITLE,
            unit="µs/turn",
            candidate="full path (recall + update)",
            baseline="bare (merge + orjson render)",
            results=results,
            target_ratio=3.0,
            target="<= 3x the bare baseline",
            checks={
                "every update reported": tally.applied == updates > 0,
                "last update stored": isinstance(stored, dict)
                and stored.get("turn") == handle.state["turn"],
            },
            extra={
                "ratio_vs_contract_floor": results["full path (recall + update)"].median
                / results["contract floor (bare + encode, schema check, journal entry)"].median,
                "state_bytes": len(orjson.dumps(doc)),
                "ops_per_sample": n,
                "events_applied": tally.applied,
            },
        )
    ]
