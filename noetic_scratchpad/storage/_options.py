"""Integer options of storage URLs, read by one rule for every backend.

A URL's query gives strings (``?busy_timeout=5000``) and ``open(..., pool_size=4)`` gives
ints; both mean the same option, so both are read here: an ``int``, or a string of ASCII
decimal digits with an optional sign and surrounding whitespace. Nothing else is guessed
at: a bool, a float, ``"1.5"``, ``"1e3"``, ``"1_000"`` or ``""`` is refused rather than
rounded or read as something the user did not write.
"""

from __future__ import annotations

import re

from ..errors import StorageConfigError

__all__ = ("int_option",)

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
