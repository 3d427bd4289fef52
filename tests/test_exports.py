"""The package's one import surface: ``__all__`` matches what is defined and what SPEC names."""

from __future__ import annotations

import importlib
import inspect
import types

import pytest

import noetic_scratchpad

#: The top-level names SPEC.md (the contract's opening paragraph) requires.
SPEC_NAMES = frozenset(
    {
        "scratchpad",
        "ScratchpadConfig",
        "ScratchpadLayer",
        "ScratchpadState",
        "Slot",
        "Budget",
        "LayerData",
        "LayerFunction",
        "FunctionOutcome",
        "ExecutionContext",
        "EventBus",
        "UpdateApplied",
        "UpdateRejected",
        "StateDiscarded",
        "ViewTruncated",
        "ScratchpadValidationError",
        "ScratchpadReadOnlyError",
        "open_storage",
        "ScopedStorage",
        "AgentHarness",
        "Agent",
        "Tool",
        "ModelRequest",
        "ScriptedModel",
    }
)


def public_names(module: types.ModuleType) -> set[str]:
    """Names a user can import from ``module``: not private, not a submodule."""
    return {
        name
        for name, value in vars(module).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    }


def test_all_is_a_tuple_without_duplicates() -> None:
    """``__all__`` is a tuple and lists each name once."""
    assert isinstance(noetic_scratchpad.__all__, tuple)
    assert len(noetic_scratchpad.__all__) == len(set(noetic_scratchpad.__all__))


def test_all_matches_the_public_names_defined() -> None:
    """Every public name at the top level is in ``__all__`` and every listed name exists."""
    listed = set(noetic_scratchpad.__all__) - {"__version__"}

    assert sorted(public_names(noetic_scratchpad) - listed) == []  # defined, not exported
    assert sorted(listed - public_names(noetic_scratchpad)) == []  # exported, not defined


def test_all_contains_every_name_spec_lists() -> None:
    """Every name SPEC.md promises at the top level is exported."""
    assert sorted(SPEC_NAMES - set(noetic_scratchpad.__all__)) == []


def test_exports_come_from_the_package() -> None:
    """Each exported class or function is defined in noetic_scratchpad, not re-exported from
    a dependency by accident."""
    for name in noetic_scratchpad.__all__:
        value = getattr(noetic_scratchpad, name)
        if inspect.isclass(value) or inspect.isfunction(value):
            assert value.__module__.startswith("noetic_scratchpad."), name


def test_version_is_a_string() -> None:
    """``__version__`` is exported and looks like a version."""
    assert isinstance(noetic_scratchpad.__version__, str)
    assert noetic_scratchpad.__version__.count(".") >= 1


def test_items_module_exports_the_items() -> None:
    """``noetic_scratchpad.items`` exports Message, FunctionCall, FunctionCallOutput and
    LLMResponse, and nothing it does not define."""
    items = importlib.import_module("noetic_scratchpad.items")

    assert {"Message", "FunctionCall", "FunctionCallOutput", "LLMResponse"} <= set(items.__all__)
    assert set(items.__all__) <= public_names(items)


@pytest.mark.parametrize(
    "module",
    ["merge", "schema", "render", "events", "context", "errors", "testing", "layer", "storage"],
)
def test_submodule_all_names_exist(module: str) -> None:
    """Each submodule's ``__all__`` names only things it defines."""
    imported = importlib.import_module(f"noetic_scratchpad.{module}")

    assert sorted(set(imported.__all__) - set(vars(imported))) == []


def test_every_error_the_library_raises_is_exported() -> None:
    """A caller catches any of the library's errors from the top level, without knowing
    which module defines it."""
    from noetic_scratchpad import errors

    defined = {
        name
        for name, value in vars(errors).items()
        if inspect.isclass(value)
        and issubclass(value, Exception)
        and value.__module__ == errors.__name__
        and not name.startswith("_")
    }
    assert sorted(defined - set(noetic_scratchpad.__all__)) == []
