"""``mcp``: serve the scratchpad to an MCP client (a desktop assistant, an IDE agent) on stdio.

Stdout carries the protocol and nothing else: logs go to stderr, and so does anything the
``--schema`` module prints while it is imported.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from collections.abc import Awaitable, Callable
from typing import NoReturn

import anyio

from ..keys import check_scope_id
from .common import DEFAULT_STORAGE, CliError, UsageError, shown_url, storage_url
from .schema import SchemaImportError, load_schema, schema_layer

__all__ = ("SchemaImportError", "add_mcp", "cmd_mcp", "load_schema")

logger = logging.getLogger("noetic_scratchpad.cli.mcp")


def add_mcp(
    add_parser: Callable[..., argparse.ArgumentParser], storage: argparse.ArgumentParser
) -> None:
    """Register the ``mcp`` command; ``storage`` is the parser holding ``--storage``."""
    mcp = add_parser(
        "mcp",
        parents=[storage],
        help="serve the scratchpad to an MCP client over stdio",
        description="Serve the tools scratchpad_read and scratchpad_update, and the "
        "scratchpad as the resource scratchpad://thread/{thread}, to an MCP client on "
        "stdin/stdout. The server keeps one thread's scratchpad (--thread, else 'default'): "
        "the model cannot name another unless --allow-any-thread is given. Runs until the "
        "client closes stdin.",
        epilog=f"Storage: --storage URL, else $NOETIC_SCRATCHPAD_STORAGE, else "
        f"{DEFAULT_STORAGE} (relative to the directory the client starts the server in: "
        "give an absolute path).",
    )
    mcp.add_argument(
        "--schema",
        metavar="MODULE:MODEL",
        help="a pydantic model every state must fit, e.g. myapp.notes:TaskNotes "
        "(imported from the current directory or the installed packages)",
    )
    mcp.add_argument(
        "--scope",
        choices=("thread", "resource"),
        default="thread",
        help="one scratchpad per thread (default), or per resource such as a user: "
        "--resource and --allow-any-resource then apply instead of the thread options",
    )
    mcp.add_argument(
        "--thread",
        metavar="ID",
        help="the thread whose scratchpad is served (default: 'default'); the model cannot "
        "name another",
    )
    mcp.add_argument(
        "--allow-any-thread",
        action="store_true",
        help="let the model name any thread: the tools take `thread`, --thread is the one "
        "used when a call names none, and every thread is a resource",
    )
    mcp.add_argument("--resource", metavar="ID", help="with --scope resource: the resource served")
    mcp.add_argument(
        "--allow-any-resource",
        action="store_true",
        help="with --scope resource: let the model name any resource (`resource`)",
    )
    mcp.add_argument(
        "--max-message-bytes",
        type=message_bytes,
        metavar="N",
        help="the largest message the client may send, in bytes (default: 4194304, 4 MiB); "
        "a longer one is refused with an error and the server reads on",
    )
    mcp.set_defaults(handler=cmd_mcp)


def message_bytes(text: str) -> int:
    """``--max-message-bytes``: a whole number of bytes, 1 or more."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"give a whole number of bytes, 1 or more, not {text!r}")
    return value


async def cmd_mcp(args: argparse.Namespace) -> int:
    own, other = ("resource", "thread") if args.scope == "resource" else ("thread", "resource")
    if getattr(args, other) is not None:
        return usage_error(f"--{other} does not apply to --scope {args.scope}; use --{own}")
    if getattr(args, f"allow_any_{other}"):
        return usage_error(
            f"--allow-any-{other} does not apply to --scope {args.scope}; use --allow-any-{own}"
        )
    allow_any = bool(getattr(args, f"allow_any_{own}"))
    default_id = "default" if getattr(args, own) is None else getattr(args, own)
    try:
        check_scope_id(default_id, own)
    except ValueError as exc:
        return usage_error(f"--{own}: {exc}")
    layer = schema_layer(args.schema, args.scope)
    try:  # after the checks: the SDK takes a while to import
        from ..integrations.mcp import DEFAULT_MAX_MESSAGE_BYTES, serve_stdio
    except ImportError as exc:
        raise CliError(str(exc)) from None
    url = storage_url(args)
    reach = f"any {own}" if allow_any else f"{own} {default_id!r} only"
    logger.info("mcp server on %s, %s scope, %s", shown_url(url), args.scope, reach)
    limit = args.max_message_bytes or DEFAULT_MAX_MESSAGE_BYTES
    await until_terminated(
        lambda: serve_stdio(
            url,
            layer=layer,
            default_id=default_id,
            allow_scope_argument=allow_any,
            max_message_bytes=limit,
        )
    )
    return 0


def usage_error(message: str) -> NoReturn:
    raise UsageError(message)


async def until_terminated(serve: Callable[[], Awaitable[None]]) -> None:
    """Run ``serve`` until it returns or SIGTERM arrives (an MCP client's second way to
    stop a server), so its cleanup (closing storage) runs either way."""
    try:
        await _serve_in_group(serve)
    except BaseExceptionGroup as errors:
        raise sole(errors) from None


async def _serve_in_group(serve: Callable[[], Awaitable[None]]) -> None:
    async with anyio.create_task_group() as group:
        if sys.platform != "win32":  # no signal receiver there; the client closes stdin

            async def on_sigterm() -> None:
                with anyio.open_signal_receiver(signal.SIGTERM) as signals:
                    async for _ in signals:
                        logger.info("SIGTERM: stopping the mcp server")
                        group.cancel_scope.cancel()

            group.start_soon(on_sigterm)
        await serve()
        group.cancel_scope.cancel()


def sole(errors: BaseExceptionGroup[BaseException]) -> BaseException:
    """The one failure inside nested task-group wrappers, so the command reports it as one
    line; the group itself when several tasks failed."""
    found: BaseException = errors
    while isinstance(found, BaseExceptionGroup) and len(found.exceptions) == 1:
        found = found.exceptions[0]
    return found
