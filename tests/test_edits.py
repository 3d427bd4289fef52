"""The edit tool's pure core: its schema, its operations, their refusals (issue 15)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from noetic_scratchpad.edits import (
    EDIT_DESCRIPTION,
    EDIT_PARAMETERS,
    EDIT_REASONS,
    EDIT_TOOL,
    OPERATIONS,
    apply_edits,
    edit_description,
    edited_keys,
    parse_edit_arguments,
)
from noetic_scratchpad.errors import ScratchpadUpdateError
from noetic_scratchpad.layer import refusal_text
from noetic_scratchpad.merge import FORBIDDEN_KEYS, MAX_DEPTH, merge_state, to_json_value

STATE: dict[str, Any] = {
    "goal": "ship it",
    "steps": ["plan", "build", "plan"],
    "plan": {"phase": 1, "todo": ["a", "b"]},
    "count": 3,
}


def refusal(state: Any, operations: Any, **kwargs: Any) -> ScratchpadUpdateError:
    """The error ``apply_edits`` raises, after checking that ``state`` was left as it was."""
    before = copy.deepcopy(state)
    with pytest.raises(ScratchpadUpdateError) as caught:
        apply_edits(state, operations, **kwargs)
    assert state == before
    return caught.value


def call(*operations: dict[str, Any]) -> str:
    """A model's edit call as JSON text, in the tool form: every field, unused ones null."""
    empty = {"value_json": None, "values_json": None, "index": None}
    return json.dumps({"operations": [{**empty, **op} for op in operations]})


# -- the schema ----------------------------------------------------------------------------


def test_schema_passes_the_agents_sdk_strict_check_unchanged() -> None:
    strict_schema = pytest.importorskip("agents.strict_schema")
    agents = pytest.importorskip("agents")
    for reject_open_objects in (False, True):
        converted = strict_schema.ensure_strict_json_schema(
            copy.deepcopy(EDIT_PARAMETERS), _reject_open_objects=reject_open_objects
        )
        assert converted == EDIT_PARAMETERS

    async def invoke(context: Any, arguments: str) -> str:
        return arguments

    tool = agents.FunctionTool(
        name="scratchpad_edit",
        description=EDIT_DESCRIPTION,
        params_json_schema=copy.deepcopy(EDIT_PARAMETERS),
        on_invoke_tool=invoke,
        strict_json_schema=True,
    )
    assert tool.params_json_schema == EDIT_PARAMETERS


def schema_nodes(node: dict[str, Any]) -> list[dict[str, Any]]:
    found = [node]
    for child in node.get("properties", {}).values():
        found += schema_nodes(child)
    if isinstance(node.get("items"), dict):
        found += schema_nodes(node["items"])
    return found


def test_schema_keeps_the_rules_strict_mode_enforces_beyond_the_sdk() -> None:
    """OpenAI refuses a strict schema with an untyped node or an open or partly optional
    object, which the SDK's checker lets through or silently closes."""
    assert EDIT_PARAMETERS["type"] == "object"  # Anthropic and OpenAI: an object at the top
    assert not {"anyOf", "oneOf", "allOf", "$ref"} & EDIT_PARAMETERS.keys()
    for node in schema_nodes(EDIT_PARAMETERS):
        assert "type" in node, node
        if node["type"] == "object":
            assert node["additionalProperties"] is False
            assert node["required"] == list(node["properties"])
    json.dumps(EDIT_PARAMETERS)  # sent as it is


def test_schema_is_valid_json_schema_that_describes_a_call() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    validator = jsonschema.Draft202012Validator
    validator.check_schema(EDIT_PARAMETERS)
    good = json.loads(
        call(
            {"op": "append", "path": ["steps"], "values_json": ['"ship"']},
            {"op": "remove", "path": ["steps"], "index": -1},
            {"op": "set", "path": ["plan", "phase"], "value_json": "2"},
            {"op": "delete", "path": ["count"]},
        )
    )
    assert validator(EDIT_PARAMETERS).is_valid(good)
    for bad in (
        {"operations": [{"op": "append", "path": ["steps"]}]},  # strict: every field
        {"operations": [{**good["operations"][0], "op": "merge"}]},
        {"operations": [{**good["operations"][0], "extra": 1}]},
        {"operations": [{**good["operations"][0], "path": "steps"}]},
        {"operations": [], "more": 1},
    ):
        assert not validator(EDIT_PARAMETERS).is_valid(bad), bad


def test_description_says_when_to_edit_and_when_to_update() -> None:
    assert "scratchpad/update" in EDIT_DESCRIPTION
    text = edit_description("scratchpad_update")
    assert "scratchpad_update" in text
    assert "scratchpad/update" not in text
    for phrase in ("append", "remove", "delete a key", "without resending", "merge"):
        assert phrase in text
    assert set(
        EDIT_PARAMETERS["properties"]["operations"]["items"]["properties"]["op"]["enum"]
    ) == set(OPERATIONS)


# -- the operations ------------------------------------------------------------------------


def test_append_adds_items_to_the_end_of_the_list() -> None:
    result = apply_edits(STATE, [{"op": "append", "path": ["steps"], "values": ["ship", 4]}])
    assert result["steps"] == ["plan", "build", "plan", "ship", 4]
    nested = apply_edits(STATE, [{"op": "append", "path": ["plan", "todo"], "values": [{}]}])
    assert nested["plan"] == {"phase": 1, "todo": ["a", "b", {}]}
    assert STATE["steps"] == ["plan", "build", "plan"]
    assert STATE["plan"]["todo"] == ["a", "b"]


def test_remove_by_value_takes_out_every_equal_item() -> None:
    result = apply_edits(STATE, [{"op": "remove", "path": ["steps"], "value": "plan"}])
    assert result["steps"] == ["build"]


def test_remove_by_value_uses_json_equality() -> None:
    state = {"items": [1, True, 1.0, {"a": 1, "b": [2]}, "1", None]}
    ones = apply_edits(state, [{"op": "remove", "path": ["items"], "value": 1}])
    assert ones["items"] == [True, {"a": 1, "b": [2]}, "1", None]
    assert [type(item) for item in ones["items"][:1]] == [bool]  # true is not 1
    objects = apply_edits(state, [{"op": "remove", "path": ["items"], "value": {"b": [2], "a": 1}}])
    assert objects["items"] == [1, True, 1.0, "1", None]
    nulls = apply_edits(state, [{"op": "remove", "path": ["items"], "value": None}])
    assert nulls["items"] == [1, True, 1.0, {"a": 1, "b": [2]}, "1"]


@pytest.mark.parametrize(
    ("index", "left"), [(0, ["b", "c"]), (2, ["a", "b"]), (-1, ["a", "b"]), (-3, ["b", "c"])]
)
def test_remove_by_index_counts_negative_indexes_from_the_end(index: int, left: list[str]) -> None:
    result = apply_edits({"l": ["a", "b", "c"]}, [{"op": "remove", "path": ["l"], "index": index}])
    assert result == {"l": left}


def test_delete_removes_the_key() -> None:
    assert "count" not in apply_edits(STATE, [{"op": "delete", "path": ["count"]}])
    result = apply_edits(STATE, [{"op": "delete", "path": ["plan", "todo"]}])
    assert result["plan"] == {"phase": 1}
    assert STATE["plan"] == {"phase": 1, "todo": ["a", "b"]}


def test_set_replaces_the_value_and_creates_missing_objects() -> None:
    result = apply_edits(
        STATE,
        [
            {"op": "set", "path": ["goal"], "value": "rest"},
            {"op": "set", "path": ["plan"], "value": {"phase": 2}},  # replaced, not merged
            {"op": "set", "path": ["notes", "today", "mood"], "value": "good"},
            {"op": "set", "path": ["count"], "value": None},
        ],
    )
    assert result == {
        "goal": "rest",
        "steps": ["plan", "build", "plan"],
        "plan": {"phase": 2},
        "notes": {"today": {"mood": "good"}},
        "count": None,
    }


def test_operations_apply_in_order_each_seeing_the_last() -> None:
    result = apply_edits(
        STATE,
        [
            {"op": "append", "path": ["steps"], "values": ["ship"]},
            {"op": "remove", "path": ["steps"], "value": "plan"},
            {"op": "remove", "path": ["steps"], "index": 0},
            {"op": "set", "path": ["done"], "value": []},
            {"op": "append", "path": ["done"], "values": ["build"]},
        ],
    )
    assert result["steps"] == ["ship"]
    assert result["done"] == ["build"]
    removed_first = apply_edits(
        {"l": ["x"]},
        [
            {"op": "remove", "path": ["l"], "value": "x"},
            {"op": "append", "path": ["l"], "values": ["x"]},
        ],
    )
    assert removed_first == {"l": ["x"]}


def test_the_input_is_never_changed_and_untouched_parts_are_shared() -> None:
    state = copy.deepcopy(STATE)
    result = apply_edits(
        state,
        [
            {"op": "append", "path": ["plan", "todo"], "values": ["c"]},
            {"op": "append", "path": ["plan", "todo"], "values": ["d"]},
            {"op": "delete", "path": ["plan", "phase"]},
        ],
    )
    assert state == STATE
    assert result["plan"] == {"todo": ["a", "b", "c", "d"]}
    assert result["steps"] is state["steps"]  # copied only along the edited paths


def test_a_failing_operation_applies_nothing() -> None:
    state = copy.deepcopy(STATE)
    error = refusal(
        state,
        [
            {"op": "append", "path": ["steps"], "values": ["ship"]},
            {"op": "delete", "path": ["plan", "phase"]},
            {"op": "append", "path": ["goal"], "values": ["x"]},
        ],
    )
    assert error.message.startswith('Operation 3 of 3 (append at ["goal"])')
    assert state == STATE
    assert state["plan"] is not None


def test_a_text_state_becomes_an_object_as_an_update_makes_it() -> None:
    ops = [{"op": "set", "path": ["goal"], "value": "x"}]
    assert apply_edits("old notes", ops) == merge_state("old notes", {"goal": "x"})
    assert apply_edits("", ops) == {"goal": "x"}


def test_values_are_cleaned_like_an_update() -> None:
    result = apply_edits(
        {"l": []},
        [
            {"op": "set", "path": ["v"], "value": ({"__proto__": 1, "ok": (1, 2)},)},
            {"op": "append", "path": ["l"], "values": [{"constructor": {}, "k": 1}]},
        ],
    )
    assert result == {"l": [{"k": 1}], "v": [{"ok": [1, 2]}]}


def test_edited_keys_are_the_top_level_keys_in_order() -> None:
    ops = parse_edit_arguments(
        call(
            {"op": "delete", "path": ["plan", "x"]},
            {"op": "set", "path": ["goal"], "value_json": '"a"'},
            {"op": "remove", "path": ["plan", "todo"], "index": 0},
        )
    )
    assert edited_keys(ops) == ["plan", "goal"]


# -- refusals while applying ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("op", "reason", "says"),
    [
        (
            {"op": "append", "path": ["nope"], "values": [1]},
            "edit_path",
            'the scratchpad has no key "nope"',
        ),
        (
            {"op": "remove", "path": ["plan", "gone"], "index": 0},
            "edit_path",
            '["plan"] has no key "gone"',
        ),
        ({"op": "delete", "path": ["plan", "x", "y"]}, "edit_path", '["plan"] has no key "x"'),
        ({"op": "delete", "path": ["count"]}, "edit_path", 'has no key "count"'),
        (
            {"op": "append", "path": ["goal"], "values": [1]},
            "edit_type",
            '["goal"] is a string, not a list',
        ),
        (
            {"op": "remove", "path": ["plan"], "value": 1},
            "edit_type",
            '["plan"] is an object, not a list',
        ),
        (
            {"op": "remove", "path": ["steps"], "value": "ship"},
            "edit_item",
            'no item equal to "ship"',
        ),
        ({"op": "remove", "path": ["steps"], "index": 3}, "edit_item", "index 3 is out of range"),
        ({"op": "remove", "path": ["steps"], "index": -4}, "edit_item", "0 to 2, or -1 to -3"),
        (
            {"op": "set", "path": ["goal", "x"], "value": 1},
            "edit_path",
            '["goal"] is a string, not an object',
        ),
        (
            {"op": "set", "path": ["steps", "0"], "value": 1},
            "edit_path",
            '["steps"] is a list, not an object',
        ),
    ],
)
def test_a_refused_operation_is_named_with_its_path_and_reason(
    op: dict[str, Any], reason: str, says: str
) -> None:
    state = {key: value for key, value in STATE.items() if key != "count"}
    first = {"op": "set", "path": ["added"], "value": 1}  # applies, then is undone
    error = refusal(state, [first, op])
    assert (error.reason, error.refused) == (reason, "edit")
    path = json.dumps(op["path"])
    assert error.message.startswith(f"Operation 2 of 2 ({op['op']} at {path}): ")
    assert says in error.message
    assert error.message.endswith("None of the operations was applied.")
    hint = EDIT_REASONS[reason].format(tool="notes_edit")
    assert refusal_text(error, "notes_edit") == f"{error.message} {hint}"


def test_a_missing_key_message_lists_the_keys_there() -> None:
    error = refusal(
        {"plan": {"steps": [], "goal": ""}}, [{"op": "delete", "path": ["plan", "stpes"]}]
    )
    assert '["plan"] has no key "stpes" (its keys: "steps", "goal")' in error.message
    empty = refusal({}, [{"op": "append", "path": ["steps"], "values": [1]}])
    assert "(it is empty); use set to create it" in empty.message
    assert (
        "none: it is empty"
        in refusal({"l": []}, [{"op": "remove", "path": ["l"], "index": 0}]).message
    )


BAD_OPERATIONS = [
    ("not a list", '"operations" is a string, not a list'),
    ([], '"operations" is empty'),
    (["set"], "Operation 2 of 2: it is a string, not an object"),
    ([{"op": "merge", "path": ["a"]}], '"op" is "merge", not append, remove, delete or set'),
    ([{"op": "set", "path": ["a"], "value": 1, "vlaue": 2}], '"vlaue": no such field'),
    ([{"op": "delete"}], 'Operation 2 of 2 (delete): "path" is missing'),
    ([{"op": "delete", "path": "a.b"}], '"path" is "a.b"; write it as a list of keys'),
    ([{"op": "delete", "path": []}], '"path" is []'),
    ([{"op": "delete", "path": ["a", 0]}], '"path" holds 0: every key must be a string'),
    ([{"op": "set", "path": ["__proto__"], "value": 1}], "a key the scratchpad never stores"),
    ([{"op": "delete", "path": ["k"] * (MAX_DEPTH + 1)}], f"more than the {MAX_DEPTH} levels"),
    ([{"op": "set", "path": ["\ud800"], "value": 1}], "lone surrogate"),
    ([{"op": "delete", "path": ["a"], "value": 1}], 'delete takes no "value": leave it out'),
    ([{"op": "set", "path": ["a"], "value": 1, "index": 0}], 'set takes no "index"'),
    ([{"op": "append", "path": ["a"]}], 'append needs "values"'),
    ([{"op": "append", "path": ["a"], "values": []}], 'append needs "values"'),
    ([{"op": "append", "path": ["a"], "values": "x"}], 'append needs "values"'),
    ([{"op": "remove", "path": ["a"]}], "one of them is needed"),
    ([{"op": "remove", "path": ["a"], "value": 1, "index": 0}], "not both"),
    ([{"op": "remove", "path": ["a"], "index": True}], '"index" is true, not an integer'),
    ([{"op": "remove", "path": ["a"], "index": 1.0}], '"index" is 1.0, not an integer'),
    ([{"op": "set", "path": ["a"]}], 'set needs "value"'),
    ([{"op": "set", "path": ["a"], "value": float("nan")}], "nan is not a JSON number"),
    ([{"op": "append", "path": ["a"], "values": [{1: 2}]}], "is a int, not a string"),
]


@pytest.mark.parametrize(("operations", "says"), BAD_OPERATIONS)
def test_malformed_operations_are_refused_before_any_applies(operations: Any, says: str) -> None:
    state = {"a": [1]}
    ops = (
        operations
        if not isinstance(operations, list) or not operations
        else [
            {"op": "append", "path": ["a"], "values": [2]},
            *operations,
        ]
    )
    error = refusal(state, ops)
    assert error.reason == "malformed"
    assert says in error.message
    assert "Nothing was applied" in error.message or "None of the operations" in error.message


def test_depth_allows_what_an_update_allows_and_no_more() -> None:
    def nested(levels: int) -> Any:
        value: Any = "leaf"
        for _ in range(levels):
            value = {"n": value}
        return value

    for path in (["a"], ["a", "b", "c", "d", "e"]):
        room = MAX_DEPTH - len(path)  # levels a value set at path may nest
        fits = apply_edits({}, [{"op": "set", "path": path, "value": nested(room)}])
        assert to_json_value(fits) == fits  # what every store accepts
        error = refusal({}, [{"op": "set", "path": path, "value": nested(room + 1)}])
        assert error.reason == "malformed"
        assert "nesting is deeper" in error.message
    fits = apply_edits(
        {"l": []}, [{"op": "append", "path": ["l"], "values": [nested(MAX_DEPTH - 2)]}]
    )
    assert to_json_value(fits) == fits
    error = refusal({"l": []}, [{"op": "append", "path": ["l"], "values": [nested(MAX_DEPTH - 1)]}])
    assert "nesting is deeper" in error.message


# -- the model's arguments -----------------------------------------------------------------


def test_parse_reads_the_tool_form_into_the_operation_form() -> None:
    ops = parse_edit_arguments(
        call(
            {"op": "append", "path": ["steps"], "values_json": ['"ship"', '{"id": 4}', "null"]},
            {"op": "remove", "path": ["steps"], "value_json": '"plan"'},
            {"op": "remove", "path": ["steps"], "index": -1},
            {"op": "set", "path": ["plan", "phase"], "value_json": "null"},
            {"op": "delete", "path": ["count"]},
        )
    )
    assert ops == [
        {"op": "append", "path": ["steps"], "values": ["ship", {"id": 4}, None]},
        {"op": "remove", "path": ["steps"], "value": "plan"},
        {"op": "remove", "path": ["steps"], "index": -1},
        {"op": "set", "path": ["plan", "phase"], "value": None},
        {"op": "delete", "path": ["count"]},
    ]
    assert apply_edits(STATE, ops) == {
        "goal": "ship it",
        "steps": ["build", "ship", {"id": 4}],
        "plan": {"phase": None, "todo": ["a", "b"]},
    }


def test_parse_takes_decoded_arguments_and_values_sent_as_themselves() -> None:
    """A provider that is not strict may send the value itself rather than its JSON text."""
    ops = parse_edit_arguments(
        {
            "operations": [
                {"op": "set", "path": ["a"], "value_json": {"x": [1, {"__proto__": 2}]}},
                {"op": "append", "path": ["l"], "values_json": [5, '"five"']},
            ]
        }
    )
    assert ops == [
        {"op": "set", "path": ["a"], "value": {"x": [1, {}]}},
        {"op": "append", "path": ["l"], "values": [5, "five"]},
    ]


@pytest.mark.parametrize(
    ("arguments", "says"),
    [
        ("{not json", "The arguments are not valid JSON"),
        ('{"operations": [NaN]}', "NaN is not a JSON number"),
        ("[1]", "The arguments are a JSON array, not an object."),
        ("[" * 100_000, "nested far too deeply"),
        ('{"goal": "x"}', 'The arguments have "goal", which the edit tool does not take'),
        ("{}", '"operations" is missing'),
        (call({"op": "set", "path": ["a"], "value_json": "done"}), "value_json is not JSON text"),
        (call({"op": "set", "path": ["a"], "value_json": "NaN"}), "NaN is not a JSON number"),
        (call({"op": "set", "path": ["a"], "value_json": "[" * 100_000}), "nested far too deeply"),
        (
            call({"op": "append", "path": ["a"], "values_json": ['"ok"', "oops"]}),
            "item 2 of values_json is not JSON text",
        ),
        (
            call({"op": "set", "path": ["a"], "value_json": '"x"', "index": 2}),
            'set takes no "index": make it null',
        ),
        (call({"op": "remove", "path": ["a"]}), 'remove takes "value_json" or "index"'),
        (
            json.dumps({"operations": [{"op": "set", "path": ["a"], "value": 1}]}),
            '"value": no such field; the fields are "op", "path", "value_json", "values_json"',
        ),
    ],
)
def test_parse_refuses_bad_arguments_naming_the_tool(arguments: str, says: str) -> None:
    with pytest.raises(ScratchpadUpdateError) as caught:
        parse_edit_arguments(arguments)
    assert (caught.value.reason, caught.value.refused) == ("malformed", "edit")
    assert says in caught.value.message
    assert "notes_edit" not in caught.value.message
    text = refusal_text(caught.value, "notes_edit")
    assert text.endswith(EDIT_REASONS["malformed"].format(tool="notes_edit"))


def test_a_value_that_is_not_json_text_gets_told_to_quote_it() -> None:
    with pytest.raises(ScratchpadUpdateError) as caught:
        parse_edit_arguments(call({"op": "set", "path": ["plan", "status"], "value_json": "done"}))
    message = caught.value.message
    assert message.startswith('Operation 1 of 1 (set at ["plan", "status"]): value_json is not')
    assert 'written with its quotes, as "\\"done\\""' in message
    assert EDIT_TOOL in refusal_text(caught.value, EDIT_TOOL)


def test_parse_refuses_a_non_object_argument() -> None:
    with pytest.raises(ScratchpadUpdateError, match="are a list, not an object"):
        parse_edit_arguments([1])  # type: ignore[arg-type]


# -- properties ----------------------------------------------------------------------------

KEYS = st.text(max_size=6).filter(lambda key: key not in FORBIDDEN_KEYS) | st.sampled_from(
    ["a", "b", "steps"]
)
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=10)
)
JSON = st.recursive(
    SCALARS,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(KEYS, children, max_size=4),
    max_leaves=20,
)
OBJECTS = st.dictionaries(KEYS, JSON, max_size=6).map(to_json_value)
NOT_OBJECTS = JSON.filter(lambda value: not isinstance(value, dict)).map(to_json_value)
PATHS = st.lists(st.sampled_from(["a", "b", "steps"]), min_size=1, max_size=3)
OPERATION = st.one_of(
    st.fixed_dictionaries(
        {"op": st.just("append"), "path": PATHS, "values": st.lists(JSON, min_size=1, max_size=3)}
    ),
    st.fixed_dictionaries({"op": st.just("remove"), "path": PATHS, "value": JSON}),
    st.fixed_dictionaries({"op": st.just("remove"), "path": PATHS, "index": st.integers(-4, 4)}),
    st.fixed_dictionaries({"op": st.just("delete"), "path": PATHS}),
    st.fixed_dictionaries({"op": st.just("set"), "path": PATHS, "value": JSON}),
)
PROPERTY_SETTINGS = settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


@PROPERTY_SETTINGS
@given(state=OBJECTS, key=KEYS, value=NOT_OBJECTS)
def test_set_at_the_top_is_the_merge_of_that_key(
    state: dict[str, Any], key: str, value: Any
) -> None:
    assert apply_edits(state, [{"op": "set", "path": [key], "value": value}]) == merge_state(
        state, {key: value}
    )


@PROPERTY_SETTINGS
@given(state=OBJECTS.filter(bool), data=st.data())
def test_delete_then_set_round_trips(state: dict[str, Any], data: st.DataObject) -> None:
    key = data.draw(st.sampled_from(sorted(state)))
    ops = [{"op": "delete", "path": [key]}, {"op": "set", "path": [key], "value": state[key]}]
    assert apply_edits(state, ops) == state
    assert key not in apply_edits(state, ops[:1])


@PROPERTY_SETTINGS
@given(state=OBJECTS, operations=st.lists(OPERATION, min_size=1, max_size=5))
def test_edits_apply_whole_or_not_at_all_and_never_change_the_input(
    state: dict[str, Any], operations: list[dict[str, Any]]
) -> None:
    before = copy.deepcopy(state)
    refused: ScratchpadUpdateError | None = None
    try:
        result = apply_edits(state, operations)
    except ScratchpadUpdateError as error:
        refused = error
    if refused is None:
        assert to_json_value(result) == result  # storable as it is
    else:
        assert refused.reason in EDIT_REASONS
        assert refused.message.startswith("Operation ")
    assert state == before


@PROPERTY_SETTINGS
@given(state=OBJECTS, value=JSON)
def test_the_tool_form_carries_any_json_value(state: dict[str, Any], value: Any) -> None:
    arguments = call({"op": "set", "path": ["v"], "value_json": json.dumps(value)})
    ops = parse_edit_arguments(arguments)
    assert apply_edits(state, ops) == apply_edits(
        state, [{"op": "set", "path": ["v"], "value": value}]
    )
