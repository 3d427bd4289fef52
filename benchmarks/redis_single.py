"""(7r) Redis: one uncontended update, the full path vs a raw redis-py read-modify-write.

Candidate: the full path on ``redis://...`` (a key prefix of its own per run). Baseline: a
raw redis-py optimistic read-modify-write of the same document (``WATCH``; ``GET``; merge;
``MULTI``; ``SET``; ``EXEC``, retried on a conflict), the least a correct multi-process
design on Redis does. Skips, with the reason, when redis-py is missing or no server answers.
The concurrent figures are ``redis_concurrent.py``'s.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

import anyio
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
    interleaved,
    make_document,
    micros_per_op,
    open_scope,
    skipped,
    turn_update,
)

KEY = "redis_single"
TITLE = "Redis: one uncontended update, full path vs raw redis-py WATCH/MULTI RMW"


class RawRedis:
    """The raw baseline: ``WATCH``/``GET``/``MULTI``/``SET``/``EXEC`` per update."""

    def __init__(self, client: Any, prefix: str = "") -> None:
        self.client = client
        self.prefix = prefix

    async def seed(self, key: str, doc: Mapping[str, Any]) -> None:
        await self.client.set(self.prefix + key, orjson.dumps(doc))

    async def read(self, key: str) -> Any:
        text = await self.client.get(self.prefix + key)
        return None if text is None else orjson.loads(text)

    async def rmw(self, key: str, update: Mapping[str, Any]) -> None:
        from redis.exceptions import WatchError

        key = self.prefix + key
        async with self.client.pipeline(transaction=True) as pipe:
            while True:
                try:
                    await pipe.watch(key)
                    text = await pipe.get(key)
                    state = orjson.loads(text) if text is not None else {}
                    pipe.multi()
                    pipe.set(key, orjson.dumps(bare_merge(state, update)))
                    await pipe.execute()
                    return
                except WatchError:
                    continue


class LockedRawRedis(RawRedis):
    """:class:`RawRedis` with an ``anyio.Lock`` per key around each update: the writers of
    one process queue instead of racing each other's ``WATCH`` (a reference, not the
    baseline: other processes still race it)."""

    def __init__(self, client: Any, prefix: str = "") -> None:
        super().__init__(client, prefix)
        self.locks: dict[str, anyio.Lock] = {}

    async def rmw(self, key: str, update: Mapping[str, Any]) -> None:
        lock = self.locks.setdefault(key, anyio.Lock())
        async with lock:
            await super().rmw(key, update)


async def connect(url: str) -> tuple[Any, str | None]:
    """A redis-py client on ``url`` that answered ``PING``, or ``None`` and why not."""
    missing = backend_available("redis")
    if missing is not None:
        return None, missing
    import redis.asyncio
    import redis.exceptions

    client = redis.asyncio.from_url(url)
    try:
        await client.ping()
    except (OSError, redis.exceptions.RedisError) as exc:
        await client.aclose()
        return None, f"no Redis server at {url} ({type(exc).__name__}: {exc})"
    return client, None


async def run(cfg: Config) -> list[Comparison]:
    client, missing = await connect(cfg.redis_url)
    if missing:
        return [skipped(7, KEY, TITLE, missing)]
    prefix = f"bench-{uuid.uuid4().hex[:10]}:"
    backend = await open_storage(f"{cfg.redis_url}?prefix={prefix}")
    raw_key = f"{prefix}raw"
    doc = make_document(5_500)
    await client.set(raw_key, orjson.dumps(doc))
    raw = RawRedis(client)
    tally, counter = EventTally(), Counter()
    n = cfg.scale(300, 30)
    try:
        handle = await open_scope(backend, bench_layer(), "single", tally, seed=doc)

        async def ours() -> float:
            return await micros_per_op(lambda i: handle.update(turn_update(i)), n, counter.next(n))

        async def baseline() -> float:
            return await micros_per_op(
                lambda i: raw.rmw(raw_key, turn_update(i)), n, counter.next(n)
            )

        results = await interleaved(
            {"ours: full path on Redis": ours, "raw redis-py WATCH/MULTI RMW": baseline},
            cfg.reps(11, 3),
        )
        stored = await backend.get(state_key("scratchpad", "thread", "single"))
        return [
            Comparison(
                question=7,
                key=KEY,
                title=TITLE,
                unit="µs/update",
                candidate="ours: full path on Redis",
                baseline="raw redis-py WATCH/MULTI RMW",
                results=results,
                target_ratio=1.5,
                target="<= 1.5x a raw redis-py WATCH/MULTI RMW (issue 27)",
                checks={
                    "last update stored": isinstance(stored, dict)
                    and stored.get("turn") == handle.state["turn"]
                },
                extra={"ops_per_sample": n},
            )
        ]
    finally:
        await backend.aclose()
        await backend.drop_keys()  # type: ignore[attr-defined]
        await client.delete(raw_key)
        await client.aclose()
