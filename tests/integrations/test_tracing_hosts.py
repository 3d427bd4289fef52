"""In every host, the model's update is one ``upsert_memory`` span under the span that is
current where the host runs the tool: pydantic-ai's tool span (what Logfire shows), the
MCP SDK's, and in the harness, the Agents SDK (whose own traces are not OpenTelemetry's)
and the HTTP app, the application's span around the run or the request."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from agents import Agent as AgentsAgent
from agents import Runner, set_tracing_disabled
from mcp import Client
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Span
from pydantic_ai import Agent as PydanticAgent
from pydantic_ai.capabilities.instrumentation import Instrumentation
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from noetic_scratchpad import scratchpad
from noetic_scratchpad.integrations.mcp import create_server
from noetic_scratchpad.integrations.openai_agents import Scratchpad
from noetic_scratchpad.integrations.pydantic_ai import ScratchpadCapability
from noetic_scratchpad.items import FunctionCall
from noetic_scratchpad.runtime import Agent, AgentHarness, ScriptedModel
from noetic_scratchpad.server import create_app
from noetic_scratchpad.storage import MemoryStorage
from tests.integrations.agents_sdk_fakes import ScriptedAgentsModel, raw_tool_call, reply
from tests.server.helpers import api_client
from tests.spans import ancestors, attributes, memory_spans, recording

UPDATE = {"goal": "ship"}
tracer = trace.get_tracer("the-application")


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    yield from recording()


def the_update(spans: InMemorySpanExporter) -> ReadableSpan:
    """The one write span of the run, checked as the conventions name it."""
    [span] = [s for s in memory_spans(spans) if s.name != "search_memory"]
    assert span.name == "upsert_memory"
    assert attributes(span)["gen_ai.operation.name"] == "upsert_memory"
    assert attributes(span)["gen_ai.memory.store.id"] == "scratchpad"
    assert attributes(span)["gen_ai.memory.record.id"] == "t1"
    assert attributes(span)["scratchpad.revision"] == 1
    return span


def parent_of(span: ReadableSpan, spans: InMemorySpanExporter) -> ReadableSpan:
    chain = ancestors(span, spans)
    assert chain, f"{span.name} has no parent among the finished spans"
    return chain[0]


def is_child_of(span: ReadableSpan, parent: Span) -> bool:
    return span.parent is not None and span.parent.span_id == parent.get_span_context().span_id


@pytest.mark.asyncio
async def test_the_harness_tool_call_is_a_span_under_the_applications_span(
    spans: InMemorySpanExporter,
) -> None:
    call = FunctionCall(call_id="c1", name="scratchpad/update", arguments=json.dumps(UPDATE))
    model = ScriptedModel([[call], "Done."])
    harness = AgentHarness("a", Agent(model=model), {}, [scratchpad()], MemoryStorage())
    async with harness:
        with tracer.start_as_current_span("agent run") as run:
            await harness.run("go", thread_id="t1")
    update = the_update(spans)
    assert is_child_of(update, run)
    assert attributes(update)["scratchpad.source"] == "tool"
    # The run's reads (its start, the refresh after the tool call): what the model saw.
    reads = [span for span in memory_spans(spans) if span.name == "search_memory"]
    assert len(reads) == 2
    assert all(is_child_of(read, run) for read in reads)
    assert [attributes(read)["gen_ai.memory.record.count"] for read in reads] == [0, 1]


@pytest.mark.asyncio
async def test_the_pydantic_ai_tool_call_is_a_span_under_its_tool_span(
    spans: InMemorySpanExporter,
) -> None:
    """With pydantic-ai's instrumentation on (its ``Instrumentation`` capability, which
    ``logfire.instrument_pydantic_ai()`` turns on for every agent), the update nests under
    the span of the tool call that made it."""

    async def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart("scratchpad_update", UPDATE, "c1")])
        return ModelResponse(parts=[TextPart("Done.")])

    async with ScratchpadCapability(scratchpad(), storage=MemoryStorage()) as notes:
        agent = PydanticAgent(FunctionModel(answer), capabilities=[notes, Instrumentation()])
        await agent.run("go", deps={"thread_id": "t1"})
    update = the_update(spans)
    tool = parent_of(update, spans)
    assert attributes(tool)["gen_ai.tool.name"] == "scratchpad_update"
    assert attributes(tool)["gen_ai.tool.call.id"] == "c1"
    assert any(above.name.startswith("invoke_agent") for above in ancestors(tool, spans))


@pytest.mark.asyncio
async def test_the_agents_sdk_tool_call_is_a_span_under_the_applications_span(
    spans: InMemorySpanExporter,
) -> None:
    set_tracing_disabled(True)  # the SDK's own traces: not OpenTelemetry's, exported nowhere
    model = ScriptedAgentsModel(
        [[raw_tool_call("c1", json.dumps(UPDATE), name="scratchpad_update")], [reply("Done.")]]
    )
    async with Scratchpad(scratchpad(), storage=MemoryStorage()) as notes:
        agent = AgentsAgent(name="a", instructions="Be brief.", tools=notes.tools, model=model)
        with tracer.start_as_current_span("agent run") as run:
            await Runner.run(agent, "go", context={"thread_id": "t1"})
    update = the_update(spans)
    assert is_child_of(update, run)


@pytest.mark.asyncio
async def test_the_mcp_tool_call_is_a_span_under_the_mcp_servers_span(
    spans: InMemorySpanExporter,
) -> None:
    async with Client(create_server(scratchpad(), MemoryStorage(), default_id="t1")) as client:
        with tracer.start_as_current_span("agent run") as run:
            await client.call_tool("scratchpad_update", {"update": UPDATE})
    update = the_update(spans)
    chain = ancestors(update, spans)
    assert run.get_span_context().span_id in {s.context.span_id for s in chain if s.context}
    server_span: Any = parent_of(update, spans)
    assert "scratchpad_update" in server_span.name  # the MCP SDK's span of the tool call


@pytest.mark.asyncio
async def test_the_http_update_is_a_span_under_the_applications_span(
    spans: InMemorySpanExporter,
) -> None:
    pad = create_app("memory://", layers=[scratchpad()])
    async with api_client(pad) as client:
        with tracer.start_as_current_span("request") as request:
            response = await client.patch("/api/scopes/thread/t1", json=UPDATE)
    assert response.status_code == 200
    update = the_update(spans)
    assert is_child_of(update, request)
    assert attributes(update)["scratchpad.source"] == "api"
