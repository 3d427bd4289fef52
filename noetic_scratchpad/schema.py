"""The schema gate: does a merged state satisfy the user's pydantic schema so far?

A scratchpad fills up over many turns, so a required field that has not been written yet
is not an error; a wrong type, a broken constraint or a forbidden extra key is. The gate
only judges: what is stored is the merged dict, never pydantic's output.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from pydantic import TypeAdapter, ValidationError

__all__ = ("SchemaGate", "partial_json_schema")

# pydantic error types that only say "not written yet".
_NOT_YET_WRITTEN = frozenset({"missing"})


class SchemaGate:
    """Validates states against ``schema`` (a pydantic model or any type TypeAdapter takes)."""

    def __init__(self, schema: Any) -> None:
        self.schema = schema
        self._adapter: TypeAdapter[Any] = TypeAdapter(schema)
        self.json_schema: dict[str, Any] = self._adapter.json_schema()
        if _resolve(self.json_schema, self.json_schema).get("type") != "object":
            raise TypeError(
                f"the scratchpad schema {schema!r} must describe a JSON object "
                "(a pydantic model, TypedDict or dataclass), not "
                f"{self.json_schema.get('type', 'another type')!r}"
            )

    def errors(self, state: Mapping[str, Any]) -> list[dict[str, Any]]:
        """Return the errors that reject ``state``: empty when it passes."""
        try:
            self._adapter.validate_python(state)
        except ValidationError as exc:
            return [
                {
                    "type": error["type"],
                    "loc": list(error["loc"]),
                    "msg": error["msg"],
                    "input": _short(error.get("input")),
                }
                for error in exc.errors(include_url=False)
                if not _not_yet_written(error)
            ]
        return []

    def tool_parameters(self) -> dict[str, Any]:
        """The JSON schema a model sees for an update: the schema's fields, all optional."""
        return partial_json_schema(self.json_schema)


def _not_yet_written(error: Any) -> bool:
    """A required field missing from an object that a later update can still merge into.

    Inside a list item (an int in ``loc``) it is a real error: lists are replaced whole, so
    no later update can fill the field in.
    """
    return error["type"] in _NOT_YET_WRITTEN and not any(
        isinstance(part, int) for part in error["loc"]
    )


def partial_json_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """Return a copy of a JSON schema with every ``required`` list removed, at every depth.

    Deep merge makes every field of a nested object optional in an update, too.
    """
    result = copy.deepcopy(dict(schema))
    _drop_required(result)
    return result


_SCHEMA_MAPS = frozenset({"properties", "patternProperties", "$defs", "definitions"})
# Keywords whose values are data, not schemas: a default may hold a key called "required".
_DATA_KEYWORDS = frozenset({"default", "examples", "example", "const", "enum"})


def _drop_required(node: dict[str, Any]) -> None:
    if isinstance(node.get("required"), list):
        del node["required"]
    for key, value in node.items():
        if key in _DATA_KEYWORDS:
            continue
        if key in _SCHEMA_MAPS and isinstance(value, dict):
            # The keys here are field names, not keywords: a field may be called "required".
            for sub in value.values():
                if isinstance(sub, dict):
                    _drop_required(sub)
        elif isinstance(value, dict):
            _drop_required(value)
        elif isinstance(value, list):
            for sub in value:
                if isinstance(sub, dict):
                    _drop_required(sub)


def _resolve(node: Mapping[str, Any], root: Mapping[str, Any]) -> Mapping[str, Any]:
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        resolved = root.get("$defs", {}).get(ref.removeprefix("#/$defs/"), {})
        return resolved if isinstance(resolved, Mapping) else {}
    return node


def _short(value: Any, limit: int = 200) -> Any:
    """Keep error details small and JSON-friendly: they go into events and tool outputs."""
    if value is None or isinstance(value, bool | int | float):
        return value
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"
