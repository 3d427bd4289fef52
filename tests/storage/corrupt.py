"""Rows the library cannot read back, written behind its back as another program (or a
damaged disk) could: for the tests of how a corrupt row is reported and cleared."""

from __future__ import annotations

import sqlite3
from typing import Any

from noetic_scratchpad.storage import StorageBackend

#: How a row can be unreadable, per backend: jsonb only holds valid JSON, so PostgreSQL's
#: unreadable rows are nested deeper than a Python parser goes.
SQLITE_CORRUPTIONS = {
    "not-utf8": "CAST(X'FF7B' AS TEXT)",
    "not-json": "'{\"goal\": '",
    "too-deep": "'" + "[" * 5000 + "]" * 5000 + "'",
}
POSTGRES_CORRUPTIONS = {"too-deep": "(repeat('[', 5000) || repeat(']', 5000))::jsonb"}
#: (backend kind, corruption) pairs, for ``pytest.mark.parametrize``.
CORRUPT_ROWS = [
    *(("sqlite", how) for how in SQLITE_CORRUPTIONS),
    *(("postgres", how) for how in POSTGRES_CORRUPTIONS),
]


async def corrupt_row(backend: StorageBackend, key: str, how: str) -> None:
    """Store an unreadable value at ``key`` of ``backend`` (SQLite or PostgreSQL), written
    or overwritten with SQL of its own connection."""
    settings: Any = getattr(backend, "settings", None)
    if settings is None:  # SQLite
        value = SQLITE_CORRUPTIONS[how]
        with sqlite3.connect(backend.path) as conn:  # type: ignore[attr-defined]
            conn.execute(
                f"INSERT INTO scratchpad_kv (key, value, updated_at, revision) "
                f"VALUES (?, {value}, 0, 1) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (key,),
            )
        return
    import asyncpg

    conn = await asyncpg.connect(settings.dsn)
    try:
        await conn.execute(
            f"INSERT INTO {settings.quoted_table} (key, value, revision) "
            f"VALUES ($1, {POSTGRES_CORRUPTIONS[how]}, 1) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            key,
        )
    finally:
        await conn.close()
