"""What the model is told about a scratchpad, in its schema's own words: the update tool's
description, the example its refusals show, and the instructions an MCP server gives.

Built once per layer from the schema's JSON schema: the schema's docstring says what the
notes are, its fields are named as the model must write them. Without a schema the
notes are a JSON object whose keys the model chooses; ``ScratchpadConfig.description``
and ``.instructions`` replace the defaults. A named scratchpad's texts name its block
(``your scratchpad "profile" (the <scratchpad name="profile"> block)``), so that a model
with two of them knows which tool writes which.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..edits import edit_description
from ..render import open_tag
from .config import TEXT_FIELD

__all__ = ("TEXT_PARAMETERS", "LayerTexts", "texts_for")

_MERGE_RULE = (
    "Pass only the {what} to change; objects merge into what is there, lists and other "
    "values replace it."
)
#: The example of an update when the model chooses the keys.
FREE_EXAMPLE = '{"currentGoal": "..."}'

#: The update tool's parameters for text notes: the whole new text.
TEXT_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        TEXT_FIELD: {
            "type": "string",
            "description": "The whole new text of your notes; it replaces the old text.",
        }
    },
    "required": [TEXT_FIELD],
    "additionalProperties": False,
}


@dataclass(frozen=True, slots=True)
class LayerTexts:
    """The texts of one layer: ``description`` (the update tool's), ``example`` (an
    update as JSON text, for refusals), ``instructions`` (a server's, with
    ``{read_tool}`` and ``{update_tool}`` to fill in) and ``block``, how the texts that
    speak of the scratchpad name it (``the scratchpad``, ``the scratchpad "profile"``)."""

    description: str
    example: str
    instructions: str
    block: str = "the scratchpad"
    yours: str = "your scratchpad"

    def instructions_for(self, read_tool: str, update_tool: str) -> str:
        return self.instructions.replace("{read_tool}", read_tool).replace(
            "{update_tool}", update_tool
        )

    def edit_description(self, update_tool: str) -> str:
        """The edit tool's description, naming this block and its update tool."""
        return edit_description(update_tool, self.yours)


def texts_for(
    json_schema: Mapping[str, Any] | None,
    *,
    text_notes: bool = False,
    description: str | None = None,
    instructions: str | None = None,
    name: str | None = None,
) -> LayerTexts:
    """The texts for a layer with ``json_schema`` (``None``: no schema), or of ``text_notes``;
    ``description`` and ``instructions``, when given, are used as they are. ``name``: a
    named scratchpad's, which the texts name with its block."""
    fields = _fields(json_schema)
    yours = "your scratchpad"
    block = "the scratchpad"
    subject = "A scratchpad"
    if name is not None:
        yours = f'your scratchpad "{name}" (the {open_tag(name)} block)'
        block = f'the scratchpad "{name}"'
        subject = f'The scratchpad "{name}" (the {open_tag(name)} block)'
    if text_notes:
        default = (
            f"Rewrite {yours}: your notes for this task, as text. Send the whole new "
            f"text as `{TEXT_FIELD}`: it replaces the old text, so keep what still matters."
        )
        example = json.dumps({TEXT_FIELD: "..."})
        topics = "your notes change"
    elif fields:
        what = _what(json_schema) or "your notes for this task"
        default = f"Update {yours}: {what}. Its fields: {', '.join(fields)}. " + _MERGE_RULE.format(
            what="fields"
        )
        example = json.dumps({fields[0]: _placeholder(json_schema, fields[0])})
        topics = f"your notes change ({', '.join(fields)})"
    else:
        default = (
            f"Update {yours}: your notes for this task, a JSON object whose keys you "
            "choose (for example the goal, the steps done and the blockers). "
            + _MERGE_RULE.format(what="keys")
        )
        example = FREE_EXAMPLE
        topics = "the goal, the steps done or the blockers change"
    default_instructions = (
        f"{subject}: your working notes for the task, kept between conversations. Call "
        "{read_tool} when you start or resume a task, and {update_tool} whenever "
        f"{topics}, passing only what changes."
    )
    return LayerTexts(
        description=description if description is not None else default,
        example=example,
        instructions=instructions if instructions is not None else default_instructions,
        block=block,
        yours=yours,
    )


def _fields(json_schema: Mapping[str, Any] | None) -> list[str]:
    if not json_schema:
        return []
    properties = json_schema.get("properties")
    return list(properties) if isinstance(properties, Mapping) else []


def _what(json_schema: Mapping[str, Any] | None) -> str | None:
    """The schema's own description (a model's docstring), as a clause."""
    text = (json_schema or {}).get("description")
    if not isinstance(text, str) or not text.strip():
        return None
    return " ".join(text.split()).rstrip(".")


def _placeholder(json_schema: Mapping[str, Any] | None, field: str) -> Any:
    """A value of ``field``'s type to show in an example."""
    spec = (json_schema or {}).get("properties", {}).get(field, {})
    kinds = {spec.get("type")} | {
        option.get("type") for option in spec.get("anyOf", ()) if isinstance(option, Mapping)
    }
    if "array" in kinds:
        return ["..."]
    if "object" in kinds or "$ref" in spec:
        return {}
    if kinds & {"integer", "number"}:
        return 1
    if "boolean" in kinds:
        return True
    return "..."
