"""Pure functions for the scratchpad's state: JSON checking, key stripping and deep merge.

Nothing here mutates its arguments or imports the rest of the package. States are treated
as immutable values: a merge copies only the path it changes and shares the rest, which is
what keeps an update cheap on a large state.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

__all__ = (
    "FORBIDDEN_KEYS",
    "MAX_DEPTH",
    "SURROGATE_FIX",
    "InvalidValueError",
    "deep_merge",
    "merge_state",
    "strip_keys",
    "to_json_value",
)

#: Keys removed at every depth: prototype-pollution keys in the JavaScript world the
#: scratchpad's JSON may travel to.
FORBIDDEN_KEYS = frozenset({"__proto__", "constructor"})

#: Containers nested deeper than this are replaced instead of merged, and rejected by
#: :func:`to_json_value`, so a cyclic or absurdly deep value can never overflow the stack.
MAX_DEPTH = 32

#: Where the old text goes when a string state receives its first object update.
PREVIOUS_TEXT_KEY = "_previous"


#: How to fix a string holding half of a UTF-16 surrogate pair.
SURROGATE_FIX = (
    "remove it, or write the character it was meant to be: the character itself, or both "
    "halves of its surrogate pair (\\ud83d\\ude00 in JSON is one emoji)"
)


class InvalidValueError(ValueError):
    """A value cannot be stored as JSON. ``path`` says where, as ``$.a.b[2]``; ``fix``,
    when given, says how to mend it."""

    def __init__(self, message: str, path: str, *, fix: str = "") -> None:
        super().__init__(f"{message} at {path}" + (f"; {fix}" if fix else ""))
        self.path = path


def to_json_value(value: Any, *, max_depth: int = MAX_DEPTH) -> Any:
    """Return a JSON-safe copy of ``value`` without forbidden keys.

    Tuples become lists, and subclasses of str, int and float their plain type. Raises
    :class:`InvalidValueError` for anything JSON cannot hold exactly: non-string keys, NaN
    and infinities, bytes, sets, dates and other objects, cycles, nesting deeper than
    ``max_depth``, and strings or keys holding a lone surrogate (half of a UTF-16 pair, as
    ``json.loads`` makes of the escape ``"\\ud800"``): that is not Unicode text, so no
    store can hold it, and retrying never helps.
    """
    try:
        return _plain_copy(value, max_depth)
    except _NotPlain:
        # Something to convert or to report: the thorough walk says what and where.
        return _to_json(value, "$", 0, max_depth, set())


class _NotPlain(Exception):
    pass


def _plain_copy(value: Any, depth_left: int) -> Any:
    """The common case, fast: exact JSON types only, no paths kept; else ``_NotPlain``."""
    kind = type(value)
    # Containers first: the loops below take scalars without a call, so what comes here
    # is mostly an object or a list.
    if kind is dict:
        if depth_left <= 0:  # too deep, or a cycle
            raise _NotPlain
        # Items that are ASCII text, ints, booleans or null are taken here, without a call
        # each (nor the frame of a list comprehension); the rest recurse.
        result: dict[str, Any] = {}
        for key, item in value.items():
            if type(key) is not str or (not key.isascii() and _has_lone_surrogate(key)):
                raise _NotPlain
            if key not in FORBIDDEN_KEYS:
                kind = type(item)
                if (kind is str and item.isascii()) or kind is int or kind is bool or item is None:
                    result[key] = item
                else:
                    result[key] = _plain_copy(item, depth_left - 1)
        return result
    if kind is list:
        if depth_left <= 0:
            raise _NotPlain
        items: list[Any] = []
        for item in value:
            kind = type(item)
            if (kind is str and item.isascii()) or kind is int or kind is bool or item is None:
                items.append(item)
            else:
                items.append(_plain_copy(item, depth_left - 1))
        return items
    if kind is str:
        # isascii() reads a flag; only other text is encoded to look for surrogates.
        if not value.isascii() and _has_lone_surrogate(value):
            raise _NotPlain
        return value
    if kind is int or kind is bool or value is None:
        return value
    if kind is float:
        if value - value != 0.0:  # NaN or an infinity
            raise _NotPlain
        return value
    raise _NotPlain


def _to_json(value: Any, path: str, depth: int, max_depth: int, seen: set[int]) -> Any:
    if value is None or isinstance(value, bool):
        return value
    # Subclasses (enums, numpy.float64, ...) become the plain type: a store must hold JSON,
    # and orjson refuses float subclasses outright.
    if isinstance(value, str):
        text = value if type(value) is str else str.__str__(value)
        _check_text(text, path, "the text")
        return text
    if isinstance(value, int):
        return value if type(value) is int else int.__int__(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidValueError(f"{value} is not a JSON number", path)
        return value if type(value) is float else float.__float__(value)
    if not isinstance(value, dict | list | tuple):
        raise InvalidValueError(f"a {type(value).__name__} is not a JSON value", path)
    if id(value) in seen:
        raise InvalidValueError("the value contains itself (a cycle)", path)
    if depth >= max_depth:
        raise InvalidValueError(f"nesting is deeper than {max_depth} levels", path)
    seen.add(id(value))
    try:
        if isinstance(value, dict):
            result: dict[str, Any] = {}
            for key, item in value.items():
                if not isinstance(key, str):
                    raise InvalidValueError(
                        f"the key {key!r} is a {type(key).__name__}, not a string", path
                    )
                if type(key) is not str:  # a StrEnum member: orjson refuses subclass keys
                    key = str.__str__(key)
                _check_text(key, path, f"the key {_shown(key)}")
                if key not in FORBIDDEN_KEYS:
                    result[key] = _to_json(item, f"{path}.{key}", depth + 1, max_depth, seen)
            return result
        return [
            _to_json(item, f"{path}[{index}]", depth + 1, max_depth, seen)
            for index, item in enumerate(value)
        ]
    finally:
        seen.discard(id(value))


def _has_lone_surrogate(text: str) -> bool:
    """Whether ``text`` holds a surrogate code point, which UTF-8 (and so JSON) cannot hold."""
    try:
        text.encode()
    except UnicodeEncodeError:
        return True
    return False


def _check_text(text: str, path: str, what: str) -> None:
    """Raise :class:`InvalidValueError` when ``text`` holds a lone surrogate."""
    if text.isascii():
        return
    try:
        text.encode()
    except UnicodeEncodeError as exc:
        code = ord(text[exc.start])
        raise InvalidValueError(
            f"{what} contains a lone surrogate U+{code:04X} (invalid Unicode: half of a "
            "UTF-16 surrogate pair, which cannot be stored)",
            path,
            fix=SURROGATE_FIX,
        ) from None


def _shown(key: str, limit: int = 40) -> str:
    """``key`` for a message: quoted, surrogates and other unprintables escaped, cut short."""
    return repr(key) if len(key) <= limit else repr(key[:limit]) + "..."


def strip_keys(value: Any, *, max_depth: int = MAX_DEPTH) -> Any:
    """Return ``value`` without :data:`FORBIDDEN_KEYS` at any depth down to ``max_depth``.

    Containers below the cap are returned as they are (replaced, never recursed into).
    """
    return _strip(value, max_depth)


def _strip(value: Any, depth_left: int) -> Any:
    if depth_left <= 0:
        return value
    if isinstance(value, dict):
        return {
            key: _strip(item, depth_left - 1)
            for key, item in value.items()
            if key not in FORBIDDEN_KEYS
        }
    if isinstance(value, list):
        return [_strip(item, depth_left - 1) for item in value]
    return value


def deep_merge(
    base: Mapping[str, Any],
    update: Mapping[str, Any],
    *,
    max_depth: int = MAX_DEPTH,
    cleaned: bool = False,
) -> dict[str, Any]:
    """Merge ``update`` into a copy of ``base``.

    Object-valued keys merge recursively; lists and primitives (``None`` included) replace.
    Forbidden keys are stripped at every depth. Below ``max_depth`` a value replaces
    instead of merging. Only the changed path is copied; untouched subtrees are shared.

    ``cleaned``: ``update`` is what :func:`to_json_value` returned and nobody else holds,
    so it has no forbidden keys and its values are taken as they are, not copied (which
    was two thirds of a small update's merge).
    """
    return _merge(base, update, max_depth, not cleaned)


def _merge(
    base: Mapping[str, Any], update: Mapping[str, Any], depth_left: int, strip: bool
) -> dict[str, Any]:
    result = dict(base)
    for key, value in update.items():
        if strip and key in FORBIDDEN_KEYS:
            continue
        current = result.get(key)
        if isinstance(value, dict) and isinstance(current, dict) and depth_left > 1:
            result[key] = _merge(current, value, depth_left - 1, strip)
        else:
            result[key] = _strip(value, depth_left - 1) if strip else value
    return result


def merge_noting(
    base: Mapping[str, Any],
    update: Mapping[str, Any],
    depth_left: int,
    path: list[str],
    restore: list[list[Any]],
    remove: list[list[str]],
) -> dict[str, Any]:
    """:func:`deep_merge` of a cleaned ``update`` into ``base`` (``cleaned=True``, from
    ``depth_left`` down), noting, as it goes, what restores ``base``: each path it writes
    (a list of keys below ``path``) with its prior value in ``restore``, or in ``remove``
    when it had none. A journaled write merges and makes its undo in this one walk."""
    result = dict(base)
    for key, value in update.items():
        if key in result:
            current = result[key]
            if isinstance(value, dict) and isinstance(current, dict) and depth_left > 1:
                result[key] = merge_noting(
                    current, value, depth_left - 1, [*path, key], restore, remove
                )
                continue
            restore.append([[*path, key], current])
        else:
            remove.append([*path, key])
        result[key] = value
    return result


def merge_state(
    state: str | Mapping[str, Any],
    update: Mapping[str, Any],
    *,
    max_depth: int = MAX_DEPTH,
    cleaned: bool = False,
) -> dict[str, Any]:
    """Apply an object update to a scratchpad state, which may still be plain text.

    A non-empty text state is kept under ``"_previous"`` (the old text wins over an update
    key of that name); an empty text state is simply replaced. ``cleaned``: as for
    :func:`deep_merge`.
    """
    if isinstance(state, str):
        merged = _merge({}, update, max_depth, not cleaned)
        if state:
            merged[PREVIOUS_TEXT_KEY] = state
        return merged
    return _merge(state, update, max_depth, not cleaned)  # deep_merge's work, a call less
