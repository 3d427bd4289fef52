"""The error every optional module raises when its extra is not installed.

::

    with needs_extra("noetic_scratchpad.server", "server", "Starlette", ("starlette",)):
        from .app import create_app

An :class:`ImportError` of one of ``packages`` (or a module inside one) inside the block
becomes an ``ImportError`` that names the extra to install; any other import error is a
real one and passes through unchanged.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

__all__ = ("install_hint", "needs_extra")


def install_hint(extra: str) -> str:
    """The command that installs ``extra``: ``pip install "noetic-scratchpad[EXTRA]"``."""
    return f'pip install "noetic-scratchpad[{extra}]"'


def _is_from(name: str | None, packages: Sequence[str]) -> bool:
    return name is not None and any(
        name == package or name.startswith(package + ".") for package in packages
    )


@contextmanager
def needs_extra(module: str, extra: str, what: str, packages: Sequence[str]) -> Iterator[None]:
    """Turn the missing ``packages`` of ``module`` into an ``ImportError`` naming ``extra``.

    ``what`` says what is missing in words ("the MCP SDK"); the error keeps the missing
    module's ``name`` and chains the original error.
    """
    try:
        yield
    except ImportError as exc:
        if not _is_from(exc.name, packages):
            raise  # not the missing extra: a real error
        raise ImportError(
            f"{module} needs {what}, which is not installed or cannot load ({exc.name}); "
            f"run: {install_hint(extra)}",
            name=exc.name,
        ) from exc
