"""The command line's JSON is the HTTP API's: ``list --json`` rows are ``GET api/scopes``
rows, ``history --json`` entries are ``GET .../history`` entries, times alike."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path

import anyio.to_thread
import pytest

from noetic_scratchpad import open_storage, scratchpad
from noetic_scratchpad.cli import main
from noetic_scratchpad.cli.common import PROG
from noetic_scratchpad.server import create_app

from .helpers import api_client


@pytest.fixture(autouse=True)
def no_cli_log_handler() -> Iterator[None]:
    yield
    root = logging.getLogger()
    for handler in [h for h in root.handlers if h.get_name() == PROG]:
        root.removeHandler(handler)


def cli_json(capsys: pytest.CaptureFixture[str], *argv: str) -> object:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert (code, err) == (0, "")
    return json.loads(out)


@pytest.mark.asyncio
async def test_list_and_history_json_are_the_http_apis(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'pad.db'}"
    async with await open_storage(url) as backend:
        thread = await scratchpad().open(backend, thread_id="t1")
        await thread.update({"goal": "ship", "steps": ["tests", "docs"]})
        await thread.update({"steps": ["docs"]})
        user = await scratchpad(scope="resource").open(backend, thread_id="t", resource_id="u1")
        await user.update({"name": "Ada"})

    async with api_client(
        create_app(url, layers=[scratchpad(), scratchpad(scope="resource")])
    ) as client:
        listed = (await client.get("/api/scopes")).json()["scopes"]
        history = (await client.get("/api/scopes/thread/t1/history")).json()["entries"]

    # main() runs its own event loop: run it where none is running.
    rows = await anyio.to_thread.run_sync(cli_json, capsys, "list", "--json", "--storage", url)
    entries = await anyio.to_thread.run_sync(
        cli_json, capsys, "history", "--thread", "t1", "--json", "--storage", url
    )
    assert rows == listed
    assert {row["kind"] for row in rows} == {"thread", "resource"}
    assert entries == history
    assert [entry["revision"] for entry in entries] == [2, 1]
