"""What a ``redis://`` (or ``rediss://``, TLS) URL says: the URL for redis-py, and the
prefix of this backend's keys.

URL options (also keyword arguments of :meth:`RedisStorage.open`, which win)::

    redis://:secret@cache.internal:6379/0?prefix=agents:

``prefix`` (default ``scratchpad:``) starts every key this backend writes, so that several
applications (or tests) share one database without seeing each other's keys.
``pool_size`` (default 50) is the most connections the client opens; a call that finds
them all busy waits for one. Both are removed before the URL goes to redis-py; every other
parameter (``socket_timeout``, ``health_check_interval``, ``ssl_cert_reqs`` of a
``rediss://`` URL) passes through.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from ...errors import StorageConfigError
from .._options import int_option, merge_options, split_query
from ..redaction import SECRET_PARAMS, hide_secrets, redact_url, url_secrets

__all__ = ("DEFAULT_POOL_SIZE", "DEFAULT_PREFIX", "RedisSettings", "parse_redis_url")

DEFAULT_PREFIX = "scratchpad:"
DEFAULT_POOL_SIZE = 50

_SCHEMES = ("redis", "rediss")
_OUR_PARAMS = ("prefix", "pool_size")
_SECRET_PARAMS = SECRET_PARAMS["redis"]


@dataclass(frozen=True, slots=True)
class RedisSettings:
    """What :func:`parse_redis_url` makes of a URL and the keyword options."""

    url: str = field(repr=False)
    """The URL for redis-py, without this backend's parameters (and with its password:
    never shown; see ``display``)."""
    prefix: str
    pool_size: int
    display: str
    """The URL without its password, for messages, logs and ``repr``."""
    secrets: tuple[str, ...] = field(default=(), repr=False)
    """The URL's passwords as written and decoded, to scrub from the driver's texts."""

    def scrub(self, text: str) -> str:
        """``text`` with the URL and every password in it replaced by their redacted form."""
        if self.url in text:
            text = text.replace(self.url, self.display)
        return hide_secrets(text, self.secrets)


def parse_redis_url(url: str, **options: Any) -> RedisSettings:
    """Split ``url`` into redis-py's URL and this backend's settings.

    Raises :class:`StorageConfigError` for another scheme, an unknown keyword option or a
    repeated ``prefix``.
    """
    parts = urlsplit(url)
    display = redact_url(url, _SECRET_PARAMS)
    if parts.scheme.lower() not in _SCHEMES:
        raise StorageConfigError(
            f"{display!r} is not a Redis URL; use redis://host:6379/0 (rediss:// for TLS)"
        )
    ours, passed = split_query(parts.query, _OUR_PARAMS, display)
    merged = merge_options(ours, options, _OUR_PARAMS, "Redis")
    prefix = str(merged.get("prefix", DEFAULT_PREFIX))
    pool_size = int_option("pool_size", merged.get("pool_size", DEFAULT_POOL_SIZE), minimum=1)
    client_url = urlunsplit(parts._replace(query="&".join(passed)))
    return RedisSettings(
        client_url,
        prefix,
        pool_size,
        redact_url(client_url, _SECRET_PARAMS),
        url_secrets(url, _SECRET_PARAMS),
    )
