"""A model's tool-call arguments: reading them, and the texts that report what was done."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .. import _json
from .._json import json_kind, reject_constant
from ..errors import ScratchpadUpdateError
from ..merge import MAX_DEPTH

__all__ = (
    "applied_text",
    "describe_errors",
    "edited_text",
    "json_kind",
    "key_list",
    "parse_arguments",
    "reject_constant",
)


def parse_arguments(arguments: str | Mapping[str, Any]) -> dict[str, Any]:
    """Turn a model's tool-call arguments into an update, or raise ``ScratchpadUpdateError``
    (reason ``"malformed"``)."""
    if isinstance(arguments, Mapping):
        return dict(arguments)
    if not isinstance(arguments, str):
        raise ScratchpadUpdateError(
            f"The arguments are a JSON {json_kind(arguments)}, not an object.", reason="malformed"
        )
    try:
        return _json.loads_arguments(arguments)
    except _json.ArgumentsError as exc:
        problem = _json.arguments_problem(exc, max_depth=MAX_DEPTH)
        raise ScratchpadUpdateError(problem, reason="malformed") from None


def applied_text(update: Mapping[str, Any]) -> str:
    """The tool output for an applied update: which keys it wrote."""
    if not update:
        return (
            "Nothing was written: the update held no key, so the scratchpad is unchanged. "
            "Send the keys to change and their new values."
        )
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
