"""``provides``: the snapshot data and the update function, through the handle and directly."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict, Field

from noetic_scratchpad import (
    ExecutionContext,
    FunctionOutcome,
    LayerData,
    LayerFunction,
    ScratchpadReadOnlyError,
    ScratchpadUpdateError,
    ScratchpadValidationError,
    UpdateApplied,
    UpdateRejected,
    scratchpad,
)
from noetic_scratchpad.layer import refusal_text
from noetic_scratchpad.testing import capture_events

from .conftest import Bind

#: Every async test runs twice: on asyncio and under trio (``anyio_backend`` in conftest).
pytestmark = pytest.mark.anyio


class Owner(BaseModel):
    name: str
    required: bool = False


class TaskNotes(BaseModel):
    model_config = ConfigDict(extra="forbid")

    currentGoal: str
    completedSteps: list[str]
    blockers: list[str] = []
    owner: Owner | None = None
    notes: str = Field(default="", max_length=20)
    count: int = 0


def update_function(layer: Any) -> LayerFunction:
    function = layer.provides["update"]
    assert isinstance(function, LayerFunction)
    return function


async def test_snapshot_is_a_copy(bind: Bind) -> None:
    """Mutating what snapshot (handle or LayerData) returns never changes the stored state."""
    scope = await bind(scratchpad(), stored={"plan": {"steps": ["a"]}})
    data = scope.layer.provides["snapshot"]
    assert isinstance(data, LayerData)

    via_handle = scope.handle.snapshot
    via_data = data.read(scope.handle.state)
    for view in (via_handle, via_data):
        assert view == {"plan": {"steps": ["a"]}}
        view["plan"]["steps"].append("mutated")
        view["new"] = 1

    assert scope.handle.snapshot == {"plan": {"steps": ["a"]}}
    assert await scope.stored() == {"plan": {"steps": ["a"]}}


async def test_update_stores_and_snapshot_shows_a_copy(bind: Bind) -> None:
    """``await handle.update`` merges, stores and reports source "api"; it returns ``None``
    (as ``dict.update`` does) and ``snapshot`` then shows a copy of the new state."""
    scope = await bind(scratchpad(schema=TaskNotes))

    with capture_events(scope.ctx.events) as events:
        returned = await scope.handle.update({"currentGoal": "g", "completedSteps": ["a"]})
    assert returned is None
    snapshot = scope.handle.snapshot
    assert snapshot == {"currentGoal": "g", "completedSteps": ["a"]}
    assert isinstance(snapshot, dict)
    snapshot["completedSteps"].append("mutated")

    assert await scope.stored() == {"currentGoal": "g", "completedSteps": ["a"]}
    assert [(e.source, e.keys, e.call_id) for e in events.of(UpdateApplied)] == [
        ("api", ("currentGoal", "completedSteps"), None)
    ]


async def test_update_schema_violation_raises_with_errors_and_changes_nothing(
    bind: Bind,
) -> None:
    """A schema violation raises ScratchpadValidationError with the pydantic errors; the stored
    state is byte-for-byte what it was, and an UpdateRejected event carries the same errors."""
    scope = await bind(scratchpad(schema=TaskNotes), stored={"currentGoal": "g"})
    before = await scope.stored_bytes()

    with (
        capture_events(scope.ctx.events) as events,
        pytest.raises(ScratchpadValidationError) as info,
    ):
        await scope.handle.update({"count": "many", "notes": "x" * 30})

    assert info.value.reason == "schema"
    assert [(e["type"], e["loc"]) for e in info.value.errors] == [
        ("string_too_long", ["notes"]),
        ("int_parsing", ["count"]),
    ]
    assert "does not fit the scratchpad's schema" in str(info.value)
    assert await scope.stored_bytes() == before
    assert scope.handle.snapshot == {"currentGoal": "g"}
    [rejected] = events.of(UpdateRejected)
    assert (rejected.hook, rejected.reason) == ("api", "schema")
    assert list(rejected.errors) == info.value.errors


async def test_gate_stores_the_merged_dict_not_the_model_output(bind: Bind) -> None:
    """Defaults are not filled in and lax coercion is not applied to what is stored."""
    scope = await bind(scratchpad(schema=TaskNotes))
    await scope.handle.update({"count": "5", "owner": {"name": "ada"}})

    assert await scope.stored() == {"count": "5", "owner": {"name": "ada"}}


async def test_seed_example_is_accepted_from_an_empty_state(bind: Bind) -> None:
    """``{currentGoal, completedSteps}`` first, then ``blockers``, from {}: both accepted."""
    scope = await bind(scratchpad(schema=TaskNotes))
    await scope.handle.update({"currentGoal": "fix login", "completedSteps": ["reproduce"]})
    await scope.handle.update({"blockers": ["staging is down"]})

    assert await scope.stored() == {
        "currentGoal": "fix login",
        "completedSteps": ["reproduce"],
        "blockers": ["staging is down"],
    }


async def test_read_only_update_raises_and_changes_nothing(bind: Bind) -> None:
    """With read_only=True, update raises ScratchpadReadOnlyError; an event says read_only."""
    scope = await bind(scratchpad(read_only=True), stored={"kept": 1})

    with capture_events(scope.ctx.events) as events:
        with pytest.raises(ScratchpadReadOnlyError, match="read-only") as info:
            await scope.handle.update({"a": 1})
        with pytest.raises(ScratchpadReadOnlyError):
            await scope.handle.call("update", '{"a": 1}', call_id="c1")

    assert info.value.reason == "read_only"
    assert await scope.stored() == {"kept": 1}
    assert [(e.hook, e.reason) for e in events.of(UpdateRejected)] == [
        ("api", "read_only"),
        ("tool", "read_only"),
    ]
    assert update_function(scope.layer).exposed is False


async def test_read_only_execute_raises() -> None:
    """The provided function refuses to run for a read-only scratchpad, too."""
    layer = scratchpad(read_only=True)
    with pytest.raises(ScratchpadReadOnlyError):
        await update_function(layer).execute({"a": 1}, {}, ExecutionContext(thread_id="t"))


async def test_tool_call_path_reports_tool_and_returns_text(bind: Bind) -> None:
    """``handle.call("update", json, call_id=...)`` applies once and says so; the ids the
    store hook leaves to a runtime's tool path are the runtime's to set, not the handle's."""
    scope = await bind(scratchpad())

    with capture_events(scope.ctx.events) as events:
        output = await scope.handle.call("update", '{"goal": "g", "n": 1}', call_id="c9")

    assert output == "Scratchpad updated (goal, n)."
    assert [(e.source, e.call_id, e.keys) for e in events.of(UpdateApplied)] == [
        ("tool", "c9", ("goal", "n"))
    ]
    assert scope.ctx.handled_call_ids == set()
    with pytest.raises(KeyError, match="provides no function 'delete'"):
        await scope.handle.call("delete", "{}")


async def test_tool_call_rejection_message_tells_the_model_how_to_fix_it(bind: Bind) -> None:
    """A rejected tool call raises an update error whose message names the fix."""
    scope = await bind(scratchpad(schema=TaskNotes))

    with pytest.raises(ScratchpadUpdateError) as info:
        await scope.handle.call("update", '{"currentGoal": 3}', call_id="c1")

    assert refusal_text(info.value, "scratchpad/update") == (
        "The update does not fit the scratchpad's schema: currentGoal: Input should be a "
        "valid string. Fix these fields and call scratchpad/update again with only the "
        "fields to change."
    )
    assert "c1" not in scope.ctx.handled_call_ids


def test_parameters_describe_the_schema_fields_with_none_required() -> None:
    """With a schema, the tool's parameters list its fields (nested too), none required."""
    parameters = dict(update_function(scratchpad(schema=TaskNotes)).parameters)

    assert parameters["type"] == "object"
    assert set(parameters["properties"]) == {
        "currentGoal",
        "completedSteps",
        "blockers",
        "owner",
        "notes",
        "count",
    }
    assert "required" not in parameters
    owner = parameters["$defs"]["Owner"]
    assert "required" not in owner
    assert set(owner["properties"]) == {"name", "required"}
    assert owner["properties"]["required"]["type"] == "boolean"
    assert parameters["properties"]["notes"]["maxLength"] == 20


async def test_execute_is_pure() -> None:
    """execute returns the merged state and the result text; its input state is untouched."""
    function = update_function(scratchpad())
    state = {"plan": {"steps": ["a"], "owner": "x"}, "keep": [1]}
    before = copy.deepcopy(state)

    outcome = await function.execute(
        {"plan": {"steps": ["b"]}, "new": True}, state, ExecutionContext(thread_id="t")
    )

    assert outcome == FunctionOutcome(
        result="Scratchpad updated (plan, new).",
        state={"plan": {"steps": ["b"], "owner": "x"}, "keep": [1], "new": True},
    )
    assert state == before


async def test_execute_checks_the_schema() -> None:
    """execute applies the same gate: a violation raises and returns no state."""
    function = update_function(scratchpad(schema=TaskNotes))
    with pytest.raises(ScratchpadValidationError):
        await function.execute({"count": [1]}, {}, ExecutionContext(thread_id="t"))


async def test_the_answer_names_an_empty_key_it_wrote(bind: Bind) -> None:
    """Issue 23, item 12: an update of the key "" was written but answered "Scratchpad
    updated (nothing)". The answer names every key written; one that would not read as a
    name (empty, a comma, spaces at its ends) is shown as a JSON string."""
    scope = await bind(scratchpad())

    assert await scope.handle.call("update", '{"": 1}', call_id="c1") == (
        'Scratchpad updated ("").'
    )
    assert await scope.handle.call("update", '{"goal": 1, "a, b": 2, " x": 3}') == (
        'Scratchpad updated (goal, "a, b", " x").'
    )
    assert await scope.stored() == {"": 1, "goal": 1, "a, b": 2, " x": 3}


async def test_the_answer_names_an_empty_key_it_edited(bind: Bind) -> None:
    scope = await bind(scratchpad(edit_tool=True))
    operation = {"op": "set", "path": [""], "value_json": "1", "values_json": None, "index": None}

    assert await scope.handle.call("edit", {"operations": [operation]}) == (
        'Scratchpad edited ("").'
    )
    assert await scope.stored() == {"": 1}
