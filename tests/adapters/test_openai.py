"""The OpenAI adapters against the ``openai`` SDK's own types, with no network.

Requests go through the real ``AsyncOpenAI`` client into a mock transport, so the
SDK serializes what the adapter built and parses what a server would answer.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from pydantic import TypeAdapter

openai = pytest.importorskip("openai")

# Newer openai SDKs run on httpx2 and older ones on httpx; use whichever the SDK brought.
try:
    import httpx2 as httpx
except ImportError:
    import httpx  # type: ignore[no-redef]

from openai.types.chat import (  # noqa: E402
    ChatCompletion,
    ChatCompletionAssistantMessageParam,
    ChatCompletionFunctionToolParam,
    ChatCompletionToolMessageParam,
)
from openai.types.responses import (  # noqa: E402
    EasyInputMessageParam,
    FunctionToolParam,
    Response,
    ResponseFunctionToolCallParam,
)
from openai.types.responses.response_input_param import FunctionCallOutput as OutputParam  # noqa: E402

from noetic_scratchpad import scratchpad  # noqa: E402
from noetic_scratchpad.adapters import (  # noqa: E402
    OpenAIChatModel,
    OpenAIResponsesModel,
    ToolNameMap,
    chat_messages,
    chat_tools,
    parse_chat_completion,
    parse_response,
    responses_input,
    responses_tools,
)
from noetic_scratchpad.items import FunctionCall, FunctionCallOutput, Message  # noqa: E402
from noetic_scratchpad.runtime import Agent, AgentHarness, ToolSpec  # noqa: E402
from tests.runtime.helpers import TaskNotes  # noqa: E402

UPDATE_SPEC = scratchpad(schema=TaskNotes).provides["update"]
SPECS = [
    ToolSpec("scratchpad/update", "Update your notes.", UPDATE_SPEC.parameters),  # type: ignore[union-attr]
    ToolSpec("lookup", "Look up a word.", {"type": "object", "properties": {}}, strict=True),
]
NAMES = ToolNameMap(spec.name for spec in SPECS)
HISTORY = [
    Message(role="system", content="Be brief."),
    Message(role="developer", content="<scratchpad>\nx\n</scratchpad>"),
    Message(role="user", content="hi"),
    Message(role="assistant", content="Let me note that."),
    FunctionCall(call_id="c1", name="scratchpad/update", arguments='{"currentGoal": "g"}'),
    FunctionCallOutput(call_id="c1", output="bad field", is_error=True),
]


def strict_validate(kind: Any, value: dict[str, Any]) -> None:
    """``value`` validates as the SDK TypedDict ``kind`` and nothing in it was dropped."""
    adapter = TypeAdapter(kind)
    assert adapter.dump_python(adapter.validate_python(value), mode="json") == value


def test_responses_tools_are_function_tool_params_and_the_scratchpad_is_not_strict() -> None:
    """Each tool is a valid ``FunctionToolParam``; the update tool is ``strict: False``."""
    tools = responses_tools(SPECS, NAMES)
    for tool in tools:
        strict_validate(FunctionToolParam, tool)
    assert [(t["name"], t["strict"]) for t in tools] == [
        ("scratchpad__update", False),
        ("lookup", True),
    ]
    assert tools[0]["parameters"]["properties"]["blockers"]["type"] == "array"
    assert "required" not in tools[0]["parameters"]


def test_responses_input_items_are_sdk_input_params() -> None:
    """Messages, calls and outputs validate as the SDK's input item params; an error output
    is marked for the model, since the API has no error flag."""
    converted = responses_input(HISTORY, NAMES)
    for message in converted[:4]:
        strict_validate(EasyInputMessageParam, message)
    strict_validate(ResponseFunctionToolCallParam, converted[4])
    strict_validate(OutputParam, converted[5])
    assert converted[4]["name"] == "scratchpad__update"
    assert converted[5] == {
        "type": "function_call_output",
        "call_id": "c1",
        "output": "Error: bad field",
    }


def test_parse_response_maps_names_back() -> None:
    """A parsed SDK ``Response`` becomes an assistant message and a call with our name."""
    response = Response.model_validate(
        responses_payload(
            [
                {"type": "reasoning", "id": "rs_1", "summary": []},
                message_output("Noting it."),
                function_call_output("call_1", "scratchpad__update", '{"blockers": []}'),
            ]
        )
    )
    parsed = parse_response(response, NAMES)
    assert parsed.items == [
        Message(role="assistant", content="Noting it."),
        FunctionCall(call_id="call_1", name="scratchpad/update", arguments='{"blockers": []}'),
    ]
    assert parsed.usage["total_tokens"] == 15


def test_chat_tools_and_messages_are_sdk_params() -> None:
    """Chat tools validate as ``ChatCompletionFunctionToolParam``; a call joins the assistant
    message before it; an output is a tool message."""
    for tool in chat_tools(SPECS, NAMES):
        strict_validate(ChatCompletionFunctionToolParam, tool)
    messages = chat_messages(HISTORY, NAMES)
    assert [m["role"] for m in messages] == ["system", "developer", "user", "assistant", "tool"]
    strict_validate(ChatCompletionAssistantMessageParam, messages[3])
    strict_validate(ChatCompletionToolMessageParam, messages[4])
    assert messages[3]["tool_calls"] == [
        {
            "id": "c1",
            "type": "function",
            "function": {"name": "scratchpad__update", "arguments": '{"currentGoal": "g"}'},
        }
    ]
    alone = chat_messages([HISTORY[4]], NAMES)
    strict_validate(ChatCompletionAssistantMessageParam, alone[0])
    assert alone[0]["content"] is None


def test_parse_chat_completion_maps_names_back() -> None:
    """A parsed ``ChatCompletion`` with text and a tool call becomes our items."""
    completion = ChatCompletion.model_validate(
        chat_payload("On it.", [("t1", "scratchpad__update", "{}")])
    )
    parsed = parse_chat_completion(completion, NAMES)
    assert parsed.items == [
        Message(role="assistant", content="On it."),
        FunctionCall(call_id="t1", name="scratchpad/update", arguments="{}"),
    ]
    assert parsed.usage["prompt_tokens"] == 10


# -- end to end through the SDK ------------------------------------------------------------


def message_output(text: str) -> dict[str, Any]:
    return {
        "type": "message",
        "id": "msg_1",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def function_call_output(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {
        "type": "function_call",
        "id": f"fc_{call_id}",
        "call_id": call_id,
        "name": name,
        "arguments": arguments,
        "status": "completed",
    }


def responses_payload(output: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "id": "resp_1",
        "object": "response",
        "created_at": 0,
        "model": "test-model",
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "status": "completed",
        "usage": {
            "input_tokens": 10,
            "output_tokens": 5,
            "total_tokens": 15,
            "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0},
        },
    }


def chat_payload(text: str | None, calls: list[tuple[str, str, str]]) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if calls:
        message["tool_calls"] = [
            {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
            for i, n, a in calls
        ]
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": "test-model",
        "choices": [{"index": 0, "finish_reason": "stop", "message": message}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


def mock_client(answers: list[dict[str, Any]], sent: list[dict[str, Any]]) -> Any:
    """An ``AsyncOpenAI`` whose server answers ``answers`` in turn and records each body."""

    def handle(request: httpx.Request) -> httpx.Response:
        sent.append(json.loads(request.content))
        return httpx.Response(200, json=answers[len(sent) - 1])

    return openai.AsyncOpenAI(
        api_key="test",
        base_url="http://openai.test/v1",
        http_client=httpx.AsyncClient(transport=httpx.MockTransport(handle)),
        max_retries=0,
    )


ModelFactory = Callable[[Any], Any]


@pytest.mark.asyncio
@pytest.mark.parametrize("placement", ["end", "start", None])
async def test_a_run_through_the_responses_api(placement: str | None) -> None:
    """The harness drives the real SDK: the update tool goes out as ``scratchpad__update``
    (non-strict), the call comes back as ``scratchpad/update`` and lands once, and the
    next request carries the call's output and the ``<scratchpad>`` block: last by default
    (``placement="end"``), after the instructions with ``placement="start"``."""
    sent: list[dict[str, Any]] = []
    client = mock_client(
        [
            responses_payload(
                [function_call_output("call_1", "scratchpad__update", '{"currentGoal": "ship"}')]
            ),
            responses_payload([message_output("Noted.")]),
        ],
        sent,
    )
    model = OpenAIResponsesModel(client, "test-model", temperature=0)
    options = {} if placement is None else {"placement": placement}
    harness = AgentHarness(
        "a",
        Agent(model=model, instructions="Be brief."),
        {},
        [scratchpad(schema=TaskNotes)],
        **options,  # type: ignore[arg-type]
    )
    async with harness:
        result = await harness.run("Ship it", thread_id="t")
    await client.close()

    assert result.output == "Noted."
    assert result.states["scratchpad"] == {"currentGoal": "ship"}
    first, second = sent
    assert first["model"] == "test-model"
    assert first["temperature"] == 0
    assert [(t["name"], t["strict"]) for t in first["tools"]] == [
        ("scratchpad__update", False),
        ("scratchpad__read", True),  # strict: its schema is made for it
    ]
    block = {
        "type": "message",
        "role": "developer",
        "content": '<scratchpad>\n{\n  "currentGoal": "ship"\n}\n</scratchpad>',
    }
    instructions = {"type": "message", "role": "system", "content": "Be brief."}
    conversation = [{"type": "message", "role": "user", "content": "Ship it"}]
    if placement == "start":
        assert second["input"][:3] == [instructions, block, *conversation]
    else:
        assert second["input"][:2] == [instructions, *conversation]
        assert second["input"][-1] == block
        second["input"].pop()
    assert second["input"][-2:] == [
        {
            "type": "function_call",
            "call_id": "call_1",
            "name": "scratchpad__update",
            "arguments": '{"currentGoal": "ship"}',
        },
        {
            "type": "function_call_output",
            "call_id": "call_1",
            "output": "Scratchpad updated (currentGoal).",
        },
    ]


@pytest.mark.asyncio
@pytest.mark.parametrize("placement", ["end", "start", None])
async def test_a_run_through_chat_completions(placement: str | None) -> None:
    """The same round trip through ``chat.completions``: tool calls and tool messages; the
    block, once there are notes, is the last message by default (``placement="end"``),
    and the first with ``placement="start"`` (this agent has no instructions)."""
    sent: list[dict[str, Any]] = []
    client = mock_client(
        [
            chat_payload(None, [("t1", "scratchpad__update", '{"blockers": "x"}')]),
            chat_payload(None, [("t2", "scratchpad__update", '{"blockers": ["x"]}')]),
            chat_payload("Done.", []),
        ],
        sent,
    )
    harness = AgentHarness(
        "a",
        Agent(model=OpenAIChatModel(client, "test-model")),
        {},
        [scratchpad(schema=TaskNotes)],
        **({} if placement is None else {"placement": placement}),  # type: ignore[arg-type]
    )
    async with harness:
        result = await harness.run("go", thread_id="t")
    await client.close()

    assert result.output == "Done."
    assert result.states["scratchpad"] == {"blockers": ["x"]}
    assert sent[0]["tools"][0]["function"]["name"] == "scratchpad__update"
    assert sent[0]["tools"][0]["function"]["strict"] is False
    rejected = sent[1]["messages"][-1]  # nothing stored yet: no block
    assert rejected["role"] == "tool"
    assert rejected["tool_call_id"] == "t1"
    assert rejected["content"].startswith("Error: The update does not fit the scratchpad's schema")
    block = {
        "role": "developer",
        "content": '<scratchpad>\n{\n  "blockers": [\n    "x"\n  ]\n}\n</scratchpad>',
    }
    messages = sent[2]["messages"]
    assert messages.count(block) == 1
    if placement == "start":
        assert messages[:2] == [block, {"role": "user", "content": "go"}]
    else:
        assert messages[0] == {"role": "user", "content": "go"}
        assert messages[-1] == block
        assert (messages[-2]["role"], messages[-2]["tool_call_id"]) == ("tool", "t2")


@pytest.mark.asyncio
async def test_a_refusal_names_the_tool_as_the_provider_sent_it() -> None:
    """The model sees ``scratchpad__update``; the text that tells it how to fix a refused
    call must name that tool, not our internal ``scratchpad/update``."""
    sent: list[dict[str, Any]] = []
    client = mock_client(
        [
            responses_payload(
                [function_call_output("call_1", "scratchpad__update", '{"currentGoal": 7}')]
            ),
            responses_payload([message_output("Noted.")]),
        ],
        sent,
    )
    harness = AgentHarness(
        "a", Agent(model=OpenAIResponsesModel(client, "m")), {}, [scratchpad(schema=TaskNotes)]
    )
    async with harness:
        await harness.run("Ship it", thread_id="t")
    await client.close()

    output = sent[1]["input"][-1]
    assert output["type"] == "function_call_output"
    assert "call scratchpad__update again" in output["output"]
    assert "scratchpad/update" not in output["output"]


EDIT_CALL = json.dumps(
    {
        "operations": [
            {
                "op": "append",
                "path": ["completedSteps"],
                "value_json": None,
                "values_json": ['"docs"'],
                "index": None,
            },
            {
                "op": "delete",
                "path": ["blockers"],
                "value_json": None,
                "values_json": None,
                "index": None,
            },
        ]
    }
)


@pytest.mark.asyncio
@pytest.mark.parametrize("api", ["responses", "chat"])
async def test_the_edit_tool_appends_and_deletes_through_openai(api: str) -> None:
    """``scratchpad/edit`` goes out strict as ``scratchpad__edit``; the model's call
    appends a step and deletes a key in one write."""
    sent: list[dict[str, Any]] = []
    if api == "responses":
        answers = [
            responses_payload([function_call_output("c1", "scratchpad__edit", EDIT_CALL)]),
            responses_payload([message_output("Done.")]),
        ]
        model: Any = OpenAIResponsesModel(mock_client(answers, sent), "m")
    else:
        answers = [
            chat_payload(None, [("c1", "scratchpad__edit", EDIT_CALL)]),
            chat_payload("Done.", []),
        ]
        model = OpenAIChatModel(mock_client(answers, sent), "m")
    harness = AgentHarness("a", Agent(model=model), {}, [scratchpad(edit_tool=True)])
    async with harness:
        await harness.update_state(
            "scratchpad", {"completedSteps": ["tests"], "blockers": ["none"]}, thread_id="t"
        )
        result = await harness.run("go", thread_id="t")
    await model.client.close()

    assert result.states["scratchpad"] == {"completedSteps": ["tests", "docs"]}
    tools = sent[0]["tools"]
    if api == "responses":
        edit = next(tool for tool in tools if tool["name"] == "scratchpad__edit")
        strict_validate(FunctionToolParam, edit)
    else:
        edit = next(t["function"] for t in tools if t["function"]["name"] == "scratchpad__edit")
    assert edit["strict"] is True
