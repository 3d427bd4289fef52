"""Another process that writes and resets a scope, for the events-across-processes tests.

``python remote_writer.py STORAGE_URL THREAD_ID``: opens a core of its own on the URL and
prints its backend's origin; then, for each line on stdin, ``write`` applies a tool call
(``call_id`` ``remote-N``) to the thread's scratchpad, ``reset`` deletes its state (as the
CLI's ``reset`` does), ``quit`` ends. Each step prints ``done`` once committed.
"""

from __future__ import annotations

import asyncio
import sys

from noetic_scratchpad import ScratchpadCore
from noetic_scratchpad.keys import state_key


async def main(url: str, thread_id: str) -> None:
    async with ScratchpadCore(storage=url, remote_events=False) as core:
        print(getattr(core.backend, "origin", ""), flush=True)
        loop = asyncio.get_running_loop()
        n = 0
        while True:
            line = (await loop.run_in_executor(None, sys.stdin.readline)).strip()
            if line == "write":
                n += 1
                result = await core.call(
                    thread_id,
                    "update",
                    {f"remote_{n}": n},
                    tool="update_scratchpad",
                    call_id=f"remote-{n}",
                )
                assert result.ok, result.text
            elif line == "reset":
                await core.backend.delete(state_key("scratchpad", "thread", thread_id))
            else:
                return
            print("done", flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
