"""What a scratchpad is configured with, and the names it is known by."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Literal

from ..edits import EDIT_TOOL
from ..errors import ScratchpadConfigError
from ..storage.base import MAX_JOURNAL_LIMIT

__all__ = (
    "DEFAULT_ID",
    "EDIT_TOOL",
    "NAME_PATTERN",
    "STATE_KEY",
    "TEXT_FIELD",
    "UPDATE_TOOL",
    "ScratchpadConfig",
    "ScratchpadState",
)

ScratchpadState = str | dict[str, Any]

#: The id of a scratchpad without a ``name``: its tools are ``scratchpad/update``, ...
DEFAULT_ID = "scratchpad"

#: The tool names a model calls: ``{layer_id}/{function}``.
UPDATE_TOOL = "scratchpad/update"

#: What a scratchpad's ``name`` may be: a letter, then letters, digits or ``_``, at most
#: 40 in all, so that its tools' names (``profile_update``) fit every host.
NAME_PATTERN = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,39}")

#: The one argument of an update of text notes: the whole new text.
TEXT_FIELD = "notes"

#: The key of a scope's state in its ``ScopedStorage``.
STATE_KEY = "state"


@dataclass(frozen=True, slots=True)
class ScratchpadConfig:
    """How a scratchpad behaves. Every limit has a safe default."""

    scope: Literal["thread", "resource"] = "thread"
    schema: Any = None
    """A pydantic model (or any type ``TypeAdapter`` accepts) the state must fit."""
    template: str | None = None
    """Initial content when nothing is stored: text, or a JSON object when there is a schema.
    Text without a schema makes the notes text: the model rewrites them whole (an update is
    ``{"notes": "the new text"}``), and the journal keeps each old text."""
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
    ttl: timedelta | float | None = None
    """How long a scope lives after its last write: a ``timedelta`` or seconds (positive);
    ``None``: for good. An expired scope reads as empty (the initial state, revision 0,
    no history), and the next write starts it afresh above its old revisions, as after
    ``reset``. ``sweep_expired`` removes expired scopes from storage."""
    clock: Callable[[], float] | None = None
    """Unix seconds now, for ``ttl`` and ``history_max_age`` (``None``: ``time.time``);
    tests pass their own."""
    history_max_age: timedelta | float | None = None
    """How long a journal entry is kept, beside ``history_limit``: a ``timedelta`` or
    seconds (positive); ``None``: by count only. Older entries drop out of ``history``
    and ``revert`` at once, and out of storage at the layer's next ``sweep``."""
    description: str | None = None
    """The update tool's description, instead of the one built from the schema's words."""
    instructions: str | None = None
    """What an MCP server tells the model about the scratchpad, instead of the default;
    ``{read_tool}`` and ``{update_tool}`` are replaced by the tools' names."""
    name: str | None = None
    """The block's name, for more than one scratchpad on an agent (``"profile"``): it is the
    layer's id, the block is ``<scratchpad name="profile">`` and its tools are
    ``profile/update`` (``profile_update`` where a host takes no ``/``), each writing only
    this block. ``None``: the one ``<scratchpad>``, id ``scratchpad``."""

    @property
    def text_notes(self) -> bool:
        """Whether the notes are text the model rewrites whole: a template and no schema."""
        return self.schema is None and bool(self.template)

    @property
    def ttl_seconds(self) -> float | None:
        """``ttl`` in seconds (``None``: scopes never expire)."""
        return _seconds(self.ttl)

    @property
    def history_max_age_seconds(self) -> float | None:
        """``history_max_age`` in seconds (``None``: entries are kept by count only)."""
        return _seconds(self.history_max_age)

    @property
    def layer_id(self) -> str:
        """The layer's id: the ``name``, else ``scratchpad``."""
        return DEFAULT_ID if self.name is None else self.name

    def __post_init__(self) -> None:
        if self.name is not None and (
            not isinstance(self.name, str) or not NAME_PATTERN.fullmatch(self.name)
        ):
            raise ScratchpadConfigError(
                f"name {self.name!r} cannot name a block and its tools: use a letter, then "
                "letters, digits or '_', at most 40 in all (such as 'profile'), or None"
            )
        if self.scope not in ("thread", "resource"):
            raise ScratchpadConfigError(f"scope must be 'thread' or 'resource', not {self.scope!r}")
        if self.template is not None and not isinstance(self.template, str):
            raise ScratchpadConfigError(
                "template must be text (with a schema, a JSON object as text: json.dumps(...)), "
                f"not a {type(self.template).__name__}"
            )
        for text in ("description", "instructions"):
            value = getattr(self, text)
            if value is not None and (not isinstance(value, str) or not value.strip()):
                raise ScratchpadConfigError(f"{text} must be non-empty text or None, not {value!r}")
        for flag in ("read_only", "edit_tool"):
            if not isinstance(getattr(self, flag), bool):
                raise ScratchpadConfigError(
                    f"{flag} must be True or False, not {getattr(self, flag)!r}"
                )
        if self.edit_tool and self.text_notes:
            raise ScratchpadConfigError(
                "edit_tool=True needs notes that are an object, and with a text template and "
                "no schema the notes are text, which the model rewrites whole; drop edit_tool, "
                "or give a schema and a JSON object template"
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
        _check_duration("ttl", self.ttl)
        _check_duration("history_max_age", self.history_max_age)
        if self.clock is not None and not callable(self.clock):
            raise ScratchpadConfigError(
                f"clock must be a function that returns Unix seconds, or None, not {self.clock!r}"
            )


def _seconds(duration: timedelta | float | None) -> float | None:
    return duration.total_seconds() if isinstance(duration, timedelta) else duration


def _check_duration(name: str, duration: Any) -> None:
    if duration is None:
        return
    if isinstance(duration, timedelta):
        seconds = duration.total_seconds()
    elif isinstance(duration, bool) or not isinstance(duration, int | float):
        raise ScratchpadConfigError(
            f"{name} must be a timedelta, a number of seconds or None, not {duration!r}"
        )
    else:
        seconds = duration
    if not 0 < seconds < float("inf"):
        raise ScratchpadConfigError(
            f"{name} must be positive and finite (such as timedelta(days=30)) or None, "
            f"not {duration!r}"
        )


def _check_timeout(name: str, seconds: Any) -> None:
    if seconds is None:
        return
    if isinstance(seconds, bool) or not isinstance(seconds, int | float):
        raise ScratchpadConfigError(f"{name} must be a number of seconds or None, not {seconds!r}")
    if seconds <= 0:
        raise ScratchpadConfigError(f"{name} must be positive or None, not {seconds}")
