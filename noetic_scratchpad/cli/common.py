"""What every command shares: the program's name, its exit codes, its default storage, its
errors, the one check of a storage URL, and the one way it names a storage URL to a person."""

from __future__ import annotations

import argparse
import logging

from ..errors import StorageConfigError
from ..storage import ENV_VAR, check_storage_url, resolve_storage_url
from ..storage.redaction import redact_url, secret_params_of

PROG = "noetic-scratchpad"
DEFAULT_STORAGE = "sqlite:///scratchpad.db"
logger = logging.getLogger("noetic_scratchpad.cli")

#: The exit codes, the same for every command.
EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_CODES = (
    f"Exit codes: {EXIT_OK} success; {EXIT_FAILED} the operation failed, was refused or "
    f"found nothing to act on (one line on stderr); {EXIT_USAGE} a usage error: an unknown "
    "command or option, a missing or malformed argument, a storage URL or --schema that "
    "cannot work (the usage and one line on stderr)."
)
#: Why a store may look empty, and how to share one with an application.
EMPTY_STORE_HINT = (
    "AgentHarness, the integrations and create_app keep scratchpads in memory:// unless "
    "given storage=, and those are gone when their process ends; to inspect them here, give "
    "the app storage='sqlite:////absolute/path.db' and this command --storage with the same "
    f"URL, or set ${ENV_VAR} to it for both"
)


class CliError(Exception):
    """A failure to report as one line on stderr, exit code 1."""


class UsageError(Exception):
    """A command line that cannot work (an argument's value): the command's usage and one
    line on stderr, exit code 2, as argparse reports the mistakes it finds itself."""


def storage_url(args: argparse.Namespace, *, inspecting: bool = False) -> str:
    """``--storage``, else ``$NOETIC_SCRATCHPAD_STORAGE``, else the default, once checked
    without opening or creating anything: a URL no backend can open (a malformed one, an
    unknown scheme, a SQLite file in a directory that does not exist) is a
    :class:`UsageError`. ``inspecting``: the command reads what another process stored,
    so ``memory://``, which holds nothing outside the process that wrote it, is one too.
    Every command that takes ``--storage`` calls this, and nothing else, to get its URL."""
    url = resolve_storage_url(args.storage, default=DEFAULT_STORAGE)
    try:
        scheme = check_storage_url(url)
    except StorageConfigError as exc:
        raise UsageError(f"--storage: {exc}") from None
    if inspecting and scheme == "memory":
        raise UsageError(
            f"--storage: {shown_url(url)} keeps data only inside the process that wrote it, "
            "so there is nothing to inspect here; use a sqlite:// or postgresql:// URL"
        )
    return url


def shown_url(url: str) -> str:
    """``url`` as every command shows it (messages, prompts, logs): its password and its
    scheme's secret parameters as ``***``, the rest (host, database, table) readable."""
    return redact_url(url, secret_params_of(url))
