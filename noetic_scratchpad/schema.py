"""The schema gate: does a merged state satisfy the user's pydantic schema so far?

A scratchpad fills up over many turns, so a required field that has not been written yet
is not an error; a wrong type, a broken constraint or a forbidden extra key is. The gate
only judges: what is stored is the merged dict, never pydantic's output.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from pydantic import BaseModel, PydanticUserError, TypeAdapter, ValidationError, create_model

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
        partial = _partial_model(schema, self._adapter.core_schema)
        # Validates the fields an update writes, alone (see errors_after_update).
        self._partial: TypeAdapter[Any] | None = None if partial is None else TypeAdapter(partial)

    @property
    def fields_independent(self) -> bool:
        """Each top-level field validates on its own, so an update's fields can be checked alone."""
        return self._partial is not None

    def errors(self, state: Mapping[str, Any]) -> list[dict[str, Any]]:
        """Return the errors that reject ``state``: empty when it passes."""
        return _errors(self._adapter, state)

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
        are the prior state's, unchanged), against a copy of the model whose fields all
        default to ``None``: the verdict is the same as :meth:`errors`, and the cost is the
        update's size instead of the whole state's.
        """
        if self._partial is None:
            return self.errors(merged)
        return _errors(self._partial, {key: merged[key] for key in keys if key in merged})

    def tool_parameters(self) -> dict[str, Any]:
        """The JSON schema a model sees for an update: the schema's fields, all optional,
        without the titles pydantic derives from names (``"Currentgoal"``: noise to a
        model); descriptions stay."""
        schema = partial_json_schema(self.json_schema)
        _walk_schemas(schema, _drop_title)
        return schema


def _errors(adapter: TypeAdapter[Any], state: Mapping[str, Any]) -> list[dict[str, Any]]:
    try:
        # The core validator itself: TypeAdapter.validate_python's wrapper costs a third of
        # a small update's validation, on every write.
        adapter.validator.validate_python(state)
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


def _partial_model(schema: Any, core_schema: Mapping[str, Any]) -> type[BaseModel] | None:
    """The model ``schema`` with every field defaulting to ``None``, or ``None`` when its
    fields cannot be validated one by one.

    Defaults are not validated, so fields left out are neither missing nor copied; fields
    given keep their type, constraints and alias, and the model's config (extra keys and
    all). Only models whose validation runs no user code qualify: a validator or
    ``model_post_init`` anywhere may look at several fields at once.
    """
    if not (isinstance(schema, type) and issubclass(schema, BaseModel)):
        return None
    if schema.model_config.get("validate_default") or not _fields_independent(core_schema):
        return None
    fields: dict[str, Any] = {}
    for name, info in schema.model_fields.items():
        optional = copy.copy(info)
        optional.default = None
        optional.default_factory = None
        # pydantic keeps what a field was given in _attributes_set (no public setter): a copy
        # of the field with the default replaced must drop default_factory there too.
        given = info._attributes_set  # noqa: SLF001
        attributes = {k: v for k, v in given.items() if k != "default_factory"}
        optional._attributes_set = {**attributes, "default": None}  # noqa: SLF001
        fields[name] = (info.annotation, optional)
    try:
        partial: type[BaseModel] = create_model(
            f"{schema.__name__}Partial", __base__=schema, **fields
        )
    except (TypeError, ValueError, PydanticUserError):  # an unusual model: check it whole
        return None
    return partial


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
    top = core_schema
    if top.get("type") == "definitions":
        top = top["schema"]
        if top.get("type") == "definition-ref":
            refs = {d.get("ref"): d for d in core_schema.get("definitions", ())}
            top = refs.get(top.get("schema_ref"), {})
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
