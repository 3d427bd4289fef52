"""The edit tool's schema and texts, and the field names of the two forms of operations."""

from __future__ import annotations

from typing import Any

__all__ = (
    "EDIT_DESCRIPTION",
    "EDIT_PARAMETERS",
    "EDIT_REASONS",
    "EDIT_TOOL",
    "FIELDS",
    "MISSING",
    "OPERATIONS",
    "PLAIN_MALFORMED",
    "PLAIN_NAMES",
    "TAKES",
    "TOOL_NAMES",
    "edit_description",
)

EDIT_TOOL = "scratchpad/edit"
OPERATIONS = ("append", "remove", "delete", "set")

#: What the model is told to do after each kind of refused edit; ``{tool}`` is its name
#: (rendered by ``layer.refusal_text``).
EDIT_REASONS = {
    "malformed": 'Call {tool} with {{"operations": [...]}}; each operation has "op" '
    '(append, remove, delete or set), "path" (object keys from the top, such as ["plan", '
    '"steps"]) and, as its op needs, "value_json", "values_json" or "index"; the others null.',
    "edit_path": "Check the path against the scratchpad as it is now and call {tool} again; "
    "only set creates keys that do not exist yet.",
    "edit_type": "append and remove work on lists only: use set to replace the value whole.",
    "edit_item": "Check the list's items as they are now and call {tool} again with an item "
    "or index that is there, or without this operation.",
}
#: The same for code that calls :func:`~.apply.apply_edits` with the operation form.
PLAIN_MALFORMED = (
    'Pass a list of operations such as {{"op": "append", "path": ["steps"], "values": [...]}}; '
    "remove takes value or index, set takes value, delete nothing more."
)

_NULLABLE_TEXT = {"type": ["string", "null"]}
EDIT_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "operations": {
            "type": "array",
            "description": "The edits, applied in order; if one fails, none is applied.",
            "items": {
                "type": "object",
                "properties": {
                    "op": {
                        "type": "string",
                        "enum": list(OPERATIONS),
                        "description": "append: add items to the end of the list at path. "
                        "remove: take out of the list at path every item equal to "
                        "value_json, or the item at index. delete: remove the key at path. "
                        "set: write value_json at path, replacing what is there.",
                    },
                    "path": {
                        "type": "array",
                        "items": {"type": "string"},
                        "description": "Object keys from the top of the scratchpad, such as "
                        '["plan", "steps"]; at least one.',
                    },
                    "value_json": {
                        **_NULLABLE_TEXT,
                        "description": "JSON text of the value: the new value for set, the "
                        'item to remove for remove. A string keeps its quotes: "\\"done\\"". '
                        "null for append, delete, and remove by index.",
                    },
                    "values_json": {
                        "type": ["array", "null"],
                        "items": {"type": "string"},
                        "description": "For append: the items to add, each as JSON text, "
                        'such as ["\\"step 3\\"", "{\\"id\\": 4}"]. null otherwise.',
                    },
                    "index": {
                        "type": ["integer", "null"],
                        "description": "For remove: the position of the item to remove; 0 "
                        "is the first, -1 the last. null otherwise.",
                    },
                },
                "required": ["op", "path", "value_json", "values_json", "index"],
                "additionalProperties": False,
            },
        }
    },
    "required": ["operations"],
    "additionalProperties": False,
}
"""The edit tool's parameters: accepted unchanged by OpenAI's strict mode and Anthropic.
Shared: copy it before handing it to code that mutates schemas."""


def edit_description(update_tool: str = "scratchpad/update", notes: str = "your scratchpad") -> str:
    """The edit tool's description, naming the update tool as the model sees it and the
    notes it edits (a named scratchpad's with its block)."""
    return (
        f"Edit {notes} in place with a list of operations applied in order, all or "
        "none: append items to a list or remove items from it without resending the whole "
        "list, delete a key, or set one value at a path. Use this to add a step to a list "
        f"or to drop a key; use {update_tool} to merge new values into fields."
    )


EDIT_DESCRIPTION = edit_description()

# The operation form's optional fields, what each op takes, and the tool form's names.
FIELDS = ("value", "values", "index")
TAKES = {"append": ("values",), "remove": ("value", "index"), "delete": (), "set": ("value",)}
TOOL_NAMES = {"value": "value_json", "values": "values_json", "index": "index"}
PLAIN_NAMES = {name: name for name in FIELDS}
MISSING: Any = object()  # "no such key", where None is a value
