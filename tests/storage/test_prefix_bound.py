"""The key range of a prefix (``prefix_upper_bound``), shared by the SQL backends: exact
in code point order, also at U+10FFFF and at the surrogate gap."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from noetic_scratchpad.storage._prefix import prefix_upper_bound
from noetic_scratchpad.storage.sqlite import SqliteStorage

# Characters at the edges that matter, and any other storable character (hypothesis never
# draws surrogates here: neither database can store them).
EDGES = ["\x00", "/", "a", "b", "\ud7ff", "\ue000", "\uffff", "\U00010000", "\U0010fffe"]
CHARS = st.sampled_from([*EDGES, "\U0010ffff"]) | st.characters(exclude_categories=("Cs",))
TEXTS = st.text(CHARS, max_size=6)


def in_range(key: str, prefix: str) -> bool:
    upper = prefix_upper_bound(prefix)
    return prefix <= key and (upper is None or key < upper)


@pytest.mark.parametrize(
    ("prefix", "upper"),
    [
        ("", None),
        ("\U0010ffff", None),
        ("\U0010ffff\U0010ffff", None),
        ("a", "b"),
        ("ab", "ac"),
        ("layers/x/", "layers/x0"),
        ("a\U0010ffff", "b"),
        ("a\U0010ffff\U0010ffff", "b"),
        ("\ud7ff", "\ue000"),
        ("x\ud7fe", "x\ud7ff"),
        ("\uffff", "\U00010000"),
        ("\x00", "\x01"),
    ],
)
def test_examples(prefix: str, upper: str | None) -> None:
    """The bound increments the last character that is not U+10FFFF, skipping surrogates;
    there is none when every character is U+10FFFF."""
    assert prefix_upper_bound(prefix) == upper


@given(prefix=TEXTS, key=TEXTS)
def test_a_key_is_in_the_range_exactly_when_it_starts_with_the_prefix(
    prefix: str, key: str
) -> None:
    """For any storable strings: key.startswith(prefix) iff prefix <= key < upper (no
    upper bound when there is none)."""
    assert key.startswith(prefix) == in_range(key, prefix)


@given(prefix=TEXTS, suffix=TEXTS, cut=st.integers(0, 6), other=CHARS)
def test_keys_next_to_the_prefix(prefix: str, suffix: str, cut: int, other: str) -> None:
    """The same for keys that do start with the prefix, and for keys that share all but
    its last characters (random pairs seldom hit either)."""
    assert in_range(prefix + suffix, prefix)
    near = prefix[: max(len(prefix) - 1 - cut, 0)] + other + suffix
    assert near.startswith(prefix) == in_range(near, prefix)


@given(prefix=TEXTS)
def test_the_bound_is_storable_and_outside_the_prefix(prefix: str) -> None:
    """A bound is a string without surrogates, above the prefix, that does not start with it."""
    upper = prefix_upper_bound(prefix)
    if upper is None:
        assert set(prefix) <= {"\U0010ffff"}
        return
    assert upper > prefix
    assert not upper.startswith(prefix)
    upper.encode()  # no surrogates: UnicodeEncodeError otherwise


@pytest.mark.asyncio
async def test_sqlite_lists_by_prefix_at_code_point_edges(tmp_path: Path) -> None:
    """list and describe by prefix on SQLite use the bound: prefixes ending in the last
    code point or just before the surrogate gap list exactly their keys."""
    keys = ["a\U0010ffff", "a\U0010ffff/x", "b", "\ud7ff", "\ud7ff/y", "\ue000", "\U0010ffff"]
    async with await SqliteStorage.open(f"sqlite:///{tmp_path / 'p.db'}") as storage:
        for key in keys:
            await storage.set(key, key)
        assert await storage.list("a\U0010ffff") == ["a\U0010ffff", "a\U0010ffff/x"]
        assert await storage.list("\ud7ff") == ["\ud7ff", "\ud7ff/y"]
        assert await storage.list("\U0010ffff") == ["\U0010ffff"]
        assert [info.key for info in await storage.describe("\ud7ff")] == ["\ud7ff", "\ud7ff/y"]
        assert await storage.list() == sorted(keys)
