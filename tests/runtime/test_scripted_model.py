"""ScriptedModel: turns as items, strings, responses or functions of the request."""

from __future__ import annotations

import pytest

from noetic_scratchpad.items import FunctionCall, LLMResponse, Message
from noetic_scratchpad.runtime import ModelRequest, ScriptedModel, ScriptExhaustedError


def request(step: int = 1) -> ModelRequest:
    return ModelRequest(items=[Message(role="user", content="hi")], step=step, execution_id="e1")


@pytest.mark.asyncio
async def test_turns_of_every_kind_play_in_order_and_requests_are_kept() -> None:
    """Lists, strings, responses, sync and async functions each become one response."""

    async def later(req: ModelRequest) -> str:
        return f"step {req.step}"

    call = FunctionCall(call_id="c", name="scratchpad/update", arguments="{}")
    model = ScriptedModel(
        [
            [call],
            "plain",
            LLMResponse(items=[Message(role="assistant", content="r")], usage={"total": 3}),
            lambda req: [Message(role="assistant", content=req.messages("user")[0])],
            later,
        ]
    )
    requests = [request(step) for step in range(1, 6)]
    responses = [await model(req) for req in requests]

    assert [r.items for r in responses] == [
        [call],
        [Message(role="assistant", content="plain")],
        [Message(role="assistant", content="r")],
        [Message(role="assistant", content="hi")],
        [Message(role="assistant", content="step 5")],
    ]
    assert responses[2].usage == {"total": 3}
    assert model.requests == requests
    assert model.remaining == 0


@pytest.mark.asyncio
async def test_running_out_of_turns_says_so() -> None:
    """A request past the script raises ScriptExhaustedError naming the count and step."""
    model = ScriptedModel(["only"])
    await model(request())
    with pytest.raises(ScriptExhaustedError, match=r"has 1 turn\(s\).*request 2 \(step 7"):
        await model(request(7))
    assert len(model.requests) == 1


@pytest.mark.asyncio
async def test_a_turn_returning_something_else_is_a_type_error() -> None:
    """A turn must produce items, a string or a response."""
    model = ScriptedModel([lambda req: 42])
    with pytest.raises(TypeError, match="not int"):
        await model(request())
