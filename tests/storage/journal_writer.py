"""A process that streams journaled commits into a store, for race and crash tests.

``python journal_writer.py URL NAME TASKS COMMITS KEEP``: opens the store at ``URL`` (its
own connections), prints ``ready``, waits for a line on stdin (so racing processes start
together), then runs ``TASKS`` concurrent tasks; task ``t`` commits ``COMMITS`` times to the
key ``k<t>``. Commit ``n`` of a task stores ``{"writer": NAME, "n": n, "count": c + 1}``
(``c`` the stored count) and journals ``{"writer": NAME, "n": n}``, keeping ``KEEP`` rows.
After each commit returns it prints ``ack <key> <revision> <n>`` (flushed), and ``done`` at
the end. ``tests/storage/test_journal_processes.py`` races several of these on one key,
and kills one with SIGKILL mid-stream.
"""

from __future__ import annotations

import asyncio
import sys

from noetic_scratchpad.storage import open_storage
from noetic_scratchpad.storage.base import Commit, Revision


def emit(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


async def main(url: str, name: str, tasks: int, commits: int, keep: int) -> None:
    async with await open_storage(url) as storage:
        emit("ready")
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)

        async def task(key: str) -> None:
            for n in range(commits):

                def fn(current: Revision, n: int = n) -> Commit:
                    count = (current.value or {}).get("count", 0) + 1
                    entry = {"writer": name, "n": n}
                    return Commit({**entry, "count": count}, entry)

                result = await storage.commit(key, fn, keep=keep)
                emit(f"ack {key} {result.revision} {n}")

        await asyncio.gather(*(task(f"k{t}") for t in range(tasks)))
    emit("done")


if __name__ == "__main__":
    url, name = sys.argv[1], sys.argv[2]
    tasks, commits, keep = map(int, sys.argv[3:6])
    asyncio.run(main(url, name, tasks, commits, keep))
