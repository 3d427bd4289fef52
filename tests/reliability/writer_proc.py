"""A process that streams scratchpad updates into SQLite until it is killed.

``python writer_proc.py SQLITE_URL TASKS SCOPES UPDATES [FIRST]``: ``TASKS`` concurrent
writers, numbered from ``FIRST`` (default 0) so that several processes can share a file,
spread over ``SCOPES`` threads (``t0``, ``t1``, ...). Writer ``w`` sends update ``n`` as
``{"w<w>": {"last": n, "u<n>": payload(w, n)}}`` and prints ``ack <w> <n>`` (flushed) once
the update call has returned, that is once the write is committed. It prints ``ready`` after
the storage is open and ``done`` if it was not killed first.

``tests/reliability/test_kill.py`` kills it with SIGKILL at a random moment and checks that
every acknowledged update survived and nothing is torn.
"""

from __future__ import annotations

import sys

import anyio

from noetic_scratchpad import ExecutionContext, ScopedStorage, ScratchpadHandle, scratchpad
from noetic_scratchpad.storage import open_storage


def payload(writer: int, n: int) -> str:
    """The value update ``n`` of ``writer`` stores; its length varies so rows change size."""
    return f"{writer}:{n}:" + "x" * (n % 37)


def emit(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


async def main(url: str, tasks: int, scopes: int, updates: int, first: int = 0) -> None:
    layer = scratchpad(max_state_bytes=10_000_000)
    async with await open_storage(url) as storage:
        emit("ready")

        async def writer(index: int) -> None:
            ctx = ExecutionContext(thread_id=f"t{index % scopes}")
            scoped = ScopedStorage.for_layer(storage, layer, ctx)
            await layer.hooks.init(storage=scoped, scope_key=scoped.scope_key, ctx=ctx)
            handle = ctx.context[layer.id]
            assert isinstance(handle, ScratchpadHandle)
            for n in range(updates):
                await handle.update({f"w{index}": {"last": n, f"u{n}": payload(index, n)}})
                emit(f"ack {index} {n}")

        async with anyio.create_task_group() as tg:
            for index in range(first, first + tasks):
                tg.start_soon(writer, index)
    emit("done")


if __name__ == "__main__":
    tasks, scopes, updates = map(int, sys.argv[2:5])
    first = int(sys.argv[5]) if len(sys.argv) > 5 else 0
    anyio.run(main, sys.argv[1], tasks, scopes, updates, first)
