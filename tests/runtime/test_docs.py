"""The Python examples in docs/quickstart.md run as they are."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import run_python

QUICKSTART = Path(__file__).parents[2] / "docs" / "quickstart.md"
BLOCKS = re.findall(r"```python[^\n]*\n(.*?)```", QUICKSTART.read_text(), re.DOTALL)


def test_quickstart_has_two_examples_under_30_lines() -> None:
    """The harness example and the bring-your-own-loop example each fit in 30 lines."""
    assert len(BLOCKS) == 2
    assert [len(block.splitlines()) <= 30 for block in BLOCKS] == [True, True]


@pytest.mark.slow
@pytest.mark.parametrize("index", [0, 1], ids=["harness", "own-loop"])
def test_quickstart_example_runs(index: int, tmp_path: Path) -> None:
    """Each example runs in a fresh interpreter and prints what its comments promise."""
    result = run_python("-c", BLOCKS[index], cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    if index == 0:
        assert result.stdout == ("Noted: shipping v2.\n{'currentGoal': 'Ship v2'}\n")
        assert (tmp_path / "scratchpad.db").exists()
    else:
        assert result.stdout == '<scratchpad>\n{\n  "goal": "v2"\n}\n</scratchpad>\n'
