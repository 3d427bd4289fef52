"""Journal entries: what a write records to be undone, and undoing it."""

from __future__ import annotations

import copy
from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from noetic_scratchpad.layer.journal import entry_of, undo
from noetic_scratchpad.merge import MAX_DEPTH, merge_state


def merge_entry(stored: Any, update: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The state after merging ``update`` into ``stored``, and the write's entry."""
    after = merge_state(stored, update)
    entry = entry_of(
        source="api", call_id=None, keys=tuple(update), applied=update, stored=stored, base=stored
    )
    return after, entry


def test_a_merge_deep_inside_a_large_object_records_only_the_values_it_replaced() -> None:
    acks = {f"writer-{n}": n for n in range(300)}
    stored = {"goal": "ship", "acks": acks, "notes": {"owner": "ana"}}
    update = {"acks": {"writer-7": 70, "writer-new": 1}, "goal": "ship v2"}
    after, entry = merge_entry(stored, update)
    assert entry["undo"] == {
        "restore": [[["acks", "writer-7"], 7], [["goal"], "ship"]],
        "remove": [["acks", "writer-new"]],
    }
    assert undo(after, entry) == stored
    # The entry costs about what the update costs, not what the object it writes into does.
    assert len(orjson.dumps(entry)) < 3 * len(orjson.dumps(update)) + 200
    assert len(orjson.dumps(entry)) < len(orjson.dumps(acks)) / 10


def test_undo_never_changes_the_state_it_starts_from() -> None:
    stored = {"plan": {"phase": 1, "owner": {"name": "ana"}}}
    after, entry = merge_entry(stored, {"plan": {"owner": {"name": "bo"}, "new": True}})
    kept = copy.deepcopy(after)
    assert undo(after, entry) == stored
    assert after == kept


def test_a_value_that_replaces_an_object_or_fills_a_null_records_the_prior_value() -> None:
    stored = {"plan": {"phase": 1}, "owner": None, "steps": ["a"]}
    after, entry = merge_entry(stored, {"plan": "dropped", "owner": {"name": "bo"}, "steps": []})
    assert entry["undo"] == {
        "restore": [[["plan"], {"phase": 1}], [["owner"], None], [["steps"], ["a"]]]
    }
    assert undo(after, entry) == stored


def test_below_the_merge_depth_a_value_is_recorded_whole_as_the_merge_replaced_it() -> None:
    def nest(depth: int, leaf: Any) -> Any:
        return leaf if depth == 0 else {"k": nest(depth - 1, leaf)}

    stored = nest(MAX_DEPTH + 2, {"old": 1})
    update = nest(MAX_DEPTH + 2, {"new": 2})
    after, entry = merge_entry(stored, update)
    (path, prior), *rest = entry["undo"]["restore"]
    assert not rest
    assert len(path) == MAX_DEPTH
    assert prior == nest(2, {"old": 1})  # the object below the depth, whole
    assert undo(after, entry) == stored


def test_entries_of_edits_and_of_earlier_releases_keep_their_top_level_form() -> None:
    stored = {"goal": "a", "steps": ["x", "y"]}
    edited = {"goal": "a", "steps": ["x"], "added": 1}
    entry = entry_of(
        source="tool",
        call_id="c1",
        keys=("steps", "added"),
        applied={"operations": []},
        stored=stored,
        base=stored,
        merged=False,
    )
    assert entry["undo"] == {"set": {"steps": ["x", "y"]}, "delete": ["added"]}
    assert undo(edited, entry) == stored


def test_a_first_write_a_text_state_or_a_replaced_state_records_the_whole_prior_state() -> None:
    # (stored, base): nothing stored, text notes, a state that no longer fitted the schema
    for stored, base in ((None, {}), ("plain text notes", "plain text notes"), ({"x": 1}, {})):
        after = merge_state(base, {"goal": "a"})
        entry = entry_of(
            source="api",
            call_id=None,
            keys=("goal",),
            applied={"goal": "a"},
            stored=stored,
            base=base,
        )
        assert entry["undo"] == {"state": stored}
        assert undo(after, entry) == stored


json_leaves = st.none() | st.booleans() | st.integers(-5, 5) | st.text("ab", max_size=2)
json_values = st.recursive(
    json_leaves,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from("abcd"), inner),
    max_leaves=12,
)
json_objects = st.dictionaries(st.sampled_from("abcd"), json_values, max_size=4)


@settings(max_examples=400, deadline=None)
@given(stored=json_objects, updates=st.lists(json_objects, min_size=1, max_size=4))
def test_undoing_merges_newest_first_gives_back_every_earlier_state(
    stored: dict[str, Any], updates: list[dict[str, Any]]
) -> None:
    states, entries = [stored], []
    for update in updates:
        after, entry = merge_entry(states[-1], update)
        states.append(after)
        entries.append(orjson.loads(orjson.dumps(entry)))  # as the journal stores it
    frozen = copy.deepcopy(states)
    state = states[-1]
    for entry, before in zip(reversed(entries), reversed(states[:-1]), strict=True):
        state = undo(state, entry)
        assert state == before
    assert states == frozen  # no state was changed by undoing
