"""A process that writes or reverts one scope of a shared store, for the revert race test.

``python journal_racer.py URL ROLE NAME DIR``. ``write``: update the scope of thread ``t1``
up to 100 times, until both reverters are done (``DIR/*.done``). ``revert``: once the
writers have begun, revert 40 times to two revisions back, then print the outcomes as
one JSON line (``{"reverted": 40}`` when every revert succeeded) and create
``DIR/NAME.done``. ``tests/layer/test_journal_races.py`` runs three writers and two
reverters on one SQLite file.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections import Counter
from pathlib import Path

from noetic_scratchpad import ScratchpadUpdateError, open_storage, scratchpad

WRITES = 100
REVERTS = 40
HISTORY_LIMIT = 1000


async def write(url: str, name: str, directory: Path) -> None:
    async with await open_storage(url) as storage:
        handle = await scratchpad(history_limit=HISTORY_LIMIT).open(storage, thread_id="t1")
        for n in range(WRITES):
            if len(list(directory.glob("*.done"))) >= 2:  # noqa: ASYNC240 (a test's few files)
                break
            await handle.update({name: n})
            await asyncio.sleep(0.001)
    print("{}")


async def revert(url: str, name: str, directory: Path) -> None:
    outcomes: Counter[str] = Counter()
    async with await open_storage(url) as storage:
        handle = await scratchpad(history_limit=HISTORY_LIMIT).open(storage, thread_id="t1")
        while handle.revision < 5:  # the writers have begun
            await asyncio.sleep(0.005)
            await handle.refresh()
        for _ in range(REVERTS):
            await handle.refresh()
            try:
                await handle.revert(handle.revision - 2)
                outcomes["reverted"] += 1
            except ScratchpadUpdateError as exc:
                outcomes[exc.reason] += 1
            await asyncio.sleep(0.002)
    (directory / f"{name}.done").touch()
    print(json.dumps(dict(outcomes)))


if __name__ == "__main__":
    url, role, name, directory = sys.argv[1:5]
    asyncio.run((write if role == "write" else revert)(url, name, Path(directory)))
