"""The pydantic-ai integration, driven by pydantic-ai's own ``Agent`` with its test models
(``FunctionModel``, ``TestModel``): no network."""

from __future__ import annotations

import asyncio
import importlib
import json
import re
import sys
import textwrap
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import anyio
import pytest
import pytest_asyncio
from pydantic import BaseModel, ConfigDict
from pydantic_ai import Agent, RunContext
from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    ModelResponsePart,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel
from pydantic_ai.models.test import TestModel

from noetic_scratchpad import (
    EventBus,
    ScratchpadConfigError,
    UpdateApplied,
    UpdateRejected,
    UpdateRetried,
    open_storage,
    scratchpad,
)
from noetic_scratchpad.core import RunScope as CoreRunScope
from noetic_scratchpad.core import ScratchpadCore
from noetic_scratchpad.integrations.pydantic_ai import (
    RunScope,
    ScratchpadCapability,
    ScratchpadToolset,
    scope_from_run,
)
from noetic_scratchpad.testing import FaultyStorage, capture_events

pytestmark = pytest.mark.asyncio

BASE = "You are a careful engineer."
MODULE = "noetic_scratchpad.integrations.pydantic_ai"


class TaskNotes(BaseModel):
    model_config = ConfigDict(extra="forbid")

    currentGoal: str
    completedSteps: list[str] = []
    blockers: list[str] = []


def update(call_id: str, **fields: Any) -> ToolCallPart:
    return ToolCallPart("scratchpad_update", fields, tool_call_id=call_id)


@dataclass
class Script:
    """A ``FunctionModel`` function: one scripted response per request, and what each
    request carried (its instructions, and the request message it answered)."""

    turns: list[list[ModelResponsePart]]
    instructions: list[str | None] = field(default_factory=list)
    seen: list[str | None] = field(default_factory=list)
    """The text that carried the block to the model (see :func:`shown`), per request."""
    requests: list[ModelRequest] = field(default_factory=list)
    tools: list[list[str]] = field(default_factory=list)
    before: Callable[[int], Any] | None = None

    async def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if self.before is not None:
            await self.before(len(self.instructions))
        self.instructions.append(info.instructions)
        self.seen.append(shown(messages, info))
        last = messages[-1]
        assert isinstance(last, ModelRequest)
        self.requests.append(last)
        self.tools.append([tool.name for tool in info.function_tools])
        return ModelResponse(parts=self.turns[len(self.instructions) - 1])

    def model(self) -> FunctionModel:
        return FunctionModel(self)


def shown(messages: list[ModelMessage], info: AgentInfo) -> str | None:
    """Where the model read the block: the last part of the request (``placement="end"``,
    the default), else the instructions (``"start"``, or no block at all)."""
    last = messages[-1]
    if isinstance(last, ModelRequest) and last.parts:
        part = last.parts[-1]
        if isinstance(part, UserPromptPart) and "<scratchpad>" in str(part.content):
            return str(part.content)
    return info.instructions


def block_of(instructions: str | None) -> Any:
    """The state shown in the ``<scratchpad>`` block of ``instructions``, or ``None``."""
    if instructions is None or "<scratchpad>" not in instructions:
        return None
    body = instructions.split("<scratchpad>\n", 1)[1].split("\n</scratchpad>", 1)[0]
    return json.loads(body)


def tool_results(request: ModelRequest) -> list[tuple[str, str]]:
    """``(outcome, text)`` of each tool result in ``request``: ``"success"``, ``"retried"``
    (a retry prompt) or ``"failed"``."""
    results = []
    for part in request.parts:
        if isinstance(part, RetryPromptPart):
            results.append(("retried", str(part.content)))
        elif isinstance(part, ToolReturnPart):
            results.append((getattr(part, "outcome", "success"), str(part.content)))
    return results


@pytest_asyncio.fixture
async def notes() -> AsyncIterator[ScratchpadCapability]:
    capability = ScratchpadCapability(storage="memory://", schema=TaskNotes)
    async with capability:
        yield capability


async def stored(notes: ScratchpadCapability | ScratchpadToolset, thread: str) -> Any:
    return (await notes.open(thread_id=thread)).snapshot


# -- the block, every step ---------------------------------------------------------------


EXPECTED_VIEWS = [
    {"currentGoal": "Ship v2"},
    {"currentGoal": "Ship v2", "completedSteps": ["built it"]},
    {"currentGoal": "Ship v2", "completedSteps": ["built it"], "blockers": ["CI is red"]},
]


def two_updates_then_answer() -> Script:
    return Script(
        [
            [update("c1", completedSteps=["built it"])],
            [update("c2", blockers=["CI is red"])],
            [TextPart("Blocked on CI.")],
        ]
    )


async def test_by_default_the_block_ends_every_request_and_stays_out_of_history(
    notes: ScratchpadCapability,
) -> None:
    """``placement="end"``: each request ends with the block as stored when it was built
    (after this run's own updates too); the instructions are the agent's alone, and the
    history keeps no block, so the next request repeats this one's prefix."""
    await (await notes.open(thread_id="t1")).update({"currentGoal": "Ship v2"})
    script = two_updates_then_answer()
    agent = Agent(script.model(), instructions=BASE, capabilities=[notes])

    result = await agent.run("Ship it.", conversation_id="t1")

    assert result.output == "Blocked on CI."
    assert script.instructions == [BASE, BASE, BASE]
    for request, text in zip(script.requests, script.seen, strict=True):
        last = request.parts[-1]
        assert isinstance(last, UserPromptPart)
        assert last.content == text
    assert [block_of(text) for text in script.seen] == EXPECTED_VIEWS
    history = json.dumps([m.parts for m in result.all_messages()], default=str)
    assert "<scratchpad>" not in history


async def test_with_placement_start_the_block_is_in_the_instructions_of_every_request() -> None:
    async with ScratchpadCapability(
        storage="memory://", schema=TaskNotes, placement="start"
    ) as notes:
        await (await notes.open(thread_id="t1")).update({"currentGoal": "Ship v2"})
        script = two_updates_then_answer()
        agent = Agent(script.model(), instructions=BASE, capabilities=[notes])

        result = await agent.run("Ship it.", conversation_id="t1")

    assert result.output == "Blocked on CI."
    assert all(text is not None and text.startswith(BASE) for text in script.instructions)
    assert [block_of(text) for text in script.instructions] == EXPECTED_VIEWS
    assert all(
        not (isinstance(part, UserPromptPart) and "<scratchpad>" in str(part.content))
        for request in script.requests
        for part in request.parts
    )
    # What pydantic-ai records in the history is what the model was sent.
    sent = [m.instructions for m in result.all_messages() if isinstance(m, ModelRequest)]
    assert sent == script.instructions


async def test_an_unknown_placement_is_refused() -> None:
    with pytest.raises(ScratchpadConfigError, match="placement must be one of 'end', 'start'"):
        ScratchpadCapability(placement="middle")  # type: ignore[arg-type]


async def test_an_empty_scratchpad_adds_no_block(notes: ScratchpadCapability) -> None:
    script = Script([[TextPart("Hello.")]])
    agent = Agent(script.model(), instructions=BASE, capabilities=[notes])

    await agent.run("Hi.")

    assert script.instructions == [BASE]
    assert script.tools == [["scratchpad_update", "scratchpad_read"]]


async def test_writes_from_elsewhere_show_up_at_the_next_request(
    notes: ScratchpadCapability,
) -> None:
    async def another_writer(request: int) -> None:
        if request == 1:  # after this run's write, before the next request
            await (await notes.open(thread_id="t1")).update({"blockers": ["from a colleague"]})

    script = Script(
        [
            [update("c1", currentGoal="Ship v2")],
            [ToolCallPart("wait", {}, tool_call_id="w1")],
            [TextPart("Done.")],
        ],
        before=another_writer,
    )
    agent = Agent(script.model(), capabilities=[notes])
    agent.tool_plain(lambda: "waited", name="wait")

    await agent.run("Ship it.", conversation_id="t1")

    assert block_of(script.seen[1]) == {"currentGoal": "Ship v2"}
    assert block_of(script.seen[2]) == {
        "currentGoal": "Ship v2",
        "blockers": ["from a colleague"],
    }


# -- refusals ----------------------------------------------------------------------------


async def test_a_refused_update_goes_back_as_a_retry_prompt_and_is_corrected(
    notes: ScratchpadCapability,
) -> None:
    script = Script(
        [
            [update("c1", currentGoal="Ship v2", completedSteps="built it")],
            [update("c2", currentGoal="Ship v2", completedSteps=["built it"])],
            [TextPart("Noted.")],
        ]
    )
    agent = Agent(script.model(), capabilities=[notes])

    with capture_events(notes.events) as events:
        result = await agent.run("Ship it.", conversation_id="t1")

    assert result.output == "Noted."
    [(outcome, text)] = tool_results(script.requests[1])
    assert outcome == "retried"
    assert "completedSteps: Input should be a valid list" in text
    assert "call scratchpad_update again" in text  # the tool as the model knows it
    assert block_of(script.seen[1]) is None  # the refusal stored nothing
    assert tool_results(script.requests[2]) == [
        ("success", "Scratchpad updated (currentGoal, completedSteps).")
    ]
    assert await stored(notes, "t1") == {"currentGoal": "Ship v2", "completedSteps": ["built it"]}
    assert [type(e) for e in events] == [UpdateRejected, UpdateApplied]


async def test_refusals_past_the_retry_budget_are_failures_and_the_run_goes_on() -> None:
    notes = ScratchpadCapability(schema=TaskNotes, max_retries=1)
    bad = {"currentGoal": 42}
    script = Script(
        [[update("c1", **bad)], [update("c2", **bad)], [TextPart("I could not save it.")]]
    )
    agent = Agent(script.model(), capabilities=[notes])

    result = await agent.run("Ship it.", conversation_id="t1")

    assert result.output == "I could not save it."
    assert [outcome for outcome, _ in tool_results(script.requests[1])] == ["retried"]
    [(outcome, text)] = tool_results(script.requests[2])
    assert outcome == "failed"
    assert text.startswith("Not saved: The update does not fit the scratchpad's schema")
    assert await stored(notes, "t1") == {}


async def test_a_refusal_names_the_tool_as_renamed_by_a_wrapper(
    notes: ScratchpadCapability,
) -> None:
    script = Script(
        [
            [ToolCallPart("memo_scratchpad_update", "[1, 2]", tool_call_id="c1")],
            [TextPart("Sorry.")],
        ]
    )
    agent = Agent(script.model(), capabilities=[notes.prefix_tools("memo")])

    await agent.run("Ship it.")

    assert script.tools[0] == ["memo_scratchpad_update", "memo_scratchpad_read"]
    [(outcome, text)] = tool_results(script.requests[1])
    assert outcome == "retried"
    assert "are a JSON array, not an object. Call memo_scratchpad_update with" in text


async def test_the_edit_tool_is_offered_and_its_refusals_name_it_as_renamed() -> None:
    """``edit_tool=True`` offers ``scratchpad_edit`` beside the update tool; behind a
    wrapper's prefix, a refused edit names the edit tool as the model called it."""
    notes = ScratchpadCapability(storage="memory://", edit_tool=True)
    missing = {
        "op": "delete",
        "path": ["nowhere"],
        "value_json": None,
        "values_json": None,
        "index": None,
    }
    script = Script(
        [
            [ToolCallPart("memo_scratchpad_edit", {"operations": [missing]}, tool_call_id="c1")],
            [TextPart("Sorry.")],
        ]
    )
    agent = Agent(script.model(), capabilities=[notes.prefix_tools("memo")])

    async with notes:
        await agent.run("Tidy up.", conversation_id="t1")

    assert sorted(script.tools[0]) == [
        "memo_scratchpad_edit",
        "memo_scratchpad_read",
        "memo_scratchpad_update",
    ]
    [(outcome, text)] = tool_results(script.requests[1])
    assert outcome == "retried"
    assert "call memo_scratchpad_edit again" in text


async def test_a_storage_failure_is_a_retry_prompt_not_a_crash() -> None:
    # One failed write, whichever primitive the layer writes with.
    inner = await open_storage("memory://")
    backend = FaultyStorage(inner, fail_on={"update", "commit"}, faults=1)
    notes = ScratchpadCapability(storage=backend)
    script = Script(
        [[update("c1", goal="Ship v2")], [update("c2", goal="Ship v2")], [TextPart("Saved.")]]
    )
    agent = Agent(script.model(), capabilities=[notes])

    with capture_events(notes.events):
        await agent.run("Ship it.", conversation_id="t1")

    [(outcome, text)] = tool_results(script.requests[1])
    assert outcome == "retried"
    assert "This call was not saved: the scratchpad's storage failed" in text
    assert "call scratchpad_update again later" in text
    assert await stored(notes, "t1") == {"goal": "Ship v2"}


# -- several updates, persistence, scope ------------------------------------------------


async def test_three_updates_in_one_response_all_land_in_order(
    notes: ScratchpadCapability,
) -> None:
    script = Script(
        [
            [
                update("c1", currentGoal="Ship v2", completedSteps=["a"]),
                update("c2", blockers=["CI is red"]),
                update("c3", completedSteps=["a", "b"]),
            ],
            [TextPart("Done.")],
        ]
    )
    agent = Agent(script.model(), capabilities=[notes])

    await agent.run("Ship it.", conversation_id="t1")

    expected = {"currentGoal": "Ship v2", "completedSteps": ["a", "b"], "blockers": ["CI is red"]}
    assert await stored(notes, "t1") == expected
    assert block_of(script.seen[1]) == expected
    assert [outcome for outcome, _ in tool_results(script.requests[1])] == ["success"] * 3


async def test_the_state_persists_across_runs_and_agents_on_sqlite(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'notes.db'}"
    first = Script([[update("c1", currentGoal="Ship v2")], [TextPart("Noted.")]])
    async with ScratchpadCapability(storage=url, schema=TaskNotes) as notes:
        result = await Agent(first.model(), capabilities=[notes]).run("Ship it.")

    # A new process would do the same: a new capability, a new agent, the same file; the
    # run carries on the conversation of the first through its message history.
    again = Script([[TextPart("Still shipping v2.")]])
    async with ScratchpadCapability(storage=url, schema=TaskNotes) as notes:
        agent = Agent(again.model(), capabilities=[notes])
        await agent.run("Status?", message_history=result.all_messages())
        other = Script([[TextPart("Hello.")]])
        await Agent(other.model(), capabilities=[notes]).run("A new conversation.")

    assert block_of(again.seen[0]) == {"currentGoal": "Ship v2"}
    assert block_of(other.seen[0]) is None


async def test_the_scope_function_picks_the_thread() -> None:
    notes = ScratchpadCapability(scope_from=lambda ctx: f"chat-{ctx.deps.chat}")
    for chat, goal in [(1, "one"), (2, "two")]:
        script = Script([[update("c1", goal=goal)], [TextPart("ok")]])
        await Agent(script.model(), capabilities=[notes]).run(
            "Hi.", deps=SimpleNamespace(chat=chat)
        )

    assert await stored(notes, "chat-1") == {"goal": "one"}
    assert await stored(notes, "chat-2") == {"goal": "two"}


async def test_an_async_scope_with_a_resource_shares_notes_across_threads() -> None:
    async def per_user(ctx: RunContext[dict[str, str]]) -> tuple[str, str]:
        return ctx.deps["chat"], ctx.deps["user"]

    notes = ScratchpadCapability(scope="resource", scope_from=per_user)
    first = Script([[update("c1", name="Ada")], [TextPart("ok")]])
    await Agent(first.model(), capabilities=[notes]).run(
        "I'm Ada.", deps={"chat": "a", "user": "u7"}
    )
    second = Script([[TextPart("Hi Ada.")]])
    await Agent(second.model(), capabilities=[notes]).run("Hi.", deps={"chat": "b", "user": "u7"})

    assert block_of(second.seen[0]) == {"name": "Ada"}


@pytest.mark.parametrize(
    ("deps", "conversation_id", "thread"),
    [
        (SimpleNamespace(thread_id="from-deps"), "conv", "from-deps"),
        ({"thread_id": "from-a-dict"}, "conv", "from-a-dict"),
        (None, "conv", "conv"),
    ],
)
async def test_the_default_scope(deps: Any, conversation_id: str, thread: str) -> None:
    notes = ScratchpadCapability()
    script = Script([[update("c1", seen=True)], [TextPart("ok")]])
    agent = Agent(script.model(), capabilities=[notes], deps_type=object)

    await agent.run("Hi.", deps=deps, conversation_id=conversation_id)

    assert await stored(notes, thread) == {"seen": True}


async def test_without_a_thread_the_default_scope_refuses_to_guess() -> None:
    ctx = SimpleNamespace(deps=None, conversation_id=None)

    with pytest.raises(ScratchpadConfigError, match="no thread id"):
        scope_from_run(ctx)  # type: ignore[arg-type]


async def test_your_own_tools_reach_the_runs_handle(notes: ScratchpadCapability) -> None:
    call = ToolCallPart("start", {"goal": "Ship v2"}, tool_call_id="s1")
    script = Script([[call], [TextPart("ok")]] * 2)  # two runs
    agent = Agent(script.model(), capabilities=[notes])
    handles: list[Any] = []

    @agent.tool
    async def start(ctx: RunContext[None], goal: str) -> str:
        handle = await notes.handle(ctx)
        assert await notes.handle(ctx) is handle  # the run's own, not one per call
        handles.append(handle)
        await handle.update({"currentGoal": goal})
        return "started"

    await agent.run("Go.", conversation_id="t1")
    await agent.run("Go again.", conversation_id="t2")

    assert block_of(script.seen[1]) == {"currentGoal": "Ship v2"}
    assert handles[0].scope_key != handles[1].scope_key  # each run its own scope


async def test_two_scratchpads_with_one_id_are_refused() -> None:
    with pytest.raises(UserError, match="'scratchpad' is used by multiple capabilities"):
        Agent(TestModel(), capabilities=[ScratchpadCapability(), ScratchpadCapability()])


async def test_the_scope_and_the_storage_are_the_cores() -> None:
    assert RunScope is CoreRunScope
    backend = await open_storage("memory://")
    notes = ScratchpadCapability(storage=backend)
    assert isinstance(notes.core, ScratchpadCore)
    assert notes.toolset.core is notes.core  # one core: the toolset's is the capability's
    await (await notes.open(thread_id="t1")).update({"goal": "x"})
    assert notes.core.backend is backend


async def test_a_bad_scope_stops_the_run_with_a_config_error() -> None:
    notes = ScratchpadCapability(scope_from=lambda ctx: "")
    agent = Agent(Script([[TextPart("ok")]]).model(), capabilities=[notes])

    with pytest.raises(ScratchpadConfigError, match="non-empty thread id"):
        await agent.run("Hi.")


@pytest.mark.parametrize(
    ("args", "options", "message"),
    [
        ((scratchpad(),), {"schema": TaskNotes}, "either a layer or scratchpad\\(\\) options"),
        (("sqlite:///notes.db",), {}, "pass a storage URL as storage="),
        ((), {"scope": "everyone"}, "scope"),
        ((), {"scope_from": "thread"}, "scope_from must be a function"),
        ((), {"storage": 42}, "must be a URL"),
        ((), {"tool_name": "scratchpad/update"}, "not a name providers accept"),
        ((), {"max_retries": -1}, "max_retries"),
    ],
)
async def test_bad_options_are_config_errors(
    args: tuple[Any, ...], options: dict[str, Any], message: str
) -> None:
    with pytest.raises(ScratchpadConfigError, match=message):
        ScratchpadCapability(*args, **options)


async def test_read_only_shows_the_block_without_the_tool() -> None:
    backend = await open_storage("memory://")
    await (await scratchpad().open(backend, thread_id="t1")).update({"goal": "Ship v2"})
    notes = ScratchpadCapability(storage=backend, read_only=True)
    script = Script([[TextPart("ok")]])

    await Agent(script.model(), capabilities=[notes]).run("Hi.", conversation_id="t1")

    assert block_of(script.seen[0]) == {"goal": "Ship v2"}
    assert script.tools == [[]]


async def test_storage_opened_here_is_closed_by_aclose_and_a_passed_backend_is_not() -> None:
    backend = await open_storage("memory://")
    async with ScratchpadCapability(storage=backend) as notes:
        await (await notes.open(thread_id="t1")).update({"goal": "x"})
    assert await (await scratchpad().open(backend, thread_id="t1")).refresh() == {"goal": "x"}

    bus = EventBus()
    owned = ScratchpadCapability(storage="memory://", events=bus)
    assert owned.events is bus
    await owned.open(thread_id="t1")
    opened = owned._notes.core.opened
    assert opened is not None
    assert not opened._closed
    await owned.aclose()
    assert opened._closed
    assert owned._notes.core.opened is None  # a later run opens it again


# -- streaming and pydantic-ai's TestModel ------------------------------------------------


async def test_run_stream_sees_the_block_and_applies_updates(
    notes: ScratchpadCapability,
) -> None:
    seen: list[str | None] = []

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
        seen.append(shown(messages, info))
        if len(seen) == 1:
            args = '{"currentGoal": "Ship v2"}'
            yield {0: DeltaToolCall("scratchpad_update", args, tool_call_id="c1")}
        else:
            yield "Shipping "
            yield "v2."

    agent = Agent(FunctionModel(stream_function=stream), capabilities=[notes])
    async with agent.run_stream("Ship it.", conversation_id="t1") as result:
        texts = [text async for text in result.stream_text()]

    assert texts[-1] == "Shipping v2."
    assert [block_of(text) for text in seen] == [None, {"currentGoal": "Ship v2"}]
    assert await stored(notes, "t1") == {"currentGoal": "Ship v2"}


async def test_agent_iter_drives_the_same_hooks(notes: ScratchpadCapability) -> None:
    script = Script([[update("c1", currentGoal="Ship v2")], [TextPart("ok")]])
    agent = Agent(script.model(), capabilities=[notes])

    async with agent.iter("Ship it.", conversation_id="t1") as run:
        nodes = [node async for node in run]

    assert len(nodes) >= 4
    assert [block_of(text) for text in script.seen] == [None, {"currentGoal": "Ship v2"}]


async def test_run_sync_works_too() -> None:
    notes = ScratchpadCapability(storage="memory://")
    script = Script([[update("c1", goal="Ship v2")], [TextPart("ok")]])
    agent = Agent(script.model(), capabilities=[notes])

    def synchronous_code() -> None:  # in a thread with no event loop running
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)  # the loop run_sync uses; closed here, not leaked
        try:
            agent.run_sync("Ship it.", conversation_id="t1")
        finally:
            asyncio.set_event_loop(None)
            loop.close()

    await anyio.to_thread.run_sync(synchronous_code)

    assert block_of(script.seen[1]) == {"goal": "Ship v2"}


class RecordingTestModel(TestModel):
    """pydantic-ai's ``TestModel``, keeping the messages of every request it was sent."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: list[list[ModelMessage]] = []

    async def request(self, messages: list[ModelMessage], *args: Any, **kwargs: Any) -> Any:
        self.sent.append(list(messages))
        return await super().request(messages, *args, **kwargs)


async def test_test_model_calls_the_tool_and_sees_what_it_wrote() -> None:
    notes = ScratchpadCapability()  # free-form: TestModel fills in the open object
    model = RecordingTestModel()
    agent = Agent(model, capabilities=[notes])

    result = await agent.run("Ship it.", conversation_id="t1")

    calls = [
        part
        for message in result.all_messages()
        if isinstance(message, ModelResponse)
        for part in message.parts
        if isinstance(part, ToolCallPart)
    ]
    # TestModel calls every tool once: the update, and the read tool (a part by path).
    assert sorted(part.tool_name for part in calls) == ["scratchpad_read", "scratchpad_update"]
    [call] = [part for part in calls if part.tool_name == "scratchpad_update"]
    written = call.args_as_dict()
    assert written  # TestModel sent something to store
    assert await stored(notes, "t1") == written
    last = model.sent[-1][-1]
    assert isinstance(last, ModelRequest)
    assert block_of(str(last.parts[-1].content)) == written
    assert f"Scratchpad updated ({', '.join(written)})." in result.output


# -- the docs ---------------------------------------------------------------------------

DOC = Path(__file__).resolve().parents[2] / "docs" / "integrations" / "pydantic-ai.md"


async def test_the_three_lines_in_the_docs_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    code = re.findall(r"```python[^\n]*\n(.*?)```", DOC.read_text(), re.DOTALL)[0]
    lines = [line for line in code.splitlines() if line.strip()]
    assert [line.split(" = ")[0] for line in lines[-3:]] == ["notes", "agent", "result"]
    # The model the page names needs a key and the network; pydantic-ai's TestModel does not.
    assert code.count('"openai:gpt-5"') == 1
    code = code.replace('"openai:gpt-5"', "TestModel()")
    namespace: dict[str, Any] = {"TestModel": TestModel}
    exec(f"async def main():\n{textwrap.indent(code, '    ')}\n    return notes, result", namespace)
    monkeypatch.chdir(tmp_path)

    notes, result = await namespace["main"]()
    await notes.aclose()

    # TestModel calls the tool with no argument (every field is optional): the tool's
    # answer to an empty update comes back, and nothing is written.
    assert "Nothing was written" in result.output
    assert (tmp_path / "notes.db").exists()
    assert result.all_messages()[0].conversation_id == "ticket-42"


# -- the plain toolset, and imports -------------------------------------------------------


async def run_with_toolset(toolset: ScratchpadToolset) -> Script:
    script = Script(
        [
            [update("c1", goal="Ship v2"), update("c2", steps=["built"])],
            [update("c3", goal=7)],
            [TextPart("ok")],
        ]
    )
    await Agent(script.model(), toolsets=[toolset]).run("Hi.", conversation_id="t1")
    return script


class ToolsetWithoutRunCopies(ScratchpadToolset):
    """As on a pydantic-ai whose toolsets get no per-run copy."""

    async def for_run(self, ctx: RunContext[Any]) -> ScratchpadToolset:
        return self


@pytest.mark.parametrize("kind", [ScratchpadToolset, ToolsetWithoutRunCopies])
async def test_the_plain_toolset_adds_the_tool_and_the_block(kind: type[ScratchpadToolset]) -> None:
    toolset = kind(schema=dict[str, str | list[str]])

    script = await run_with_toolset(toolset)

    assert [block_of(text) for text in script.seen] == [
        None,
        {"goal": "Ship v2", "steps": ["built"]},
        {"goal": "Ship v2", "steps": ["built"]},
    ]
    [(outcome, text)] = tool_results(script.requests[2])
    assert outcome == "retried"
    assert "scratchpad_update" in text
    assert await stored(toolset, "t1") == {"goal": "Ship v2", "steps": ["built"]}


@pytest.mark.parametrize("kind", [ScratchpadCapability, ScratchpadToolset, ToolsetWithoutRunCopies])
async def test_a_call_is_one_write_and_a_request_at_most_one_read(kind: Any) -> None:
    """Through the core: a tool call writes on the run's handle, or, without a per-run copy,
    on the scope without reading it first; each request reads the block once (the first
    one reuses what the run read when it opened)."""
    storage = FaultyStorage(await open_storage("memory://"))  # counts; injects nothing
    notes = kind(storage=storage)
    script = Script(
        [[update("c1", goal="Ship v2"), update("c2", steps=["built"])], [TextPart("ok")]]
    )
    capabilities = [notes] if kind is ScratchpadCapability else []
    toolsets = [] if kind is ScratchpadCapability else [notes]
    agent = Agent(script.model(), capabilities=capabilities, toolsets=toolsets)

    await agent.run("Hi.", conversation_id="t1")

    assert storage.calls == {"get_revision": 2, "commit": 2}  # two requests, two calls
    assert block_of(script.seen[1]) == {"goal": "Ship v2", "steps": ["built"]}


def reimport(monkeypatch: pytest.MonkeyPatch, missing: str) -> ModuleType:
    """Import the integration afresh with ``missing`` made unimportable; the originals come
    back when the test ends."""
    for name in [n for n in sys.modules if n == MODULE or n.startswith(MODULE + ".")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, missing, None)  # what `import` of a missing module sees
    return importlib.import_module(MODULE)


async def test_without_the_capabilities_api_the_toolset_still_works(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    module = reimport(monkeypatch, "pydantic_ai.capabilities")

    with pytest.raises(ImportError, match=r"ScratchpadToolset\(") as caught:
        module.ScratchpadCapability  # noqa: B018
    assert "capabilities" in str(caught.value)
    monkeypatch.undo()  # pydantic-ai itself needs its capabilities to run an agent

    toolset = module.ScratchpadToolset(schema=dict[str, str | list[str]])
    script = await run_with_toolset(toolset)
    assert block_of(script.seen[2]) == {"goal": "Ship v2", "steps": ["built"]}


async def test_importing_without_pydantic_ai_says_which_extra_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(ImportError, match='pip install "noetic-scratchpad\\[pydantic-ai\\]"'):
        reimport(monkeypatch, "pydantic_ai")


async def test_a_call_id_reused_in_a_later_turn_is_a_new_call_or_a_retry(
    notes: ScratchpadCapability,
) -> None:
    """Issue 23, item 4: some runtimes number their calls ``call_0`` in every turn. The
    second turn's ``call_0`` with other arguments is applied (its event notes the reused
    id); the third's, repeating the second's arguments, is a retry: nothing written, the
    first result returned. A later run (a new handle) still knows the call."""
    script = Script(
        [
            [update("call_0", currentGoal="Ship v2")],
            [update("call_0", blockers=["CI is red"])],
            [update("call_0", blockers=["CI is red"])],
            [TextPart("Noted.")],
        ]
    )
    agent = Agent(script.model(), instructions=BASE, capabilities=[notes])

    with capture_events(notes.events) as events:
        await agent.run("Ship it.", conversation_id="t1")
        handle = await notes.open(thread_id="t1")
        again = await handle.call("update", {"blockers": ["CI is red"]}, call_id="call_0")

    assert await stored(notes, "t1") == {"currentGoal": "Ship v2", "blockers": ["CI is red"]}
    assert [tool_results(request) for request in script.requests[1:]] == [
        [("success", "Scratchpad updated (currentGoal).")],
        [("success", "Scratchpad updated (blockers).")],
        [("success", "Scratchpad updated (blockers).")],
    ]
    assert again == "Scratchpad updated (blockers)."
    applied = events.of(UpdateApplied)
    assert [(e.keys, e.reused_call_id, e.revision) for e in applied] == [
        (("currentGoal",), False, 1),
        (("blockers",), True, 2),
    ]
    assert [(e.call_id, e.revision) for e in events.of(UpdateRetried)] == [
        ("call_0", 2),
        ("call_0", 2),
    ]
