"""The schema gate of SPEC.md section 1, and the tool parameters built from the schema."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict, Field
from typing_extensions import TypedDict

from noetic_scratchpad.schema import SchemaGate, partial_json_schema


class TaskNotes(BaseModel):
    """The seed's example schema."""

    model_config = ConfigDict(extra="forbid")

    currentGoal: str
    completedSteps: list[str]
    blockers: list[str]
    notes: str = Field(default="", max_length=10)


class Owner(BaseModel):
    name: str
    required: bool


class Project(BaseModel):
    title: str
    owner: Owner
    priority: int = 3


class TypedNotes(TypedDict):
    goal: str
    count: int


@dataclasses.dataclass
class DataNotes:
    goal: str
    count: int


def types_of(errors: list[dict[str, Any]]) -> list[tuple[str, list[Any]]]:
    return [(error["type"], error["loc"]) for error in errors]


def test_required_fields_not_written_yet_do_not_fail() -> None:
    """The seed's example: goal and steps first from an empty state, blockers later."""
    gate = SchemaGate(TaskNotes)

    assert gate.errors({}) == []
    assert gate.errors({"currentGoal": "fix login", "completedSteps": []}) == []
    assert gate.errors({"currentGoal": "x", "completedSteps": ["a"], "blockers": ["b"]}) == []


def test_wrong_type_fails() -> None:
    """A value of the wrong type is an error with its location."""
    errors = SchemaGate(TaskNotes).errors({"currentGoal": ["not", "text"]})

    assert types_of(errors) == [("string_type", ["currentGoal"])]
    assert errors[0]["input"] == "['not', 'text']"


def test_constraint_violation_fails() -> None:
    """A Field constraint (max_length) is enforced."""
    errors = SchemaGate(TaskNotes).errors({"notes": "far too long for ten"})

    assert types_of(errors) == [("string_too_long", ["notes"])]


def test_forbidden_extra_key_fails() -> None:
    """With ``extra="forbid"`` an unknown key is an error."""
    errors = SchemaGate(TaskNotes).errors({"currentGoal": "x", "surprise": 1})

    assert types_of(errors) == [("extra_forbidden", ["surprise"])]


def test_nested_missing_fields_pass_but_nested_wrong_types_fail() -> None:
    """Inside a nested model, unwritten fields pass and wrong types still fail."""
    gate = SchemaGate(Project)

    assert gate.errors({"owner": {"name": "ada"}}) == []
    assert types_of(gate.errors({"owner": {"required": "maybe"}})) == [
        ("bool_parsing", ["owner", "required"])
    ]


def test_typeddict_and_dataclass_schemas() -> None:
    """TypedDict and dataclass schemas gate like models: partial is fine, wrong types fail."""
    for schema in (TypedNotes, DataNotes):
        gate = SchemaGate(schema)
        assert gate.errors({"goal": "g"}) == [], schema
        assert types_of(gate.errors({"count": "many"})) == [("int_parsing", ["count"])], schema


@pytest.mark.parametrize("schema", [int, str, list[int], int | None])
def test_non_object_schema_is_rejected(schema: Any) -> None:
    """A schema that does not describe a JSON object cannot be a scratchpad's schema."""
    with pytest.raises(TypeError, match="must describe a JSON object"):
        SchemaGate(schema)


def test_long_error_inputs_are_shortened() -> None:
    """Error details stay small: an input longer than 200 characters is cut with an ellipsis."""
    long_list = ["x" * 500]
    errors = SchemaGate(TaskNotes).errors({"currentGoal": long_list, "completedSteps": [1]})

    assert types_of(errors) == [
        ("string_type", ["currentGoal"]),
        ("string_type", ["completedSteps", 0]),
    ]
    assert errors[0]["input"] == repr(long_list)[:199] + "…"
    assert errors[1]["input"] == 1


def test_tool_parameters_have_the_fields_and_no_required() -> None:
    """The update tool's parameters list the schema's fields, none of them required, and
    none of the titles pydantic derives from names."""
    parameters = SchemaGate(TaskNotes).tool_parameters()

    assert parameters["type"] == "object"
    assert set(parameters["properties"]) == {"currentGoal", "completedSteps", "blockers", "notes"}
    assert parameters["properties"]["completedSteps"] == {
        "items": {"type": "string"},
        "type": "array",
    }
    assert "title" not in parameters
    assert parameters["additionalProperties"] is False
    assert "required" not in parameters


def test_tool_parameters_drop_required_in_nested_defs_but_keep_a_field_named_required() -> None:
    """Nested models lose their ``required`` lists; a property called "required" stays."""
    parameters = SchemaGate(Project).tool_parameters()
    owner = parameters["$defs"]["Owner"]

    assert "required" not in parameters
    assert "required" not in owner
    assert owner["properties"]["required"] == {"type": "boolean"}
    assert set(owner["properties"]) == {"name", "required"}


def test_partial_json_schema_does_not_touch_its_input() -> None:
    """``partial_json_schema`` works on a copy."""
    schema = {"type": "object", "required": ["a"], "properties": {"a": {"type": "string"}}}

    expected = {"type": "object", "properties": {"a": {"type": "string"}}}
    assert partial_json_schema(schema) == expected
    assert schema["required"] == ["a"]


def test_tool_parameters_keep_data_that_contains_a_required_key() -> None:
    """Defaults and examples are data: a "required" key inside them is not a keyword."""

    class Meta(BaseModel):
        meta: dict[str, Any] = Field(
            default={"required": ["x"], "k": 1}, examples=[{"required": ["y"]}]
        )

    meta = SchemaGate(Meta).tool_parameters()["properties"]["meta"]

    assert meta["default"] == {"required": ["x"], "k": 1}
    assert meta["examples"] == [{"required": ["y"]}]


class Step(BaseModel):
    title: str
    done: bool


class Plan(BaseModel):
    steps: list[Step] = []
    byOwner: dict[str, Step] = {}


def test_missing_field_inside_a_list_item_fails() -> None:
    """A list item lacking a required field fails: lists are replaced whole, so no later
    update could fill it in. Inside objects (dict values too) it may still come later."""
    gate = SchemaGate(Plan)

    assert types_of(gate.errors({"steps": [{"title": "a"}]})) == [("missing", ["steps", 0, "done"])]
    assert gate.errors({"steps": [{"title": "a", "done": False}]}) == []
    assert gate.errors({"byOwner": {"ada": {"title": "a"}}}) == []


def test_titles_go_but_a_field_called_title_and_data_holding_one_stay() -> None:
    """Only the titles of schemas are dropped: a field named ``title``, a nested model's
    fields and a default holding a ``title`` key are the user's, and stay."""

    class Link(BaseModel):
        title: str = Field(description="What the link is.")

    class Page(BaseModel):
        title: str = ""
        links: list[Link] = []
        meta: dict[str, str] = Field(default={"title": "kept"})

    parameters = SchemaGate(Page).tool_parameters()

    assert set(parameters["properties"]) == {"title", "links", "meta"}
    assert parameters["properties"]["meta"]["default"] == {"title": "kept"}
    link = parameters["$defs"]["Link"]
    assert link["properties"]["title"] == {"description": "What the link is.", "type": "string"}
    assert "title" not in link
    assert "title" not in repr(parameters["properties"]["links"])
