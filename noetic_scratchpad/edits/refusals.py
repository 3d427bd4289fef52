"""How an edit is refused: the exceptions, and the texts that say what is wrong.

A refusal says what happened; what the model is told to do about it (:data:`.schema.EDIT_REASONS`,
naming the edit tool as the host presents it) is added where the model reads it, by
``layer.refusal_text``. Code's operations are told how to write them here (it is code that
reads it).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import ScratchpadUpdateError
from .schema import PLAIN_MALFORMED, PLAIN_NAMES

__all__ = (
    "Refusal",
    "Where",
    "kind_of",
    "malformed",
    "no_key",
    "show",
    "show_names",
    "show_path",
)


class Refusal(Exception):
    """An operation the editor cannot apply; :meth:`Where.refuse` makes it the error."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


@dataclass(slots=True)
class Where:
    """Which operation is being read or applied, for the refusal's message."""

    number: int
    total: int
    names: Mapping[str, str]
    op: str = ""
    path: Sequence[str] = ()

    def refuse(self, detail: str, reason: str = "malformed") -> ScratchpadUpdateError:
        what = f" ({self.op} at {show_path(self.path)})" if self.path else ""
        what = what or (f" ({self.op})" if self.op else "")
        text = (
            f"Operation {self.number} of {self.total}{what}: {detail}. None of the operations "
            "was applied."
        )
        if reason == "malformed" and self.names is PLAIN_NAMES:
            text += " " + PLAIN_MALFORMED.format()
        return ScratchpadUpdateError(text, reason=reason, refused="edit")


def malformed(detail: str) -> ScratchpadUpdateError:
    """A refusal of the whole call, before any one operation is read."""
    return ScratchpadUpdateError(
        f"{detail} Nothing was applied.", reason="malformed", refused="edit"
    )


def no_key(where: Sequence[str], node: Mapping[str, Any], key: str) -> str:
    place = show_path(where) if where else "the scratchpad"
    keys = list(node)
    there = ", ".join(show(k) for k in keys[:10]) + (", ..." if len(keys) > 10 else "")
    return f"{place} has no key {show(key)} ({'its keys: ' + there if keys else 'it is empty'})"


def kind_of(value: Any) -> str:
    kinds = {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}
    if value is None:
        return "null"
    return kinds.get(type(value)) or (
        "a number" if isinstance(value, int | float) else f"a {type(value).__name__}"
    )


def show(value: Any, limit: int = 80) -> str:
    """``value`` as JSON for a message, cut short."""
    try:
        text = json.dumps(value, ensure_ascii=False)
        text.encode()  # a lone surrogate: escape it instead
    except (TypeError, ValueError):
        try:
            text = json.dumps(value, default=repr)
        except ValueError:  # a cycle, from code
            text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def show_path(path: Sequence[str]) -> str:
    return show(list(path), limit=160)


def show_names(fields: Sequence[str]) -> str:
    return ", ".join(show(field) for field in fields)
