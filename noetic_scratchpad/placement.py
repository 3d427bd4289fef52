"""Where a layer's block goes in a model request: after the conversation, or before it.

Providers cache the longest unchanged prefix of a request (OpenAI automatically, Anthropic
up to a cache breakpoint). A block that changes sits inside that prefix when it comes
before the conversation, so every change of the notes makes the provider process the whole
history again. After the conversation, just before the model's turn, a change costs only
the block itself; the model reads the current notes last, next to the question it answers.

``"end"`` (the default): the instructions, the conversation, then the block.
``"start"``: the instructions, the block, then the conversation (the seed's order).

Every host takes ``placement=`` with these values and calls :func:`arrange` (or, where the
host builds its request itself, follows the same order).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, TypeVar, get_args

from .errors import ScratchpadConfigError

__all__ = ("DEFAULT_PLACEMENT", "Placement", "arrange", "check_placement", "without_block")

Placement = Literal["end", "start"]
DEFAULT_PLACEMENT: Placement = "end"
_PLACEMENTS: tuple[str, ...] = get_args(Placement)

T = TypeVar("T")


def check_placement(placement: object) -> Placement:
    """``placement`` if it is one of ``"end"`` and ``"start"``; else ``ScratchpadConfigError``."""
    if placement == "end":
        return "end"
    if placement == "start":
        return "start"
    raise ScratchpadConfigError(
        f"placement must be one of {', '.join(map(repr, _PLACEMENTS))}, not {placement!r}: "
        '"end" puts the block after the conversation (the provider keeps its prompt cache '
        'when the notes change), "start" before it'
    )


def arrange(
    instructions: Sequence[T],
    blocks: Sequence[T],
    conversation: Sequence[T],
    placement: Placement,
) -> list[T]:
    """The items of one request in ``placement``'s order."""
    if placement == "start":
        return [*instructions, *blocks, *conversation]
    return [*instructions, *conversation, *blocks]


def without_block(instructions: str, block: str) -> str | None:
    """``instructions`` without ``block`` at its end (and the blank line before it), or
    ``None`` when they do not end with it: a host that moves the block to the end of the
    request takes it out of the instructions it was first added to."""
    if not block or not instructions.endswith(block):
        return None
    return instructions[: -len(block)].rstrip("\n")
