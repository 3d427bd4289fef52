"""Options of storage URLs, read by one rule for every backend: integers, and the split of
a URL's query between a backend's own parameters and its driver's.

A URL's query gives strings (``?busy_timeout=5000``) and ``open(..., pool_size=4)`` gives
ints; both mean the same option, so both are read here: an ``int``, or a string of ASCII
decimal digits with an optional sign and surrounding whitespace. Nothing else is guessed
at: a bool, a float, ``"1.5"``, ``"1e3"``, ``"1_000"`` or ``""`` is refused rather than
rounded or read as something the user did not write.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from typing import Any
from urllib.parse import parse_qsl

from ..errors import StorageConfigError

__all__ = ("int_option", "merge_options", "split_query")

_DECIMAL = re.compile(r"[+-]?[0-9]+")


def int_option(name: str, value: object, *, minimum: int) -> int:
    """``value`` as an integer of at least ``minimum``.

    Raises :class:`StorageConfigError` naming the option, the value and the minimum when
    ``value`` is not an ``int`` (``bool`` is not) or a decimal string, or is below
    ``minimum``.
    """
    number: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str) and _DECIMAL.fullmatch(value.strip()):
        number = int(value)
    if number is None or number < minimum:
        raise StorageConfigError(f"{name}={value!r} must be an integer of at least {minimum}")
    return number


def split_query(
    query: str, ours: Collection[str], display: str
) -> tuple[dict[str, str], list[str]]:
    """The parameters of ``query`` named in ``ours`` (decoded), and the other segments as
    written, for the driver (which decodes them itself). A parameter of ours given twice
    is a :class:`StorageConfigError` naming ``display`` (the URL as it may be shown)."""
    found: dict[str, str] = {}
    passed: list[str] = []
    for segment in filter(None, query.split("&")):
        [(name, value)] = parse_qsl(segment, keep_blank_values=True) or [(segment, "")]
        if name not in ours:
            passed.append(segment)
        elif name in found:
            raise StorageConfigError(f"the storage URL {display!r} gives {name!r} twice")
        else:
            found[name] = value
    return found, passed


def merge_options(
    found: Mapping[str, str], options: Mapping[str, Any], ours: Collection[str], kind: str
) -> dict[str, Any]:
    """The URL's parameters overridden by the keyword ``options`` that are not ``None``;
    a keyword not in ``ours`` is a :class:`StorageConfigError` naming the ``kind`` of
    backend."""
    unknown = sorted(set(options) - set(ours))
    if unknown:
        raise StorageConfigError(f"unknown {kind} storage option(s): {', '.join(unknown)}")
    return {**found, **{k: v for k, v in options.items() if v is not None}}
