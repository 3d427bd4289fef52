"""A process that holds SQLite's write lock on a database until told to let go.

``python sqlite_locker.py PATH TABLE KEY``: opens ``PATH``, takes the write lock with
``BEGIN IMMEDIATE``, overwrites the row ``KEY`` of ``TABLE`` with junk inside that
transaction, prints ``locked``, waits for a line on stdin, rolls back (the junk never
commits), prints ``released`` and exits.
"""

from __future__ import annotations

import sqlite3
import sys


def main(path: str, table: str, key: str) -> None:
    connection = sqlite3.connect(path, isolation_level=None)
    connection.execute("BEGIN IMMEDIATE")
    connection.execute(f"UPDATE {table} SET value = ? WHERE key = ?", ('"junk"', key))
    print("locked", flush=True)
    sys.stdin.readline()
    connection.execute("ROLLBACK")
    connection.close()
    print("released", flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:4])
