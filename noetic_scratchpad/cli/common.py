"""What every command shares: the program's name, its default storage, its error, and the
one way it names a storage URL to a person."""

from __future__ import annotations

import argparse
import logging

from ..storage import resolve_storage_url
from ..storage.redaction import redact_url, secret_params_of

PROG = "noetic-scratchpad"
DEFAULT_STORAGE = "sqlite:///scratchpad.db"
logger = logging.getLogger("noetic_scratchpad.cli")


class CliError(Exception):
    """A failure to report as one line on stderr, exit code 1."""


def storage_url(args: argparse.Namespace) -> str:
    """``--storage``, else ``$NOETIC_SCRATCHPAD_STORAGE``, else the default."""
    return resolve_storage_url(args.storage, default=DEFAULT_STORAGE)


def shown_url(url: str) -> str:
    """``url`` as every command shows it (messages, prompts, logs): its password and its
    scheme's secret parameters as ``***``, the rest (host, database, table) readable."""
    return redact_url(url, secret_params_of(url))
