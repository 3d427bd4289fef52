"""The read tool: the model reads one part of its scratchpad, by path, within the budget.

A view cut to its token budget shows long lists and texts in part (see
:func:`~noetic_scratchpad.render.render_view`); this is how the model sees the rest: the
value at a path of object keys, and of a list (a text) the items (characters) from
``start`` to ``end``, as many as fit the budget, saying where to go on from.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..render import Tokenizer, estimate_tokens

__all__ = ("READ_DESCRIPTION", "READ_PARAMETERS", "cut_advice", "read_part", "read_tool_name")

READ_DESCRIPTION = (
    "Read one part of your scratchpad that its view shows only in part: the value at "
    'path (object keys from the top, such as ["steps"]; [] for all of it), and of a list '
    "the items from start to end (indexes from 0, end not included), of a text the "
    "characters. Returns as much as fits, and says where to go on from."
)

# anyOf rather than a list of types: every provider's strict mode and pydantic-ai's
# TestModel read it.
_NULLABLE_INDEX: dict[str, Any] = {"anyOf": [{"type": "integer"}, {"type": "null"}]}
READ_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "path": {
            "type": "array",
            "items": {"type": "string"},
            "description": 'Object keys from the top of the scratchpad, such as ["steps"].',
        },
        "start": {
            **_NULLABLE_INDEX,
            "description": "The first item (character) to read; null for the first.",
        },
        "end": {
            **_NULLABLE_INDEX,
            "description": "The item (character) to stop before; null for the last.",
        },
    },
    "required": ["path", "start", "end"],
    "additionalProperties": False,
}
"""The read tool's parameters: accepted by OpenAI's strict mode and Anthropic."""


def read_part(
    state: Any, args: Mapping[str, Any], budget: int, tokenize: Tokenizer | None = None
) -> str:
    """The read tool's output for ``args`` on ``state``: the part asked for, cut to
    ``budget`` tokens, or a sentence saying what is wrong with ``args``."""
    count = tokenize or estimate_tokens
    path = args.get("path", [])
    if not isinstance(path, list) or not all(isinstance(key, str) for key in path):
        return 'path must be a list of object keys, such as ["steps"], or [] for everything.'
    start, end = args.get("start"), args.get("end")
    for name, index in (("start", start), ("end", end)):
        if index is not None and type(index) is not int:
            return f"{name} must be an index (0 is the first) or null, not {json.dumps(index)}."
    value = state
    for depth, key in enumerate(path):
        if not isinstance(value, dict) or key not in value:
            where = json.dumps(path[:depth], ensure_ascii=False)
            keys = ", ".join(json.dumps(k, ensure_ascii=False) for k in list(value)[:20])
            has = f"its keys: {keys}" if isinstance(value, dict) and value else "no keys"
            return (
                f"The scratchpad has no {json.dumps(key, ensure_ascii=False)} at {where} ({has})."
            )
        value = value[key]
    shown = json.dumps(path, ensure_ascii=False)
    if isinstance(value, list | str):
        return _window(value, shown, start, end, budget, count)
    text = f"{shown}:\n{_pretty(value)}"
    if count(text) <= budget:
        return text
    keys = (
        ", ".join(json.dumps(k, ensure_ascii=False) for k in value)
        if isinstance(value, dict)
        else ""
    )
    return f"{shown} is too long to read whole; read one of its keys by path: {keys}."


def _window(
    value: list[Any] | str,
    shown: str,
    start: int | None,
    end: int | None,
    budget: int,
    count: Tokenizer,
) -> str:
    """Items (characters) ``start`` to ``end`` of ``value``, as many as fit."""
    total = len(value)
    first, last, _ = slice(start, end).indices(total)
    unit = "items" if isinstance(value, list) else "characters"
    if first >= last:
        return f"{shown} has {total:,} {unit}; there are none from {first} to {last}."

    def text(stop: int) -> str:
        part = value[first:stop]
        body = part if isinstance(part, str) else _pretty(part)
        more = f" (the rest from {stop}: read again with start {stop})" if stop < last else ""
        return f"{shown}, {unit} {first} to {stop - 1} of {total:,}{more}:\n{body}"

    low, high = first, last + 1  # text(low + 1) may not fit; text(high) does not
    if count(text(last)) <= budget:
        return text(last)
    while high - low > 1:
        middle = (low + high) // 2
        if middle > first and count(text(middle)) <= budget:
            low = middle
        else:
            high = middle
    if low == first:
        return f"{shown}, {unit[:-1]} {first} alone is longer than the budget of {budget} tokens."
    return text(low)


def _pretty(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False)


def cut_advice(*, writable: bool, edit_tool: bool, read_tool: bool) -> str:
    """What the cut notice tells the model to do about the parts it does not see."""
    parts = []
    if writable:
        if edit_tool:
            parts.append(
                "To add to a list shown in part, append with the edit tool instead of resending it"
            )
        parts.append(
            "an update that resends a list or text shown in part without its hidden part is refused"
        )
    if read_tool:
        parts.append("to see a hidden part, call the read tool with its path")
    if not parts:
        return ""
    text = "; ".join(parts)
    return text[0].upper() + text[1:] + "."


def read_tool_name(update_tool: str) -> str:
    """The read tool's name beside the update tool's, as a host names it:
    ``scratchpad_update`` -> ``scratchpad_read``; ``notes`` -> ``notes_read``."""
    if update_tool.endswith("update"):
        return update_tool[: -len("update")] + "read"
    return f"{update_tool}_read"
