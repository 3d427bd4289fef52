"""Splitting the context budget across layers: minimums first, the rest by headroom."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from noetic_scratchpad.layer import Budget
from noetic_scratchpad.runtime import split_budget


def test_enough_for_everyone_gives_every_max() -> None:
    """A total that covers every max gives each layer its max, no more."""
    assert split_budget(10_000, [Budget(200, 1500), Budget(100, 400)]) == [1500, 400]


def test_minimums_first_then_headroom_in_proportion() -> None:
    """After the minimums, what is left is shared by headroom (1300 : 300 here)."""
    # left after minimums: 1000 - 300 = 700; headroom 1300 and 300 -> 568.75 and 131.25
    assert split_budget(1000, [Budget(200, 1500), Budget(100, 400)]) == [769, 231]


def test_short_total_serves_minimums_in_slot_order() -> None:
    """When the minimums do not fit, earlier layers get theirs first."""
    assert split_budget(250, [Budget(200, 1500), Budget(100, 400)]) == [200, 50]
    assert split_budget(0, [Budget(200, 1500)]) == [0]


def test_layers_without_headroom_keep_their_minimum() -> None:
    """A fixed-size layer (min == max) takes its size; the rest goes to the others."""
    assert split_budget(700, [Budget(300, 300), Budget(0, 1000)]) == [300, 400]


def test_negative_total_is_refused() -> None:
    """A negative budget is a mistake, not zero."""
    with pytest.raises(ValueError, match="zero or more"):
        split_budget(-1, [Budget(0, 1)])


budgets = st.lists(
    st.tuples(st.integers(0, 2000), st.integers(0, 2000)).map(
        lambda pair: Budget(min(pair), max(pair))
    ),
    max_size=6,
)


@given(total=st.integers(0, 20_000), layers=budgets)
def test_split_never_exceeds_total_or_a_max_and_uses_what_it_can(
    total: int, layers: list[Budget]
) -> None:
    """Shares sum to min(total, sum of maxes), each within [0, max], minimums before extras."""
    shares = split_budget(total, layers)
    assert len(shares) == len(layers)
    assert sum(shares) == min(total, sum(b.max for b in layers))
    assert all(0 <= share <= b.max for share, b in zip(shares, layers, strict=True))
    if total >= sum(b.min for b in layers):
        assert all(share >= b.min for share, b in zip(shares, layers, strict=True))
