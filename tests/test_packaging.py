"""The distributions: the wheel installs the library only, and both pass the index's checks.

Built offline (``--no-isolation``, the build backend from the test extra), once per session.
"""

from __future__ import annotations

import email.parser
import json
import tarfile
import zipfile
from pathlib import Path

import pytest
from conftest import run_python

import noetic_scratchpad

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "noetic_scratchpad"

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sdist and the wheel built from it, as ``python -m build`` makes them."""
    out = tmp_path_factory.mktemp("dist")
    built = run_python(
        "-m", "build", "--no-isolation", "--outdir", str(out), str(ROOT), cwd=ROOT, timeout=180
    )
    assert built.returncode == 0, built.stdout + built.stderr
    return out


def _wheel(dist: Path) -> Path:
    (wheel,) = dist.glob("*.whl")
    return wheel


def test_the_wheel_holds_the_library_and_nothing_else(dist: Path) -> None:
    """Only ``noetic_scratchpad/`` and its dist-info: no top-level ``benchmarks`` (or any other
    package) lands in site-packages, where it would shadow a project's own folder."""
    with zipfile.ZipFile(_wheel(dist)) as wheel:
        names = wheel.namelist()
    tops = {name.split("/", 1)[0] for name in names}
    dist_info = f"noetic_scratchpad-{noetic_scratchpad.__version__}.dist-info"
    assert tops == {"noetic_scratchpad", dist_info}


def test_the_wheel_holds_every_file_of_the_package(dist: Path) -> None:
    """The inspector's page and the ``py.typed`` marker travel with the modules."""
    with zipfile.ZipFile(_wheel(dist)) as wheel:
        names = {name for name in wheel.namelist() if name.startswith("noetic_scratchpad/")}
    on_disk = {
        path.relative_to(ROOT).as_posix()
        for path in PACKAGE.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }
    assert names == on_disk
    assert "noetic_scratchpad/py.typed" in names
    assert "noetic_scratchpad/server/static/inspector.html" in names


def test_the_version_lives_in_one_place(dist: Path) -> None:
    """The metadata's version is the package's ``__version__`` (read by ``--version``, the
    OpenAPI document and the MCP server), and the sdist carries the same."""
    with zipfile.ZipFile(_wheel(dist)) as wheel:
        dist_info = f"noetic_scratchpad-{noetic_scratchpad.__version__}.dist-info"
        metadata = email.parser.Parser().parsestr(wheel.read(f"{dist_info}/METADATA").decode())
    assert metadata["Name"] == "noetic-scratchpad"
    assert metadata["Version"] == noetic_scratchpad.__version__
    (sdist,) = dist.glob("*.tar.gz")
    assert sdist.name == f"noetic_scratchpad-{noetic_scratchpad.__version__}.tar.gz"
    with tarfile.open(sdist) as archive:
        members = {member.name.split("/", 1)[-1] for member in archive.getmembers()}
    # The sdist is the source: a wheel built from it, and the benchmarks run from it.
    assert {"pyproject.toml", "README.md", "noetic_scratchpad/__init__.py"} <= members
    assert "benchmarks/__main__.py" in members


def test_twine_check_passes(dist: Path) -> None:
    """The metadata and the README render as the package index requires."""
    files = sorted(str(path) for path in dist.iterdir())
    checked = run_python("-m", "twine", "check", "--strict", *files, cwd=ROOT)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.count("PASSED") == 2, checked.stdout


def test_python_m_benchmarks_runs_from_a_checkout() -> None:
    """Out of the wheel, ``benchmarks`` still runs from the repository root (``.ci/run`` and the
    docs use ``python -m benchmarks``)."""
    ran = run_python("-m", "benchmarks", "--help", cwd=ROOT)
    assert ran.returncode == 0, ran.stderr
    assert "usage" in ran.stdout.lower()


def test_a_fresh_venv_with_only_the_wheel_runs_the_demo_and_names_missing_extras(
    dist: Path, tmp_path: Path
) -> None:
    """The wheel installed alone (its dependencies, no extra) into a new virtualenv: the
    command runs the demo, ``benchmarks`` is not importable, and every module that needs an
    extra says which one to install."""
    import subprocess
    import sys

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    installed = subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", str(_wheel(dist))],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert installed.returncode == 0, installed.stderr[-3000:]
    env = {"PATH": str(venv / "bin"), "HOME": str(tmp_path)}

    def run(*command: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False
        )

    demo = run(str(venv / "bin" / "noetic-scratchpad"), "demo", "--storage", "memory://")
    assert demo.returncode == 0, demo.stderr
    assert "<scratchpad>" in demo.stdout
    extras = {
        "noetic_scratchpad.server": "server",
        "noetic_scratchpad.integrations.mcp": "mcp",
        "noetic_scratchpad.integrations.pydantic_ai": "pydantic-ai",
        "noetic_scratchpad.integrations.openai_agents": "openai-agents",
    }
    probe = (
        "import importlib, json, sys\n"
        "out = {}\n"
        "for name in sys.argv[1:]:\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "        out[name] = 'imported'\n"
        "    except ImportError as exc:\n"
        "        out[name] = str(exc)\n"
        "print(json.dumps(out))\n"
    )
    probed = run(str(python), "-c", probe, "benchmarks", *extras)
    assert probed.returncode == 0, probed.stderr
    found = json.loads(probed.stdout)
    assert found["benchmarks"] == "No module named 'benchmarks'"
    for module, extra in extras.items():
        assert found[module].endswith(f'run: pip install "noetic-scratchpad[{extra}]"'), module
