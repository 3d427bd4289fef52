"""``python -m benchmarks.remote_events URL [--writes N]``: how long another process's
write takes to reach this process's bus (docs/events.md, "Events across processes").

This process opens a core on ``URL`` and subscribes to its bus; a child process (this
module with ``--child``) opens its own and writes one scope ``N`` times, 20 ms apart,
printing the wall-clock time right after each commit. The latency of a write is the time
from that print to the ``UpdateApplied`` of its revision here (one machine, one clock).
Prints the writes heard and the p50 and p99 latency in milliseconds.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time

from noetic_scratchpad import ScratchpadCore, UpdateApplied
from noetic_scratchpad.keys import state_key

THREAD = "remote-events-benchmark"


async def child(url: str, writes: int) -> None:
    async with ScratchpadCore(storage=url, remote_events=False) as core:
        print("ready", flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
        for n in range(writes):
            handle = await core.handle(THREAD, read=False)
            await handle.update({"n": n})
            print(time.time(), flush=True)
            await asyncio.sleep(0.02)


async def measure(url: str, writes: int) -> None:
    async with ScratchpadCore(storage=url) as core:
        heard: dict[int, float] = {}

        def on_event(event: object) -> None:
            if isinstance(event, UpdateApplied) and event.origin and event.revision:
                heard[event.revision] = time.time()

        core.events.subscribe(on_event)
        stored = await core.backend.get_revision(state_key("scratchpad", "thread", THREAD))
        base = stored.revision if stored is not None else 0
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "benchmarks.remote_events",
            url,
            "--writes",
            str(writes),
            "--child",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        assert proc.stdout is not None
        assert (await proc.stdout.readline()).strip() == b"ready"
        await asyncio.sleep(0.5)  # the watch is listening
        out, _ = await proc.communicate(b"go\n")
        sent = [float(line) for line in out.split()]
        await asyncio.sleep(0.5)
    latencies = sorted(
        (heard[base + n + 1] - at) * 1000 for n, at in enumerate(sent) if base + n + 1 in heard
    )
    if not latencies:
        print(f"heard 0/{writes}")
        return
    p99 = latencies[max(0, int(len(latencies) * 0.99) - 1)]
    print(
        f"heard {len(latencies)}/{writes}  p50 {latencies[len(latencies) // 2]:.2f} ms  "
        f"p99 {p99:.2f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("url")
    parser.add_argument("--writes", type=int, default=200)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    asyncio.run((child if args.child else measure)(args.url, args.writes))


if __name__ == "__main__":
    main()
