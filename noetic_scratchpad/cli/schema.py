"""``--schema MODULE:MODEL`` of ``serve`` and ``mcp``: the one way both load it and refuse
what cannot work (a usage error, exit code 2)."""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
from typing import Any

from ..errors import ScratchpadConfigError
from ..keys import Scope
from ..layer import ScratchpadLayer, scratchpad
from .common import UsageError

__all__ = ("SchemaImportError", "load_schema", "schema_layer")


class SchemaImportError(Exception):
    """``--schema`` names nothing importable."""


def schema_layer(spec: str | None, scope: Scope = "thread") -> ScratchpadLayer:
    """A ``scope``-scoped scratchpad layer with the model ``spec`` names (none: no schema);
    a :class:`~.common.UsageError` saying why when it cannot be."""
    try:
        return scratchpad(scope=scope, schema=None if spec is None else load_schema(spec))
    except (SchemaImportError, ScratchpadConfigError) as exc:
        raise UsageError(f"--schema {spec}: {exc}") from None


def load_schema(spec: str) -> Any:
    """Import ``module:Model`` (``Model`` may be dotted); ``SchemaImportError`` saying why not.

    The current directory is searched first, as when running ``python -m``. Whatever the
    module prints goes to stderr: stdout belongs to the command (the protocol, for ``mcp``).
    """
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise SchemaImportError("give the model as module:Model, e.g. myapp.notes:TaskNotes")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        with contextlib.redirect_stdout(sys.stderr):
            module = importlib.import_module(module_name)
    except ImportError as exc:
        raise SchemaImportError(
            f"cannot import {module_name!r} ({exc}); run the server from the directory that "
            "holds it, or install it in this environment"
        ) from None
    except Exception as exc:  # the user's module failed while it ran
        raise SchemaImportError(
            f"importing {module_name!r} failed: {type(exc).__name__}: {exc}"
        ) from None
    found: Any = module
    for part in attribute.split("."):
        try:
            found = getattr(found, part)
        except AttributeError:
            raise SchemaImportError(f"module {module_name!r} has no {attribute!r}") from None
    return found
