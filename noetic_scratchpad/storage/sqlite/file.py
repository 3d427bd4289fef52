"""Which database file a storage has open, and whether it is still the one at its path.

SQLite keeps the file it opened. Removed (``rm``), renamed away or replaced (a backup
renamed over it), that file lives on for this process alone: every write still commits,
into a file no other process sees and that is gone once the storage closes. So the
storage notes the file's identity (device and inode) when it opens it, and before each
write commits, and with each read, checks that the file at the path still has it: one
``stat`` per transaction (a write batch) or read, about 2 µs, in the connection's
thread. While the file is open its inode cannot be reused, so a new file at the path
always differs.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from ...errors import StorageError

__all__ = ("OpenedFile",)

_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class OpenedFile:
    """The database file a storage opened: its path, device and inode."""

    path: str
    device: int
    inode: int

    @classmethod
    def at(cls, path: str) -> OpenedFile:
        """The file at ``path`` now (just after the connections opened it)."""
        found = os.stat(path)
        return cls(path, found.st_dev, found.st_ino)

    def check(self, action: str) -> None:
        """Raise :class:`StorageError` unless the file at the path is still this one;
        ``action``: what is refused (``"written"``, ``"read"``)."""
        try:
            found = os.stat(self.path)
        except FileNotFoundError:
            why = "no file is at that path any more"
        except OSError as exc:
            why = f"it cannot be checked at that path ({exc})"
        else:
            if found.st_ino == self.inode and found.st_dev == self.device:
                return
            why = "another file is at that path now"
        raise StorageError(
            f"the SQLite database file {self.path} was removed or replaced while this "
            f"storage had it open ({why}); nothing was {action}, as it would only reach the "
            "old file, which no other process sees and which is lost when the storage "
            "closes. Put the database file back at that path, or close this storage and "
            "open it again (open_storage) to use the file now there. Move or replace a "
            "database only while no process has it open, and with its -wal and -shm files"
        )

    def read(self, fn: Callable[..., _T], *args: Any) -> _T:
        """``fn(*args)`` (a read, in the connection's thread), answered only if the file
        is still this one; a database error of a moved file is reported as the move."""
        try:
            result = fn(*args)
        except sqlite3.Error:
            self.check("read")
            raise
        self.check("read")
        return result
