"""One parser for every tool path's arguments, with one rule for NaN and Infinity."""

from __future__ import annotations

from typing import Any

import pytest

from noetic_scratchpad import Agent, AgentHarness, ScriptedModel, Tool, _json, scratchpad
from noetic_scratchpad.adapters.anthropic import _input_object
from noetic_scratchpad.items import FunctionCall, FunctionCallOutput, Message
from noetic_scratchpad.layer import parse_arguments


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("{", "json"),
        ('{"n": NaN}', "json"),
        ('{"n": Infinity}', "json"),
        ('{"n": -Infinity}', "json"),
        ("[1]", "type"),
        ('"text"', "type"),
        ("[" * 100_000 + "]" * 100_000, "depth"),
    ],
)
def test_arguments_that_are_not_an_object_are_refused_alike_everywhere(
    text: str, kind: str
) -> None:
    with pytest.raises(_json.ArgumentsError) as caught:
        _json.loads_arguments(text)
    assert caught.value.kind == kind
    with pytest.raises(ValueError, match="The arguments"):
        parse_arguments(text)
    assert _input_object(text) == {"_raw_arguments": text}


def test_empty_arguments_are_an_empty_object() -> None:
    assert _json.loads_arguments("") == {}
    assert parse_arguments("") == {}


@pytest.mark.asyncio
async def test_an_agent_tool_called_with_nan_gets_an_error_output() -> None:
    """NaN is refused on an agent tool's path as on the scratchpad's (the tool path used
    to fall back to a parser that accepted it)."""
    seen: list[dict[str, Any]] = []

    async def record(args: dict[str, Any], ctx: Any) -> str:
        seen.append(args)
        return "ok"

    tool = Tool("record", "Record a number.", {"type": "object"}, record)
    model = ScriptedModel(
        [
            [FunctionCall(call_id="c1", name="record", arguments='{"n": NaN}')],
            [Message(role="assistant", content="done")],
        ]
    )
    harness = AgentHarness(
        name="t",
        agent=Agent(model=model, tools=[tool]),
        params={},
        context_layers=[scratchpad()],
    )
    async with harness:
        await harness.run("go", thread_id="t1")
    outputs = [item for item in model.requests[1].items if isinstance(item, FunctionCallOutput)]
    assert outputs[0].is_error
    assert "NaN is not a JSON number" in outputs[0].output
    assert seen == []
