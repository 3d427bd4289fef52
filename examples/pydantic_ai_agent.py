"""A pydantic-ai agent with a scratchpad, offline: a scripted model (pydantic-ai's
``FunctionModel``) stands in for the LLM.

Run it with ``python examples/pydantic_ai_agent.py`` (needs
``pip install "noetic-scratchpad[pydantic-ai]"``). The model writes its goal, makes a
mistake the schema refuses and corrects it, writes three notes in one response, and
answers; a second run on the same conversation starts from the notes the first one left.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from pathlib import Path

from pydantic import BaseModel, ConfigDict
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    TextPart,
    ToolCallPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from noetic_scratchpad import ScratchpadEvent, UpdateApplied, UpdateRejected
from noetic_scratchpad.integrations.pydantic_ai import ScratchpadCapability


class TaskNotes(BaseModel):
    model_config = ConfigDict(extra="forbid")

    currentGoal: str
    completedSteps: list[str] = []
    blockers: list[str] = []


def update(call_id: str, **fields: object) -> ToolCallPart:
    return ToolCallPart("scratchpad_update", fields, tool_call_id=call_id)


# One response per model request; the model's "reasoning" is this script.
SCRIPT: list[list[ToolCallPart | TextPart]] = [
    [update("c1", currentGoal="Fix the login bug", completedSteps="reproduced it")],
    [update("c2", currentGoal="Fix the login bug", completedSteps=["reproduced it"])],
    [
        update("c3", completedSteps=["reproduced it", "bisected to a1b2c3"]),
        update("c4", blockers=["no access to the staging logs"]),
        update("c5", currentGoal="Fix the login bug in the session cookie"),
    ],
    [TextPart("Found it: the session cookie. Blocked on staging logs; asked for access.")],
    # The second run: the notes are already at the end of its request.
    [TextPart("Still blocked on the staging logs.")],
]


def scripted_model() -> FunctionModel:
    turns = iter(SCRIPT)

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        print(f"  model sees: {shown_notes(messages)}")
        return ModelResponse(parts=next(turns))

    return FunctionModel(respond)


def shown_notes(messages: list[ModelMessage]) -> str:
    """The scratchpad block, the last part of the request, on one line."""
    last = messages[-1].parts[-1]
    text = last.content if isinstance(last, UserPromptPart) else ""
    _, found, rest = (text if isinstance(text, str) else "").partition("<scratchpad>")
    if not found:
        return "no scratchpad yet"
    return json.dumps(json.loads(rest.partition("</scratchpad>")[0]))


def on_event(event: ScratchpadEvent) -> None:
    if isinstance(event, UpdateApplied):
        print(f"    applied: {', '.join(event.keys)}")
    elif isinstance(event, UpdateRejected):
        print(f"    refused ({event.reason}), sent back to the model: {event.message}")


async def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        url = f"sqlite:///{Path(folder) / 'notes.db'}"

        # The three lines: the capability, the agent, a run.
        notes = ScratchpadCapability(storage=url, schema=TaskNotes)
        agent = Agent(
            scripted_model(), instructions="You are a careful engineer.", capabilities=[notes]
        )
        notes.events.subscribe(on_event)

        async with notes:  # closes the SQLite file at the end
            print("run 1")
            result = await agent.run("Fix the login bug.", conversation_id="ticket-42")
            print(f"  answer: {result.output}")

            print("run 2 (same conversation)")
            result = await agent.run("Any news?", conversation_id="ticket-42")
            print(f"  answer: {result.output}")

            handle = await notes.open(thread_id="ticket-42")
            print("stored notes:")
            print(json.dumps(handle.snapshot, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
