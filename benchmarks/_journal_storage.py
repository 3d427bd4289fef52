"""Storage of the journal benchmark (:mod:`benchmarks.journal`): one scope, many updates.

Each layer (journal on, journal off) writes ``points[-1]`` realistic updates to one scope in
a SQLite file of its own. At each point the WAL is checkpointed into the file (TRUNCATE),
then measured: the file's bytes, and the bytes of the stored values and journal entries
(``length`` of each as bytes). Bounded means flat from the first point to the last.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from noetic_scratchpad import open_storage

from ._harness import Comparison, Config, EventTally, Stats, make_document, open_scope, turn_update

Row = dict[str, int]


def measure_file(path: Path) -> Row:
    """Checkpoint the WAL into the file, then its bytes and the bytes of the rows."""
    conn = sqlite3.connect(path, isolation_level=None, timeout=5)
    try:
        busy = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
        values, value_bytes = conn.execute(
            "SELECT count(*), coalesce(sum(length(CAST(value AS BLOB))), 0) FROM scratchpad_kv"
        ).fetchone()
        entries, entry_bytes = conn.execute(
            "SELECT count(*), coalesce(sum(length(CAST(entry AS BLOB))), 0) "
            "FROM scratchpad_kv_journal"
        ).fetchone()
        free_pages = conn.execute("PRAGMA freelist_count").fetchone()[0]
    finally:
        conn.close()
    wal = path.with_name(path.name + "-wal")
    return {
        "file_bytes": path.stat().st_size,
        "wal_bytes": wal.stat().st_size if wal.exists() else 0,
        "checkpoint_busy": busy,
        "kv_rows": values,
        "kv_value_bytes": value_bytes,
        "journal_rows": entries,
        "journal_entry_bytes": entry_bytes,
        "free_pages": free_pages,
    }


async def growth(path: Path, layer: Any, points: Sequence[int]) -> list[Row]:
    """``points[-1]`` updates to one scope, measuring the file at each point."""
    backend = await open_storage(f"sqlite:///{path}")
    measured = []
    try:
        handle = await open_scope(backend, layer, "growth", EventTally(), make_document(5_500))
        done = 0
        for point in points:
            for i in range(done, point):
                await handle.update(turn_update(i))
            done = point
            measured.append({"updates": point, **measure_file(path)})
    finally:
        await backend.aclose()
    return measured


async def storage(
    cfg: Config, workdir: Path, layers: Mapping[str, Any], keep: int, title: str
) -> Comparison:
    """Bytes after each point, for each of ``layers`` (candidate first, baseline second)."""
    on, off = layers
    points = (1_000, 5_000, 10_000) if not cfg.quick else (60, 150, 300)
    table = {
        name: await growth(workdir / f"growth-{layer.config.history_limit}.db", layer, points)
        for name, layer in layers.items()
    }
    print("  journal storage, one scope (bytes after a checkpoint):")
    for name, rows in table.items():
        for row in rows:
            print(
                f"    {name}: after {row['updates']:,} updates: file {row['file_bytes']:,} B, "
                f"values {row['kv_value_bytes']:,} B, journal {row['journal_rows']} rows "
                f"{row['journal_entry_bytes']:,} B, {row['free_pages']} free pages"
            )

    def rows_bytes(row: Row) -> int:
        return row["kv_value_bytes"] + row["journal_entry_bytes"]

    results = {
        f"{on}: SQLite file": Stats.of([row["file_bytes"] for row in table[on]]),
        f"{off}: SQLite file": Stats.of([row["file_bytes"] for row in table[off]]),
        f"{on}: values + journal entries": Stats.of([rows_bytes(row) for row in table[on]]),
        f"{off}: values": Stats.of([rows_bytes(row) for row in table[off]]),
    }

    def flat(rows: list[Row], measure: Callable[[Row], int]) -> bool:
        return measure(rows[-1]) <= 1.1 * measure(rows[0])

    last = f"{points[-1]:,}"
    return Comparison(
        question=9,
        key="journal_storage",
        title=f"{title}: bytes of one scope after {', '.join(f'{p:,}' for p in points)} updates",
        unit="bytes",
        candidate=f"{on}: SQLite file",
        baseline=f"{off}: SQLite file",
        results=results,
        target=f"bounded: {keep} entries kept, bytes flat (<= 1.1x) from {points[0]:,} to {last}",
        checks={
            f"{keep} journal entries kept": all(r["journal_rows"] == keep for r in table[on]),
            "no journal with history_limit=0": all(r["journal_rows"] == 0 for r in table[off]),
            "file flat": all(flat(rows, lambda r: r["file_bytes"]) for rows in table.values()),
            "rows flat": all(flat(rows, rows_bytes) for rows in table.values()),
            "checkpoint completed": all(
                not r["checkpoint_busy"] for rows in table.values() for r in rows
            ),
        },
        extra={"points": list(points), "per_point": table},
    )
