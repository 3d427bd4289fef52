"""The ``noetic-scratchpad`` command, run as a subprocess like a user runs it."""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest
from conftest import run_python

from noetic_scratchpad.cli.common import EMPTY_STORE_HINT

pytestmark = pytest.mark.slow


def cli(*args: str, cwd: Path, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``python -m noetic_scratchpad ARGS`` in ``cwd`` with no storage in the env."""
    env = {k: v for k, v in os.environ.items() if k != "NOETIC_SCRATCHPAD_STORAGE"}
    return run_python("-m", "noetic_scratchpad", *args, cwd=cwd, env=env, stdin=stdin or "")


FINAL_STATE = {
    "currentGoal": "Ship billing service v2",
    "completedSteps": ["Wrote the release notes", "Ran the staging migration"],
    "blockers": [],
}


def test_demo_runs_on_the_default_sqlite_file_and_shows_blocks_and_updates(
    tmp_path: Path,
) -> None:
    """``demo`` writes ./scratchpad.db, prints each block the model sees, every applied
    update, the one rejected update and the final state; stderr stays clean."""
    result = cli("demo", cwd=tmp_path)

    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert (tmp_path / "scratchpad.db").exists()
    out = result.stdout
    assert "Scratchpad demo on sqlite:///scratchpad.db, thread 'demo'" in out
    assert out.count("[turn ") == 3
    assert out.count("   + scratchpad updated by tool:") == 3
    assert out.count("   ! update rejected by the tool path (schema):") == 1
    assert "blockers: Input should be a valid list" in out
    assert out.count("   the model sees:") == 3
    assert "     | <scratchpad>" in out
    assert out.index("! update rejected") < out.index('{"blockers": ["The staging database')
    final = out[out.index("Stored scratchpad:\n") + len("Stored scratchpad:\n") :]
    assert json.loads(final[: final.index("\n\nInspect it:")]) == FINAL_STATE

    again = cli("demo", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert again.stdout == out


def test_show_list_and_reset_after_the_demo(tmp_path: Path) -> None:
    """``show`` prints the block or JSON, ``list`` the scope with size and time, ``reset
    --yes`` deletes it, after which ``show`` fails with exit code 1."""
    url = f"sqlite:///{tmp_path / 'data' / 'pad.db'}"
    (tmp_path / "data").mkdir()
    assert cli("demo", "--storage", url, "--thread", "t-1", cwd=tmp_path).returncode == 0

    shown = cli("show", "--thread", "t-1", "--storage", url, cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith("<scratchpad>\n{\n")
    assert shown.stdout.endswith("</scratchpad>\n")
    as_json = cli("show", "--thread", "t-1", "--json", "--storage", url, cwd=tmp_path)
    assert json.loads(as_json.stdout) == FINAL_STATE
    other_kind = cli("show", "--resource", "t-1", "--json", "--storage", url, cwd=tmp_path)
    assert other_kind.returncode == 1  # resource t-1 is another scope than thread t-1

    listed = cli("list", "--json", "--storage", url, cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    (row,) = json.loads(listed.stdout)
    assert set(row) == {"kind", "id", "layer", "revision", "size", "updated_at"}  # as the API's
    assert (row["kind"], row["id"], row["layer"]) == ("thread", "t-1", "scratchpad")
    assert row["revision"] == 3  # the demo's three updates
    assert row["size"] == len(json.dumps(FINAL_STATE, separators=(",", ":")))
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", row["updated_at"])
    table = cli("list", "--storage", url, cwd=tmp_path).stdout.splitlines()
    assert table[0].split() == ["KIND", "ID", "REVISION", "SIZE", "LAST", "WRITE"]
    assert table[1].split() == ["thread", "t-1", "3", str(row["size"]), "B", row["updated_at"]]
    assert table[-1] == f"1 scope(s) in {url}"

    reset = cli("reset", "--thread", "t-1", "--yes", "--storage", url, cwd=tmp_path)
    assert reset.returncode == 0, reset.stderr
    assert reset.stdout == "Deleted the scratchpad of thread 't-1' (1 key(s)).\n"
    gone = cli("show", "--thread", "t-1", "--storage", url, cwd=tmp_path)
    assert gone.returncode == 1
    assert gone.stdout == ""
    assert gone.stderr.startswith("noetic-scratchpad: error: no scratchpad stored for thread")
    assert gone.stderr.count("\n") == 1
    assert json.loads(cli("list", "--json", "--storage", url, cwd=tmp_path).stdout) == []


def test_reset_asks_and_refuses_without_a_terminal(tmp_path: Path) -> None:
    """Without ``--yes`` and without a TTY, ``reset`` deletes nothing and exits 1."""
    assert cli("demo", cwd=tmp_path).returncode == 0
    refused = cli("reset", "--all", cwd=tmp_path, stdin="y\n")
    assert refused.returncode == 1
    assert refused.stderr == (
        "noetic-scratchpad: error: this would delete every scratchpad (all threads and "
        "resources) in sqlite:///scratchpad.db (1 key(s)); stdin is not a terminal to ask "
        "for confirmation, so nothing was deleted: pass --yes to confirm\n"
    )
    assert json.loads(cli("show", "--thread", "demo", "--json", cwd=tmp_path).stdout) == FINAL_STATE
    done = cli("reset", "--all", "-y", cwd=tmp_path)
    assert done.returncode == 0
    assert done.stdout == "Deleted every scratchpad (all threads and resources) (1 key(s)).\n"


def test_inspecting_a_missing_database_creates_nothing(tmp_path: Path) -> None:
    """``list`` on a database that does not exist says where it looked, why it may be empty
    and how to share one file with an app, and creates no file; ``show`` and ``history``
    fail the same way, with the same words; ``reset`` has nothing to do."""
    listed = cli("list", cwd=tmp_path)
    assert listed.returncode == 0
    looked = (
        f"no scratchpad is stored in sqlite:///scratchpad.db: the file "
        f"{tmp_path / 'scratchpad.db'} does not exist yet"
    )
    assert listed.stdout == f"{looked[0].upper()}{looked[1:]}.\n{EMPTY_STORE_HINT}.\n"
    assert "memory://" in EMPTY_STORE_HINT
    assert "NOETIC_SCRATCHPAD_STORAGE" in EMPTY_STORE_HINT
    for command in ("show", "history"):
        shown = cli(command, "--thread", "x", cwd=tmp_path)
        assert shown.returncode == 1
        assert shown.stderr == f"noetic-scratchpad: error: {looked}; {EMPTY_STORE_HINT}\n"
    reset = cli("reset", "--all", "--yes", cwd=tmp_path)
    assert reset.returncode == 0
    assert not (tmp_path / "scratchpad.db").exists()


def test_usage_errors_exit_2_and_runtime_errors_exit_1(tmp_path: Path) -> None:
    """A missing command or option is a usage error (2), and so is a storage URL that
    cannot work: the usage and one line on stderr, no traceback."""
    missing = cli(cwd=tmp_path)
    assert missing.returncode == 2
    assert "the following arguments are required: COMMAND" in missing.stderr
    no_scope = cli("show", cwd=tmp_path)
    assert no_scope.returncode == 2
    assert "one of the arguments --thread --resource is required" in no_scope.stderr
    memory = cli("list", "--storage", "memory://", cwd=tmp_path)
    assert memory.returncode == 2
    assert "keeps data only inside the process that wrote it" in memory.stderr
    bad = cli("show", "--thread", "t", "--storage", "bogus://x", cwd=tmp_path)
    assert bad.returncode == 2
    assert bad.stderr.startswith("usage: noetic-scratchpad show ")
    assert bad.stderr.splitlines()[-1].startswith(
        "noetic-scratchpad show: error: --storage: unknown storage scheme 'bogus'"
    )
    assert "Traceback" not in bad.stderr


def test_help_everywhere_and_version(tmp_path: Path) -> None:
    """``--help`` works for the program and every command; ``--version`` prints it."""
    from noetic_scratchpad import __version__

    for command in ([], ["demo"], ["show"], ["list"], ["reset"]):
        shown = cli(*command, "--help", cwd=tmp_path)
        assert shown.returncode == 0
        assert shown.stdout.startswith("usage: noetic-scratchpad")
    assert "--storage URL" in cli("list", "--help", cwd=tmp_path).stdout
    version = cli("--version", cwd=tmp_path)
    assert version.stdout == f"noetic-scratchpad {__version__}\n"


COMMANDS = ("demo", "show", "list", "history", "revert", "reset", "migrate")


@pytest.mark.parametrize("command", COMMANDS)
def test_help_of_every_command_exits_0_with_usage_on_stdout(tmp_path: Path, command: str) -> None:
    """``COMMAND --help`` prints that command's usage on stdout, nothing on stderr, exit 0."""
    shown = cli(command, "--help", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith(f"usage: noetic-scratchpad {command} ")
    assert shown.stderr == ""
    for other in (c for c in COMMANDS if c != command):
        assert f"noetic-scratchpad {other} " not in shown.stdout


def test_an_unknown_command_exits_2_with_usage_on_stderr(tmp_path: Path) -> None:
    """A command that does not exist is a usage error: usage and the choices on stderr."""
    unknown = cli("frobnicate", cwd=tmp_path)
    assert unknown.returncode == 2
    assert unknown.stdout == ""
    assert unknown.stderr.startswith("usage: noetic-scratchpad")
    assert "invalid choice: 'frobnicate'" in unknown.stderr
    assert "Traceback" not in unknown.stderr


def test_list_json_without_a_scratchpad_prints_an_empty_list(tmp_path: Path) -> None:
    """``list --json`` prints ``[]`` both for a database file that does not exist (and does
    not create it) and for one that holds other keys but no scratchpad."""
    url = f"sqlite:///{tmp_path / 'pad.db'}"
    missing = cli("list", "--json", "--storage", url, cwd=tmp_path)
    assert missing.returncode == 0, missing.stderr
    assert missing.stdout == "[]\n"
    assert not (tmp_path / "pad.db").exists()

    script = f"""
import anyio
from noetic_scratchpad import open_storage

async def main():
    backend = await open_storage({url!r})
    await backend.set("unrelated/key", {{"not": "a scratchpad"}})
    await backend.aclose()
anyio.run(main)
"""
    written = run_python("-c", script, cwd=tmp_path)
    assert written.returncode == 0, written.stderr
    assert (tmp_path / "pad.db").exists()
    empty = cli("list", "--json", "--storage", url, cwd=tmp_path)
    assert empty.returncode == 0, empty.stderr
    assert empty.stdout == "[]\n"
    assert empty.stderr == ""


def test_storage_comes_from_the_environment(tmp_path: Path) -> None:
    """With no ``--storage``, ``$NOETIC_SCRATCHPAD_STORAGE`` chooses the database."""
    url = f"sqlite:///{tmp_path / 'env.db'}"
    env = {**os.environ, "NOETIC_SCRATCHPAD_STORAGE": url}
    result = run_python("-m", "noetic_scratchpad", "demo", cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stderr
    assert f"Scratchpad demo on {url}" in result.stdout
    assert (tmp_path / "env.db").exists()
    assert not (tmp_path / "scratchpad.db").exists()


def test_reset_deletes_exactly_one_scope(tmp_path: Path) -> None:
    """``reset --thread a`` deletes thread ``a`` only: threads ``a/b`` and ``a/x/y`` and
    resource ``a`` keep their notes (it used to delete every key under the prefix ``a/``)."""
    url = f"sqlite:///{tmp_path / 'pad.db'}"
    script = f"""
import anyio
from noetic_scratchpad import Agent, AgentHarness, ScriptedModel, scratchpad

async def main():
    for scope in ("thread", "resource"):
        harness = AgentHarness(name=scope, agent=Agent(model=ScriptedModel([])), params={{}},
                               context_layers=[scratchpad(scope=scope)], storage={url!r})
        async with harness:
            for scope_id in ("a", "a/b", "a/x/y"):
                await harness.update_state("scratchpad", {{"id": scope_id}},
                                           thread_id="t", resource_id=scope_id)
            if scope == "thread":
                for scope_id in ("a", "a/b", "a/x/y"):
                    await harness.update_state("scratchpad", {{"id": scope_id}}, thread_id=scope_id)
anyio.run(main)
"""
    written = run_python("-c", script, cwd=tmp_path)
    assert written.returncode == 0, written.stderr
    before = json.loads(cli("list", "--json", "--storage", url, cwd=tmp_path).stdout)
    assert len(before) == 7  # thread t, three more threads, three resources

    reset = cli("reset", "--thread", "a", "--yes", "--storage", url, cwd=tmp_path)
    assert reset.stdout == "Deleted the scratchpad of thread 'a' (1 key(s)).\n"
    after = json.loads(cli("list", "--json", "--storage", url, cwd=tmp_path).stdout)
    assert sorted((row["kind"], row["id"]) for row in after) == [
        ("resource", "a"),
        ("resource", "a/b"),
        ("resource", "a/x/y"),
        ("thread", "a/b"),
        ("thread", "a/x/y"),
        ("thread", "t"),
    ]


def test_migrate_moves_a_database_of_the_first_release(tmp_path: Path) -> None:
    """A database the first release wrote (threads ``t1`` and ``a/b``, resource ``u42``, all
    in one namespace) is listed as legacy, and ``migrate`` moves it to the new layout:
    afterwards ``show`` finds each scope and ``list`` has nothing legacy left. Running it
    again changes nothing."""
    db = tmp_path / "legacy.db"
    shutil.copy(Path(__file__).parent / "data" / "legacy-0.1.0.db", db)
    url = f"sqlite:///{db}"
    listed = json.loads(cli("list", "--json", "--storage", url, cwd=tmp_path).stdout)
    assert sorted((row["kind"], row["id"]) for row in listed) == [
        ("legacy", "a/b"),
        ("legacy", "t1"),
        ("legacy", "u42"),
    ]
    hint = cli("show", "--thread", "t1", "--storage", url, cwd=tmp_path)
    assert hint.returncode == 1
    assert "migrate" in hint.stderr
    assert "migrate" in cli("list", "--storage", url, cwd=tmp_path).stdout

    moved = cli("migrate", "--yes", "--storage", url, cwd=tmp_path)
    assert moved.returncode == 0, moved.stderr
    assert moved.stdout.startswith("Moved 3 scratchpad(s) to scopes/scratchpad/thread/.")
    for scope_id, goal in (("t1", "thread t1"), ("a/b", "thread a/b"), ("u42", "user u42")):
        shown = cli("show", "--thread", scope_id, "--json", "--storage", url, cwd=tmp_path)
        assert json.loads(shown.stdout) == {"goal": goal}
    listed = json.loads(cli("list", "--json", "--storage", url, cwd=tmp_path).stdout)
    assert {row["kind"] for row in listed} == {"thread"}
    again = cli("migrate", "--yes", "--storage", url, cwd=tmp_path)
    assert again.stdout.startswith("Nothing to migrate")


def test_migrate_as_resource_keeps_a_newer_state(tmp_path: Path) -> None:
    """``migrate --as resource`` makes the old scopes resource scopes; where the new layout
    already holds a scope, that newer state wins and the old one is dropped."""
    db = tmp_path / "legacy.db"
    shutil.copy(Path(__file__).parent / "data" / "legacy-0.1.0.db", db)
    url = f"sqlite:///{db}"
    with sqlite3.connect(db) as conn:
        conn.execute(
            "INSERT INTO scratchpad_kv VALUES "
            "('scopes/scratchpad/resource/u42/state', '{\"goal\": \"newer\"}', 0)"
        )
    moved = cli("migrate", "--as", "resource", "--yes", "--storage", url, cwd=tmp_path)
    assert moved.returncode == 0, moved.stderr
    assert "1 had a newer state" in moved.stdout
    shown = cli("show", "--resource", "u42", "--json", "--storage", url, cwd=tmp_path)
    assert json.loads(shown.stdout) == {"goal": "newer"}
    shown = cli("show", "--resource", "a/b", "--json", "--storage", url, cwd=tmp_path)
    assert json.loads(shown.stdout) == {"goal": "thread a/b"}


def test_an_unusable_scope_id_is_a_usage_error(tmp_path: Path) -> None:
    """An id longer than the limit is refused with a message, exit code 2."""
    url = f"sqlite:///{tmp_path / 'pad.db'}"
    refused = cli("reset", "--thread", "x" * 600, "--yes", "--storage", url, cwd=tmp_path)
    assert refused.returncode == 2
    assert "over the limit of 512" in refused.stderr


def test_history_shows_a_bad_overwrite_and_revert_undoes_it(tmp_path: Path) -> None:
    """A model's overwrite that dropped a step is seen in ``history`` (text and JSON) and
    undone by ``revert --to``, which is a revision of its own."""
    url = f"sqlite:///{tmp_path / 'pad.db'}"
    script = f"""
import anyio
from noetic_scratchpad import Agent, AgentHarness, ScriptedModel, scratchpad

async def main():
    harness = AgentHarness(name="h", agent=Agent(model=ScriptedModel([])),
                           context_layers=[scratchpad()], storage={url!r})
    async with harness:
        await harness.update_state("scratchpad", {{"goal": "ship", "steps": ["tests", "docs"]}},
                                   thread_id="t1")
        await harness.update_state("scratchpad", {{"steps": ["docs"]}}, thread_id="t1")
anyio.run(main)
"""
    written = run_python("-c", script, cwd=tmp_path)
    assert written.returncode == 0, written.stderr

    shown = cli("history", "--thread", "t1", "--storage", url, cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0].startswith("revision 2  ")
    assert lines[0].endswith("  api")
    assert lines[1] == '  ~ steps: ["tests", "docs"] -> ["docs"]'
    assert lines[2].startswith("revision 1  ")
    assert '  + goal: "ship"' in lines

    as_json = json.loads(
        cli("history", "--thread", "t1", "--json", "--storage", url, cwd=tmp_path).stdout
    )
    assert [entry["revision"] for entry in as_json] == [2, 1]
    assert as_json[0]["changes"] == {"steps": {"before": ["tests", "docs"], "after": ["docs"]}}

    refused = cli("revert", "--thread", "t1", "--to", "1", "--storage", url, cwd=tmp_path)
    assert refused.returncode == 1  # no terminal, no --yes: nothing is changed
    reverted = cli("revert", "--thread", "t1", "--to", "1", "--yes", "--storage", url, cwd=tmp_path)
    assert reverted.returncode == 0, reverted.stderr
    assert "revision 3" in reverted.stdout
    state = json.loads(
        cli("show", "--thread", "t1", "--json", "--storage", url, cwd=tmp_path).stdout
    )
    assert state == {"goal": "ship", "steps": ["tests", "docs"]}
    newest = cli("history", "--thread", "t1", "-n", "1", "--storage", url, cwd=tmp_path)
    assert newest.stdout.splitlines()[0].endswith("  revert")

    too_old = cli("revert", "--thread", "t1", "--to", "9", "--yes", "--storage", url, cwd=tmp_path)
    assert too_old.returncode == 1
    assert "no revision 9" in too_old.stderr


def test_serve_banner_hides_the_urls_secrets(capsys: pytest.CaptureFixture[str]) -> None:
    """The banner shows the storage URL as every message does: password, query values."""
    import socket

    from noetic_scratchpad.cli.serve import print_banner

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        print_banner("postgresql://app:s3cret@db/notes?sslpassword=k3y-k3y", sock, token=True)

    out = capsys.readouterr().out
    assert "serving postgresql://app:***@db/notes?sslpassword=***\n" in out
    assert "s3cret" not in out
    assert "k3y-k3y" not in out


@pytest.mark.parametrize(
    "command",
    [
        ["demo"],
        ["show", "--thread", "t"],
        ["list"],
        ["list", "--json"],
        ["history", "--thread", "t"],
        ["revert", "--thread", "t", "--to", "1", "--yes"],
        ["reset", "--all", "--yes"],
        ["migrate", "--yes"],
        ["serve", "--port", "0"],
        ["mcp"],
    ],
    ids=" ".join,
)
def test_a_sqlite_path_too_long_is_a_configuration_error(
    tmp_path: Path, command: list[str]
) -> None:
    """Every command refuses a path the system refuses, as it refuses any bad storage URL:
    a usage error (exit code 2), one readable line saying what to do; nothing is created."""
    url = "sqlite:///" + "a" * 5000 + ".db"

    result = cli(*command, "--storage", url, cwd=tmp_path)

    assert result.returncode == 2, result.stderr
    line = result.stderr.splitlines()[-1]
    assert line.startswith(
        f"noetic-scratchpad {command[0]}: error: --storage: cannot open the SQLite database"
    )
    assert f"too long ({len(str(tmp_path)) + 5004:,} characters, its longest name 5,003)" in line
    assert result.stderr.endswith("; choose a shorter path\n")
    assert len(line) < 400
    assert os.listdir(tmp_path) == []


def test_a_refused_write_is_one_line_from_its_data_with_no_hint_for_a_model(
    tmp_path: Path,
) -> None:
    """``revert`` to a revision that was never written: the line says what was refused and
    why, and tells no one to call a tool."""
    url = f"sqlite:///{tmp_path / 'pad.db'}"
    script = f"""
import anyio
from noetic_scratchpad import open_storage, scratchpad

async def main():
    async with await open_storage({url!r}) as backend:
        handle = await scratchpad().open(backend, thread_id="t1")
        await handle.update({{"goal": "ship"}})
anyio.run(main)
"""
    written = run_python("-c", script, cwd=tmp_path)
    assert written.returncode == 0, written.stderr
    refused = cli("revert", "--thread", "t1", "--to", "9", "--yes", "--storage", url, cwd=tmp_path)
    assert refused.returncode == 1
    (line,) = refused.stderr.splitlines()  # no log line of the UpdateRejected event besides
    assert line.startswith(
        "noetic-scratchpad: error: the revert was refused (history): There is no revision 9"
    )
    assert "scratchpad/update" not in refused.stderr


def test_main_in_process_leaves_the_callers_logging_as_it_was(tmp_path: Path) -> None:
    """An application or a test that runs ``main()`` in its own process keeps its logging:
    the levels and handlers the command set for itself are put back when it returns."""
    import logging

    from noetic_scratchpad.cli import main

    root, package = logging.getLogger(), logging.getLogger("noetic_scratchpad")
    before = (root.level, package.level, list(root.handlers))
    storage = f"sqlite:///{tmp_path / 'none.db'}"
    assert main(["--log-level", "error", "list", "--storage", storage]) == 0
    assert main(["show", "--thread", "nope", "--storage", storage]) == 1
    assert (root.level, package.level, list(root.handlers)) == before
