"""JSON text for storage and size limits: orjson where it can, the standard library else."""

from __future__ import annotations

import json
from typing import Any

import orjson

__all__ = ("dumps", "loads", "same_value")


def dumps(value: Any) -> bytes:
    """Compact UTF-8 JSON. Raises ``ValueError`` for what JSON cannot hold."""
    try:
        return orjson.dumps(value)
    except orjson.JSONEncodeError as exc:
        if "Integer exceeds 64-bit range" not in str(exc):
            raise ValueError(f"the value cannot be stored as JSON: {exc}") from None
    try:  # integers past 64 bits are JSON, just not orjson's
        text = json.dumps(
            value, ensure_ascii=False, allow_nan=False, separators=(",", ":")
        ).encode()
    except (TypeError, ValueError) as exc:
        raise ValueError(f"the value cannot be stored as JSON: {exc}") from None
    # orjson would read those integers back as floats, silently: the leading space (still
    # valid JSON, never produced by orjson) tells ``loads`` to use the standard library.
    return b" " + text


def loads(data: bytes | str) -> Any:
    """Parse JSON text; integers past 64 bits included when ``dumps`` wrote them."""
    if data[:1] in (b" ", " "):
        return json.loads(data)
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(data)


def same_value(a: Any, b: Any) -> bool:
    """Whether ``a`` and ``b`` are the same JSON value, whatever the order of their keys
    (PostgreSQL's jsonb hands objects back in an order of its own). ``False`` when either
    is not JSON orjson can write (integers past 64 bits included): the caller then checks
    the slow way."""
    try:
        # Copies decoded from the same text list their keys alike: the plain encoding, a
        # third of the sorted one's cost, then settles it. (Equal text: the same value.)
        if (
            type(a) is dict
            and type(b) is dict
            and list(a) == list(b)
            and orjson.dumps(a) == orjson.dumps(b)
        ):
            return True
        return orjson.dumps(a, option=orjson.OPT_SORT_KEYS) == orjson.dumps(
            b, option=orjson.OPT_SORT_KEYS
        )
    except orjson.JSONEncodeError:
        return False
