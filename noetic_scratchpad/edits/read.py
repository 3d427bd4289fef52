"""Reading operations: a model's edit call (tool form) or code's operations (operation
form), checked, their values decoded and cleaned; refusals name the failing operation."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from .. import _json
from .._json import reject_constant
from ..merge import FORBIDDEN_KEYS, MAX_DEPTH, InvalidValueError, to_json_value
from .refusals import Where, kind_of, malformed, show, show_names
from .schema import FIELDS, MISSING, OPERATIONS, PLAIN_NAMES, TAKES, TOOL_NAMES

__all__ = ("parse_edit_arguments", "read_all")


def parse_edit_arguments(args: str | Mapping[str, Any]) -> list[dict[str, Any]]:
    """A model's edit call (JSON text, or its decoded mapping) as operations in the
    operation form, checked and cleaned. Raises ``ScratchpadUpdateError`` (``refused``
    ``"edit"``), whose message names the failing operation."""
    arguments = _load_arguments(args)
    unknown = sorted(set(arguments) - {"operations"})
    if unknown:
        raise malformed(
            f"The arguments have {show_names(unknown)}, which the edit tool does not take. To "
            "merge new values into fields, use the update tool instead."
        )
    return read_all(arguments.get("operations"), TOOL_NAMES)


def read_all(operations: Any, names: Mapping[str, str]) -> list[dict[str, Any]]:
    if not isinstance(operations, list | tuple):
        shown = "missing" if operations is None else f"{kind_of(operations)}, not a list"
        raise malformed(f'"operations" is {shown}.')
    if not operations:
        raise malformed('"operations" is empty: there is nothing to do.')
    total = len(operations)
    return [_read(raw, Where(n, total, names)) for n, raw in enumerate(operations, 1)]


def _read(raw: Any, where: Where) -> dict[str, Any]:
    """One operation, checked, its values decoded (tool form) and cleaned."""
    names = where.names
    if not isinstance(raw, Mapping):
        raise where.refuse(f"it is {kind_of(raw)}, not an object")
    unknown = sorted(set(raw) - {"op", "path", *names.values()})
    if unknown:
        fields = show_names(["op", "path", *names.values()])
        raise where.refuse(f"{show_names(unknown)}: no such field; the fields are {fields}")
    kind = raw.get("op")
    if kind not in OPERATIONS:
        raise where.refuse(f'"op" is {show(kind)}, not append, remove, delete or set')
    where.op = kind
    path = _read_path(raw.get("path"), where)
    given = {name: raw[names[name]] for name in FIELDS if _given(raw, names, name)}
    for name in given:
        if name not in TAKES[kind]:
            leave = "make it null" if names is TOOL_NAMES else "leave it out"
            raise where.refuse(f'{kind} takes no "{names[name]}": {leave}')
    return {"op": kind, "path": path, **_read_fields(kind, given, path, where)}


def _read_fields(
    kind: str, given: Mapping[str, Any], path: list[str], where: Where
) -> dict[str, Any]:
    """The fields ``kind`` needs, from those ``given``: decoded, cleaned, within depth (the
    path takes some of the MAX_DEPTH levels a state may nest)."""
    names = where.names
    if kind == "append":
        values = given.get("values")
        if not isinstance(values, list | tuple) or not values:
            raise where.refuse(f'append needs "{names["values"]}", a list of the items to add')
        label = names["values"]
        items = [_decode(item, where, f"item {i} of {label}") for i, item in enumerate(values, 1)]
        return {"values": _clean(items, where, label, MAX_DEPTH - len(path))}
    if kind == "set":
        if "value" not in given:
            raise where.refuse(f'set needs "{names["value"]}", the new value')
        value = _decode(given["value"], where, names["value"])
        return {"value": _clean(value, where, names["value"], MAX_DEPTH - len(path))}
    if kind == "delete":
        return {}
    if ("value" in given) == ("index" in given):
        which = "not both" if given else "one of them is needed"
        raise where.refuse(f'remove takes "{names["value"]}" or "index": {which}')
    if "index" in given:
        if type(given["index"]) is not int:
            raise where.refuse(f'"index" is {show(given["index"])}, not an integer')
        return {"index": given["index"]}
    value = _decode(given["value"], where, names["value"])
    return {"value": _clean(value, where, names["value"], MAX_DEPTH - len(path) - 1)}


def _given(raw: Mapping[str, Any], names: Mapping[str, str], name: str) -> bool:
    """Whether ``raw`` gives field ``name``: a JSON null is a value only for the operation
    form's ``value`` (the tool form writes it ``"null"``)."""
    value = raw.get(names[name], MISSING)
    if value is MISSING:
        return False
    return value is not None or (name == "value" and names is PLAIN_NAMES)


def _read_path(path: Any, where: Where) -> list[str]:
    if not isinstance(path, list | tuple) or not path:
        shown = "missing" if path is None else show(path)
        raise where.refuse(f'"path" is {shown}; write it as a list of keys, such as ["steps"]')
    if len(path) > MAX_DEPTH:
        raise where.refuse(f'"path" has {len(path)} keys, more than the {MAX_DEPTH} levels kept')
    for key in path:
        if not isinstance(key, str):
            raise where.refuse(f'"path" holds {show(key)}: every key must be a string')
        if key in FORBIDDEN_KEYS:
            raise where.refuse(f'"path" holds {show(key)}, a key the scratchpad never stores')
    try:
        keys: list[str] = to_json_value(list(path))  # plain str, lone surrogates refused
    except InvalidValueError as exc:
        raise where.refuse(f'"path" cannot be stored: {exc}') from None
    where.path = keys
    return keys


def _decode(value: Any, where: Where, label: str) -> Any:
    """The value of a tool-form field: JSON text decoded; a non-string taken as it is."""
    if where.names is PLAIN_NAMES or not isinstance(value, str):
        return value
    try:
        return json.loads(value, parse_constant=reject_constant)
    except (ValueError, RecursionError) as exc:
        detail = "nested far too deeply" if isinstance(exc, RecursionError) else str(exc)
        raise where.refuse(
            f"{label} is not JSON text ({detail}); a string value is written with its "
            'quotes, as "\\"done\\""'
        ) from None


def _clean(value: Any, where: Where, label: str, max_depth: int) -> Any:
    try:
        return to_json_value(value, max_depth=max(max_depth, 0))
    except InvalidValueError as exc:
        raise where.refuse(f"{label} cannot be stored as JSON: {exc}") from None


def _load_arguments(args: Any) -> Mapping[str, Any]:
    """The arguments as a mapping, refused as the update tool's ``parse_arguments`` does."""
    if isinstance(args, Mapping):
        return args
    if not isinstance(args, str):
        raise malformed(f"The arguments are {kind_of(args)}, not an object.")
    try:
        return _json.loads_arguments(args)
    except _json.ArgumentsError as exc:
        raise malformed(_json.arguments_problem(exc, max_depth=MAX_DEPTH)) from None
