"""One of several processes racing on one scratchpad scope in PostgreSQL.

``python pg_race_writer.py POSTGRES_URL INDEX WRITES THREAD_ID``: opens its own backend (its
own connection pool), prints ``ready``, waits for a line on stdin (so every process starts
writing at the same moment), then sends ``WRITES`` updates one after another through the
scratchpad layer, update ``n`` writing the key ``p<INDEX>_<n>``. It prints, as one JSON line,
the number of keys the state had right after each of its writes.

``tests/storage/test_postgres.py`` runs four of these and checks that nothing was lost.
"""

from __future__ import annotations

import asyncio
import json
import sys

from noetic_scratchpad import ExecutionContext, ScopedStorage, ScratchpadHandle, scratchpad
from noetic_scratchpad.storage import open_storage


async def main(url: str, index: int, writes: int, thread_id: str) -> None:
    layer = scratchpad(scope="thread")
    async with await open_storage(url, pool_size=2) as storage:
        ctx = ExecutionContext(thread_id=thread_id)
        scoped = ScopedStorage.for_layer(storage, layer, ctx)
        await layer.hooks.init(storage=scoped, scope_key=scoped.scope_key, ctx=ctx)
        handle = ctx.context[layer.id]
        assert isinstance(handle, ScratchpadHandle)
        print("ready", flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
        sizes = []
        for n in range(writes):
            await handle.update({f"p{index}_{n}": n})
            state = handle.state  # the state this write produced (one writer per process)
            assert isinstance(state, dict)
            sizes.append(len(state))
        print(json.dumps(sizes), flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]))
