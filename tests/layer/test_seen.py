"""The rule that a model's update may not drop what its view hid, and the read tool's
output: pure functions, tested without storage."""

from __future__ import annotations

import json

import pytest

from noetic_scratchpad import ScratchpadPartlySeenError, scratchpad
from noetic_scratchpad.layer.failures import refusal_text, sibling_tool
from noetic_scratchpad.layer.reading import read_part, read_tool_name
from noetic_scratchpad.layer.seen import ViewLimit, check_seen
from noetic_scratchpad.storage import MemoryStorage

STEPS = [f"step {i}: matched the payout of batch {i}" for i in range(300)]
STATE = {"goal": "reconcile", "steps": STEPS}
LIMIT = ViewLimit(1500, None, edit_tool=True)


def test_a_resent_view_of_a_cut_list_is_refused_with_its_data() -> None:
    with pytest.raises(ScratchpadPartlySeenError) as caught:
        check_seen(STATE, {"steps": [*STEPS[:3], *STEPS[-80:], "step 300"]}, LIMIT)
    error = caught.value
    assert error.reason == "shown_in_part"
    assert error.refused == "update"
    [part] = error.errors
    assert part["type"] == "shown_in_part"
    assert part["msg"].startswith('["steps"] shows ')
    assert part["loc"] == ["steps"]
    assert part["kind"] == "list"
    assert part["total"] == 300
    assert part["shown"] + part["hidden"] == 300
    assert part["fixes"] == ["append", "read"]


@pytest.mark.parametrize(
    "update",
    [
        {"goal": "ship"},  # the cut list untouched
        {"steps": [*STEPS, "step 300"]},  # the whole list, the hidden part included
        {"steps": ["older steps: see the report", *STEPS[3:297]]},  # the hidden run kept
        {"steps": "300 steps done; see the report"},  # a summary in place of the list
        {"steps": None},  # dropped on purpose
    ],
)
def test_an_update_that_keeps_the_hidden_part_or_means_another_value_passes(
    update: dict[str, object],
) -> None:
    check_seen(STATE, update, LIMIT)


def test_a_list_that_fits_the_view_may_be_replaced() -> None:
    check_seen({"steps": STEPS[:10]}, {"steps": ["one"]}, LIMIT)


def test_without_the_edit_tool_the_only_fix_is_to_read() -> None:
    with pytest.raises(ScratchpadPartlySeenError) as caught:
        check_seen(STATE, {"steps": STEPS[-5:]}, ViewLimit(1500))
    assert caught.value.errors[0]["fixes"] == ["read"]
    text = refusal_text(caught.value, "notes_update")
    assert "notes_edit" not in text
    assert "first call notes_read with its path to see the hidden part" in text


def test_tool_names_beside_the_update_tool() -> None:
    assert sibling_tool("scratchpad/update", "edit") == "scratchpad/edit"
    assert sibling_tool("memo_scratchpad_update", "read") == "memo_scratchpad_read"
    assert sibling_tool("notes", "read") == "the scratchpad's read tool"
    assert read_tool_name("scratchpad__update") == "scratchpad__read"
    assert read_tool_name("notes") == "notes_read"


@pytest.mark.asyncio
async def test_the_models_edit_is_not_checked_and_the_applications_update_neither() -> None:
    """An edit says what it changes (a set replaces on purpose); code's writes are its own."""
    layer = scratchpad(edit_tool=True)
    handle = await layer.open(MemoryStorage(), thread_id="t")
    await handle.update(STATE)
    set_steps = {
        "op": "set",
        "path": ["steps"],
        "value_json": json.dumps(["one"]),
        "values_json": None,
        "index": None,
    }
    assert await handle.call("edit", {"operations": [set_steps]}) == "Scratchpad edited (steps)."
    await handle.update(STATE)
    await handle.update({"steps": STEPS[:110]})
    assert handle.state["steps"] == STEPS[:110]


def test_read_part_windows_a_list_within_the_budget() -> None:
    text = read_part(STATE, {"path": ["steps"], "start": 3, "end": None}, 200)
    first_line = text.split("\n", 1)[0]
    assert first_line.startswith('["steps"], items 3 to ')
    assert first_line.endswith(": read again with start " + first_line.split("start ")[-1])
    stop = int(first_line.rsplit("start ", 1)[1].rstrip("):"))
    assert json.loads(text.split("\n", 1)[1]) == STEPS[3:stop]
    assert len(text) / 4 <= 200


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (
            {"path": ["nowhere"]},
            'The scratchpad has no "nowhere" at [] (its keys: "goal", "steps").',
        ),
        ({"path": "steps"}, "path must be a list of object keys"),
        (
            {"path": ["steps"], "start": "3"},
            'start must be an index (0 is the first) or null, not "3".',
        ),
        (
            {"path": ["steps"], "start": 400},
            '["steps"] has 300 items; there are none from 300 to 300.',
        ),
        ({"path": ["goal"], "start": None, "end": 3}, '["goal"], characters 0 to 2 of 9:\nrec'),
    ],
)
def test_read_part_says_what_is_wrong_or_what_it_read(args: dict[str, object], says: str) -> None:
    assert read_part(STATE, args, 1500).startswith(says)


def test_a_view_cut_as_text_protects_every_long_list_and_text() -> None:
    """When not even the shortest view by structure fits, the view is a prefix of the
    body: no list it holds is known to be seen whole, so dropping items is refused, and a
    list resent whole with more items passes."""
    steps = [f"Matched payout {4100 + i} to its invoice" for i in range(24)]
    state = {"goal": "Refund the duplicate charge on order 4821", "steps": steps}
    limit = ViewLimit(120, advice=scratchpad().cut_advice)  # the view the model is shown
    with pytest.raises(ScratchpadPartlySeenError) as caught:
        check_seen(state, {"steps": [*steps[:5], "new"]}, limit)
    assert caught.value.message.startswith(
        'The update would replace what the scratchpad\'s view shows only in part (["steps"], '
        "of 24 items, may be cut off): the items past the cut would be lost, so nothing was "
        "written"
    )
    check_seen(state, {"steps": [*steps, "new"]}, limit)


@pytest.mark.asyncio
async def test_the_refusal_is_one_update_rejected_event_with_its_parts() -> None:
    from noetic_scratchpad import UpdateRejected
    from noetic_scratchpad.testing import capture_events

    layer = scratchpad()
    handle = await layer.open(MemoryStorage(), thread_id="t")
    await handle.update(STATE)
    with capture_events(handle.ctx.events) as events, pytest.raises(ScratchpadPartlySeenError):
        await handle.call("update", {"steps": STEPS[-5:]}, call_id="c1")
    [rejected] = events.of(UpdateRejected)
    assert (rejected.reason, rejected.hook, rejected.call_id) == ("shown_in_part", "tool", "c1")
    assert rejected.errors[0]["loc"] == ["steps"]
    assert handle.state["steps"] == STEPS
