"""What the asyncio fast path buys: the full path with it on and off, on asyncio, in one run.

``python -m benchmarks.runtime_paths [--quick]``. Each workload runs twice per repetition,
interleaved: with ``_runtime.FAST_PATH`` on (asyncio's event, the shared-timer write
timeout, a task per background job) and off (anyio's event and cancel scope, background
jobs in a task group of their owner's): (1) recall + one update on memory, (2) one
uncontended update on SQLite, (3) 100 concurrent writers on one scope and on 100 scopes.
On SQLite also with the fast path and the writer's tasks in a task group lent to the
backend (``backend.tasks.hosted_by(group)``, as an owning object does). An object takes
its runtime when it is made (a store when it opens, a handle's writer), so each variant
writes through its own backend and handles, made under its own setting. The figure is the
process's CPU time per update (every thread: the event loop's and SQLite's), so that other
work on a shared machine moves it less than it moves wall time. Prints medians, ranges and
each variant's cost against the fast path (above 1: the fast path is cheaper).
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio

from noetic_scratchpad import _runtime, open_storage

from ._harness import (
    BIG_BUDGET,
    WRITERS,
    Counter,
    EventTally,
    Stats,
    bench_layer,
    interleaved,
    make_document,
    open_scope,
    run_writers,
    turn_update,
    writer_update,
)

Sample = Callable[[], Awaitable[float]]


@contextmanager
def fast_path(on: bool) -> Iterator[None]:
    """``_runtime.FAST_PATH`` set to ``on`` for the block (objects made in it keep it)."""
    _runtime.FAST_PATH = on
    try:
        yield
    finally:
        _runtime.FAST_PATH = True


def with_fast_path(on: bool, sample: Sample) -> Sample:
    async def run() -> float:
        with fast_path(on):
            return await sample()

    return run


def in_lent_group(owner: Any, sample: Sample) -> Sample:
    """``sample`` with ``owner``'s tasks in a task group lent to it (as a core lends its
    own), on the fast path otherwise."""

    async def run() -> float:
        async with anyio.create_task_group() as group:
            with owner.hosted_by(group):
                result = await sample()
        return result

    return run


async def cpu_micros_per_op(op: Callable[[int], Awaitable[Any]], n: int, start: int) -> float:
    """The process's CPU microseconds per ``await op(i)``, over ``n`` sequential calls."""
    begin = time.process_time()
    for i in range(start, start + n):
        await op(i)
    return (time.process_time() - begin) / n * 1e6


async def measure(
    title: str, unit: str, samples: dict[bool, Sample], reps: int, owner: Any = None
) -> None:
    """``samples[on]``: the workload on objects made with the fast path ``on``; ``owner``:
    the fast path's task owner, to measure in a lent group too."""
    variants = {
        "fast path": with_fast_path(True, samples[True]),
        "generic": with_fast_path(False, samples[False]),
    }
    if owner is not None:
        variants["lent group"] = in_lent_group(owner, samples[True])
    results: dict[str, Stats] = await interleaved(variants, reps)
    fast = results["fast path"]
    print(title)
    for name, stats in results.items():
        print(f"  {name:<11} {stats.median:,.1f} {unit} [{stats.min:,.1f} - {stats.max:,.1f}]")
    for name in list(results)[1:]:
        other = results[name]
        pairs = sorted(o / f for o, f in zip(other.samples, fast.samples, strict=True))
        ratio = other.median / fast.median
        print(f"  cost of {name}: {ratio:.2f}x (per rep {pairs[0]:.2f}-{pairs[-1]:.2f})")


async def main(quick: bool) -> None:
    reps = 3 if quick else 15
    doc = make_document(5_500)
    layer = bench_layer()
    counter = Counter()

    memory = await open_storage("memory://")
    n = 300 if quick else 2_000

    async def memory_sample_of(on: bool) -> Sample:
        with fast_path(on):
            handle = await open_scope(memory, layer, f"overhead-{on}", EventTally(), seed=doc)

        async def turn(i: int) -> None:
            await layer.recall(state=handle.state, budget=BIG_BUDGET, ctx=handle.ctx)
            await handle.update(turn_update(i))

        async def sample() -> float:
            return await cpu_micros_per_op(turn, n, counter.next(n))

        return sample

    samples = {on: await memory_sample_of(on) for on in (True, False)}
    await measure("(1) recall + one update, memory://", "CPU µs/turn", samples, reps)
    await memory.aclose()

    with tempfile.TemporaryDirectory() as workdir:
        backends: dict[bool, Any] = {}
        for on in (True, False):
            with fast_path(on):
                backends[on] = await open_storage(f"sqlite:///{Path(workdir) / f'{on}.db'}")
        m = 100 if quick else 500

        async def single_sample_of(on: bool) -> Sample:
            with fast_path(on):
                single = await open_scope(backends[on], layer, "single", EventTally(), seed=doc)

            async def update(i: int) -> None:
                await single.update(turn_update(i))

            async def sample() -> float:
                return await cpu_micros_per_op(update, m, counter.next(m))

            return sample

        samples = {on: await single_sample_of(on) for on in (True, False)}
        title = "(2) one uncontended update, SQLite"
        await measure(title, "CPU µs/update", samples, reps, backends[True].tasks)

        for many in (False, True):
            tally = EventTally()

            def concurrent_sample_of(
                on: bool, many: bool = many, tally: EventTally = tally
            ) -> Sample:
                async def sample() -> float:
                    tag = f"c{counter.next()}"
                    scopes = [f"{tag}-{w}" if many else tag for w in range(WRITERS)]
                    handles: list[Any] = [
                        await open_scope(
                            backends[on], layer, scope, tally, seed=doc if many or not w else None
                        )
                        for w, scope in enumerate(scopes)
                    ]  # made inside the variant's setting (see with_fast_path)

                    async def write(w: int, j: int) -> None:
                        await handles[w].update(writer_update(w, j))

                    begin = time.process_time()
                    _, acked = await run_writers(write, 2 if quick else 3)
                    return (time.process_time() - begin) / acked * 1e6

                return sample

            samples = {on: concurrent_sample_of(on) for on in (True, False)}
            scopes = "100 scopes" if many else "ONE scope"
            title = f"(3) 100 writers on {scopes}, SQLite"
            await measure(title, "CPU µs/update", samples, reps, backends[True].tasks)
        for backend in backends.values():
            await backend.aclose()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small samples (seconds)")
    asyncio.run(main(parser.parse_args().quick))
