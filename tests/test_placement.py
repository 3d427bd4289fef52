"""The shared order of a request: the block after the conversation, or before it."""

from __future__ import annotations

import pytest

from noetic_scratchpad import ScratchpadConfigError
from noetic_scratchpad.placement import (
    DEFAULT_PLACEMENT,
    arrange,
    check_placement,
    without_block,
)


def test_the_default_puts_the_block_after_the_conversation() -> None:
    assert DEFAULT_PLACEMENT == "end"
    order = arrange(["instructions"], ["block"], ["user", "assistant"], DEFAULT_PLACEMENT)
    assert order == ["instructions", "user", "assistant", "block"]


def test_start_puts_the_block_between_the_instructions_and_the_conversation() -> None:
    order = arrange(["instructions"], ["block"], ["user", "assistant"], "start")
    assert order == ["instructions", "block", "user", "assistant"]


@pytest.mark.parametrize("placement", ["middle", "END", None, 1])
def test_anything_else_is_a_config_error_that_names_the_choices(placement: object) -> None:
    with pytest.raises(ScratchpadConfigError, match="placement must be one of 'end', 'start'"):
        check_placement(placement)


def test_without_block_takes_the_block_and_its_blank_line_off_the_end() -> None:
    block = "<scratchpad>\nnotes\n</scratchpad>"
    assert without_block(f"Be brief.\n\n{block}", block) == "Be brief."
    assert without_block(block, block) == ""
    assert without_block(f"{block}\n\nBe brief.", block) is None  # not at the end: kept
    assert without_block("Be brief.", "") is None
