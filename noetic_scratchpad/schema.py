"""The schema gate: does a merged state satisfy the user's pydantic schema so far?

A scratchpad fills up over many turns, so a required field that has not been written yet
is not an error; a wrong type, a broken constraint or a forbidden extra key is. The gate
only judges: what is stored is the merged dict, never pydantic's output.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

from pydantic import BaseModel, TypeAdapter, ValidationError
from pydantic_core import CoreConfig, CoreSchema, SchemaError, SchemaValidator
from pydantic_core import core_schema as cs

__all__ = ("SchemaGate", "partial_json_schema")


class Validator(Protocol):
    """A TypeAdapter's validator, or one built here from a core schema."""

    def validate_python(self, input: Any, /) -> Any: ...


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
        # Validates the fields an update writes, alone (see errors_after_update).
        self._fields = _fields_validator(schema, self._adapter.core_schema)

    @property
    def fields_independent(self) -> bool:
        """Each top-level field validates on its own, so an update's fields can be checked alone."""
        return self._fields is not None

    def errors(self, state: Mapping[str, Any]) -> list[dict[str, Any]]:
        """Return the errors that reject ``state``: empty when it passes."""
        return _errors(self._adapter.validator, state)

    def removed_required(
        self, before: Mapping[str, Any], after: Mapping[str, Any]
    ) -> list[dict[str, Any]]:
        """The errors of required top-level fields that ``before`` had and ``after`` has
        not: an edit or a revert deleted them. (A field not written yet is no error, but
        one deleted is: no update is about to fill it in.)"""
        required = _resolve(self.json_schema, self.json_schema).get("required", ())
        return [
            {"type": "missing", "loc": [name], "msg": "Field required", "input": None}
            for name in required
            if name in before and name not in after
        ]

    def errors_after_update(
        self, merged: Mapping[str, Any], keys: Iterable[str]
    ) -> list[dict[str, Any]]:
        """The errors of ``merged``, the merge of an update writing ``keys`` into a state
        known to pass.

        When fields validate independently only the written fields are checked (the others
        are the prior state's, unchanged), each against its own schema: the verdict is the
        same as :meth:`errors`, and the cost is the update's size instead of the whole
        state's.
        """
        if self._fields is None:
            return self.errors(merged)
        return _errors(self._fields, {key: merged[key] for key in keys if key in merged})

    def tool_parameters(self) -> dict[str, Any]:
        """The JSON schema a model sees for an update: the schema's fields, all optional,
        without the titles pydantic derives from names (``"Currentgoal"``: noise to a
        model); descriptions stay."""
        schema = partial_json_schema(self.json_schema)
        _walk_schemas(schema, _drop_title)
        return schema


def _errors(validator: Validator, state: Mapping[str, Any]) -> list[dict[str, Any]]:
    try:
        # The core validator itself: TypeAdapter.validate_python's wrapper costs a third of
        # a small update's validation, on every write.
        validator.validate_python(state)
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


def _fields_validator(schema: Any, core_schema: CoreSchema) -> SchemaValidator | None:
    """A validator of any subset of the model ``schema``'s fields: its fields' own core
    schemas in a ``TypedDict`` of none required, under the model's config (extra keys,
    aliases, string limits and all); ``None`` when the fields cannot be validated one by
    one.

    Fields left out are neither missing nor filled with defaults, and no model instance is
    made: half the cost of validating the model with every field optional, on every
    write. Only models whose validation runs no user code qualify: a validator or
    ``model_post_init`` anywhere may look at several fields at once. tests/test_hot_paths.py
    checks its verdicts against the whole model's.
    """
    if not (isinstance(schema, type) and issubclass(schema, BaseModel)):
        return None
    if schema.model_config.get("validate_default") or not _fields_independent(core_schema):
        return None
    model, definitions = _top(core_schema)
    if model.get("type") != "model" or model["schema"]["type"] != "model-fields":
        return None
    model_fields = model["schema"]
    if model_fields.get("extras_schema") is not None or model.get("extras_schema") is not None:
        return None  # typed extra keys: the whole model judges them
    fields: dict[str, cs.TypedDictField] = {}
    for name, field in model_fields["fields"].items():
        field_schema = field["schema"]
        if field_schema["type"] == "default":
            if field_schema.get("on_error", "raise") != "raise":
                return None  # a default that stands in for a bad value: not a plain default
            field_schema = field_schema["schema"]  # a field left out is just left out
        fields[name] = cs.typed_dict_field(
            field_schema,
            required=False,
            validation_alias=field.get("validation_alias"),
        )
    config: CoreConfig = model.get("config") or CoreConfig()
    subset: CoreSchema = cs.typed_dict_schema(
        fields,
        total=False,
        extra_behavior=model_fields.get("extra_behavior") or config.get("extra_fields_behavior"),
        config=config,
    )
    if definitions:
        subset = cs.definitions_schema(subset, definitions)
    try:
        return SchemaValidator(subset, config)
    except SchemaError:  # an unusual model: check it whole
        return None


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
    _walk_schemas(node, _drop_keyword_required)


def _drop_keyword_required(node: dict[str, Any]) -> None:
    if isinstance(node.get("required"), list):
        del node["required"]


def _drop_title(node: dict[str, Any]) -> None:
    if isinstance(node.get("title"), str):
        del node["title"]


def _walk_schemas(node: dict[str, Any], change: Callable[[dict[str, Any]], None]) -> None:
    """Apply ``change`` to ``node`` and every schema in it, at every depth: never to data
    (a default may hold a key called "title") nor to a map of field names."""
    change(node)
    for key, value in node.items():
        if key in _DATA_KEYWORDS:
            continue
        if key in _SCHEMA_MAPS and isinstance(value, dict):
            # The keys here are field names, not keywords: a field may be called "required".
            for sub in value.values():
                if isinstance(sub, dict):
                    _walk_schemas(sub, change)
        elif isinstance(value, dict):
            _walk_schemas(value, change)
        elif isinstance(value, list):
            for sub in value:
                if isinstance(sub, dict):
                    _walk_schemas(sub, change)


# Core-schema markers of code that may look at more than one field (or the whole state).
_CROSS_FIELD_TYPES = frozenset(
    {"function-after", "function-before", "function-wrap", "function-plain"}
)


def _fields_independent(core_schema: Mapping[str, Any]) -> bool:
    """A model or TypedDict whose validation involves no user code at all.

    Then a field's verdict never depends on another field, so an update's fields can be
    checked alone. Any validator or ``model_post_init`` anywhere, even nested, says no.
    """
    top, _ = _top(core_schema)
    if top.get("type") not in ("model", "typed-dict") or top.get("root_model"):
        return False
    stack: list[Any] = [core_schema]
    while stack:
        node = stack.pop()
        if isinstance(node, Mapping):
            if (
                node.get("type") in _CROSS_FIELD_TYPES
                or node.get("post_init")
                or node.get("custom_init")
            ):
                return False
            stack.extend(node.values())
        elif isinstance(node, list | tuple):
            stack.extend(node)
    return True


def _top(core_schema: Mapping[str, Any]) -> tuple[Any, list[CoreSchema]]:
    """The schema a core schema validates with at its top (a model's, a TypedDict's...)
    and the definitions it refers to: pydantic wraps a schema whose nested models are
    shared or recursive in ``definitions``, its top possibly a reference among them."""
    if core_schema.get("type") != "definitions":
        return core_schema, []
    definitions = list(core_schema["definitions"])
    top = core_schema["schema"]
    if top.get("type") == "definition-ref":
        refs = {definition.get("ref"): definition for definition in definitions}
        top = refs.get(top.get("schema_ref"), {})
    return top, definitions


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
