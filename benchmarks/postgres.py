"""(7) PostgreSQL beside SQLite: per-update latency and concurrent throughput.

Candidate: the full path on ``postgresql://...`` (a table of its own per run). Baseline: a
raw asyncpg read-modify-write of the same document (BEGIN; SELECT ... FOR UPDATE; merge;
UPDATE; COMMIT on a pooled connection), the least a correct multi-server design does. The
full path on SQLite runs beside them, so the two backends are compared in one run.
Skips, with the reason, when asyncpg is missing or no server answers.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import orjson

from noetic_scratchpad import open_storage
from noetic_scratchpad.keys import state_key

from ._harness import (
    Comparison,
    Config,
    Counter,
    EventTally,
    backend_available,
    bare_merge,
    bench_layer,
    concurrent_against_raw,
    interleaved,
    make_document,
    micros_per_op,
    open_scope,
    skipped,
    turn_update,
)

TITLES = {
    "postgres_single": "PostgreSQL: one uncontended update, full path vs raw asyncpg RMW",
    "postgres_concurrent_one_scope": "PostgreSQL: 100 concurrent writers on ONE scope",
    "postgres_concurrent_many_scopes": "PostgreSQL: 100 concurrent writers on 100 scopes",
}


async def server_missing(url: str) -> str | None:
    try:
        import asyncpg  # type: ignore[import-untyped]
    except ImportError:
        return "asyncpg is not installed (pip install 'noetic-scratchpad[postgres]')"
    try:
        conn = await asyncpg.connect(url, timeout=3)
    except (OSError, TimeoutError, asyncpg.PostgresError) as exc:
        return f"no PostgreSQL server at {url} ({type(exc).__name__}: {exc})"
    await conn.close()
    return None


def with_table(url: str, table: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}table={table}"


class RawPostgres:
    """The raw baseline: one transaction per update on a pooled connection."""

    def __init__(self, pool: Any, table: str) -> None:
        self.pool = pool
        self.table = table

    async def setup(self) -> None:
        await self.pool.execute(
            f"CREATE TABLE IF NOT EXISTS {self.table} (key text PRIMARY KEY, value jsonb NOT NULL)"
        )

    async def seed(self, key: str, doc: Mapping[str, Any]) -> None:
        await self.pool.execute(
            f"INSERT INTO {self.table} (key, value) VALUES ($1, $2::jsonb) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            key,
            orjson.dumps(doc).decode(),
        )

    async def read(self, key: str) -> Any:
        text = await self.pool.fetchval(f"SELECT value::text FROM {self.table} WHERE key = $1", key)
        return None if text is None else orjson.loads(text)

    async def rmw(self, key: str, update: Mapping[str, Any]) -> None:
        async with self.pool.acquire() as conn, conn.transaction():
            text = await conn.fetchval(
                f"SELECT value::text FROM {self.table} WHERE key = $1 FOR UPDATE", key
            )
            state = orjson.loads(text) if text is not None else {}
            await conn.execute(
                f"UPDATE {self.table} SET value = $2::jsonb WHERE key = $1",
                key,
                orjson.dumps(bare_merge(state, update)).decode(),
            )


async def run(cfg: Config) -> list[Comparison]:
    missing = backend_available("postgres") or await server_missing(cfg.postgres_url)
    if missing:
        return [skipped(7, key, title, missing) for key, title in TITLES.items()]
    import asyncpg

    sqlite_missing = backend_available("sqlite")
    doc = make_document(5_500)
    layer = bench_layer()
    tally = EventTally()
    counter = Counter()
    run_id = uuid.uuid4().hex[:10]
    ours_table, raw_table = f"bench_ours_{run_id}", f"bench_raw_{run_id}"
    backend = await open_storage(with_table(cfg.postgres_url, ours_table))
    sqlite = (
        None
        if sqlite_missing
        else await open_storage(f"sqlite:///{cfg.workdir / 'postgres_side.db'}")
    )
    pool = await asyncpg.create_pool(cfg.postgres_url, min_size=1, max_size=10)
    raw = RawPostgres(pool, raw_table)
    comparisons: list[Comparison] = []
    try:
        await raw.setup()
        # -- (a) one uncontended update ------------------------------------------------------
        raw_key = state_key("scratchpad", "thread", "single")
        await raw.seed(raw_key, doc)
        pg_handle = await open_scope(backend, layer, "single", tally, seed=doc)
        sqlite_handle = (
            None if sqlite is None else await open_scope(sqlite, layer, "single", tally, seed=doc)
        )
        n = cfg.scale(200, 30)

        def sampler(op: Callable[[int], Awaitable[Any]]) -> Callable[[], Awaitable[float]]:
            async def sample() -> float:
                return await micros_per_op(op, n, counter.next(n))

            return sample

        async def pg_raw(i: int) -> None:
            await raw.rmw(raw_key, turn_update(i))

        variants: dict[str, Callable[[], Awaitable[float]]] = {
            "ours: full path on PostgreSQL": sampler(lambda i: pg_handle.update(turn_update(i))),
            "raw asyncpg RMW (FOR UPDATE)": sampler(pg_raw),
        }
        if sqlite_handle is not None:
            variants["ours: full path on SQLite"] = sampler(
                lambda i: sqlite_handle.update(turn_update(i))
            )
        results = await interleaved(variants, cfg.reps(11, 3))
        stored = await backend.get(state_key("scratchpad", "thread", "single"))
        comparisons.append(
            Comparison(
                question=7,
                key="postgres_single",
                title=TITLES["postgres_single"],
                unit="µs/update",
                candidate="ours: full path on PostgreSQL",
                baseline="raw asyncpg RMW (FOR UPDATE)",
                results=results,
                target_ratio=1.5,
                target="<= 1.5x a raw asyncpg RMW (by analogy with (2))",
                checks={
                    "last update stored": isinstance(stored, dict)
                    and stored.get("turn") == pg_handle.state["turn"]
                },
                extra={"ops_per_sample": n},
            )
        )

        # -- (b) 100 concurrent writers --------------------------------------------------------
        ours = {"pg": ("ours: full path on PostgreSQL", backend)}
        if sqlite is not None:
            ours["sqlite"] = ("ours: full path on SQLite", sqlite)
        comparisons += await concurrent_against_raw(
            cfg,
            question=7,
            family="postgres",
            titles=TITLES,
            ours=ours,
            raw=raw,
            raw_label="raw asyncpg RMW per op (pool of 10)",
            target=">= 1.0x raw per-op asyncpg RMW, 0 lost (by analogy with (3))",
        )
    finally:
        await backend.aclose()
        if sqlite is not None:
            await sqlite.aclose()
        for table in (ours_table, raw_table):
            await pool.execute(f"DROP TABLE IF EXISTS {table}")
        await pool.close()
    return comparisons
