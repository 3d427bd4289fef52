"""Splitting the context's token budget across layers.

Every layer first gets its ``min`` (in slot order while the total lasts); what is left is
shared in proportion to each layer's headroom (``max - min``), never past its ``max``.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..layer import Budget

__all__ = ("split_budget",)


def split_budget(total: int, budgets: Sequence[Budget]) -> list[int]:
    """The tokens each layer may use, in the order of ``budgets`` (which is slot order).

    The result never sums to more than ``total`` and never gives a layer more than its
    ``max``. When ``total`` cannot cover every minimum, earlier layers get theirs first.
    """
    if total < 0:
        raise ValueError(f"the context budget must be zero or more tokens, not {total}")
    shares: list[int] = []
    left = total
    for budget in budgets:
        share = min(budget.min, left)
        shares.append(share)
        left -= share
    headroom = [budget.max - budget.min for budget in budgets]
    wanted = sum(headroom)
    if left <= 0 or wanted == 0:
        return shares
    if left >= wanted:
        return [budget.max for budget in budgets]
    # Proportional shares, rounded down; the remainder goes to the largest fractions
    # (earlier layers first on ties), so the whole of ``left`` is used.
    extra = [left * room // wanted for room in headroom]
    remainder = left - sum(extra)
    by_fraction = sorted(range(len(headroom)), key=lambda i: (-(left * headroom[i] % wanted), i))
    for index in by_fraction[:remainder]:
        extra[index] += 1
    return [share + add for share, add in zip(shares, extra, strict=True)]
