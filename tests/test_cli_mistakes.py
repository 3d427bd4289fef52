"""Every subcommand's mistakes, as a user makes them: the message and the exit code.

One voice: 0 only on success; 1 when the operation failed, was refused or found nothing
to act on (one line on stderr); 2 for a usage error, reported as argparse reports its own
(the command's usage, then ``noetic-scratchpad COMMAND: error: ...``). The commands run
in-process through :func:`noetic_scratchpad.cli.main`, as the console script runs them.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from noetic_scratchpad import open_storage, scratchpad
from noetic_scratchpad.cli import main
from noetic_scratchpad.cli.common import EXIT_CODES, PROG

MALFORMED = "sqlite:/x.db"
MALFORMED_LINE = (
    "--storage: sqlite URL 'sqlite:/x.db' is malformed: write sqlite:/// and then the file's "
    "path, as in sqlite:///relative/path.db or sqlite:////absolute/path.db"
)


@pytest.fixture(autouse=True)
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test runs in its own directory, with no storage in the environment, and
    leaves no log handler of the command line behind."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("NOETIC_SCRATCHPAD_STORAGE", raising=False)
    yield
    root = logging.getLogger()
    for handler in [h for h in root.handlers if h.get_name() == PROG]:
        root.removeHandler(handler)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def usage_error(err: str, command: str) -> str:
    """The error line of a usage error of ``command``, once the usage is checked first."""
    assert err.startswith(f"usage: {PROG} {command} ")
    *_, line = err.splitlines()
    assert line.startswith(f"{PROG} {command}: error: ")
    assert "Traceback" not in err
    return line.removeprefix(f"{PROG} {command}: error: ")


@pytest.fixture
def pad(tmp_path: Path) -> str:
    """``pad.db`` with thread ``t1`` at revision 2."""
    url = f"sqlite:///{tmp_path / 'pad.db'}"

    async def write() -> None:
        async with await open_storage(url) as backend:
            handle = await scratchpad().open(backend, thread_id="t1")
            await handle.update({"goal": "ship"})
            await handle.update({"steps": ["docs"]})

    asyncio.run(write())
    return url


@pytest.mark.parametrize(
    ("argv", "command", "message"),
    [
        (["show", "--thred", "demo"], "show", "unrecognized arguments: --thred (did you mean "),
        (["history", "--thread", "t", "--limt", "3"], "history", "(did you mean --limit?)"),
        (["revert", "--thread", "t", "--too", "3"], "revert", "(did you mean --to?)"),
        (["reset", "--thread", "t", "--yse"], "reset", "(did you mean --yes?)"),
        (["list", "--jsn"], "list", "unrecognized arguments: --jsn (did you mean --json?)"),
        (["list", "--thread", "x"], "list", "unrecognized arguments: --thread x"),
        (["export", "--resource", "u", "--outptu", "f"], "export", "(did you mean --output?)"),
        (["serve", "--prot", "1"], "serve", "unrecognized arguments: --prot 1 (did you mean "),
        (["mcp", "--shema", "m:M"], "mcp", "(did you mean --schema?)"),
    ],
    ids=lambda value: " ".join(value) if isinstance(value, list) else "",
)
def test_a_mistyped_option_is_reported_as_unrecognized_with_what_was_meant(
    capsys: pytest.CaptureFixture[str], argv: list[str], command: str, message: str
) -> None:
    """A typo is named as argparse names an unknown option, with its command's usage and
    the option probably meant, even when a required option is missing because of it."""
    code, out, err = run(capsys, *argv)
    assert (code, out) == (2, "")
    assert message in usage_error(err, command)


def test_show_thred_names_the_typo_and_the_option_meant(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, _, err = run(capsys, "show", "--thred", "demo")
    assert code == 2
    assert usage_error(err, "show") == "unrecognized arguments: --thred (did you mean --thread?)"


@pytest.mark.parametrize(
    "argv",
    [
        ["serve"],
        ["mcp"],
        ["list"],
        ["show", "--thread", "t"],
        ["history", "--thread", "t"],
        ["revert", "--thread", "t", "--to", "1", "--yes"],
        ["reset", "--all", "--yes"],
        ["migrate", "--yes"],
        ["export", "--resource", "u"],
        ["import", "doc.json"],
        ["erase", "--resource", "u", "--yes"],
    ],
    ids=" ".join,
)
def test_every_command_refuses_a_malformed_storage_url_in_the_same_words(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, argv: list[str]
) -> None:
    """``sqlite:/x.db`` (one slash) and a file in a directory that does not exist are usage
    errors of every command that takes ``--storage``, with the same line; nothing is
    created (``list`` used to answer "No scratchpad is stored", exit code 0)."""
    code, out, err = run(capsys, *argv, "--storage", MALFORMED)
    assert (code, out) == (2, "")
    assert usage_error(err, argv[0]) == MALFORMED_LINE

    code, out, err = run(capsys, *argv, "--storage", "sqlite:///nodir/x.db")
    assert (code, out) == (2, "")
    assert usage_error(err, argv[0]) == (
        f"--storage: cannot open the SQLite database {tmp_path / 'nodir' / 'x.db'}: the "
        f"directory {tmp_path / 'nodir'} does not exist; create it (mkdir -p "
        f"{tmp_path / 'nodir'}) or choose another path"
    )
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", ["serve", "mcp"])
@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("bad", "--schema bad: give the model as module:Model, e.g. myapp.notes:TaskNotes"),
        ("no_such_module:M", "--schema no_such_module:M: cannot import 'no_such_module'"),
        ("json:Nope", "--schema json:Nope: module 'json' has no 'Nope'"),
    ],
)
def test_serve_and_mcp_refuse_a_bad_schema_in_the_same_words(
    capsys: pytest.CaptureFixture[str], command: str, spec: str, message: str
) -> None:
    code, out, err = run(capsys, command, "--schema", spec, "--storage", "memory://")
    assert (code, out) == (2, "")
    assert usage_error(err, command).startswith(message)


def test_a_scope_that_does_not_exist_is_not_found_for_show_history_and_revert(
    capsys: pytest.CaptureFixture[str], pad: str
) -> None:
    """``show``, ``history`` and ``revert`` of a scope with nothing stored exit 1 with the
    same line (``history`` used to print "no journaled writes" and exit 0)."""
    line = (
        f"{PROG}: error: no scratchpad stored for thread 'nope' in {pad}; "
        f"`{PROG} list` shows what is stored\n"
    )
    for argv in (["show"], ["history"], ["revert", "--to", "1", "--yes"]):
        code, out, err = run(capsys, *argv, "--thread", "nope", "--storage", pad)
        assert (code, out, err) == (1, "", line)


def test_revert_to_a_revision_never_written_is_one_line(
    capsys: pytest.CaptureFixture[str], pad: str
) -> None:
    """No WARNING log line repeating the error the command prints."""
    code, out, err = run(
        capsys, "revert", "--thread", "t1", "--to", "999", "--yes", "--storage", pad
    )
    assert (code, out) == (1, "")
    assert err == (
        f"{PROG}: error: the revert was refused (history): There is no revision 999 to revert "
        "to: the scratchpad is at revision 2. Pick one from its history.\n"
    )


def test_revert_without_yes_says_what_it_would_do_and_how_to_confirm(
    capsys: pytest.CaptureFixture[str], pad: str
) -> None:
    code, out, err = run(capsys, "revert", "--thread", "t1", "--to", "1", "--storage", pad)
    assert (code, out) == (1, "")
    assert err == (
        f"{PROG}: error: this would make the scratchpad of thread 't1' what it was at "
        "revision 1 (it is at revision 2); stdin is not a terminal to ask for confirmation, "
        "so nothing was changed: pass --yes to confirm\n"
    )
    code, out, _ = run(capsys, "show", "--thread", "t1", "--json", "--storage", pad)
    assert code == 0
    assert '"steps"' in out  # unchanged


@pytest.mark.parametrize(
    ("argv", "what"),
    [
        (["reset", "--thread", "t1"], "delete the scratchpad of thread 't1' in"),
        (["erase", "--thread", "t1"], "erase everything stored for thread 't1' in"),
    ],
)
def test_every_confirmation_without_a_terminal_speaks_alike(
    capsys: pytest.CaptureFixture[str], pad: str, argv: list[str], what: str
) -> None:
    code, out, err = run(capsys, *argv, "--storage", pad)
    assert (code, out) == (1, "")
    assert err.startswith(f"{PROG}: error: this would {what} {pad}")
    assert err.endswith(
        "; stdin is not a terminal to ask for confirmation, so nothing was "
        f"{'deleted' if argv[0] == 'reset' else 'erased'}: pass --yes to confirm\n"
    )


@pytest.mark.parametrize(
    ("argv", "command", "message"),
    [
        ([], None, "the following arguments are required: COMMAND"),
        (["frobnicate"], None, "argument COMMAND: invalid choice: 'frobnicate'"),
        (["show"], "show", "one of the arguments --thread --resource is required"),
        (["revert", "--thread", "t"], "revert", "the following arguments are required: --to"),
        (["revert", "--thread", "t", "--to", "x"], "revert", "give a whole number, 0 or more"),
        (["revert", "--thread", "t", "--to", "-1"], "revert", "0 or more, not '-1'"),
        (["history", "--thread", "t", "-n", "-5"], "history", "0 or more, not '-5'"),
        (["serve", "--port", "70000"], "serve", "give a port from 0 to 65535, not '70000'"),
        (["show", "--thread", "x" * 600], "show", "--thread: "),
        (["list", "--storage", "memory://"], "list", "--storage: memory:// keeps data only"),
        (["list", "--storage", "bogus://x"], "list", "--storage: unknown storage scheme 'bogus'"),
        (["export"], "export", "name the subject: --resource ID, --thread ID, or both"),
        (["serve", "--session-max-age", "0"], "serve", "'0' is not a positive number"),
        (["mcp", "--resource", "u"], "mcp", "--resource does not apply to --scope thread"),
    ],
    ids=lambda value: " ".join(value)[:40] if isinstance(value, list) else "",
)
def test_usage_errors_exit_2_with_the_usage_and_one_line(
    capsys: pytest.CaptureFixture[str], argv: list[str], command: str | None, message: str
) -> None:
    code, out, err = run(capsys, *argv)
    assert (code, out) == (2, "")
    if command is None:
        assert err.startswith(f"usage: {PROG} ")
        assert message in err.splitlines()[-1]
    else:
        assert message in usage_error(err, command)


def test_the_help_documents_the_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "--help")
    assert (code, err) == (0, "")
    assert " ".join(EXIT_CODES.split()) in " ".join(out.split())
    assert EXIT_CODES.startswith("Exit codes: 0 success; 1 the operation failed")


def test_an_empty_store_says_where_it_looked_and_why(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """``list`` on a store that exists but holds no scratchpad names the file (its
    absolute path for a relative URL) and says the hosts default to ``memory://``."""

    async def create() -> None:
        async with await open_storage("sqlite:///scratchpad.db") as backend:
            await backend.set("other/key", {"a": 1})

    asyncio.run(create())
    code, out, err = run(capsys, "list")
    assert (code, err) == (0, "")
    first, second = out.splitlines()
    assert first == (
        f"No scratchpad is stored in sqlite:///scratchpad.db ({tmp_path / 'scratchpad.db'})."
    )
    assert second.startswith(
        "AgentHarness, the integrations and create_app keep scratchpads "
        "in memory:// unless given storage="
    )


REVISION_LINE = re.compile(
    r"revision \d+  \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z  [a-z]+( call \S+)?"
)


def test_history_and_its_docs_show_one_time_format(
    capsys: pytest.CaptureFixture[str], pad: str
) -> None:
    """``history`` prints times as the HTTP API writes them (ISO 8601, UTC, milliseconds),
    and docs/history.md shows the lines as the command prints them."""
    code, out, _ = run(capsys, "history", "--thread", "t1", "--storage", pad)
    assert code == 0
    printed = [line for line in out.splitlines() if line.startswith("revision ")]
    assert len(printed) == 2
    assert all(REVISION_LINE.fullmatch(line) for line in printed), printed
    page = (Path(__file__).resolve().parents[1] / "docs" / "history.md").read_text()
    shown = [line for line in page.splitlines() if line.startswith("revision ")]
    assert len(shown) == 2
    assert all(REVISION_LINE.fullmatch(line) for line in shown), shown


def test_reset_of_a_scope_with_nothing_stored_is_not_found_as_on_the_api(
    capsys: pytest.CaptureFixture[str], pad: str
) -> None:
    """``reset --thread nope`` exits 1 with the line of ``show`` (the API answers 404);
    ``reset --all`` with nothing stored has nothing to do, and succeeds."""
    code, out, err = run(capsys, "reset", "--thread", "nope", "--yes", "--storage", pad)
    assert (code, out) == (1, "")
    assert err == (
        f"{PROG}: error: no scratchpad stored for thread 'nope' in {pad}; "
        f"`{PROG} list` shows what is stored\n"
    )
    assert run(capsys, "reset", "--all", "--yes", "--storage", pad)[0] == 0
    code, out, err = run(capsys, "reset", "--all", "--yes", "--storage", pad)
    assert (code, out, err) == (0, f"Nothing to reset: no scratchpad in {pad}.\n", "")
