"""The command line's arguments: the program's options and one subparser per command."""

from __future__ import annotations

import argparse
import difflib
import sys
from collections.abc import Callable, Sequence
from typing import NoReturn, TypeAlias

from .. import __version__
from .common import DEFAULT_STORAGE, EXIT_CODES, PROG
from .demo import cmd_demo
from .history import cmd_history, cmd_revert
from .mcp import add_mcp
from .migrate import cmd_migrate
from .portability import add_portability
from .scopes import cmd_list, cmd_reset, cmd_show
from .serve import add_serve

# ``add_parser`` of the object ``add_subparsers`` returns: it makes one command's parser.
AddParser: TypeAlias = Callable[..., argparse.ArgumentParser]


class Parser(argparse.ArgumentParser):
    """argparse's parser, reporting a mistyped option as what it is.

    argparse checks the required arguments before it looks at the ones it did not
    recognise, so ``show --thred demo`` would say "one of the arguments --thread
    --resource is required". This parser says "unrecognized arguments: --thred (did you
    mean --thread?)" instead, and reports any unrecognised argument with its command's
    usage (argparse leaves that to the top-level parser, whose usage does not help).
    """

    _argv: list[str]

    def parse_known_args(  # type: ignore[override]  # typeshed's overloads; same contract
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        self._argv = list(sys.argv[1:] if args is None else args)
        parsed, extras = super().parse_known_args(self._argv, namespace)
        if extras and self._is_command():
            self.error(self._unrecognized(extras))
        return parsed, extras

    def error(self, message: str) -> NoReturn:
        unknown = self._unknown_options()
        if unknown and "required" in message:  # the mistyped option is the mistake
            message = self._unrecognized(unknown)
        super().error(message)

    def _is_command(self) -> bool:
        return self._subparsers is None  # a command's parser, not the program's

    def _unknown_options(self) -> list[str]:
        """The arguments of ``self._argv`` that look like options and are none of this
        parser's (its own abbreviations allowed), before any ``--``."""
        known = self._option_string_actions
        unknown = []
        for argument in getattr(self, "_argv", []):
            if argument == "--":
                break
            if not argument.startswith("-") or self._negative_number_matcher.match(argument):
                continue
            name = argument.partition("=")[0]
            if name.startswith("--"):
                found = name in known or any(option.startswith(name) for option in known)
            else:
                found = name[:2] in known
            if not found:
                unknown.append(argument)
        return unknown

    def _unrecognized(self, extras: list[str]) -> str:
        """argparse's message, with the option the user probably meant."""
        message = f"unrecognized arguments: {' '.join(extras)}"
        options = [option for option in self._option_string_actions if option.startswith("--")]
        for extra in extras:
            close = difflib.get_close_matches(extra.partition("=")[0], options, n=1)
            if close:
                return f"{message} (did you mean {close[0]}?)"
        return message


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog=PROG,
        description="An agent's working memory: run the demo, inspect and reset scratchpads.",
        epilog=f"Storage: --storage URL, else $NOETIC_SCRATCHPAD_STORAGE, else {DEFAULT_STORAGE}. "
        f"{EXIT_CODES}",
    )
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    parser.add_argument(
        "--log-level",
        choices=("debug", "info", "warning", "error"),
        help="library log messages on stderr at or above this level "
        "(default: warning; error for demo, which prints every diagnostic itself)",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    storage, layer = shared_options()
    add_demo(commands.add_parser, storage)
    add_mcp(commands.add_parser, storage)
    add_serve(commands.add_parser, storage)
    add_portability(commands.add_parser, storage)
    for add_command in (add_show, add_list, add_history, add_revert, add_reset, add_migrate):
        add_command(commands.add_parser, [storage, layer])
    for command in commands.choices.values():  # a usage error found later says its usage
        command.set_defaults(command_parser=command)
    return parser


def shared_options() -> tuple[argparse.ArgumentParser, argparse.ArgumentParser]:
    """The parents of the commands' parsers: ``--storage`` and ``--layer``."""
    storage = argparse.ArgumentParser(add_help=False)
    storage.add_argument(
        "--storage",
        metavar="URL",
        help=f"memory://, sqlite:///path.db or postgresql://... (default: {DEFAULT_STORAGE})",
    )
    layer = argparse.ArgumentParser(add_help=False)
    layer.add_argument("--layer", default="scratchpad", help="layer id (default: scratchpad)")
    return storage, layer


def add_demo(add_parser: AddParser, storage: argparse.ArgumentParser) -> None:
    demo = add_parser(
        "demo",
        parents=[storage],
        help="run a scripted agent conversation and watch its scratchpad",
        description="Run a scripted three-turn conversation (no API key needed) with a "
        "TaskNotes scratchpad, printing each <scratchpad> block the model sees and each "
        "update or rejection as it happens. The demo thread is reset first.",
    )
    demo.add_argument("--thread", default="demo", help="thread id to use (default: demo)")
    demo.set_defaults(handler=cmd_demo)


def add_show(add_parser: AddParser, parents: list[argparse.ArgumentParser]) -> None:
    show = add_parser(
        "show",
        parents=parents,
        help="print one stored scratchpad",
        description="Print the scratchpad of one thread or resource as the model sees it.",
    )
    add_scope(show, allow_all=False)
    show.add_argument("--json", action="store_true", help="print the stored state as JSON")
    show.set_defaults(handler=cmd_show)


def add_list(add_parser: AddParser, parents: list[argparse.ArgumentParser]) -> None:
    listing = add_parser(
        "list",
        parents=parents,
        help="list stored scratchpads with their sizes and last writes",
        description="List every stored scope (thread or resource id), its size and last write.",
    )
    listing.add_argument("--json", action="store_true", help="print the list as JSON")
    listing.set_defaults(handler=cmd_list)


def add_history(add_parser: AddParser, parents: list[argparse.ArgumentParser]) -> None:
    history = add_parser(
        "history",
        parents=parents,
        help="show a scratchpad's journaled writes, newest first, with a diff each",
        description="Show the journaled writes of one thread or resource, newest first: "
        "the revision, when, who wrote it (tool, store, api, revert), the call id, and what "
        "changed in each key it wrote.",
    )
    add_scope(history, allow_all=False)
    history.add_argument(
        "-n", "--limit", type=count, default=20, help="how many writes to show (default: 20)"
    )
    history.add_argument("--json", action="store_true", help="print the entries as JSON")
    history.set_defaults(handler=cmd_history)


def add_revert(add_parser: AddParser, parents: list[argparse.ArgumentParser]) -> None:
    revert = add_parser(
        "revert",
        parents=parents,
        help="make a scratchpad what it was at an earlier revision",
        description="Make the state of one thread or resource what it was right after "
        "revision N (see `history`). The revert is a new revision of its own, journaled, "
        "so it can be reverted too. Asks first; without a terminal it refuses unless --yes.",
    )
    add_scope(revert, allow_all=False)
    revert.add_argument("--to", type=count, required=True, metavar="N", help="the revision")
    revert.add_argument("-y", "--yes", action="store_true", help="do not ask for confirmation")
    revert.set_defaults(handler=cmd_revert)


def add_reset(add_parser: AddParser, parents: list[argparse.ArgumentParser]) -> None:
    reset = add_parser(
        "reset",
        parents=parents,
        help="delete stored scratchpads",
        description="Delete the scratchpad of one thread or resource, or all of them. Asks "
        "first; without a terminal it refuses unless --yes is given.",
    )
    add_scope(reset, allow_all=True)
    reset.add_argument("-y", "--yes", action="store_true", help="do not ask for confirmation")
    reset.set_defaults(handler=cmd_reset)


def add_migrate(add_parser: AddParser, parents: list[argparse.ArgumentParser]) -> None:
    migrate = add_parser(
        "migrate",
        parents=parents,
        help="move scratchpads stored by the first release to the current key layout",
        description="The first release kept threads and resources in one namespace "
        "(layers/{layer}/{id}/state); the layer now keeps each kind apart and no longer "
        "reads that layout. This moves every such scratchpad to a scope of the kind you "
        "name (thread by default, resource for resource-scoped apps). Safe to run twice.",
    )
    migrate.add_argument(
        "--as",
        dest="scope",
        choices=("thread", "resource"),
        default="thread",
        help="the kind of scope the old scratchpads become (default: thread)",
    )
    migrate.add_argument("-y", "--yes", action="store_true", help="do not ask for confirmation")
    migrate.set_defaults(handler=cmd_migrate)


def count(text: str) -> int:
    """A whole number, 0 or more (argparse's type: a usage error otherwise)."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"give a whole number, 0 or more, not {text!r}")
    return value


def add_scope(parser: argparse.ArgumentParser, *, allow_all: bool) -> None:
    """``--thread ID`` or ``--resource ID`` (or, with ``allow_all``, ``--all``): one required."""
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--thread", metavar="ID", help="a thread id (thread-scoped scratchpads)")
    group.add_argument(
        "--resource", metavar="ID", help="a resource id, such as a user (resource scope)"
    )
    if allow_all:
        group.add_argument("--all", action="store_true", help="every thread and resource")
