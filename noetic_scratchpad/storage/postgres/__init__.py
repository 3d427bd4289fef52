"""``postgresql://`` and ``postgres://``: one table shared by every app server.

Each key is a row ``(key text primary key, value json, updated_at timestamptz, revision
bigint)``, and each journaled write a row of ``{table}_journal`` (key, revision,
written_at, entry json): JSON text kept as it was written, so every number reads back as
written. A deleted key's last revision is kept in ``{table}_retired`` (key, revision): the
write that creates the key again continues above it, so that a key's revisions never
repeat. The atomic read-modify-write of a key runs in one transaction that holds the row's
lock (``SELECT ... FOR UPDATE``) from its read to its commit, and writes the row, its
journal row and the journal's trim in one statement, so writers on any number of servers
serialize per key and never lose each other's updates, while different keys never wait for
each other.

Inside one process the writes of a key also go through a :class:`~noetic_scratchpad.locks.
KeyedBatcher`: the writers queued behind a running transaction are combined into the next
one. A hundred tasks writing one scope therefore hold one pool connection and commit a few
times, instead of taking every connection of the pool and queueing on the row lock.

URL options (``table``, ``pool_size``, ``min_size``, ``max_size``; everything else passes
through to asyncpg) are described in :mod:`.options`.

Messages, logs and ``repr`` show the URL with its secrets replaced by ``***``: the password
of ``user:password@``, and the query parameters ``password`` and ``sslpassword``.

An existing table is used only if it has the columns this backend writes (``key`` text
with a unique index, ``value`` json or jsonb, ``updated_at`` timestamptz); a table of another
shape is refused when the storage opens, not at its first write, and tables of an earlier
version get what they lack (a 0.1 table its ``revision`` column and journal, any its retired
table). Their jsonb columns keep working, as jsonb keeps numbers; opening logs how to
convert them to json.
A key is the table's primary key,
and PostgreSQL's btree index holds at most 2,704 bytes a row (keys are compressed first,
so a repetitive key may be longer): a longer key is refused with ``ValueError``.

The modules, one job each:

- :mod:`.options`: the URL, its options and the table name, checked before connecting,
  and the URL's passwords, kept out of messages, logs and ``repr`` (by
  :mod:`noetic_scratchpad.storage.redaction`);
- :mod:`.codec`: values as JSON text on the wire (json or jsonb), with the escape of U+0000;
- :mod:`.table`: the SQL run on the three tables;
- :mod:`.schema`: their creation under an advisory lock, the upgrades, the shape checks;
- :mod:`.failures`: what a failed call means for the stored data, and the error saying so;
- :mod:`.connection`: opening the pool and lending its connections;
- :mod:`.writer`: the update and commit transaction that holds the row lock;
- :mod:`.store`: :class:`PostgresStorage`, the storage contract on top of them.
"""

from __future__ import annotations

# The driver, imported here first: where it is missing, importing this package fails at
# once (open_storage turns that into the install command), whatever submodules are loaded.
import asyncpg  # type: ignore[import-untyped, unused-ignore]  # noqa: F401

from .options import DEFAULT_TABLE, PostgresSettings, parse_postgres_url
from .store import PostgresStorage

__all__ = ("DEFAULT_TABLE", "PostgresSettings", "PostgresStorage", "parse_postgres_url")
