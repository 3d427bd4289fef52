"""Layer attributes, ``ScratchpadConfig`` and the template checks of SPEC.md section 1."""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict
from typing_extensions import TypedDict

from noetic_scratchpad import (
    Budget,
    LayerData,
    LayerFunction,
    ScratchpadConfig,
    ScratchpadConfigError,
    ScratchpadLayer,
    Slot,
    scratchpad,
)


class TaskNotes(BaseModel):
    model_config = ConfigDict(extra="forbid")

    currentGoal: str
    completedSteps: list[str]
    blockers: list[str]


def test_layer_identity() -> None:
    """id, name, slot and budget are the contract's constants."""
    layer = scratchpad()

    assert isinstance(layer, ScratchpadLayer)
    assert layer.id == "scratchpad"
    assert layer.name == "Scratchpad"
    assert layer.slot is Slot.SCRATCHPAD
    assert layer.slot == 100
    assert layer.budget == Budget(min=200, max=1500)


def test_slot_members_and_values() -> None:
    """Slot is an IntEnum with exactly the contract's members, in prompt order."""
    assert issubclass(Slot, int)
    assert {slot.name: slot.value for slot in Slot} == {
        "REMINDER": 80,
        "STEERING": 90,
        "SCRATCHPAD": 100,
        "ENTITY": 150,
        "OBSERVATIONS": 200,
        "PROCEDURAL": 250,
        "EPISODIC": 300,
        "RAG": 350,
        "SEMANTIC_RECALL": 400,
    }
    assert sorted(Slot)[0] is Slot.REMINDER


def test_budget_checks_its_bounds() -> None:
    """A Budget needs 0 <= min <= max and is frozen."""
    with pytest.raises(ValueError, match="min <= max"):
        Budget(min=10, max=5)
    with pytest.raises(ValueError, match="min <= max"):
        Budget(min=-1, max=5)
    with pytest.raises(dataclasses.FrozenInstanceError):
        Budget(1, 2).max = 3  # type: ignore[misc]


def test_default_config() -> None:
    """``scratchpad()`` is thread-scoped, schemaless, writable, with safe limits."""
    layer = scratchpad()

    assert layer.config == ScratchpadConfig()
    assert layer.scope == "thread"
    assert (layer.config.schema, layer.config.template, layer.config.read_only) == (
        None,
        None,
        False,
    )
    assert layer.config.max_state_bytes == 128 * 1024
    assert layer.config.write_timeout == 30.0
    assert layer.config.read_timeout == 30.0


def test_three_ways_to_configure() -> None:
    """Keywords, a config object, and a config object with keyword overrides."""
    by_keywords = scratchpad(scope="resource", read_only=True)
    config = ScratchpadConfig(scope="thread", template="Goal: ?")
    by_config = scratchpad(config)
    overridden = scratchpad(config, scope="resource")

    assert (by_keywords.scope, by_keywords.config.read_only) == ("resource", True)
    assert by_config.config is config
    assert by_config.initial_state() == "Goal: ?"
    assert (overridden.scope, overridden.config.template) == ("resource", "Goal: ?")
    assert config.scope == "thread"


@pytest.mark.parametrize("scope", ["global", "", "Thread", None])
def test_bad_scope_is_a_value_error_at_construction(scope: Any) -> None:
    """Any scope but "thread" or "resource" fails at once, as a ValueError."""
    with pytest.raises(ValueError, match="scope must be 'thread' or 'resource'") as info:
        scratchpad(scope=scope)
    assert isinstance(info.value, ScratchpadConfigError)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"max_state_bytes": 1}, "max_state_bytes must be at least 2"),
        ({"write_timeout": 0}, "write_timeout must be positive"),
        ({"colour": "red"}, "unexpected keyword argument 'colour'"),
        ({"max_state_bytes": "big"}, "max_state_bytes must be an int, not 'big'"),
        ({"max_state_bytes": True}, "max_state_bytes must be an int, not True"),
        ({"write_timeout": "soon"}, "write_timeout must be a number of seconds or None"),
        ({"read_timeout": -1}, "read_timeout must be positive"),
        ({"read_timeout": True}, "read_timeout must be a number of seconds or None, not True"),
        ({"read_only": "yes"}, "read_only must be True or False, not 'yes'"),
        ({"template": {"goal": "?"}}, r"template must be text .* not a dict"),
    ],
)
def test_bad_limits_and_unknown_options_are_config_errors(
    options: dict[str, Any], message: str
) -> None:
    """Limits and types are checked and unknown options named at construction, whether the
    options come alone or override a config object."""
    with pytest.raises(ScratchpadConfigError, match=message):
        scratchpad(**options)
    with pytest.raises(ScratchpadConfigError, match=message):
        scratchpad(ScratchpadConfig(), **options)


def test_provides_keys_and_types() -> None:
    """``provides`` has the data ``snapshot`` and the functions ``update`` and ``read``
    (the state may outgrow the block's budget); a state kept within the budget has no
    part to read."""
    layer = scratchpad()

    assert set(layer.provides) == {"snapshot", "update", "read"}
    assert set(scratchpad(max_state_bytes=1500).provides) == {"snapshot", "update"}
    assert isinstance(layer.provides["snapshot"], LayerData)
    update = layer.provides["update"]
    assert isinstance(update, LayerFunction)
    assert update.exposed is True
    assert update.description.startswith("Update your scratchpad")
    assert update.parameters == {"type": "object", "additionalProperties": True}
    assert inspect.iscoroutinefunction(update.execute)


def test_hooks_are_coroutines_with_keyword_only_arguments() -> None:
    """init, recall, store and on_spawn are coroutine functions taking keywords only."""
    hooks = scratchpad().hooks
    for name in ("init", "recall", "store", "on_spawn"):
        hook = getattr(hooks, name)
        assert inspect.iscoroutinefunction(hook), name
        kinds = {p.kind for p in inspect.signature(hook).parameters.values()}
        assert kinds == {inspect.Parameter.KEYWORD_ONLY}, name


def test_read_only_hides_the_tool() -> None:
    """With ``read_only=True`` the update function is not exposed to the model."""
    update = scratchpad(read_only=True).provides["update"]

    assert isinstance(update, LayerFunction)
    assert update.exposed is False


def test_string_template_is_the_initial_text() -> None:
    """Without a schema the template is the text itself; no template is ""."""
    assert scratchpad(template="Goal: ?\nSteps:").initial_state() == "Goal: ?\nSteps:"
    assert scratchpad().initial_state() == ""
    assert scratchpad(template='{"not": "parsed"}').initial_state() == '{"not": "parsed"}'


def test_schema_template_is_a_json_object_checked_at_construction() -> None:
    """With a schema the template is parsed once; a partial object that fits is fine."""
    layer = scratchpad(schema=TaskNotes, template='{"currentGoal": "?", "constructor": 1}')

    assert layer.initial_state() == {"currentGoal": "?"}
    assert scratchpad(schema=TaskNotes).initial_state() == {}


@pytest.mark.parametrize(
    ("template", "message"),
    [
        ("Goal: ?", "it is not JSON"),
        ('{"currentGoal": NaN}', "NaN is not a JSON number"),
        ('{"currentGoal": 1e400}', "inf is not a JSON number"),
        ("[1, 2]", "must be a JSON object, not a array"),
        ('"text"', "must be a JSON object, not a string"),
        ('{"currentGoal": 5}', "the template does not fit the schema: currentGoal"),
        ('{"unknown": 1}', "the template does not fit the schema: unknown"),
        ("[" * 100_000, "it is not JSON"),
    ],
)
def test_bad_schema_template_is_a_config_error_at_once(template: str, message: str) -> None:
    """A template that is not a JSON object fitting the schema fails at construction."""
    with pytest.raises(ScratchpadConfigError, match=message):
        scratchpad(schema=TaskNotes, template=template)


def test_initial_state_is_a_fresh_copy() -> None:
    """Changing one initial state never changes the next one."""
    layer = scratchpad(schema=TaskNotes, template='{"completedSteps": ["a"]}')
    first = layer.initial_state()
    assert isinstance(first, dict)
    first["completedSteps"].append("b")

    assert layer.initial_state() == {"completedSteps": ["a"]}


class TypedNotes(TypedDict):
    goal: str


@dataclasses.dataclass
class DataNotes:
    goal: str


def test_typeddict_and_dataclass_are_accepted_schemas() -> None:
    """Any object-shaped type TypeAdapter takes can be the schema."""
    for schema in (TypedNotes, DataNotes, dict[str, int]):
        assert scratchpad(schema=schema).initial_state() == {}


@pytest.mark.parametrize("schema", [int, list[str], str | None])
def test_non_object_schema_is_a_config_error(schema: Any) -> None:
    """A schema whose JSON form is not an object is refused at construction."""
    with pytest.raises(ScratchpadConfigError, match="must describe a JSON object"):
        scratchpad(schema=schema)


def test_schema_pydantic_cannot_use_is_a_config_error() -> None:
    """A type pydantic refuses (here an arbitrary class) is a config error, not pydantic's."""

    class Opaque:
        pass

    with pytest.raises(ScratchpadConfigError, match="unusable scratchpad schema"):
        scratchpad(schema=Opaque)
