"""A checker worker process: many tasks writing random operations until a deadline.

``python -m tests.reliability.checker.worker --url URL --worker w0 --seed N --tasks T
--seconds S --log PATH [--solo]``. Each task has its own random stream derived from the
worker's seed. Everything the worker does goes to its log (see :mod:`.log`); it prints
nothing. ``--solo`` (for ``memory://``, which no other process can see) also does what the
parent does for the other backends: it resets scopes in process and reads every scope
again and again while the tasks run, and reads them once more at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import random
import time
from pathlib import Path

from noetic_scratchpad import StorageBackend, open_storage

from .log import LogWriter
from .ops import Reader, Workbench, read_loop, reset_in_process
from .scenario import SCOPES, Scope, choose_op, derive_seed, parse_scopes

TINY_WRITE_TIMEOUT = 0.002


async def task_loop(
    bench: Workbench, args: argparse.Namespace, task: int, deadline: float, done: list[int]
) -> None:
    """Operations until ``deadline``, and on until the worker has done ``--min-ops`` (a
    loaded machine still checks something), but never past three times ``--seconds``."""
    rng = random.Random(derive_seed(args.seed, f"task{task}"))
    last_call = deadline + 2 * args.seconds
    seq = 0
    while (now := time.monotonic()) < deadline or (done[0] < args.min_ops and now < last_call):
        await bench.perform(choose_op(rng, args.worker, task, seq, args.scopes))
        done[0] += 1
        seq += 1


async def reset_loop(
    backend: StorageBackend, log: LogWriter, args: argparse.Namespace, deadline: float
) -> None:
    """``--solo``: reset a random scope every few tens of milliseconds, in process."""
    rng = random.Random(derive_seed(args.seed, "resets"))
    scopes: tuple[Scope, ...] = args.scopes
    while time.monotonic() < deadline:
        await asyncio.sleep(rng.uniform(0.01, 0.1))
        scope = rng.choice(scopes)
        start = time.monotonic()
        deleted = await reset_in_process(backend, scope)
        end = time.monotonic()
        log.write(
            {
                "t": "reset",
                "kind": scope.kind,
                "scope": scope.id,
                "start": start,
                "end": end,
                "ok": True,
                "detail": f"{deleted} key(s)",
            }
        )


async def solo_reads(
    backend: StorageBackend, log: LogWriter, args: argparse.Namespace, deadline: float
) -> None:
    """``--solo``: read every scope again and again until ``deadline``."""
    rng = random.Random(derive_seed(args.seed, "reads"))
    async with Reader(backend, args.scopes) as reader:
        await read_loop(reader, log, rng, lambda: time.monotonic() >= deadline)


async def main(args: argparse.Namespace) -> None:
    log = LogWriter(Path(args.log))
    shared: StorageBackend | None = None
    if args.solo:  # one backend object for every harness: memory:// is per object
        shared = await open_storage(args.url)
    bench = Workbench(shared or args.url, args.worker, log, args.tiny_timeout)
    await bench.open()
    start = time.monotonic()
    deadline = start + args.seconds
    log.write({"t": "worker", "w": args.worker, "status": "ready", "pid": os.getpid(), "at": start})
    done = [0]
    async with asyncio.TaskGroup() as group:
        for task in range(args.tasks):
            group.create_task(task_loop(bench, args, task, deadline, done))
        if shared is not None:
            if not args.no_resets:
                group.create_task(reset_loop(shared, log, args, deadline))
            group.create_task(solo_reads(shared, log, args, deadline))
    await bench.aclose()
    if shared is not None:
        async with Reader(shared, args.scopes) as reader:
            for record in await reader.read_all(final=True):
                log.write(record)
        await shared.aclose()
    log.write({"t": "worker", "w": args.worker, "status": "done", "at": time.monotonic()})
    log.close()


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tests.reliability.checker.worker")
    parser.add_argument("--url", required=True)
    parser.add_argument("--worker", required=True)
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--tasks", type=int, required=True)
    parser.add_argument("--seconds", type=float, required=True)
    parser.add_argument("--log", required=True)
    parser.add_argument("--solo", action="store_true")
    parser.add_argument("--tiny-timeout", type=float, default=TINY_WRITE_TIMEOUT)
    parser.add_argument("--scopes", type=parse_scopes, default=SCOPES)
    parser.add_argument("--no-resets", action="store_true")
    parser.add_argument("--min-ops", type=int, default=0)
    return parser.parse_args()


if __name__ == "__main__":
    # The library logs every rejection as a warning; the log file has them all already.
    logging.getLogger("noetic_scratchpad").setLevel(logging.CRITICAL)
    asyncio.run(main(parse_args()))
