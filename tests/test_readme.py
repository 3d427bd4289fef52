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
    (block,) = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    result = run_python("-c", block, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == (
        "Noted: deploying v2.\n{'currentGoal': 'Deploy v2', 'completedSteps': ['write tests']}\n"
    )
    assert (tmp_path / "scratchpad.db").exists()
