"""A scripted Agents SDK ``Model``, built like the SDK's own test double (its FakeModel):
each call pops the next turn of output items and records what the runner sent. Also the
helpers the OpenAI Agents tests share."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from agents import Agent, ModelResponse, ModelSettings, Tool, Usage
from agents.agent_output import AgentOutputSchemaBase
from agents.handoffs import Handoff
from agents.items import TResponseInputItem, TResponseOutputItem, TResponseStreamEvent
from agents.models.interface import Model, ModelTracing
from openai.types.responses import (
    Response,
    ResponseCompletedEvent,
    ResponseCreatedEvent,
    ResponseFunctionToolCall,
    ResponseOutputItemAddedEvent,
    ResponseOutputItemDoneEvent,
    ResponseOutputMessage,
    ResponseOutputText,
)
from pydantic import BaseModel, ConfigDict

from noetic_scratchpad.integrations.openai_agents import Scratchpad

BASE = "You are a careful engineer."


class TaskNotes(BaseModel):
    model_config = ConfigDict(extra="forbid")

    currentGoal: str
    completedSteps: list[str] = []
    blockers: list[str] = []


@dataclass(frozen=True)
class SeenCall:
    """What the runner sent the model on one call."""

    system_instructions: str | None
    input: list[dict[str, Any]]
    tools: list[Tool]
    streamed: bool

    def outputs(self) -> dict[str, str]:
        """The tool outputs in the input so far, by call id."""
        return {
            item["call_id"]: item["output"]
            for item in self.input
            if item.get("type") == "function_call_output"
        }


class ScriptedAgentsModel(Model):
    """Replays ``turns`` (lists of output items), one per model call; records each call."""

    def __init__(self, turns: list[list[TResponseOutputItem]]) -> None:
        self.turns = list(turns)
        self.calls: list[SeenCall] = []

    def _next(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        tools: list[Tool],
        *,
        streamed: bool,
    ) -> list[TResponseOutputItem]:
        items = [{"role": "user", "content": input}] if isinstance(input, str) else input
        self.calls.append(
            SeenCall(system_instructions, json.loads(json.dumps(items)), list(tools), streamed)
        )
        if not self.turns:
            raise AssertionError(f"the model was called {len(self.calls)} times; script ended")
        return self.turns.pop(0)

    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: ModelSettings,
        tools: list[Tool],
        output_schema: AgentOutputSchemaBase | None,
        handoffs: list[Handoff],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: Any | None,
    ) -> ModelResponse:
        output = self._next(system_instructions, input, tools, streamed=False)
        return ModelResponse(output=output, usage=Usage(), response_id="resp-1")

    async def stream_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: ModelSettings,
        tools: list[Tool],
        output_schema: AgentOutputSchemaBase | None,
        handoffs: list[Handoff],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None = None,
        conversation_id: str | None = None,
        prompt: Any | None = None,
    ) -> AsyncIterator[TResponseStreamEvent]:
        output = self._next(system_instructions, input, tools, streamed=True)
        response = _response(output)
        yield ResponseCreatedEvent(type="response.created", response=response, sequence_number=0)
        sequence = 1
        for index, item in enumerate(output):
            yield ResponseOutputItemAddedEvent(
                type="response.output_item.added",
                item=item,
                output_index=index,
                sequence_number=sequence,
            )
            yield ResponseOutputItemDoneEvent(
                type="response.output_item.done",
                item=item,
                output_index=index,
                sequence_number=sequence + 1,
            )
            sequence += 2
        yield ResponseCompletedEvent(
            type="response.completed", response=response, sequence_number=sequence
        )


def _response(output: list[TResponseOutputItem]) -> Response:
    return Response(
        id="resp-1",
        created_at=0,
        model="scripted",
        object="response",
        output=output,
        tool_choice="auto",
        tools=[],
        parallel_tool_calls=True,
    )


def tool_call(
    call_id: str, name: str = "scratchpad_update", **fields: Any
) -> ResponseFunctionToolCall:
    """The model calling ``name`` with ``fields`` as its JSON arguments."""
    return ResponseFunctionToolCall(
        id=f"fc-{call_id}",
        call_id=call_id,
        name=name,
        arguments=json.dumps(fields),
        type="function_call",
        status="completed",
    )


def raw_tool_call(
    call_id: str, arguments: str, name: str = "scratchpad_update"
) -> ResponseFunctionToolCall:
    """The model calling ``name`` with ``arguments`` exactly as given."""
    return ResponseFunctionToolCall(
        id=f"fc-{call_id}",
        call_id=call_id,
        name=name,
        arguments=arguments,
        type="function_call",
        status="completed",
    )


def reply(text: str) -> ResponseOutputMessage:
    """The model's final answer."""
    return ResponseOutputMessage(
        id="msg-1",
        content=[ResponseOutputText(text=text, type="output_text", annotations=[])],
        role="assistant",
        status="completed",
        type="message",
    )


def agent_for(notes: Scratchpad, model: ScriptedAgentsModel) -> Agent[Any]:
    """An agent with the scratchpad's instructions (after ``BASE``) and tool, on ``model``."""
    return Agent(
        name="Assistant", instructions=notes.instructions(BASE), tools=[notes.tool], model=model
    )


def block_of(instructions: str | None) -> Any:
    """The state shown in the ``<scratchpad>`` block of ``instructions``."""
    assert instructions is not None
    body = instructions.split("<scratchpad>\n", 1)[1].split("\n</scratchpad>", 1)[0]
    return json.loads(body)
