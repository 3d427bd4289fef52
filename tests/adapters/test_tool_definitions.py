"""``tool_definitions``: the scratchpad's tools for a loop of your own, in each provider's
format, the same the harness sends."""

from __future__ import annotations

from typing import Any

import pytest
from anthropic.types import ToolParam
from openai.types.chat import ChatCompletionFunctionToolParam
from openai.types.responses import FunctionToolParam

from noetic_scratchpad import ScratchpadConfigError, scratchpad
from noetic_scratchpad.adapters import (
    PROVIDERS,
    OpenAIChatModel,
    OpenAIResponsesModel,
    default_tool_names,
    tool_definitions,
)
from noetic_scratchpad.runtime import Agent, AgentHarness
from noetic_scratchpad.storage import MemoryStorage
from tests.adapters.test_anthropic import sdk_valid
from tests.adapters.test_openai import (
    chat_payload,
    message_output,
    mock_client,
    responses_payload,
    strict_validate,
)
from tests.runtime.helpers import TaskNotes


def test_each_provider_gets_its_own_format_of_the_same_tool() -> None:
    layer = scratchpad(schema=TaskNotes)
    update = layer.provides["update"]
    responses, chat, anthropic = (tool_definitions(layer, p) for p in PROVIDERS)
    assert PROVIDERS == ("openai", "openai-chat", "anthropic")

    # The update tool, then the read tool (the state may outgrow the block's budget).
    assert [tool["name"] for tool in responses] == ["scratchpad__update", "scratchpad__read"]
    tool = responses[0]
    strict_validate(FunctionToolParam, tool)
    assert tool["name"] == "scratchpad__update"
    assert tool["description"] == update.description  # type: ignore[union-attr]
    assert tool["parameters"] == dict(update.parameters)  # type: ignore[union-attr]
    assert tool["strict"] is False

    tool = chat[0]
    strict_validate(ChatCompletionFunctionToolParam, tool)
    assert tool["function"]["name"] == "scratchpad__update"
    assert tool["function"]["parameters"] == dict(update.parameters)  # type: ignore[union-attr]

    tool = anthropic[0]
    assert sdk_valid(ToolParam, tool)
    assert tool["name"] == "scratchpad__update"
    assert tool["input_schema"] == dict(update.parameters)  # type: ignore[union-attr]
    assert "strict" not in tool


@pytest.mark.asyncio
async def test_the_definitions_are_what_the_harness_sends() -> None:
    """Through the real ``openai`` client: the harness's first request carries exactly
    ``tool_definitions(layer, ...)`` for the Responses API and for Chat Completions."""
    layer = scratchpad(schema=TaskNotes)
    for provider, model_class, answer in (
        ("openai", OpenAIResponsesModel, responses_payload([message_output("Hi.")])),
        ("openai-chat", OpenAIChatModel, chat_payload("Hi.", [])),
    ):
        sent: list[dict[str, Any]] = []
        client = mock_client([answer], sent)
        harness = AgentHarness("a", Agent(model=model_class(client, "m")), {}, [layer])
        async with harness:
            await harness.run("hello", thread_id="t")
        await client.close()
        assert sent[0]["tools"] == tool_definitions(layer, provider), provider  # type: ignore[arg-type]


@pytest.mark.asyncio
async def test_a_handle_gives_its_layers_tools_and_the_names_are_the_callers() -> None:
    """From a handle too; with ``edit_tool=True`` two tools, the edit tool's text naming the
    update tool by the caller's name; a call to that name runs through ``handle.call``."""
    handle = await scratchpad(edit_tool=True).open(MemoryStorage(), thread_id="t")
    assert default_tool_names(handle) == {
        "update": "scratchpad__update",
        "edit": "scratchpad__edit",
        "read": "scratchpad__read",
    }
    tools = tool_definitions(handle, "anthropic", names={"update": "notes"})
    assert [tool["name"] for tool in tools] == ["notes", "scratchpad__edit", "scratchpad__read"]
    assert "notes" in tools[1]["description"]
    # The model called "notes": the caller's map says that is the update function.
    assert await handle.call("update", '{"goal": "ship"}') == "Scratchpad updated (goal)."
    assert handle.snapshot == {"goal": "ship"}


def test_a_read_only_scratchpad_offers_no_tool() -> None:
    assert tool_definitions(scratchpad(read_only=True), "openai") == []


def test_an_unknown_provider_or_a_name_providers_refuse_is_refused() -> None:
    with pytest.raises(ScratchpadConfigError, match="unknown provider 'gemini'; known: openai"):
        tool_definitions(scratchpad(), "gemini")  # type: ignore[arg-type]
    with pytest.raises(ScratchpadConfigError, match="the name 'scratchpad/update' for update"):
        tool_definitions(scratchpad(), "openai", names={"update": "scratchpad/update"})
    with pytest.raises(ScratchpadConfigError, match="expected a scratchpad layer"):
        tool_definitions(object(), "openai")  # type: ignore[arg-type]
