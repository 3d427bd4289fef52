"""Every optional module names its extra when the extra is not installed.

Each case runs in a fresh interpreter with the extra's package hidden (``sys.modules[name] =
None``, as if it were not installed).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import run_python

from noetic_scratchpad._extras import install_hint, needs_extra

CASES = [
    ("noetic_scratchpad.server", "starlette", "server"),
    ("noetic_scratchpad.integrations.mcp", "mcp", "mcp"),
    ("noetic_scratchpad.integrations.pydantic_ai", "pydantic_ai", "pydantic-ai"),
    ("noetic_scratchpad.integrations.openai_agents", "agents", "openai-agents"),
]


@pytest.mark.slow
@pytest.mark.parametrize(("module", "hidden", "extra"), CASES)
def test_importing_without_the_extra_names_it(
    module: str, hidden: str, extra: str, tmp_path: Path
) -> None:
    code = (
        f"import sys; sys.modules[{hidden!r}] = None\n"
        "try:\n"
        f"    import {module}\n"
        "except ImportError as exc:\n"
        "    print(type(exc).__name__, exc.name, str(exc), sep='|')\n"
    )
    ran = run_python("-c", code, cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    kind, name, message = ran.stdout.rstrip("\n").split("|")
    assert kind == "ImportError"
    assert name == hidden or name.startswith(hidden + ".")
    assert message.startswith(f"{module} needs ")
    assert message.endswith(f'run: pip install "noetic-scratchpad[{extra}]"')
    assert f"({name})" in message


def test_the_hint_is_one_command() -> None:
    assert install_hint("server") == 'pip install "noetic-scratchpad[server]"'


def test_an_import_error_of_another_package_passes_through_unchanged() -> None:
    """A broken import that is not the extra's stays the real error, not a wrong hint."""
    original = ImportError("boom", name="starlette_helpers")
    with (
        pytest.raises(ImportError) as raised,
        needs_extra("noetic_scratchpad.server", "server", "Starlette", ("starlette",)),
    ):
        raise original
    assert raised.value is original


def test_a_module_inside_the_package_counts_as_the_package() -> None:
    with (
        pytest.raises(ImportError, match=r"needs Starlette.*\(starlette\.routing\)") as raised,
        needs_extra("noetic_scratchpad.server", "server", "Starlette", ("starlette",)),
    ):
        raise ImportError("cannot import name 'Route'", name="starlette.routing")
    assert raised.value.name == "starlette.routing"
    assert isinstance(raised.value.__cause__, ImportError)
