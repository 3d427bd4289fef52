"""Every Python block of README.md and docs/ runs, in order per page (see tests/doc_blocks.py
for how a block says that it continues another, awaits at top level or is skipped).

Each chain runs in a fresh interpreter in an empty directory (SQLite files land there), with
no network: models are scripted, storage is memory:// or a file in that directory.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import run_python
from doc_blocks import ROOT, Block, chains, pages

CHAINS = [chain for page in pages() for chain in chains(page)]
RUN = [chain for chain in CHAINS if chain[0].skip is None]
SKIPPED = [chain[0] for chain in CHAINS if chain[0].skip is not None]


def test_the_blocks_are_found_and_almost_all_run() -> None:
    """The count the docs test covers: every block but those that need a service named in
    their skip reason (a PostgreSQL or Redis host of the example, FastAPI, Logfire)."""
    every = [block for chain in CHAINS for block in chain]
    ran = [block for chain in RUN for block in chain]
    assert len(every) >= 50
    assert len(ran) + len(SKIPPED) == len(every)
    assert len(SKIPPED) <= 7, [block.where for block in SKIPPED]
    for block in SKIPPED:
        assert block.skip is not None, block.where
        assert len(block.skip) > 10, block.where


@pytest.mark.slow
@pytest.mark.parametrize("chain", RUN, ids=[chain[0].where for chain in RUN])
def test_the_block_runs(chain: list[Block], tmp_path: Path) -> None:
    document = [
        {"code": block.code, "awaits": block.awaits, "where": block.where} for block in chain
    ]
    (tmp_path / "chain.json").write_text(json.dumps(document), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests")])}
    env.pop("NOETIC_SCRATCHPAD_STORAGE", None)
    ran = run_python(
        str(ROOT / "tests" / "doc_blocks.py"), "chain.json", cwd=tmp_path, env=env, timeout=120
    )
    assert ran.returncode == 0, f"{[block.where for block in chain]}\n{ran.stderr[-3000:]}"
    if chain[-1].prints is not None:
        assert ran.stdout.splitlines() == chain[-1].prints.splitlines()


def test_the_output_a_page_shows_is_checked() -> None:
    """Blocks followed by "prints:" and their output: the runs above compare it."""
    shown = [chain[-1].where for chain in RUN if chain[-1].prints is not None]
    assert len(shown) >= 2, shown


@pytest.mark.asyncio
async def test_the_log_line_events_md_shows_is_the_one_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """docs/events.md's rejected-update record: the same level, logger, message name and
    keys in the same order as a real one (values with "..." in the page stand for any)."""
    import logging
    import re

    from pydantic import BaseModel

    from noetic_scratchpad import ScratchpadValidationError, scratchpad
    from noetic_scratchpad.storage import MemoryStorage

    class Notes(BaseModel):
        blockers: list[str] = []

    page = (ROOT / "docs" / "events.md").read_text(encoding="utf-8")
    (shown,) = re.findall(r"^WARNING noetic_scratchpad\.events: update_rejected .*$", page, re.M)
    handle = await scratchpad(schema=Notes).open(MemoryStorage(), thread_id="t1")
    with (
        caplog.at_level(logging.WARNING, logger="noetic_scratchpad"),
        pytest.raises(ScratchpadValidationError),
    ):
        await handle.call("update", '{"blockers": "x"}', call_id="call_3")
    (record,) = caplog.records
    logged = f"{record.levelname} {record.name}: {record.getMessage()}"

    def keys(line: str) -> list[str]:
        return re.findall(r"(?:^|\s)(\w+)=", re.sub(r'"[^"]*"', '""', line))

    assert keys(logged) == keys(shown)
    for part in shown.split():
        if "..." not in part and not part.startswith('message="') and '"' not in part:
            assert part in logged.split(), part
