"""``count_tokens=``: every host counts the block's budget in the application's tokens.

The stand-in counter takes one token a character, four times the default estimate (about
what Chinese or Japanese text costs with OpenAI's tokenizers). Notes of about 330
characters (some 83 estimated tokens) fit a 200-token budget by the estimate, and do not
by the counter: each host must show them cut, in at most 200 of the counter's tokens.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from agents import RunContextWrapper
from mcp import Client
from mcp.types import TextContent
from pydantic_ai import Agent as PydanticAgent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from noetic_scratchpad import (
    Agent,
    AgentHarness,
    ScratchpadConfigError,
    ScriptedModel,
    ViewTruncated,
    scratchpad,
)
from noetic_scratchpad.integrations.mcp import create_server, serve_stdio
from noetic_scratchpad.integrations.openai_agents import Scratchpad
from noetic_scratchpad.integrations.pydantic_ai import ScratchpadCapability, ScratchpadToolset
from noetic_scratchpad.items import Message
from noetic_scratchpad.render import estimate_tokens
from noetic_scratchpad.storage import MemoryStorage
from noetic_scratchpad.testing import capture_events

BUDGET = 200
NOTES = {"steps": [f"step {i}: checked the invoice batch" for i in range(9)]}
CUT = "[scratchpad view truncated:"


class Counter:
    """One token a character; remembers that it was asked."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, text: str) -> int:
        self.calls += 1
        return len(text)


def assert_cut_to_the_counter(block: str | None, counter: Counter, budget: int = BUDGET) -> None:
    assert block is not None
    assert counter.calls > 0
    assert CUT in block
    assert len(block) <= budget  # the counter's tokens: one a character
    assert block.startswith("<scratchpad>\n")
    assert block.endswith("\n</scratchpad>")


def test_the_notes_fit_by_the_estimate_and_not_by_the_counter() -> None:
    """The premise of every test here."""
    block = "<scratchpad>\n" + json.dumps(NOTES, indent=2) + "\n</scratchpad>"
    assert estimate_tokens(block) <= BUDGET < len(block)


@pytest.mark.asyncio
async def test_the_harness_counts_every_recall_with_count_tokens() -> None:
    counter = Counter()
    model = ScriptedModel(["ok"])
    harness = AgentHarness(
        name="a",
        agent=Agent(model=model),
        context_layers=[scratchpad()],
        context_budget=BUDGET,
        count_tokens=counter,
    )
    async with harness:
        await harness.update_state("scratchpad", NOTES, thread_id="t1")
        with capture_events(harness.events) as events:
            await harness.run("go on", thread_id="t1")
    (request,) = model.requests
    blocks = [
        item.content
        for item in request.items
        if isinstance(item, Message) and item.content.startswith("<scratchpad>")
    ]
    assert len(blocks) == 1
    assert_cut_to_the_counter(blocks[0], counter)
    (cut,) = events.of(ViewTruncated)
    assert cut.total_tokens == len(
        "<scratchpad>\n" + json.dumps(NOTES, indent=2) + "\n</scratchpad>"
    )


@pytest.mark.asyncio
async def test_the_harness_takes_its_old_keyword_with_a_warning() -> None:
    counter = Counter()
    with pytest.warns(DeprecationWarning, match="count_tokens"):
        harness = AgentHarness(name="a", agent=Agent(model=ScriptedModel(["ok"])), tokenize=counter)
    assert harness.tokenize is counter
    with pytest.raises(ScratchpadConfigError, match="count_tokens only"):
        AgentHarness(name="a", agent=Agent(model=ScriptedModel([])), tokenize=len, count_tokens=len)


@pytest.mark.asyncio
async def test_layer_open_sizes_the_handles_block_with_count_tokens() -> None:
    counter = Counter()
    storage = MemoryStorage()
    layer = scratchpad()
    await (await layer.open(storage, thread_id="t1")).update(NOTES)
    handle = await layer.open(storage, thread_id="t1", count_tokens=counter)
    assert_cut_to_the_counter(handle.block(BUDGET), counter)
    plain = await layer.open(storage, thread_id="t1")
    assert CUT not in plain.block(BUDGET)  # the default estimate: it fits


@pytest.mark.asyncio
@pytest.mark.parametrize("host", [ScratchpadCapability, ScratchpadToolset])
async def test_pydantic_ai_counts_the_block_where_the_model_reads_it(host: Any) -> None:
    counter = Counter()
    seen: list[str] = []

    async def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        # The block is in the instructions (the toolset) or, by the capability's default
        # placement, the request's last part: what the model reads, wherever it is.
        prompts = [
            str(part.content)
            for message in messages
            if isinstance(message, ModelRequest)
            for part in message.parts
            if isinstance(part, UserPromptPart)
        ]
        seen.append("\n".join([info.instructions or "", *prompts]))
        return ModelResponse(parts=[TextPart("ok")])

    notes = host(storage="memory://", budget=BUDGET, count_tokens=counter)
    async with notes:
        await (await notes.open(thread_id="t1")).update(NOTES)
        if host is ScratchpadCapability:
            agent = PydanticAgent(FunctionModel(model), capabilities=[notes])
        else:
            agent = PydanticAgent(FunctionModel(model), toolsets=[notes])
        await agent.run("go on", deps=type("Deps", (), {"thread_id": "t1"})())
    assert len(seen) == 1
    start = seen[0].index("<scratchpad>")
    end = seen[0].index("</scratchpad>", start) + len("</scratchpad>")
    assert_cut_to_the_counter(seen[0][start:end], counter)


@pytest.mark.asyncio
async def test_the_agents_sdk_counts_the_block_with_count_tokens() -> None:
    counter = Counter()
    notes = Scratchpad(storage=MemoryStorage(), budget=BUDGET, count_tokens=counter)
    run_context = RunContextWrapper(context={"thread_id": "t1"})
    await (await notes.handle(run_context)).update(NOTES)
    assert_cut_to_the_counter(await notes.block(run_context), counter)


@pytest.mark.asyncio
async def test_mcp_read_counts_the_block_with_count_tokens() -> None:
    counter = Counter()
    storage = MemoryStorage()
    layer = scratchpad()
    big = {"steps": [f"step {i}: checked the invoice batch" for i in range(60)]}
    await (await layer.open(storage, thread_id="default")).update(big)
    budget = layer.budget.max
    server = create_server(layer, storage, count_tokens=counter)
    async with Client(server) as client:
        result = await client.call_tool("scratchpad_read", {})
    content = result.content[0]
    assert isinstance(content, TextContent)
    assert estimate_tokens(json.dumps(big, indent=2)) < budget
    assert_cut_to_the_counter(content.text, counter, budget)


NOT_A_COUNTER = "cl100k_base"
HOSTS: list[Callable[[], Any]] = [
    lambda: AgentHarness(
        name="a", agent=Agent(model=ScriptedModel([])), count_tokens=NOT_A_COUNTER
    ),
    lambda: ScratchpadCapability(storage="memory://", count_tokens=NOT_A_COUNTER),
    lambda: ScratchpadToolset(storage="memory://", count_tokens=NOT_A_COUNTER),
    lambda: Scratchpad(storage=MemoryStorage(), count_tokens=NOT_A_COUNTER),
    lambda: create_server(None, MemoryStorage(), count_tokens=NOT_A_COUNTER),
]


@pytest.mark.parametrize("build", HOSTS, ids=["harness", "capability", "toolset", "agents", "mcp"])
def test_a_counter_that_is_not_a_function_is_refused_when_the_host_is_built(
    build: Callable[[], Any],
) -> None:
    with pytest.raises(ScratchpadConfigError, match="count_tokens must be a function"):
        build()


@pytest.mark.asyncio
async def test_layer_open_refuses_a_counter_that_is_not_a_function() -> None:
    with pytest.raises(ScratchpadConfigError, match="count_tokens must be a function"):
        await scratchpad().open(MemoryStorage(), thread_id="t1", count_tokens=NOT_A_COUNTER)  # type: ignore[arg-type]


@pytest.mark.asyncio
async def test_serve_stdio_refuses_a_counter_that_is_not_a_function_before_serving() -> None:
    with pytest.raises(ScratchpadConfigError, match="count_tokens must be a function"):
        await serve_stdio(MemoryStorage(), count_tokens=NOT_A_COUNTER)  # type: ignore[arg-type]
