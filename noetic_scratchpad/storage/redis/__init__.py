"""``redis://`` and ``rediss://`` storage: the contract on a Redis server (see :mod:`.store`).

Importing this package imports redis-py; ``open_storage`` imports it only when a Redis
URL is opened, so the driver is needed only by those who use it
(``pip install 'noetic-scratchpad[redis]'``).
"""

from __future__ import annotations

# The driver, imported here first: where it is missing, importing this package fails at
# once, and open_storage names the extra to install.
import redis.asyncio  # noqa: F401

from .options import DEFAULT_PREFIX, RedisSettings, parse_redis_url
from .store import RedisStorage

__all__ = ("DEFAULT_PREFIX", "RedisSettings", "RedisStorage", "parse_redis_url")
