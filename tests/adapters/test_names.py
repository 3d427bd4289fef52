"""Tool names mapped to ``^[a-zA-Z0-9_-]{1,64}$`` and back, without collisions."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from noetic_scratchpad.adapters import PROVIDER_NAME, ToolNameMap


def test_layer_tool_names_become_double_underscores() -> None:
    """``scratchpad/update`` is sent as ``scratchpad__update``; fitting names stay as they are."""
    names = ToolNameMap(["scratchpad/update", "get_weather", "web.search"])
    assert names.mapping == {
        "scratchpad/update": "scratchpad__update",
        "get_weather": "get_weather",
        "web.search": "web_search",
    }
    assert names.to_internal("scratchpad__update") == "scratchpad/update"
    assert names.to_internal("get_weather") == "get_weather"


def test_a_name_that_already_fits_keeps_it_and_the_other_gets_a_hash() -> None:
    """A tool literally named ``scratchpad__update`` keeps its name; ``scratchpad/update``
    gets a hash suffix instead, and both decode to themselves."""
    names = ToolNameMap(["scratchpad/update", "scratchpad__update"])
    sent = names.to_provider("scratchpad/update")
    assert names.to_provider("scratchpad__update") == "scratchpad__update"
    assert sent.startswith("scratchpad__update_")
    assert len(sent) == len("scratchpad__update_") + 8
    assert names.to_internal(sent) == "scratchpad/update"
    assert names.to_internal("scratchpad__update") == "scratchpad__update"


def test_names_that_sanitize_alike_do_not_collide() -> None:
    """``a:b`` and ``a;b`` would both become ``a_b``; one gets a hash, both round-trip."""
    names = ToolNameMap(["a;b", "a:b"])
    assert sorted(names.mapping.values())[0] == "a_b"
    assert len(set(names.mapping.values())) == 2
    assert {names.to_internal(names.to_provider(n)) for n in ("a;b", "a:b")} == {"a;b", "a:b"}


def test_long_names_are_cut_to_64_with_a_hash() -> None:
    """Two 100-character names sharing a 64-character prefix get distinct 64-character names."""
    long_a = "layer" * 18 + "/alpha"
    long_b = "layer" * 18 + "/beta"
    names = ToolNameMap([long_a, long_b])
    sent_a, sent_b = names.to_provider(long_a), names.to_provider(long_b)
    assert len(sent_a) == len(sent_b) == 64
    assert sent_a != sent_b
    assert PROVIDER_NAME.match(sent_a)
    assert PROVIDER_NAME.match(sent_b)
    assert (names.to_internal(sent_a), names.to_internal(sent_b)) == (long_a, long_b)


def test_unknown_names_pass_through_and_unknown_tools_raise() -> None:
    """A name the model invented comes back unchanged; encoding a tool not in the map is a
    KeyError that says so."""
    names = ToolNameMap(["scratchpad/update"])
    assert names.to_internal("made_up") == "made_up"
    with pytest.raises(KeyError, match="not among the tools"):
        names.to_provider("other/tool")


def test_the_map_does_not_depend_on_order() -> None:
    """The same set of names in any order gives the same map."""
    tools = ["b/x", "a/x", "a__x", "x" * 80, "y" * 80]
    assert ToolNameMap(tools).mapping == ToolNameMap(reversed(tools)).mapping


@given(st.lists(st.text(min_size=1, max_size=100), min_size=1, max_size=12, unique=True))
def test_any_names_round_trip_to_valid_distinct_provider_names(tools: list[str]) -> None:
    """Every name maps to a distinct valid provider name that decodes back to it."""
    names = ToolNameMap(tools)
    sent = [names.to_provider(tool) for tool in tools]
    assert all(PROVIDER_NAME.match(name) for name in sent)
    assert len(set(sent)) == len(tools)
    assert [names.to_internal(name) for name in sent] == tools
