"""What a scratchpad is configured with, and the names it is known by."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from ..edits import EDIT_TOOL
from ..errors import ScratchpadConfigError
from ..storage.base import MAX_JOURNAL_LIMIT

__all__ = ("EDIT_TOOL", "STATE_KEY", "UPDATE_TOOL", "ScratchpadConfig", "ScratchpadState")

ScratchpadState = str | dict[str, Any]

#: The tool names a model calls: ``{layer_id}/{function}``.
UPDATE_TOOL = "scratchpad/update"

#: The key of a scope's state in its ``ScopedStorage``.
STATE_KEY = "state"


@dataclass(frozen=True, slots=True)
class ScratchpadConfig:
    """How a scratchpad behaves. Every limit has a safe default."""

    scope: Literal["thread", "resource"] = "thread"
    schema: Any = None
    """A pydantic model (or any type ``TypeAdapter`` accepts) the state must fit."""
    template: str | None = None
    """Initial content when nothing is stored: text, or a JSON object when there is a schema."""
    read_only: bool = False
    max_state_bytes: int = 128 * 1024
    """An update that would make the stored JSON bigger than this is rejected (``too_large``)."""
    write_timeout: float | None = 30.0
    """Seconds a write may wait for storage before it is reported as failed."""
    read_timeout: float | None = 30.0
    """Seconds ``init`` and ``refresh`` may wait for storage to load the state before they
    raise ``StorageError``."""
    edit_tool: bool = False
    """Offer the model a second tool, ``scratchpad/edit``: operations that append to or
    remove from a list, delete a key or set a value at a path, applied all or none."""
    history_limit: int = 50
    """Journal entries kept per scope (``handle.history``, ``handle.revert``); 0 keeps none.
    Each entry holds the update and the prior values of the keys it wrote."""

    def __post_init__(self) -> None:
        if self.scope not in ("thread", "resource"):
            raise ScratchpadConfigError(f"scope must be 'thread' or 'resource', not {self.scope!r}")
        if self.template is not None and not isinstance(self.template, str):
            raise ScratchpadConfigError(
                "template must be text (with a schema, a JSON object as text: json.dumps(...)), "
                f"not a {type(self.template).__name__}"
            )
        for flag in ("read_only", "edit_tool"):
            if not isinstance(getattr(self, flag), bool):
                raise ScratchpadConfigError(
                    f"{flag} must be True or False, not {getattr(self, flag)!r}"
                )
        if isinstance(self.max_state_bytes, bool) or not isinstance(self.max_state_bytes, int):
            raise ScratchpadConfigError(
                f"max_state_bytes must be an int, not {self.max_state_bytes!r}"
            )
        if self.max_state_bytes < 2:
            raise ScratchpadConfigError(
                f"max_state_bytes must be at least 2, not {self.max_state_bytes}"
            )
        limit = self.history_limit
        if (
            isinstance(limit, bool)
            or not isinstance(limit, int)
            or not 0 <= limit <= MAX_JOURNAL_LIMIT
        ):
            raise ScratchpadConfigError(
                f"history_limit must be an int from 0 (the journal off) to {MAX_JOURNAL_LIMIT} "
                f"(2**63 - 1, what every backend can count to), not {limit!r}"
            )
        for name in ("write_timeout", "read_timeout"):
            _check_timeout(name, getattr(self, name))


def _check_timeout(name: str, seconds: Any) -> None:
    if seconds is None:
        return
    if isinstance(seconds, bool) or not isinstance(seconds, int | float):
        raise ScratchpadConfigError(f"{name} must be a number of seconds or None, not {seconds!r}")
    if seconds <= 0:
        raise ScratchpadConfigError(f"{name} must be positive or None, not {seconds}")
