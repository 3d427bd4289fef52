"""What every command shares: the program's name, its default storage, its error."""

from __future__ import annotations

import argparse
import logging

from ..storage import resolve_storage_url

PROG = "noetic-scratchpad"
DEFAULT_STORAGE = "sqlite:///scratchpad.db"
logger = logging.getLogger("noetic_scratchpad.cli")


class CliError(Exception):
    """A failure to report as one line on stderr, exit code 1."""


def storage_url(args: argparse.Namespace) -> str:
    """``--storage``, else ``$NOETIC_SCRATCHPAD_STORAGE``, else the default."""
    return resolve_storage_url(args.storage, default=DEFAULT_STORAGE)
