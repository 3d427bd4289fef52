"""(7r) Redis: 100 concurrent writers on ONE scope and on 100 scopes.

Candidate: the full path on ``redis://...`` (a key prefix of its own per run), each writer its
own execution context and handle. Baseline: the same 100 tasks, each update a raw redis-py
optimistic read-modify-write (``WATCH``; ``GET``; merge; ``MULTI``; ``SET``; ``EXEC``, retried
on a conflict) on one pooled connection per update in flight: the least a correct
multi-process design on Redis does. Beside them, for reference, the same with an
``anyio.Lock`` per key, so that the writers of one process queue instead of racing. A lost
update is an acknowledged key missing from the final stored state. Skips, with the reason,
when redis-py is missing or no server answers.
"""

from __future__ import annotations

import uuid

from noetic_scratchpad import open_storage

from ._harness import Comparison, Config, concurrent_against_raw, skipped
from .redis_single import LockedRawRedis, RawRedis, connect

TITLES = {
    "redis_concurrent_one_scope": "Redis: 100 concurrent writers on ONE scope",
    "redis_concurrent_many_scopes": "Redis: 100 concurrent writers on 100 scopes",
}
RAW = "raw redis-py WATCH/MULTI RMW per op"


async def run(cfg: Config) -> list[Comparison]:
    client, missing = await connect(cfg.redis_url)
    if missing:
        return [skipped(7, key, title, missing) for key, title in TITLES.items()]
    run_id = uuid.uuid4().hex[:10]
    prefix, raw_prefix = f"bench-{run_id}:", f"bench-raw-{run_id}:"
    backend = await open_storage(f"{cfg.redis_url}?prefix={prefix}")
    try:
        return await concurrent_against_raw(
            cfg,
            question=7,
            family="redis",
            titles=TITLES,
            ours={"redis": ("ours: full path on Redis", backend)},
            raw=RawRedis(client, raw_prefix),
            raw_label=RAW,
            target=">= 1.0x a raw redis-py WATCH/MULTI RMW per op, 0 lost (issue 27)",
            references={
                "raw, lock per key": (f"{RAW}, lock per key", LockedRawRedis(client, raw_prefix))
            },
        )
    finally:
        await backend.aclose()
        await backend.drop_keys()  # type: ignore[attr-defined]
        async for key in client.scan_iter(match=f"{raw_prefix}*"):
            await client.delete(key)
        await client.aclose()
