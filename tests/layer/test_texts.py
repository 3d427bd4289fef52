"""What the model is told about a scratchpad is in its schema's words, or the user's."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, Field

from noetic_scratchpad import ScratchpadConfigError, scratchpad
from noetic_scratchpad.core import ScratchpadCore
from noetic_scratchpad.layer import LayerFunction


class Ticket(BaseModel):
    """Notes on the customer's support ticket"""

    customer: str = Field("", description="Who wrote in.")
    promised: list[str] = Field([], description="What we promised them, in order.")
    refunded: bool = False


def update_description(**options: object) -> str:
    provided = scratchpad(**options).provides["update"]
    assert isinstance(provided, LayerFunction)
    return provided.description


def test_the_update_tool_names_the_schemas_fields_and_says_what_the_notes_are() -> None:
    assert update_description(schema=Ticket) == (
        "Update your scratchpad: Notes on the customer's support ticket. Its fields: "
        "customer, promised, refunded. Pass only the fields to change; objects merge into "
        "what is there, lists and other values replace it."
    )


def test_without_a_schema_the_model_chooses_the_keys() -> None:
    assert update_description() == (
        "Update your scratchpad: your notes for this task, a JSON object whose keys you "
        "choose (for example the goal, the steps done and the blockers). Pass only the keys "
        "to change; objects merge into what is there, lists and other values replace it."
    )


def test_a_description_of_ones_own_replaces_it_and_bad_ones_are_refused() -> None:
    assert update_description(description="Keep the ticket's facts here.") == (
        "Keep the ticket's facts here."
    )
    with pytest.raises(ScratchpadConfigError, match="description must be non-empty text"):
        scratchpad(description="  ")
    with pytest.raises(ScratchpadConfigError, match="instructions must be non-empty text"):
        scratchpad(instructions=3)


def test_the_fields_descriptions_reach_the_model_and_titles_do_not() -> None:
    provided = scratchpad(schema=Ticket).provides["update"]
    assert isinstance(provided, LayerFunction)
    properties = provided.parameters["properties"]
    assert properties["promised"]["description"] == "What we promised them, in order."
    assert "title" not in repr(provided.parameters)


def test_instructions_speak_of_the_fields_and_name_the_hosts_tools() -> None:
    texts = scratchpad(schema=Ticket).texts
    assert texts.instructions_for("notes_read", "notes_update") == (
        "A scratchpad: your working notes for the task, kept between conversations. Call "
        "notes_read when you start or resume a task, and notes_update whenever your notes "
        "change (customer, promised, refunded), passing only what changes."
    )
    own = scratchpad(instructions="Read {read_tool} first; write with {update_tool}.").texts
    assert own.instructions_for("r", "u") == "Read r first; write with u."


@pytest.mark.parametrize(
    ("schema", "example"),
    [(Ticket, '{"customer": "..."}'), (None, '{"currentGoal": "..."}')],
)
@pytest.mark.asyncio
async def test_a_malformed_update_is_answered_with_an_example_in_the_schemas_words(
    schema: type[BaseModel] | None, example: str
) -> None:
    async with ScratchpadCore(scratchpad(schema=schema)) as core:
        result = await core.call("t1", "update", "not json", tool="notes_update")
    assert not result.ok
    assert result.text.endswith(
        f"Call notes_update with a JSON object of the fields to change, for example {example}."
    )


def test_the_example_takes_the_first_fields_type() -> None:
    class Steps(BaseModel):
        steps: list[str] = []

    class Count(BaseModel):
        count: int | None = None

    assert scratchpad(schema=Steps).texts.example == '{"steps": ["..."]}'
    assert scratchpad(schema=Count).texts.example == '{"count": 1}'
