"""``main``: parse the arguments, set up logging, run the command, map failures to exit codes
(:data:`~.common.EXIT_CODES`: 0 success, 1 failed, refused or not found, 2 a usage error).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import sys
from collections.abc import Callable, Coroutine, Iterator, Sequence
from typing import Any

from ..errors import ScratchpadError, ScratchpadUpdateError
from .common import EXIT_FAILED, EXIT_USAGE, PROG, CliError, UsageError
from .parser import build_parser
from .stderr_filter import SecretFilter, invocation_secrets

__all__ = ("configure_logging", "main")


def configure_logging(level: str) -> None:
    """Log records go to stderr, so stdout carries only the command's output.

    The library's loggers (``noetic_scratchpad.*``) show ``level`` and up; other libraries'
    warnings and up. Calling it again replaces the handler an earlier call installed.
    """
    threshold = getattr(logging, level.upper())
    root = logging.getLogger()
    for previous in [h for h in root.handlers if h.get_name() == PROG]:
        root.removeHandler(previous)
    handler = logging.StreamHandler(sys.stderr)
    handler.set_name(PROG)
    handler.setFormatter(
        logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s", "%Y-%m-%d %H:%M:%S")
    )
    root.addHandler(handler)
    root.setLevel(max(threshold, logging.WARNING))
    logging.getLogger("noetic_scratchpad").setLevel(threshold)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code.

    Whatever it writes to stderr (usage errors, log records, error lines) goes through a
    :class:`SecretFilter`: no secret of a storage URL reaches it.
    """
    arguments = sys.argv[1:] if argv is None else list(argv)
    with (
        contextlib.redirect_stderr(SecretFilter(sys.stderr, invocation_secrets(arguments))),
        _logging_restored(),
    ):
        return run(arguments)


@contextlib.contextmanager
def _logging_restored() -> Iterator[None]:
    """Put back the levels and handlers :func:`configure_logging` changes, so a caller
    running :func:`main` in its own process (a test, an application) keeps its logging."""
    root, package = logging.getLogger(), logging.getLogger("noetic_scratchpad")
    levels, handlers = (root.level, package.level), list(root.handlers)
    try:
        yield
    finally:
        for added in [h for h in root.handlers if h not in handlers]:
            root.removeHandler(added)
        root.setLevel(levels[0])
        package.setLevel(levels[1])


def run(argv: Sequence[str]) -> int:
    """:func:`main`, once stderr is filtered."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version (0) or a usage error (2), printed
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    configure_logging(args.log_level or ("error" if args.command == "demo" else "warning"))
    handler: Callable[[argparse.Namespace], Coroutine[Any, Any, int]] = args.handler
    try:
        return asyncio.run(handler(args))
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except UsageError as exc:  # as argparse reports a mistake: the usage, then one line
        command: argparse.ArgumentParser = args.command_parser
        command.print_usage(sys.stderr)
        print(f"{command.prog}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except Exception as exc:  # one line, no traceback: the message says what to do
        print(f"{PROG}: error: {error_line(exc)}", file=sys.stderr)
        return EXIT_FAILED


def error_line(exc: Exception) -> str:
    """The message of a failure; its type too unless it is one of the expected kinds. A
    refusal says what was refused and why, from its data."""
    if isinstance(exc, ScratchpadUpdateError):
        return f"the {exc.refused} was refused ({exc.reason}): {exc.message}"
    if isinstance(exc, CliError | ScratchpadError | OSError | ValueError):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"
