"""The deep merge of SPEC.md section 1: what merges, what replaces, what is stripped."""

from __future__ import annotations

import copy
import enum
import json
from datetime import datetime
from typing import Any

import pytest

from noetic_scratchpad.merge import (
    FORBIDDEN_KEYS,
    MAX_DEPTH,
    SURROGATE_FIX,
    InvalidValueError,
    deep_merge,
    merge_state,
    strip_keys,
    to_json_value,
)


def nested(depth: int, leaf: Any) -> Any:
    """``{"n": {"n": ... leaf}}`` with ``depth`` dicts, built without recursion."""
    value = leaf
    for _ in range(depth):
        value = {"n": value}
    return value


def depth_of(value: Any) -> int:
    """How many dicts are nested along the ``"n"`` chain."""
    depth = 0
    while isinstance(value, dict) and "n" in value:
        value = value["n"]
        depth += 1
    return depth


def test_nested_objects_merge_recursively() -> None:
    """An object-valued key merges into the object already there, at every level."""
    base = {"goal": "ship", "plan": {"step": 1, "owner": {"name": "ada", "team": "core"}}}
    update = {"plan": {"owner": {"team": "infra"}, "eta": "fri"}}

    assert deep_merge(base, update) == {
        "goal": "ship",
        "plan": {"step": 1, "owner": {"name": "ada", "team": "infra"}, "eta": "fri"},
    }


def test_lists_replace_instead_of_concatenating() -> None:
    """A list in the update replaces the list (or anything) under that key."""
    base = {"steps": ["a", "b"], "tags": {"x": 1}}

    assert deep_merge(base, {"steps": ["c"], "tags": ["now", "a", "list"]}) == {
        "steps": ["c"],
        "tags": ["now", "a", "list"],
    }


def test_primitives_and_none_replace() -> None:
    """Strings, numbers, booleans and None replace what was there, objects included."""
    base = {"a": {"deep": 1}, "b": "text", "c": 3, "d": True}

    assert deep_merge(base, {"a": None, "b": 2.5, "c": False, "d": "yes"}) == {
        "a": None,
        "b": 2.5,
        "c": False,
        "d": "yes",
    }


def test_object_replaces_primitive_and_primitive_replaces_object() -> None:
    """An object over a non-object is stored as it is (nothing to merge with)."""
    assert deep_merge({"a": 1}, {"a": {"x": 1}}) == {"a": {"x": 1}}
    assert deep_merge({"a": {"x": 1}}, {"a": "flat"}) == {"a": "flat"}


def test_forbidden_keys_are_stripped_at_every_depth_and_inside_lists() -> None:
    """``__proto__`` and ``constructor`` never survive a merge, however deep or listed."""
    update = {
        "__proto__": {"polluted": True},
        "constructor": {"prototype": {"x": 1}},
        "plan": {"__proto__": 1, "step": {"constructor": "c", "ok": 1}},
        "items": [{"__proto__": {"a": 1}, "keep": 1}, [{"constructor": 2, "k": 3}]],
    }

    assert deep_merge({"plan": {"old": 0}}, update) == {
        "plan": {"old": 0, "step": {"ok": 1}},
        "items": [{"keep": 1}, [{"k": 3}]],
    }
    assert frozenset({"__proto__", "constructor"}) == FORBIDDEN_KEYS


def test_prior_state_is_never_mutated() -> None:
    """Merging leaves the base and the update exactly as they were."""
    base = {"a": {"b": {"c": 1}}, "l": [1, 2], "s": "x"}
    update = {"a": {"b": {"d": 2}}, "l": [3], "__proto__": {"p": 1}}
    base_before, update_before = copy.deepcopy(base), copy.deepcopy(update)

    result = deep_merge(base, update)

    assert base == base_before
    assert update == update_before
    assert result is not base
    assert result["a"] is not base["a"]
    assert result["a"]["b"] is not base["a"]["b"]


def test_a_cleaned_update_is_taken_as_it_is_and_any_other_is_copied() -> None:
    """``cleaned=True`` (an update from ``to_json_value``, held by no one else) puts the
    update's own containers in the result; by default they are stripped copies."""
    base = {"plan": {"old": 0}, "tags": ["a"]}
    update = to_json_value({"plan": {"step": {"ok": 1}}, "tags": ["b"], "new": {"x": 1}})

    taken = merge_state(base, update, cleaned=True)
    copied = merge_state(base, update)

    assert (
        taken
        == copied
        == {
            "plan": {"old": 0, "step": {"ok": 1}},
            "tags": ["b"],
            "new": {"x": 1},
        }
    )
    assert taken["plan"]["step"] is update["plan"]["step"]
    assert taken["tags"] is update["tags"]
    assert taken["new"] is update["new"]
    assert copied["plan"]["step"] is not update["plan"]["step"]
    assert copied["tags"] is not update["tags"]
    assert copied["new"] is not update["new"]
    assert taken["plan"] is not base["plan"]  # the changed path is still a copy
    assert base == {"plan": {"old": 0}, "tags": ["a"]}


def test_merge_state_keeps_old_text_under_previous() -> None:
    """A text state meeting an object update becomes the update plus ``_previous``."""
    assert merge_state("Goal: find the bug", {"goal": "fix it"}) == {
        "goal": "fix it",
        "_previous": "Goal: find the bug",
    }


def test_merge_state_old_text_wins_over_update_key_named_previous() -> None:
    """An update key called ``_previous`` cannot overwrite the old text."""
    assert merge_state("old notes", {"_previous": "forged", "a": 1}) == {
        "_previous": "old notes",
        "a": 1,
    }


def test_merge_state_empty_text_is_simply_replaced() -> None:
    """An empty text state leaves no ``_previous`` behind."""
    assert merge_state("", {"a": 1, "_previous": "mine"}) == {"a": 1, "_previous": "mine"}
    assert merge_state("", {"a": 1}) == {"a": 1}


def test_merge_state_with_object_state_is_deep_merge() -> None:
    """An object state merges exactly like :func:`deep_merge`."""
    state = {"a": {"b": 1}}
    assert merge_state(state, {"a": {"c": 2}}) == {"a": {"b": 1, "c": 2}}
    assert state == {"a": {"b": 1}}


def test_depth_cap_replaces_instead_of_recursing() -> None:
    """Past ``max_depth`` levels an object replaces the old one instead of merging into it."""
    base = {"a": {"b": {"c": {"old": 1}}}}
    update = {"a": {"b": {"c": {"new": 2}}}}

    assert deep_merge(base, update, max_depth=3) == {"a": {"b": {"c": {"new": 2}}}}
    assert deep_merge(base, update, max_depth=4) == {"a": {"b": {"c": {"old": 1, "new": 2}}}}


def test_ten_thousand_deep_update_merges_without_recursion_error() -> None:
    """A 10,000-deep object merges in bounded recursion: deep parts are replaced, not walked."""
    base = nested(10_000, {"old": 1})
    update = nested(10_000, {"new": 2})

    result = deep_merge(base, update)

    assert depth_of(result) == 10_000
    inner = result
    for _ in range(MAX_DEPTH):
        inner = inner["n"]
    assert inner is update_at(update, MAX_DEPTH)
    assert update_at(result, 10_000) == {"new": 2}


def update_at(value: Any, depth: int) -> Any:
    for _ in range(depth):
        value = value["n"]
    return value


def test_cyclic_update_merges_without_hanging() -> None:
    """A self-containing update is copied down to the cap, then shared: no endless walk."""
    cyclic: dict[str, Any] = {"k": 1}
    cyclic["self"] = cyclic

    result = deep_merge({"k": 0}, cyclic)

    assert result["k"] == 1
    level = result
    for _ in range(MAX_DEPTH - 1):
        level = level["self"]
        assert level is not cyclic
        assert level["k"] == 1
    assert level["self"] is cyclic


def test_strip_keys_leaves_containers_below_the_cap_untouched() -> None:
    """``strip_keys`` walks ``max_depth`` levels; deeper containers are returned as they are."""
    deep = {"__proto__": 1}
    value = {"a": {"__proto__": 2, "b": deep}}

    assert strip_keys(value, max_depth=2) == {"a": {"b": {"__proto__": 1}}}
    assert strip_keys(value, max_depth=3) == {"a": {"b": {}}}
    assert strip_keys([{"constructor": 1, "x": 2}]) == [{"x": 2}]


def test_to_json_value_copies_and_strips() -> None:
    """``to_json_value`` returns a new JSON value without forbidden keys; tuples become lists."""
    value = {"a": (1, "two", None, True, 2.5), "__proto__": {}, "b": {"constructor": 1}}

    result = to_json_value(value)

    assert result == {"a": [1, "two", None, True, 2.5], "b": {}}
    assert json.loads(json.dumps(result)) == result


CYCLIC_LIST: list[Any] = []
CYCLIC_LIST.append(CYCLIC_LIST)


@pytest.mark.parametrize(
    ("value", "path", "message"),
    [
        ({"a": float("nan")}, "$.a", "nan is not a JSON number"),
        ({"a": [1, float("-inf")]}, "$.a[1]", "-inf is not a JSON number"),
        ({"a": {1: "x"}}, "$.a", "the key 1 is a int, not a string"),
        ({"a": b"bytes"}, "$.a", "a bytes is not a JSON value"),
        ({"a": {1, 2}}, "$.a", "a set is not a JSON value"),
        ({"a": datetime(2026, 1, 1)}, "$.a", "a datetime is not a JSON value"),
        ({"a": object()}, "$.a", "a object is not a JSON value"),
        ({"a": CYCLIC_LIST}, "$.a[0]", "the value contains itself (a cycle)"),
        (
            nested(MAX_DEPTH + 1, 1),
            "$" + ".n" * MAX_DEPTH,
            f"nesting is deeper than {MAX_DEPTH} levels",
        ),
    ],
)
def test_to_json_value_rejects_what_json_cannot_hold(value: Any, path: str, message: str) -> None:
    """Non-JSON values raise InvalidValueError saying what is wrong and where."""
    with pytest.raises(InvalidValueError) as info:
        to_json_value(value)

    assert info.value.path == path
    assert str(info.value) == f"{message} at {path}"


def test_to_json_value_accepts_the_cap_itself() -> None:
    """Nesting exactly ``MAX_DEPTH`` containers deep is allowed; one more is not."""
    assert depth_of(to_json_value(nested(MAX_DEPTH, 1))) == MAX_DEPTH


class Ratio(float):
    """Stands for numpy.float64 and the like: a float subclass orjson refuses."""


class Colour(enum.StrEnum):
    RED = "red"


class Level(enum.IntEnum):
    HIGH = 3


def test_to_json_value_turns_scalar_subclasses_into_plain_types() -> None:
    """Enum members and float/int/str subclasses (keys too) become plain str, int and float."""
    result = to_json_value(
        {"r": Ratio(0.5), "c": Colour.RED, "l": [Level.HIGH], "b": True, Colour.RED: 1}
    )

    assert result == {"r": 0.5, "c": "red", "l": [3], "b": True, "red": 1}
    assert [type(result["r"]), type(result["c"]), type(result["l"][0])] == [float, str, int]
    assert type(result["b"]) is bool
    assert [type(key) for key in result] == [str] * 5


@pytest.mark.parametrize(
    ("value", "path", "what", "code"),
    [
        ({"a": "\ud800"}, "$.a", "the text", "D800"),
        ({"a": ["ok", {"b": "x\udfffy"}]}, "$.a[1].b", "the text", "DFFF"),
        ({"a": {"k\udc00": 1}}, "$.a", "the key 'k\\udc00'", "DC00"),
        ({"a": [{"\ud83d": 1}]}, "$.a[0]", "the key '\\ud83d'", "D83D"),
        ({"a": Colour("red"), "b": type("S", (str,), {})("\ud800")}, "$.b", "the text", "D800"),
        ({"a": (("\udbff",),)}, "$.a[0][0]", "the text", "DBFF"),
    ],
)
def test_to_json_value_rejects_lone_surrogates_at_any_depth(
    value: Any, path: str, what: str, code: str
) -> None:
    """A string or key holding half of a UTF-16 surrogate pair is not storable text: it is
    refused where it is, saying so and how to fix it, in a message that itself holds none."""
    with pytest.raises(InvalidValueError) as info:
        to_json_value(value)

    assert info.value.path == path
    assert str(info.value) == (
        f"{what} contains a lone surrogate U+{code} (invalid Unicode: half of a UTF-16 "
        f"surrogate pair, which cannot be stored) at {path}; {SURROGATE_FIX}"
    )
    str(info.value).encode()


def test_to_json_value_keeps_whole_pairs_and_other_text() -> None:
    """Characters beyond U+FFFF (a surrogate pair in UTF-16) and any other text pass."""
    value = {"mood": "\U0001f600", "ログイン": ["café", "\ue000", "\uffff"]}

    assert to_json_value(value) == value
