"""A model's tool-call arguments: reading them, and the texts that tell it what to fix."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .. import _json
from .._json import json_kind, reject_constant
from ..errors import ScratchpadUpdateError
from ..merge import MAX_DEPTH
from .config import UPDATE_TOOL

__all__ = (
    "FIX_HINTS",
    "applied_text",
    "describe_errors",
    "edited_text",
    "fix_hint",
    "json_kind",
    "key_list",
    "parse_arguments",
    "reject_constant",
)

#: What the model is told to do after each kind of rejected update; ``{tool}`` is the
#: update tool's name as the model sees it (see :func:`fix_hint`).
FIX_HINTS = {
    "malformed": "Call {tool} with a JSON object of the fields to change, "
    'for example {{"currentGoal": "..."}}.',
    "schema": "Fix these fields and call {tool} again with only the fields to change.",
    "too_large": "Condense the scratchpad: replace long lists or notes with a short summary "
    "(writing a key replaces its value) and try again.",
    "read_only": "This scratchpad is read-only; do not try to update it.",
    "corrupt": "Do not call {tool} again: carry on with the task without it. The operator "
    "has been told, and must reset the scratchpad.",
}


def fix_hint(kind: str, tool: str = UPDATE_TOOL) -> str:
    """What the model is told to do after a rejected update of ``kind``, naming the update
    tool ``tool`` as the model sees it (a provider or framework may have renamed it)."""
    return FIX_HINTS[kind].format(tool=tool)


def parse_arguments(arguments: str | Mapping[str, Any], tool: str = UPDATE_TOOL) -> dict[str, Any]:
    """Turn a model's tool-call arguments into an update, or raise ``ScratchpadUpdateError``
    whose message names the update tool ``tool``."""
    if isinstance(arguments, Mapping):
        return dict(arguments)
    if not isinstance(arguments, str):
        raise ScratchpadUpdateError(
            f"The arguments are a JSON {json_kind(arguments)}, not an object. "
            + fix_hint("malformed", tool),
            reason="malformed",
        )
    try:
        return _json.loads_arguments(arguments)
    except _json.ArgumentsError as exc:
        problem = _json.arguments_problem(exc, max_depth=MAX_DEPTH)
        raise ScratchpadUpdateError(
            f"{problem} {fix_hint('malformed', tool)}", reason="malformed"
        ) from None


def applied_text(update: Mapping[str, Any]) -> str:
    """The tool output for an applied update: which keys it wrote."""
    return f"Scratchpad updated ({key_list(update)})."


def edited_text(keys: Sequence[str]) -> str:
    """The tool output for an applied edit: which top-level keys it changed."""
    return f"Scratchpad edited ({key_list(keys)})."


def key_list(keys: Iterable[str]) -> str:
    """Keys as the model reads them: ``goal, steps``, ``nothing`` for none. A key that
    would not read as a name (``""``, a comma, spaces at its ends) is a JSON string."""
    return ", ".join(map(_key_name, keys)) or "nothing"


def _key_name(key: str) -> str:
    plain = key and key == key.strip() and key.isprintable() and not _PUNCTUATION & set(key)
    return key if plain else json.dumps(key, ensure_ascii=False)


#: Characters that would blur where a key in :func:`key_list` starts or ends.
_PUNCTUATION = frozenset(',()"')


def describe_errors(errors: Sequence[dict[str, Any]], limit: int = 5) -> str:
    """Validation errors as one line a model can act on: ``field.path: message; ...``."""
    parts = [
        f"{'.'.join(str(part) for part in error['loc']) or 'the state'}: {error['msg']}"
        for error in errors[:limit]
    ]
    if len(errors) > limit:
        parts.append(f"and {len(errors) - limit} more")
    return "; ".join(parts)
