"""JSON text for storage and size limits: orjson where it can, the standard library else."""

from __future__ import annotations

import json
from typing import Any

import orjson

__all__ = (
    "ArgumentsError",
    "arguments_problem",
    "dumps",
    "json_kind",
    "loads",
    "loads_arguments",
    "reject_constant",
)


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


class ArgumentsError(ValueError):
    """Tool-call arguments that are not a JSON object; ``kind`` says why: ``"json"`` (not
    JSON, NaN and Infinity included), ``"depth"`` (nested past the parser's limit) or
    ``"type"`` (JSON, but not an object: ``found`` names what it is)."""

    def __init__(self, kind: str, detail: str, found: str = "") -> None:
        super().__init__(detail)
        self.kind = kind
        self.found = found


def loads_arguments(text: str) -> dict[str, Any]:
    """A model's tool-call arguments as an object: the one parser of every tool path.

    Empty text is ``{}``. NaN and Infinity are refused (they are not JSON numbers, and no
    backend could store them). Raises :class:`ArgumentsError`.
    """
    try:
        value = json.loads(text or "{}", parse_constant=reject_constant)
    except RecursionError:  # the stdlib parser recurses once per nesting level
        raise ArgumentsError("depth", "nested far too deeply") from None
    except ValueError as exc:
        raise ArgumentsError("json", str(exc)) from None
    if not isinstance(value, dict):
        raise ArgumentsError("type", "not an object", json_kind(value))
    return value


def arguments_problem(exc: ArgumentsError, *, max_depth: int) -> str:
    """What is wrong with a model's arguments, as the sentence the update and edit tools
    open their refusals with; ``max_depth`` is the deepest nesting a state may hold."""
    if exc.kind == "depth":
        what = f"are nested far too deeply (more than {max_depth} levels are never stored)"
    elif exc.kind == "type":
        what = f"are a JSON {exc.found}, not an object"
    else:
        what = f"are not valid JSON ({exc})"
    return f"The arguments {what}."


def reject_constant(name: str) -> Any:
    """``parse_constant`` for ``json.loads``: NaN and Infinity are not JSON numbers."""
    raise ValueError(f"{name} is not a JSON number")


def json_kind(value: Any) -> str:
    """What JSON calls the type of ``value``: ``string``, ``array``, ``null``..."""
    kinds = {str: "string", bool: "boolean", int: "number", float: "number", list: "array"}
    return "null" if value is None else kinds.get(type(value), type(value).__name__)
