"""docs/own-loop.md: its example runs as it is and prints what the page says it prints."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import run_python

DOC = Path(__file__).resolve().parents[2] / "docs" / "own-loop.md"


@pytest.mark.slow
def test_own_loop_example_runs_and_prints_what_the_doc_shows(tmp_path: Path) -> None:
    """The first Python block of docs/own-loop.md runs with no harness and prints exactly the
    page's text block, and nothing else: the library's log records print nothing."""
    page = DOC.read_text(encoding="utf-8")
    code = re.findall(r"```python[^\n]*\n(.*?)```", page, re.DOTALL)[0]
    expected = re.findall(r"```text\n(.*?)```", page, re.DOTALL)[0]
    script = tmp_path / "own_loop.py"
    script.write_text(code, encoding="utf-8")

    completed = run_python(str(script), cwd=tmp_path)
    assert completed.returncode == 0, completed.stderr

    assert completed.stdout.splitlines() == expected.splitlines()
    assert completed.stderr == ""


@pytest.mark.slow
def test_the_one_call_example_runs_and_prints_what_the_doc_shows(tmp_path: Path) -> None:
    """The page's ``layer.open`` example prints exactly its text block."""
    page = DOC.read_text(encoding="utf-8")
    code = re.findall(r"```python[^\n]*\n(.*?)```", page, re.DOTALL)[-1]
    expected = re.findall(r"```text\n(.*?)```", page, re.DOTALL)[-1]
    script = tmp_path / "one_call.py"
    script.write_text(code, encoding="utf-8")

    completed = run_python(str(script), cwd=tmp_path)
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.splitlines() == expected.splitlines()
