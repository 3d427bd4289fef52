"""``sqlite:///path.db``: an embedded store on aiosqlite, safe for several processes per file.

Writes go through one writer per process: its queue turns every write that arrives while
a transaction runs into the next transaction (group commit), and each transaction is one
function run in the connection's thread, so an update costs one thread hop however many
statements it needs. Each
transaction starts with ``BEGIN IMMEDIATE``, which takes SQLite's write lock before it
reads, so writers in other processes sharing the file are serialized by SQLite itself.
Reads run on a second, read-only connection and never wait for a write transaction (WAL).

The modules, one job each:

- :mod:`.options`: the URL, its options, and the checks of the file's path;
- :mod:`.connection`: opening and configuring the two aiosqlite connections, and the only
  use of aiosqlite's private API (running a function in a connection's thread);
- :mod:`.file`: the database file the connections opened, and the check that it is still
  the one at the path (a removed or replaced file refuses writes and reads);
- :mod:`.table`: the tables' shape (key-value rows with their revision, and the journal),
  their SQL, the upgrade of a 0.1 file, and how a stored value is decoded;
- :mod:`.writer`: the queue of writes and the write transaction (group commit, what a
  transaction does to each key before it writes, the row cache, per-key isolation);
- :mod:`.store`: :class:`SqliteStorage`, the storage contract on top of them.
"""

from __future__ import annotations

# The driver, imported here first: where it is missing, importing this package fails at
# once (open_storage turns that into the install command), whatever submodules are loaded.
import aiosqlite  # noqa: F401

from .options import SqliteOptions, parse_sqlite_url
from .store import SqliteStorage

__all__ = ("SqliteOptions", "SqliteStorage", "parse_sqlite_url")
