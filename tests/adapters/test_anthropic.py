"""The Anthropic adapter against the ``anthropic`` SDK's own types, with no network."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import TypeAdapter

anthropic = pytest.importorskip("anthropic")
# Newer anthropic SDKs run on httpx2 and refuse an httpx client; older ones use httpx.
try:
    import httpx2 as hx
except ImportError:  # pragma: no cover - depends on the installed SDK
    import httpx as hx  # type: ignore[no-redef]

from anthropic.types import Message as SdkMessage  # noqa: E402
from anthropic.types import (  # noqa: E402
    TextBlockParam,
    ToolParam,
    ToolResultBlockParam,
    ToolUseBlockParam,
)

from noetic_scratchpad import scratchpad  # noqa: E402
from noetic_scratchpad.adapters import (  # noqa: E402
    AnthropicModel,
    ToolNameMap,
    anthropic_messages,
    anthropic_tools,
    parse_message,
)
from noetic_scratchpad.items import FunctionCall, FunctionCallOutput, Message  # noqa: E402
from noetic_scratchpad.runtime import Agent, AgentHarness, ToolSpec  # noqa: E402
from tests.runtime.helpers import TaskNotes  # noqa: E402

SPECS = [
    ToolSpec("scratchpad/update", "Update your notes.", {"type": "object", "properties": {}}),
    ToolSpec("lookup", "Look up.", {"type": "object", "properties": {}}, strict=True),
]
NAMES = ToolNameMap(spec.name for spec in SPECS)


def sdk_valid(kind: Any, value: dict[str, Any]) -> bool:
    """``value`` validates as the SDK TypedDict ``kind`` with nothing dropped."""
    adapter = TypeAdapter(kind)
    return bool(adapter.dump_python(adapter.validate_python(value), mode="json") == value)


BLOCK_PARAMS = {
    "text": TextBlockParam,
    "tool_use": ToolUseBlockParam,
    "tool_result": ToolResultBlockParam,
}


def valid_message(message: dict[str, Any]) -> bool:
    """A ``MessageParam`` whose every block validates as the SDK's param for its type.

    (Validating the whole ``MessageParam`` union at once consumes its ``Iterable`` content
    in pydantic, so blocks are checked one by one.)"""
    return (
        set(message) == {"role", "content"}
        and message["role"] in ("user", "assistant")
        and all(sdk_valid(BLOCK_PARAMS[block["type"]], block) for block in message["content"])
    )


def test_tools_are_tool_params_and_only_strict_tools_say_so() -> None:
    """Each tool is a valid ``ToolParam``; the update tool carries no ``strict`` (the API's
    non-strict default) and a strict tool carries ``strict: True``."""
    tools = anthropic_tools(SPECS, NAMES)
    assert all(sdk_valid(ToolParam, tool) for tool in tools)
    assert tools[0] == {
        "name": "scratchpad__update",
        "description": "Update your notes.",
        "input_schema": {"type": "object", "properties": {}},
    }
    assert tools[1]["strict"] is True


def test_messages_put_instructions_in_system_and_alternate_roles() -> None:
    """System and developer text go to ``system``; calls are ``tool_use`` blocks of the
    assistant; outputs are ``tool_result`` blocks of the user with ``is_error``."""
    system, messages = anthropic_messages(
        [
            Message(role="system", content="Be brief."),
            Message(role="developer", content="<scratchpad>\nx\n</scratchpad>"),
            Message(role="user", content="hi"),
            Message(role="assistant", content="Noting."),
            FunctionCall(call_id="tu_1", name="scratchpad/update", arguments='{"a": 1}'),
            FunctionCall(call_id="tu_2", name="lookup", arguments="not json"),
            FunctionCallOutput(call_id="tu_1", output="bad", is_error=True),
            FunctionCallOutput(call_id="tu_2", output="found"),
            Message(role="user", content="thanks"),
        ],
        NAMES,
    )
    assert system == "Be brief.\n\n<scratchpad>\nx\n</scratchpad>"
    assert all(valid_message(message) for message in messages)
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert messages[1]["content"][1:] == [
        {"type": "tool_use", "id": "tu_1", "name": "scratchpad__update", "input": {"a": 1}},
        {
            "type": "tool_use",
            "id": "tu_2",
            "name": "lookup",
            "input": {"_raw_arguments": "not json"},
        },
    ]
    assert messages[2]["content"] == [
        {"type": "tool_result", "tool_use_id": "tu_1", "content": "bad", "is_error": True},
        {"type": "tool_result", "tool_use_id": "tu_2", "content": "found", "is_error": False},
        {"type": "text", "text": "thanks"},
    ]


def test_a_developer_message_after_the_conversation_is_user_text_where_it_stands() -> None:
    """Only the system and developer messages that open a request go to ``system``: the
    block after the conversation (``placement="end"``) stays last, as text of the user's
    turn, so ``system`` and the messages before it are the same from request to request."""
    block = "<scratchpad>\nx\n</scratchpad>"
    system, messages = anthropic_messages(
        [
            Message(role="system", content="Be brief."),
            Message(role="user", content="hi"),
            FunctionCall(call_id="tu_1", name="scratchpad/update", arguments='{"a": 1}'),
            FunctionCallOutput(call_id="tu_1", output="ok"),
            Message(role="developer", content=block),
        ],
        NAMES,
    )
    assert system == "Be brief."
    assert all(valid_message(message) for message in messages)
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert messages[2]["content"] == [
        {"type": "tool_result", "tool_use_id": "tu_1", "content": "ok", "is_error": False},
        {"type": "text", "text": block},
    ]


def message_payload(content: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "test-model",
        "content": content,
        "stop_reason": "tool_use",
        "stop_sequence": None,
        "usage": {"input_tokens": 12, "output_tokens": 3},
    }


def test_parse_message_maps_tool_use_back() -> None:
    """A parsed SDK ``Message`` with text and ``tool_use`` becomes our items."""
    message = SdkMessage.model_validate(
        message_payload(
            [
                {"type": "text", "text": "Noting."},
                {
                    "type": "tool_use",
                    "id": "tu_1",
                    "name": "scratchpad__update",
                    "input": {"a": [1]},
                },
            ]
        )
    )
    parsed = parse_message(message, NAMES)
    assert parsed.items == [
        Message(role="assistant", content="Noting."),
        FunctionCall(call_id="tu_1", name="scratchpad/update", arguments='{"a":[1]}'),
    ]
    assert parsed.usage["input_tokens"] == 12


@pytest.mark.asyncio
@pytest.mark.parametrize("placement", ["end", "start", None])
async def test_a_run_through_the_messages_api(placement: str | None) -> None:
    """The harness drives the real ``AsyncAnthropic``: a rejected update comes back as a
    ``tool_result`` with ``is_error``, the corrected one lands. The block is the user turn's
    last text, after the tool results, by default (``placement="end"``), and keeps
    ``system`` the instructions alone; with ``placement="start"`` it is in ``system``."""
    answers = [
        message_payload(
            [
                {
                    "type": "tool_use",
                    "id": "tu_1",
                    "name": "scratchpad__update",
                    "input": {"blockers": "x"},
                }
            ]
        ),
        message_payload(
            [
                {
                    "type": "tool_use",
                    "id": "tu_2",
                    "name": "scratchpad__update",
                    "input": {"blockers": ["x"]},
                }
            ]
        ),
        message_payload([{"type": "text", "text": "Done."}]),
    ]
    sent: list[dict[str, Any]] = []

    def handle(request: hx.Request) -> hx.Response:
        sent.append(json.loads(request.content))
        return hx.Response(200, json=answers[len(sent) - 1])

    client = anthropic.AsyncAnthropic(
        api_key="test",
        base_url="http://anthropic.test",
        http_client=hx.AsyncClient(transport=hx.MockTransport(handle)),
        max_retries=0,
    )
    harness = AgentHarness(
        "a",
        Agent(model=AnthropicModel(client, "test-model", max_tokens=256), instructions="Be brief."),
        {},
        [scratchpad(schema=TaskNotes)],
        **({} if placement is None else {"placement": placement}),  # type: ignore[arg-type]
    )
    async with harness:
        result = await harness.run("go", thread_id="t")
    await client.close()

    assert result.output == "Done."
    assert result.states["scratchpad"] == {"blockers": ["x"]}
    assert sent[0]["system"] == "Be brief."
    assert sent[0]["max_tokens"] == 256
    assert sent[0]["tools"][0]["name"] == "scratchpad__update"
    assert "strict" not in sent[0]["tools"][0]
    rejected = sent[1]["messages"][-1]["content"][0]
    assert rejected["type"] == "tool_result"
    assert rejected["is_error"] is True
    assert "blockers: Input should be a valid list" in rejected["content"]
    block = '<scratchpad>\n{\n  "blockers": [\n    "x"\n  ]\n}\n</scratchpad>'
    if placement == "start":
        assert sent[2]["system"] == f"Be brief.\n\n{block}"
        assert block not in json.dumps(sent[2]["messages"])
    else:
        assert sent[2]["system"] == "Be brief."
        assert [m["role"] for m in sent[2]["messages"]] == ["user", "assistant"] * 2 + ["user"]
        [result_block, text_block] = sent[2]["messages"][-1]["content"]
        assert (result_block["type"], result_block["tool_use_id"]) == ("tool_result", "tu_2")
        assert text_block == {"type": "text", "text": block}


@pytest.mark.asyncio
async def test_the_edit_tool_appends_and_deletes_through_anthropic() -> None:
    """``scratchpad/edit`` goes out as ``scratchpad__edit`` (a schema Anthropic takes as it
    is); the model's ``tool_use`` appends a step and deletes a key in one write."""
    operations = [
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
    answers = [
        message_payload(
            [
                {
                    "type": "tool_use",
                    "id": "tu_1",
                    "name": "scratchpad__edit",
                    "input": {"operations": operations},
                }
            ]
        ),
        message_payload([{"type": "text", "text": "Done."}]),
    ]
    sent: list[dict[str, Any]] = []

    def handle(request: hx.Request) -> hx.Response:
        sent.append(json.loads(request.content))
        return hx.Response(200, json=answers[len(sent) - 1])

    client = anthropic.AsyncAnthropic(
        api_key="test",
        base_url="http://anthropic.test",
        http_client=hx.AsyncClient(transport=hx.MockTransport(handle)),
        max_retries=0,
    )
    harness = AgentHarness(
        "a",
        Agent(model=AnthropicModel(client, "test-model")),
        {},
        [scratchpad(edit_tool=True)],
    )
    async with harness:
        await harness.update_state(
            "scratchpad", {"completedSteps": ["tests"], "blockers": ["none"]}, thread_id="t"
        )
        result = await harness.run("go", thread_id="t")
    await client.close()

    assert result.states["scratchpad"] == {"completedSteps": ["tests", "docs"]}
    edit = next(tool for tool in sent[0]["tools"] if tool["name"] == "scratchpad__edit")
    assert edit["input_schema"]["type"] == "object"
    assert sdk_valid(ToolParam, edit)
    output = sent[1]["messages"][-1]["content"][0]
    assert output["type"] == "tool_result"
    assert output["content"] == "Scratchpad edited (completedSteps, blockers)."
