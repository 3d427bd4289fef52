"""The scratchpad in an OpenAI Agents SDK agent, offline.

A scripted model stands in for the LLM, so this runs with no network and no API key:

    pip install "noetic-scratchpad[openai-agents]"
    python examples/openai_agents_agent.py

The model writes its goal, makes a mistake the schema refuses (and fixes it), writes two
updates in one response, and then, in a second run on a fresh ``Scratchpad`` over the same
SQLite file (as after a restart, and streamed), finds its notes at the end of its input.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from agents import Agent, ModelResponse, RunConfig, Runner, Usage, set_tracing_disabled
from agents.models.interface import Model
from openai.types.responses import (
    Response,
    ResponseCompletedEvent,
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)
from pydantic import BaseModel, ConfigDict

from noetic_scratchpad.integrations.openai_agents import Scratchpad


class TaskNotes(BaseModel):
    model_config = ConfigDict(extra="forbid")

    currentGoal: str
    completedSteps: list[str] = []
    blockers: list[str] = []


def update(call_id: str, **fields: Any) -> ResponseFunctionToolCall:
    return ResponseFunctionToolCall(
        id=f"fc_{call_id}",
        call_id=call_id,
        name="scratchpad_update",
        arguments=json.dumps(fields),
        type="function_call",
    )


def say(text: str) -> ResponseOutputMessage:
    return ResponseOutputMessage(
        id="msg_1",
        content=[ResponseOutputText(text=text, type="output_text", annotations=[])],
        role="assistant",
        status="completed",
        type="message",
    )


class ScriptedModel(Model):
    """Stands in for the LLM: one list of output items per call. It prints what a real
    model would read: the scratchpad, the last item of its input (moved there by
    ``notes.input_filter``), and the outputs of its tools."""

    def __init__(self, turns: list[list[Any]]) -> None:
        self.turns = turns
        self.answered: set[str] = set()  # tool outputs already printed

    def _next(self, instructions: str | None, items: Any) -> list[Any]:
        last = items[-1] if isinstance(items, list) and items else {}
        shown = last.get("content") if last.get("role") == "developer" else None
        notes = shown or "(empty scratchpad)"
        print(f"--- model call; the scratchpad it is shown:\n{notes}")
        for item in items if isinstance(items, list) else []:
            if item.get("type") == "function_call_output" and item["call_id"] not in self.answered:
                self.answered.add(item["call_id"])
                print(f"    tool output {item['call_id']}: {item['output']}")
        return self.turns.pop(0)

    # The runner passes more arguments (settings, tools, ...); this stand-in needs none.
    async def get_response(
        self, system_instructions: str | None, input: Any, *args: Any, **kwargs: Any
    ) -> ModelResponse:
        output = self._next(system_instructions, input)
        return ModelResponse(output=output, usage=Usage(), response_id=None)

    async def stream_response(
        self, system_instructions: str | None, input: Any, *args: Any, **kwargs: Any
    ) -> AsyncIterator[Any]:
        output = self._next(system_instructions, input)
        response = Response(
            id="resp_1",
            created_at=0,
            model="scripted",
            object="response",
            output=output,
            tool_choice="auto",
            tools=[],
            parallel_tool_calls=True,
        )
        yield ResponseCompletedEvent(
            type="response.completed", response=response, sequence_number=0
        )


FIRST_RUN: list[list[Any]] = [
    [update("c1", currentGoal="Fix the login bug", completedSteps=["reproduced it"])],
    [update("c2", completedSteps="bisected")],  # not a list: the schema refuses it
    [
        update("c3", completedSteps=["reproduced it", "bisected to a3f9"]),
        update("c4", blockers=["no access to the staging logs"]),
    ],
    [say("Blocked on the staging logs; I asked for access.")],
]
SECOND_RUN: list[list[Any]] = [[say("Still blocked on the staging logs.")]]


async def main(database: Path) -> None:
    set_tracing_disabled(True)  # nothing leaves the process
    url = f"sqlite:///{database}"
    context = {"thread_id": "ticket-42"}  # whose scratchpad: one per thread

    # The three lines: a scratchpad, an agent with its instructions and tool, a run.
    async with Scratchpad(storage=url, schema=TaskNotes) as notes:
        agent = Agent(
            name="Engineer",
            instructions=notes.instructions("You are a careful engineer."),
            tools=notes.tools,
            model=ScriptedModel(FIRST_RUN),
        )
        config = RunConfig(call_model_input_filter=notes.input_filter)  # the block goes last
        result = await Runner.run(
            agent, "The login page fails for some users.", context=context, run_config=config
        )
        print(f"=== first run answered: {result.final_output}\n")

    # A fresh Scratchpad on the same file, as after a restart; streamed this time.
    async with Scratchpad(storage=url, schema=TaskNotes) as notes:
        agent = Agent(
            name="Engineer",
            instructions=notes.instructions("You are a careful engineer."),
            tools=notes.tools,
            model=ScriptedModel(SECOND_RUN),
        )
        config = RunConfig(call_model_input_filter=notes.input_filter)
        streamed = Runner.run_streamed(agent, "Any progress?", context=context, run_config=config)
        async for _event in streamed.stream_events():
            pass
        print(f"=== second run answered: {streamed.final_output}")


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as folder:
        asyncio.run(main(Path(folder) / "scratchpad.db"))
