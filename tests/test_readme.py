"""The README's example runs as printed."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import run_python

README = Path(__file__).resolve().parent.parent / "README.md"


@pytest.mark.slow
def test_readme_example_runs_and_prints_the_stored_scratchpad(tmp_path: Path) -> None:
    """The README's example runs in a fresh interpreter on SQLite, prints the model's answer
    and the stored scratchpad, and leaves the database file it names."""
    (block,) = re.findall(r"```python[^\n]*\n(.*?)```", README.read_text(), re.S)
    result = run_python("-c", block, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == (
        "Noted: deploying v2.\n{'currentGoal': 'Deploy v2', 'completedSteps': ['write tests']}\n"
    )
    assert (tmp_path / "scratchpad.db").exists()


def _commands() -> list[str]:
    """Every subcommand of ``noetic-scratchpad``, from its parser."""
    import argparse

    from noetic_scratchpad.cli.parser import build_parser

    (subparsers,) = (
        action
        for action in build_parser()._actions
        if isinstance(action, argparse._SubParsersAction)
    )
    return sorted(subparsers.choices)


def test_the_readme_leads_to_every_door_with_its_extra() -> None:
    """Own loop, harness, pydantic-ai, Agents SDK, MCP and the HTTP app with its inspector:
    each has its page linked and, where it needs one, its extra named."""
    text = README.read_text()
    for page in (
        "docs/own-loop.md",
        "docs/harness.md",
        "docs/integrations/pydantic-ai.md",
        "docs/integrations/openai-agents.md",
        "docs/integrations/mcp.md",
        "docs/server.md",
    ):
        assert f"]({page})" in text, page
        assert (README.parent / page).exists(), page
    for extra in ("pydantic-ai", "openai-agents", "mcp", "server"):
        assert f'pip install "noetic-scratchpad[{extra}]"' in text, extra
    assert "noetic-scratchpad serve" in text
    assert "inspector" in text
    assert "](docs/images/inspector.png)" in text
    assert (README.parent / "docs" / "images" / "inspector.png").exists()


def test_the_readme_and_the_quickstart_list_every_command() -> None:
    """The README's command block and the quickstart's table name every subcommand the
    parser has (a new command cannot be left out of either)."""
    commands = _commands()
    assert {"history", "revert", "serve", "mcp", "migrate", "export", "import"} <= set(commands)
    readme = README.read_text()
    quickstart = (README.parent / "docs" / "quickstart.md").read_text()
    for command in commands:
        assert f"noetic-scratchpad {command}" in readme, command
        assert f"| `noetic-scratchpad {command}" in quickstart, command
