"""``export``, ``import`` and ``erase`` on the command line, run as a user runs them."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
from pathlib import Path

import pytest
from conftest import run_python

pytestmark = pytest.mark.slow


def cli(*args: str, cwd: Path, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "NOETIC_SCRATCHPAD_STORAGE"}
    return run_python("-m", "noetic_scratchpad", *args, cwd=cwd, env=env, stdin=stdin or "")


WRITE = """
import anyio
from noetic_scratchpad import open_storage, scratchpad

async def main():
    async with await open_storage("sqlite:///pad.db") as storage:
        user = await scratchpad(scope="resource").open(storage, thread_id="t1", resource_id="alice")
        await user.update({"name": "Alice"})
        await user.update({"city": "Lyon"})
        await (await scratchpad().open(storage, thread_id="t1")).update({"goal": "trip"})
        await (await scratchpad().open(storage, thread_id="t9")).update({"goal": "bob's"})
anyio.run(main)
"""
STORAGE = ("--storage", "sqlite:///pad.db")


def stored_keys(cwd: Path) -> list[str]:
    with sqlite3.connect(cwd / "pad.db") as conn:
        return [key for (key,) in conn.execute("SELECT key FROM scratchpad_kv ORDER BY key")]


def test_export_erase_and_import_round_trip(tmp_path: Path) -> None:
    assert run_python("-c", WRITE, cwd=tmp_path).returncode == 0

    exported = cli("export", *STORAGE, "--resource", "alice", "--thread", "t1", cwd=tmp_path)
    assert exported.returncode == 0, exported.stderr
    document = json.loads(exported.stdout)
    assert {(s["kind"], s["id"]) for s in document["scopes"]} == {
        ("resource", "alice"),
        ("thread", "t1"),
    }
    to_file = cli(
        "export",
        *STORAGE,
        "--resource",
        "alice",
        "--thread",
        "t1",
        "-o",
        "alice.json",
        cwd=tmp_path,
    )
    assert to_file.stdout == (
        "Exported 2 scope(s) (2 key(s)) of resource 'alice' and thread 't1' to alice.json.\n"
    )

    refused = cli("erase", *STORAGE, "--resource", "alice", "--thread", "t1", cwd=tmp_path)
    assert refused.returncode == 1
    assert "pass --yes" in refused.stderr
    assert len(stored_keys(tmp_path)) == 3

    erased = cli(
        "erase", *STORAGE, "--resource", "alice", "--thread", "t1", "--yes", "--json", cwd=tmp_path
    )
    assert erased.returncode == 0, erased.stderr
    report = json.loads(erased.stdout)
    assert report["keys_deleted"] == 2
    assert report["complete"] is True
    assert report["storage"] == "sqlite:///pad.db"
    assert stored_keys(tmp_path) == ["scopes/scratchpad/thread/t9/state"]

    loaded = cli("import", *STORAGE, "alice.json", cwd=tmp_path)
    assert loaded.returncode == 0, loaded.stderr
    assert loaded.stdout == (
        "Imported 2 key(s), replaced 0, left 0 as they were, into sqlite:///pad.db.\n"
    )
    shown = cli("show", *STORAGE, "--resource", "alice", "--json", cwd=tmp_path)
    assert json.loads(shown.stdout) == {"name": "Alice", "city": "Lyon"}
    history = cli("history", *STORAGE, "--resource", "alice", "--json", cwd=tmp_path)
    assert [entry["update"] for entry in json.loads(history.stdout)] == [
        {"city": "Lyon"},
        {"name": "Alice"},
    ]


def test_a_conflicting_import_fails_until_replace(tmp_path: Path) -> None:
    assert run_python("-c", WRITE, cwd=tmp_path).returncode == 0
    exported = cli("export", *STORAGE, "--thread", "t1", "-o", "t1.json", cwd=tmp_path)
    assert exported.returncode == 0, exported.stderr
    document = json.loads((tmp_path / "t1.json").read_text())
    document["scopes"][0]["keys"]["state"]["value"] = {"goal": "changed"}
    document["scopes"][0]["keys"]["state"]["journal"] = []
    (tmp_path / "changed.json").write_text(json.dumps(document))

    conflict = cli("import", *STORAGE, "changed.json", cwd=tmp_path)
    assert conflict.returncode == 1
    assert conflict.stderr.startswith("noetic-scratchpad: error: 1 key(s) are stored with")
    assert "pass --replace" in conflict.stderr

    replaced = cli("import", *STORAGE, "changed.json", "--replace", "--json", cwd=tmp_path)
    assert replaced.returncode == 0, replaced.stderr
    assert [row["id"] for row in json.loads(replaced.stdout)["replaced"]] == ["t1"]
    shown = cli("show", *STORAGE, "--thread", "t1", "--json", cwd=tmp_path)
    assert json.loads(shown.stdout) == {"goal": "changed"}


def test_usage_and_input_errors(tmp_path: Path) -> None:
    """No subject is a usage error (2); a file that is not an export, a runtime one (1)."""
    no_subject = cli("erase", *STORAGE, "--yes", cwd=tmp_path)
    assert no_subject.returncode == 2
    assert "name the subject: --resource ID, --thread ID, or both" in no_subject.stderr
    (tmp_path / "other.json").write_text('{"format": "other"}')
    bad = cli("import", *STORAGE, "other.json", cwd=tmp_path)
    assert bad.returncode == 1
    assert "other.json: not a noetic-scratchpad/export document" in bad.stderr
    nothing = cli("erase", *STORAGE, "--thread", "x", "--yes", cwd=tmp_path)
    assert nothing.stdout == "Nothing to erase: sqlite:///pad.db holds nothing yet.\n"
    assert not (tmp_path / "pad.db").exists()
