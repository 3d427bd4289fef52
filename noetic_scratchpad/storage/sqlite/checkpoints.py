"""Checkpoints of the write-ahead log, off the write path.

In WAL mode a commit appends its pages to the ``-wal`` file, and a checkpoint copies them
back into the database file, with an fsync of each. SQLite's default runs it inside the
COMMIT that takes the log past 1,000 pages, so now and then one write waits for the copy
of everyone's earlier ones (100 writers on 100 scopes measured some 15% slower for it).

Here the writer's connection checkpoints only as a backstop, past :data:`BACKSTOP_PAGES`
pages, and a :class:`Checkpointer` (a thread and a connection of its own) runs a
``PASSIVE`` checkpoint after the writer's commits, at most every :data:`INTERVAL` seconds:
it copies what no reader still needs, waits for no lock, and holds up no write. (A new
write then starts the log over once a checkpoint has copied all of it, as before.)
"""

from __future__ import annotations

import logging
import queue
import sqlite3
import threading
import time
from urllib.request import pathname2url

__all__ = ("BACKSTOP_PAGES", "INTERVAL", "Checkpointer")

logger = logging.getLogger("noetic_scratchpad")

#: Seconds between two checkpoints asked for: about 1,000 pages of single writes here.
INTERVAL = 0.05
#: Pages past which the writer's own connection checkpoints, should this thread lag.
BACKSTOP_PAGES = 10_000


class Checkpointer:
    """The background checkpoints of the database at ``path``; :meth:`after_commit` is
    called in the writer's thread, :meth:`close` once, from anywhere."""

    def __init__(self, path: str, busy_timeout: int) -> None:
        self._path = path
        self._busy_timeout = busy_timeout
        self._requests: queue.SimpleQueue[bool] = queue.SimpleQueue()
        self._pending = False  # asked for and not finished
        self._asked_at = 0.0
        #: Checkpoints run, for tests and diagnostics.
        self.runs = 0
        self._thread = threading.Thread(
            target=self._run, name=f"noetic-scratchpad checkpoints of {path}", daemon=True
        )
        self._thread.start()

    def after_commit(self) -> None:
        """A commit has landed: ask for a checkpoint unless one is on its way or the last
        was asked for less than :data:`INTERVAL` ago. Never blocks."""
        if self._pending:
            return
        now = time.monotonic()
        if now - self._asked_at < INTERVAL:
            return
        self._asked_at, self._pending = now, True
        self._requests.put(True)

    def close(self) -> None:
        """Stop after the checkpoint under way, if any, and close the connection; blocks
        until the thread has ended (run it off the event loop)."""
        self._requests.put(False)
        self._thread.join()

    def _run(self) -> None:
        try:
            conn = _connect(self._path, self._busy_timeout)
        except sqlite3.Error as exc:  # the writer's backstop checkpoints instead
            logger.warning("no background checkpoints of %s: %s", self._path, exc)
            return
        try:
            while self._requests.get():
                try:
                    conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                    self.runs += 1
                except sqlite3.Error as exc:  # the next one may do; the backstop is there
                    logger.debug("a background checkpoint of %s failed: %s", self._path, exc)
                finally:
                    self._pending = False
        finally:
            conn.close()


def _connect(path: str, busy_timeout: int) -> sqlite3.Connection:
    # mode=rw: a file gone from the path is not made anew, empty.
    conn = sqlite3.connect(f"file:{pathname2url(path)}?mode=rw", uri=True, isolation_level=None)
    conn.execute(f"PRAGMA busy_timeout = {busy_timeout}")
    return conn
