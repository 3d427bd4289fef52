"""What a ``postgresql://`` URL says: the DSN for asyncpg, the table and the pool's size.

URL options (also keyword arguments of :meth:`PostgresStorage.open`, which win)::

    postgresql://user:secret@db.internal:5432/app?table=scratchpad_kv&pool_size=10

``table`` (``[schema.]name``, default ``scratchpad_kv``; its journal is
``[schema.]name_journal``, and the last revisions of its deleted keys
``[schema.]name_retired``), ``pool_size`` (an alias of ``max_size``), ``min_size`` and
``max_size``. They are removed before the URL goes to
asyncpg; every other parameter (``sslmode``, ``application_name``, a server setting such
as ``lock_timeout``) passes through.

Everything here is checked before a connection is opened: the table name is spliced into
SQL, so anything but a plain (optionally schema-qualified) identifier is refused here.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from ...errors import StorageConfigError
from .._options import int_option, merge_options, split_query
from ..redaction import SECRET_PARAMS, hide_secrets, redact_url, url_secrets

__all__ = (
    "DEFAULT_MAX_SIZE",
    "DEFAULT_MIN_SIZE",
    "DEFAULT_TABLE",
    "PostgresSettings",
    "parse_postgres_url",
)

DEFAULT_TABLE = "scratchpad_kv"
DEFAULT_MIN_SIZE = 1
DEFAULT_MAX_SIZE = 10

_SCHEMES = ("postgresql", "postgres")
_OUR_PARAMS = ("table", "pool_size", "min_size", "max_size")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_PORT = re.compile(r"[0-9]{1,5}")
_MAX_IDENTIFIER_BYTES = 63  # PostgreSQL's NAMEDATALEN - 1; longer names are silently cut
_JOURNAL_SUFFIX = "_journal"
_RETIRED_SUFFIX = "_retired"
# The parameters whose value is a secret: shown as ``***``, the others as written.
_SECRET_PARAMS = SECRET_PARAMS["postgresql"]


@dataclass(frozen=True, slots=True)
class PostgresSettings:
    """What :func:`parse_postgres_url` makes of a URL and the keyword options."""

    dsn: str = field(repr=False)
    """The URL for asyncpg, without this backend's own query parameters (and with its
    password: never shown; see ``display``)."""
    table: str
    """The table name as given (``name`` or ``schema.name``), validated."""
    min_size: int
    max_size: int
    display: str
    """The URL without its password, for messages and logs."""
    secrets: tuple[str, ...] = field(default=(), repr=False)
    """The URL's passwords as written and decoded, to scrub from driver error texts."""

    @property
    def quoted_table(self) -> str:
        return ".".join(f'"{part}"' for part in self.table.split("."))

    @property
    def journal_table(self) -> str:
        """The journal's table: ``{table}_journal`` in the table's schema (a name past
        PostgreSQL's 63 bytes is cut and made unique with a hash of the table's name)."""
        return self._beside(_JOURNAL_SUFFIX)

    @property
    def quoted_journal_table(self) -> str:
        return ".".join(f'"{part}"' for part in self.journal_table.split("."))

    @property
    def retired_table(self) -> str:
        """The table of deleted keys' last revisions: ``{table}_retired``, named as the
        journal is."""
        return self._beside(_RETIRED_SUFFIX)

    @property
    def quoted_retired_table(self) -> str:
        return ".".join(f'"{part}"' for part in self.retired_table.split("."))

    @property
    def channel(self) -> str:
        """The ``NOTIFY`` channel the writes of this table are announced on (see
        :mod:`..notices`): ``{table}_changes``, named as the journal is."""
        return self._beside("_changes")

    def _beside(self, suffix: str) -> str:
        """``{table}{suffix}`` in the table's schema, cut to PostgreSQL's 63 bytes and then
        made unique with a hash of the table's name."""
        *schema, name = self.table.split(".")
        side = f"{name}{suffix}"
        if len(side.encode()) > _MAX_IDENTIFIER_BYTES:
            digest = hashlib.sha256(name.encode()).hexdigest()[:8]
            keep = _MAX_IDENTIFIER_BYTES - len(suffix) - len(digest) - 1
            side = f"{name[:keep]}_{digest}{suffix}"
        return ".".join([*schema, side])

    def scrub(self, text: str) -> str:
        """``text`` with the URL and every password in it replaced by their redacted form."""
        if self.dsn in text:
            text = text.replace(self.dsn, self.display)
        return hide_secrets(text, self.secrets)


def parse_postgres_url(url: str, **options: Any) -> PostgresSettings:
    """Split ``url`` into asyncpg's DSN and this backend's settings.

    Keyword ``options`` (``table``, ``pool_size``, ``min_size``, ``max_size``) win over
    the same parameters in the URL's query string. Raises :class:`StorageConfigError` for
    an unknown scheme, a repeated or malformed parameter or a table name that is not an
    identifier.
    """
    parts = urlsplit(url)
    display = redact_url(url, _SECRET_PARAMS)
    if parts.scheme.lower() not in _SCHEMES:
        raise StorageConfigError(
            f"{display!r} is not a PostgreSQL URL; use postgresql://user@host:5432/dbname"
        )
    _check_ports(parts.netloc, display)
    ours, passed = split_query(parts.query, _OUR_PARAMS, display)
    merged = merge_options(ours, options, _OUR_PARAMS, "PostgreSQL")
    table = str(merged.get("table", DEFAULT_TABLE))
    _check_table_name(table)
    min_size, max_size = _pool_sizes(merged)
    dsn = urlunsplit(parts._replace(query="&".join(passed)))
    return PostgresSettings(
        dsn,
        table,
        min_size,
        max_size,
        redact_url(dsn, _SECRET_PARAMS),
        url_secrets(url, _SECRET_PARAMS),
    )


def _check_ports(netloc: str, display: str) -> None:
    """Refuse a port that is not a number from 1 to 65535, before the driver does with
    a raw error. Most often it is the start of a password with an unencoded ``/``
    (``user:pass/word@host`` ends the host part at the ``/``), so the port itself is never
    shown."""
    for host in netloc.rpartition("@")[2].split(","):  # asyncpg takes several hosts
        port = host.rpartition("]")[2].partition(":")[2]  # after an IPv6 address's ]
        if port and not (_PORT.fullmatch(port) and 1 <= int(port) <= 65535):
            raise StorageConfigError(
                f"the port of {display!r} is not a number from 1 to 65535; if the password "
                "holds '/', '?', '#' or '@', percent-encode them ('/' is %2F)"
            )


def _pool_sizes(options: Mapping[str, Any]) -> tuple[int, int]:
    """``(min_size, max_size)`` of the pool; ``pool_size`` is another name of ``max_size``."""
    pool_size = _size_option(options, "pool_size", minimum=1)
    max_size = _size_option(options, "max_size", minimum=1)
    min_size = _size_option(options, "min_size", minimum=0)
    if pool_size is not None and max_size is not None and pool_size != max_size:
        raise StorageConfigError(
            f"pool_size={pool_size} and max_size={max_size} disagree; give one of them "
            "(pool_size is the most connections the pool opens, the same as max_size)"
        )
    max_size = max_size or pool_size or DEFAULT_MAX_SIZE
    if min_size is None:
        min_size = min(DEFAULT_MIN_SIZE, max_size)
    if min_size > max_size:
        raise StorageConfigError(
            f"min_size={min_size} is larger than the pool's maximum ({max_size}); "
            "lower min_size or raise pool_size"
        )
    return min_size, max_size


def _size_option(options: Mapping[str, Any], name: str, *, minimum: int) -> int | None:
    """The pool size option ``name``, or ``None`` when it is not given."""
    raw = options.get(name)
    return None if raw is None else int_option(name, raw, minimum=minimum)


def _check_table_name(table: str) -> None:
    parts = table.split(".")
    ok = 1 <= len(parts) <= 2 and all(
        _IDENTIFIER.match(part) and len(part.encode()) <= _MAX_IDENTIFIER_BYTES for part in parts
    )
    if not ok:
        raise StorageConfigError(
            f"table name {table!r} is not a PostgreSQL identifier; use letters, digits and "
            f"underscores, not starting with a digit, at most {_MAX_IDENTIFIER_BYTES} "
            "characters, optionally schema-qualified (myschema.scratchpad_kv)"
        )
