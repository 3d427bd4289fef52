"""The key range of a prefix, for backends that list keys with an index range scan.

Both SQL backends compare keys in code point order (SQLite's BINARY collation on UTF-8,
PostgreSQL's ``"C"`` collation), the order of Python's ``str``. The keys that start with
a prefix are then exactly those from the prefix up to, not including, the bound below, and
the query can use the key's index instead of scanning with ``LIKE``.
"""

from __future__ import annotations

__all__ = ("prefix_upper_bound",)

_LAST = "\U0010ffff"
_SURROGATES_START = 0xD800
_SURROGATES_END = 0xDFFF


def prefix_upper_bound(prefix: str) -> str | None:
    """The least string greater than every string that starts with ``prefix``, in code
    point order; ``None`` when there is none (``prefix`` is empty or all U+10FFFF).

    Surrogates are skipped: neither database can store them (they have no UTF-8 form), so
    the bound is a storable string, and it is exact among storable strings.
    """
    stripped = prefix.rstrip(_LAST)
    if not stripped:
        return None
    code = ord(stripped[-1]) + 1
    if _SURROGATES_START <= code <= _SURROGATES_END:
        code = _SURROGATES_END + 1
    return stripped[:-1] + chr(code)
