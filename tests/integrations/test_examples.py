"""Every script in ``examples/`` runs as a user would run it, offline, and says something."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import run_python

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples").glob("*.py"))


def test_there_are_examples() -> None:
    assert EXAMPLES, "examples/ holds no scripts; the test below would run none"


@pytest.mark.slow
@pytest.mark.parametrize("script", EXAMPLES, ids=lambda path: path.name)
def test_the_example_runs_offline(script: Path, tmp_path: Path) -> None:
    env = dict(os.environ)
    # A proxy that refuses every connection: an example that reaches for the network
    # fails here instead of passing on a machine that happens to be online.
    dead = "http://127.0.0.1:9"
    env.update(HTTP_PROXY=dead, HTTPS_PROXY=dead, ALL_PROXY=dead, NO_PROXY="localhost,127.0.0.1")
    env.pop("NOETIC_SCRATCHPAD_STORAGE", None)

    # A fresh directory as the working directory: files an example writes land there.
    done = run_python(str(script), cwd=tmp_path, env=env, timeout=120)

    report = f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    assert done.returncode == 0, report
    assert "Traceback" not in done.stdout + done.stderr, report
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    assert len(lines) >= 2, f"an example should show what it did; {report}"
