"""``demo``: a scripted three-turn conversation that prints its scratchpad as it changes."""

from __future__ import annotations

import argparse
import json
import shlex
from typing import Any

from pydantic import BaseModel, ConfigDict

from ..events import ScratchpadEvent, UpdateApplied, UpdateRejected
from ..items import FunctionCall, Item, LLMResponse, Message
from ..keys import state_key
from ..layer import scratchpad
from ..runtime import Agent, AgentHarness, ModelRequest, ScriptedModel, Turn
from .common import PROG, shown_url, storage_url


class TaskNotes(BaseModel):
    """The demo's scratchpad schema (the seed's example)."""

    model_config = ConfigDict(extra="forbid")

    currentGoal: str
    completedSteps: list[str]
    blockers: list[str]


def call(call_id: str, **arguments: Any) -> FunctionCall:
    return FunctionCall(call_id=call_id, name="scratchpad/update", arguments=json.dumps(arguments))


def correct_blockers(request: ModelRequest) -> list[Item]:
    """The scripted model reads its rejected call's error and sends a list instead."""
    last = request.last_output
    if last is not None and last.is_error:
        return [call("call_4", blockers=["The staging database is read-only"])]
    return [Message(role="assistant", content="Noted.")]


DEMO_RUNS: list[tuple[str, list[Turn]]] = [
    (
        "We need to ship v2 of the billing service today.",
        [
            [
                Message(role="assistant", content="Let me write the plan down first."),
                call(
                    "call_1",
                    currentGoal="Ship billing service v2",
                    completedSteps=["Wrote the release notes"],
                ),
            ],
            "Plan noted. Next I'll run the database migration on staging.",
        ],
    ),
    (
        "The migration failed: the staging database is read-only.",
        [
            [call("call_3", blockers="The staging database is read-only")],
            correct_blockers,
            "Blocker recorded. Could someone grant write access to staging?",
        ],
    ),
    (
        "Done: the DBA granted write access and I re-ran the migration.",
        [
            [
                call(
                    "call_5",
                    completedSteps=["Wrote the release notes", "Ran the staging migration"],
                    blockers=[],
                )
            ],
            "Staging is migrated and nothing blocks us. Next: deploy to production.",
        ],
    ),
]


class Printer:
    """Writes the demo's lines to stdout as they happen."""

    def __call__(self, text: str = "") -> None:
        print(text, flush=True)

    def event(self, event: ScratchpadEvent) -> None:
        if isinstance(event, UpdateApplied):
            self(f"   + scratchpad updated by {event.source}: {', '.join(event.keys) or '-'}")
        elif isinstance(event, UpdateRejected):
            self(f"   ! update rejected by the {event.hook} path ({event.reason}): {event.message}")


class NarratedModel:
    """The scripted model of :data:`DEMO_RUNS`, printing the ``<scratchpad>`` block it
    sees and the calls it makes."""

    def __init__(self, out: Printer) -> None:
        self._out = out
        self._scripted = ScriptedModel([turn for _, run_turns in DEMO_RUNS for turn in run_turns])
        self._shown: list[str] = []

    async def __call__(self, request: ModelRequest) -> LLMResponse:
        self._show(scratchpad_block(request))
        response = await self._scripted(request)
        for item in response.items:
            if isinstance(item, FunctionCall):
                self._out(f"   assistant calls {item.name} {item.arguments}")
        return response

    def _show(self, block: str | None) -> None:
        if block is None:
            self._out("   (the scratchpad is empty: no <scratchpad> block in the prompt)")
        elif self._shown and self._shown[-1] == block:
            self._out("   (the model sees the same <scratchpad> block as before)")
        else:
            self._out("   the model sees:")
            self._out("\n".join(f"     | {line}" for line in block.splitlines()))
        self._shown.append(block or "")


def scratchpad_block(request: ModelRequest) -> str | None:
    """The ``<scratchpad>`` message of the prompt, if there is one."""
    return next(
        (
            item.content
            for item in request.items
            if isinstance(item, Message) and item.content.startswith("<scratchpad>")
        ),
        None,
    )


async def cmd_demo(args: argparse.Namespace) -> int:
    url = storage_url(args)
    out = Printer()
    harness = AgentHarness(
        name="demo",
        agent=Agent(model=NarratedModel(out), instructions="You are a careful release engineer."),
        params={},
        context_layers=[scratchpad(schema=TaskNotes)],
        storage=url,
    )
    async with harness:
        await harness.storage.delete(state_key("scratchpad", "thread", args.thread))
        out(f"Scratchpad demo on {shown_url(url)}, thread {args.thread!r} (reset first).")
        out("Schema: TaskNotes {currentGoal: str, completedSteps: [str], blockers: [str]}")
        await converse(harness, args.thread, out)
        final = await harness.read_state("scratchpad", thread_id=args.thread)
    out()
    out("Stored scratchpad:")
    out(json.dumps(final, indent=2, ensure_ascii=False))
    out()
    out(f"Inspect it: {inspect_command(args.thread, args.storage)}")
    if args.storage is not None and shown_url(args.storage) != args.storage:
        out("(with your URL's secrets where it shows ***)")
    return 0


def inspect_command(thread: str, storage: str | None) -> str:
    """The ``show`` command for the demo's thread, ready to paste into a shell; the URL as
    :func:`~.common.shown_url` shows it (and none when it came from the environment)."""
    storage_flag = "" if storage is None else f" --storage {shlex.quote(shown_url(storage))}"
    return f"{PROG} show --thread {shlex.quote(thread)}{storage_flag}"


async def converse(harness: AgentHarness, thread: str, out: Printer) -> None:
    """Run the user's turns of :data:`DEMO_RUNS`, printing each and every update event."""
    unsubscribe = harness.events.subscribe(out.event)
    try:
        for number, (text, _) in enumerate(DEMO_RUNS, start=1):
            out()
            out(f"[turn {number}] user: {text}")
            result = await harness.run(text, thread_id=thread)
            out(f"   assistant: {result.output}")
    finally:
        unsubscribe()
