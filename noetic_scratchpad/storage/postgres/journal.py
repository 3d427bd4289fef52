"""Journal rows as read from PostgreSQL: decoded one by one, a bad row skipped.

The entries are read as text (``entry::text``) and decoded here, so that one row that
cannot be read (written by another program) costs its own entry, never the others'.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from ..base import JournalRow
from .codec import decode_text

__all__ = ("decode_journal",)

logger = logging.getLogger("noetic_scratchpad.storage.postgres")


def decode_journal(table: str, key: str, records: Iterable[Any]) -> list[JournalRow]:
    """The rows of ``key`` (records of ``revision``, ``written_at``, ``entry`` text) in
    the journal ``table``, in the order read."""
    journal: list[JournalRow] = []
    for row in records:
        try:
            entry = decode_text(row["entry"].encode())
        except (ValueError, RecursionError) as exc:
            logger.warning(
                "skipped the journal row of %r at revision %s in %r: its entry cannot "
                "be read (%s); delete the row or the key's journal to silence this",
                key,
                row["revision"],
                table,
                exc,
            )
            continue
        journal.append(JournalRow(row["revision"], row["written_at"], entry))
    return journal
