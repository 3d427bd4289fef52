"""Every option means the same in every host.

One scenario per cell of hosts x options, each host driven offline by its own machinery
(the harness with a scripted model and with each provider adapter over the real SDK and a
mock transport, pydantic-ai's ``Agent`` with a ``FunctionModel``, the Agents SDK's
``Runner`` with a scripted ``Model``, MCP through the SDK's in-process ``Client``). In each
cell the model makes the same calls (an update, a schema refusal, and with the edit tool an
edit and a refused edit) and the test checks the tools it was offered, under the names that
host presents, the text it read back for each call, and what was stored.

The HTTP app has no model and offers no tool: its cells send the same update and refusal
as ``PATCH`` requests through httpx's ASGI transport (the options that apply over HTTP:
all but ``edit_tool``, for which the API has no endpoint) and check the response, the
``application/problem+json`` of the refusal, and what was stored.

A second table runs a failing storage under every host: the model reads a short sentence
(not saved, or not known to be saved), never a path, a host or a driver's message, while
the logs still carry them.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import anthropic
import openai
import pytest
from agents import Agent as AgentsAgent
from agents import Runner, set_tracing_disabled
from mcp import Client, MCPError
from mcp.types import TextContent
from pydantic_ai import Agent as PydanticAgent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    ModelResponsePart,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from noetic_scratchpad import ScratchpadConfigError, StorageError, scratchpad
from noetic_scratchpad.adapters import AnthropicModel, OpenAIChatModel, OpenAIResponsesModel
from noetic_scratchpad.core import ScratchpadCore
from noetic_scratchpad.integrations.mcp import create_server
from noetic_scratchpad.integrations.openai_agents import Scratchpad
from noetic_scratchpad.integrations.pydantic_ai import ScratchpadCapability
from noetic_scratchpad.items import FunctionCall, FunctionCallOutput
from noetic_scratchpad.layer import ScratchpadLayer
from noetic_scratchpad.runtime import Agent, AgentHarness, ScriptedModel
from noetic_scratchpad.runtime.model import ModelRequest as HarnessRequest
from noetic_scratchpad.server import create_app
from noetic_scratchpad.storage import MemoryStorage, StorageBackend
from noetic_scratchpad.testing import FaultyStorage
from tests.adapters.test_anthropic import message_payload
from tests.adapters.test_openai import (
    chat_payload,
    function_call_output,
    message_output,
    responses_payload,
)
from tests.integrations.agents_sdk_fakes import (
    ScriptedAgentsModel,
    TaskNotes,
    raw_tool_call,
    reply,
)

try:
    import httpx2 as httpx
except ImportError:  # pragma: no cover - depends on the installed SDKs
    import httpx  # type: ignore[no-redef]

THREAD, RESOURCE = "t1", "u1"

Kind = Literal["update", "edit", "read"]


@dataclass(frozen=True)
class Call:
    """One tool call of the model: which of the scratchpad's tools, with what arguments."""

    kind: Kind
    args: dict[str, Any]
    call_id: str


@dataclass
class Seen:
    """What the model saw in one run: the tools offered, and the text read for each call."""

    tools: list[str] = field(default_factory=list)
    texts: dict[str, str] = field(default_factory=dict)
    everything: str = ""
    """All the model was sent, as text: instructions, the block, tools, every result."""


# -- the hosts ---------------------------------------------------------------------------


class Host:
    """A way in: ``names`` maps our tools to the names this host presents; ``run`` plays
    ``calls`` as one conversation and returns what the model saw."""

    name: str
    names: ClassVar[dict[str, str]]
    extra_tools: ClassVar[tuple[str, ...]] = ()

    async def run(
        self, layer: ScratchpadLayer, storage: StorageBackend, calls: Sequence[Call]
    ) -> Seen:
        raise NotImplementedError


def _scope(layer: ScratchpadLayer) -> tuple[str, str | None]:
    return THREAD, RESOURCE if layer.scope == "resource" else None


class ScriptedHarness(Host):
    name = "harness"
    names: ClassVar[dict[str, str]] = {
        "update": "scratchpad/update",
        "edit": "scratchpad/edit",
        "read": "scratchpad/read",
    }

    async def run(
        self, layer: ScratchpadLayer, storage: StorageBackend, calls: Sequence[Call]
    ) -> Seen:
        turns: list[Any] = [
            [FunctionCall(call_id=c.call_id, name=self.names[c.kind], arguments=json.dumps(c.args))]
            for c in calls
        ]
        model = ScriptedModel([*turns, "Done."])
        thread, resource = _scope(layer)
        harness = AgentHarness("a", Agent(model=model), {}, [layer], storage)
        async with harness:
            await harness.run("go", thread_id=thread, resource_id=resource)
        seen = Seen(tools=[spec.name for spec in model.requests[0].tools])
        for request in model.requests:
            seen.texts.update(_harness_outputs(request))
        seen.everything = repr(model.requests)
        return seen


def _harness_outputs(request: HarnessRequest) -> dict[str, str]:
    return {
        item.call_id: item.output for item in request.items if isinstance(item, FunctionCallOutput)
    }


def _mock_transport(answers: list[dict[str, Any]], sent: list[dict[str, Any]]) -> Any:
    def handle(request: httpx.Request) -> httpx.Response:
        sent.append(json.loads(request.content))
        return httpx.Response(200, json=answers[len(sent) - 1])

    return httpx.AsyncClient(transport=httpx.MockTransport(handle))


class ProviderHarness(Host):
    """The harness over a provider adapter and the provider's real SDK."""

    names: ClassVar[dict[str, str]] = {
        "update": "scratchpad__update",
        "edit": "scratchpad__edit",
        "read": "scratchpad__read",
    }

    def __init__(self, api: Literal["responses", "chat", "anthropic"]) -> None:
        self.api = api
        self.name = f"harness+{api}"

    def _model(self, calls: Sequence[Call], sent: list[dict[str, Any]]) -> Any:
        api = self.api
        if api == "responses":
            answers = [
                responses_payload(
                    [function_call_output(c.call_id, self.names[c.kind], json.dumps(c.args))]
                )
                for c in calls
            ] + [responses_payload([message_output("Done.")])]
            client = openai.AsyncOpenAI(
                api_key="test",
                base_url="http://openai.test/v1",
                http_client=_mock_transport(answers, sent),
                max_retries=0,
            )
            return OpenAIResponsesModel(client, "m")
        if api == "chat":
            answers = [
                chat_payload(None, [(c.call_id, self.names[c.kind], json.dumps(c.args))])
                for c in calls
            ] + [chat_payload("Done.", [])]
            client = openai.AsyncOpenAI(
                api_key="test",
                base_url="http://openai.test/v1",
                http_client=_mock_transport(answers, sent),
                max_retries=0,
            )
            return OpenAIChatModel(client, "m")
        use = [
            {"type": "tool_use", "id": c.call_id, "name": self.names[c.kind], "input": c.args}
            for c in calls
        ]
        answers = [message_payload([block]) for block in use]
        answers.append(message_payload([{"type": "text", "text": "Done."}]))
        client = anthropic.AsyncAnthropic(
            api_key="test",
            base_url="http://anthropic.test",
            http_client=_mock_transport(answers, sent),
            max_retries=0,
        )
        return AnthropicModel(client, "m")

    async def run(
        self, layer: ScratchpadLayer, storage: StorageBackend, calls: Sequence[Call]
    ) -> Seen:
        sent: list[dict[str, Any]] = []
        model = self._model(calls, sent)
        thread, resource = _scope(layer)
        harness = AgentHarness("a", Agent(model=model), {}, [layer], storage)
        async with harness:
            await harness.run("go", thread_id=thread, resource_id=resource)
        await model.client.close()
        return Seen(
            tools=self._tool_names(sent[0]),
            texts=self._outputs(sent),
            everything=json.dumps(sent, ensure_ascii=False),
        )

    def _tool_names(self, body: dict[str, Any]) -> list[str]:
        tools = body.get("tools", [])
        if self.api == "chat":
            return [tool["function"]["name"] for tool in tools]
        return [tool["name"] for tool in tools]

    def _outputs(self, sent: list[dict[str, Any]]) -> dict[str, str]:
        texts: dict[str, str] = {}
        for body in sent:
            if self.api == "responses":
                for item in body["input"]:
                    if item.get("type") == "function_call_output":
                        texts[item["call_id"]] = item["output"]
            elif self.api == "chat":
                for message in body["messages"]:
                    if message["role"] == "tool":
                        texts[message["tool_call_id"]] = message["content"]
            else:
                for message in body["messages"]:
                    for block in message["content"]:
                        if isinstance(block, dict) and block.get("type") == "tool_result":
                            texts[block["tool_use_id"]] = block["content"]
        return texts


class PydanticAIHost(Host):
    name = "pydantic-ai"
    names: ClassVar[dict[str, str]] = {
        "update": "scratchpad_update",
        "edit": "scratchpad_edit",
        "read": "scratchpad_read",
    }

    async def run(
        self, layer: ScratchpadLayer, storage: StorageBackend, calls: Sequence[Call]
    ) -> Seen:
        turns: list[list[ModelResponsePart]] = [
            [ToolCallPart(self.names[c.kind], c.args, tool_call_id=c.call_id)] for c in calls
        ]
        turns.append([TextPart("Done.")])
        seen = Seen()
        requests: list[ModelRequest] = []

        async def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            seen.everything += repr(messages) + repr(info)
            if not seen.tools:
                seen.tools = [tool.name for tool in info.function_tools]
            last = messages[-1]
            assert isinstance(last, ModelRequest)
            requests.append(last)
            return ModelResponse(parts=turns[len(requests) - 1])

        thread, resource = _scope(layer)
        async with ScratchpadCapability(layer, storage=storage) as notes:
            agent = PydanticAgent(FunctionModel(answer), capabilities=[notes])
            await agent.run("go", deps={"thread_id": thread, "resource_id": resource})
        for request in requests:
            for part in request.parts:
                if isinstance(part, RetryPromptPart | ToolReturnPart) and part.tool_call_id:
                    seen.texts[part.tool_call_id] = str(part.content)
        return seen


class AgentsSDKHost(Host):
    name = "agents-sdk"
    names: ClassVar[dict[str, str]] = {
        "update": "scratchpad_update",
        "edit": "scratchpad_edit",
        "read": "scratchpad_read",
    }

    async def run(
        self, layer: ScratchpadLayer, storage: StorageBackend, calls: Sequence[Call]
    ) -> Seen:
        set_tracing_disabled(True)
        turns: list[list[Any]] = [
            [raw_tool_call(c.call_id, json.dumps(c.args), name=self.names[c.kind])] for c in calls
        ]
        model = ScriptedAgentsModel([*turns, [reply("Done.")]])
        thread, resource = _scope(layer)
        async with Scratchpad(layer, storage=storage) as notes:
            agent = AgentsAgent(
                name="a",
                instructions=notes.instructions("Be brief."),
                tools=notes.tools,
                model=model,
            )
            context = {"thread_id": thread, "resource_id": resource}
            await Runner.run(agent, "go", context=context)
        # A disabled tool (read-only) is in the agent's list but never reaches the model.
        seen = Seen(tools=[tool.name for tool in model.calls[0].tools])
        for call in model.calls:
            seen.texts.update(call.outputs())
        seen.everything = repr(model.calls)
        return seen


class MCPHost(Host):
    name = "mcp"
    names: ClassVar[dict[str, str]] = {
        "update": "scratchpad_update",
        "edit": "scratchpad_edit",
        "read": "scratchpad_read",
    }
    extra_tools: ClassVar[tuple[str, ...]] = ("scratchpad_read",)

    async def run(
        self, layer: ScratchpadLayer, storage: StorageBackend, calls: Sequence[Call]
    ) -> Seen:
        # Pinned to the scope, as `mcp --thread t1` serves it: the model names none.
        scope_id = RESOURCE if layer.scope == "resource" else THREAD
        seen = Seen()
        async with Client(create_server(layer, storage, default_id=scope_id)) as client:
            listed = (await client.list_tools()).tools
            seen.tools = [tool.name for tool in listed]
            # What a client shows the model: the instructions, the tools, every result
            # (and, for a model that reads its notes first, scratchpad_read's).
            seen.everything = f"{client.instructions}{listed!r}"
            read = await client.call_tool("scratchpad_read", {})
            seen.everything += repr(read)
            for c in calls:
                args = {"update": c.args} if c.kind == "update" else dict(c.args)
                result = await client.call_tool(self.names[c.kind], args)
                seen.everything += repr(result)
                content = result.content[0]
                assert isinstance(content, TextContent)
                seen.texts[c.call_id] = content.text
        return seen


HOSTS: list[Host] = [
    ScriptedHarness(),
    ProviderHarness("responses"),
    ProviderHarness("chat"),
    ProviderHarness("anthropic"),
    PydanticAIHost(),
    AgentsSDKHost(),
    MCPHost(),
]


@pytest.fixture(autouse=True)
def _no_tracing() -> None:
    set_tracing_disabled(True)  # the Agents SDK exports nothing


# -- the options -------------------------------------------------------------------------

TEMPLATE = {"currentGoal": "Start", "blockers": ["none yet"]}

OPTIONS: dict[str, dict[str, Any]] = {
    "plain": {},
    "schema": {"schema": TaskNotes},
    "edit_tool": {"schema": TaskNotes, "edit_tool": True},
    "read_only": {"schema": TaskNotes, "read_only": True},
    "resource": {"schema": TaskNotes, "scope": "resource"},
    "template": {"schema": TaskNotes, "template": json.dumps(TEMPLATE)},
    "history_limit": {"schema": TaskNotes, "history_limit": 1},
}

UPDATE = Call("update", {"currentGoal": "Ship", "completedSteps": ["tests"]}, "c1")
REFUSED = Call("update", {"completedSteps": "not a list"}, "c2")
EDIT = Call(
    "edit",
    {
        "operations": [
            {
                "op": "append",
                "path": ["completedSteps"],
                "value_json": None,
                "values_json": ['"docs"'],
                "index": None,
            }
        ]
    },
    "c3",
)
REFUSED_EDIT = Call(
    "edit",
    {
        "operations": [
            {
                "op": "delete",
                "path": ["nowhere"],
                "value_json": None,
                "values_json": None,
                "index": None,
            }
        ]
    },
    "c4",
)


def _calls(options: dict[str, Any]) -> list[Call]:
    if options.get("read_only"):
        return []  # no tool to call: the model only reads
    calls = [UPDATE]
    if "schema" in options:
        calls.append(REFUSED)
    if options.get("edit_tool"):
        calls += [EDIT, REFUSED_EDIT]
    return calls


def _expected_state(options: dict[str, Any]) -> dict[str, Any]:
    if options.get("read_only"):
        return {}
    state: dict[str, Any] = dict(TEMPLATE) if "template" in options else {}
    state.update(UPDATE.args)
    if options.get("edit_tool"):
        state["completedSteps"] = ["tests", "docs"]
    return state


async def _stored(layer: ScratchpadLayer, storage: StorageBackend) -> Any:
    """The state as another execution of the same scope reads it (for a resource scope,
    from another thread of the resource)."""
    if layer.scope == "resource":
        return (await layer.open(storage, thread_id="elsewhere", resource_id=RESOURCE)).state
    return (await layer.open(storage, thread_id=THREAD)).state


@pytest.mark.asyncio
@pytest.mark.parametrize("option", list(OPTIONS))
@pytest.mark.parametrize("host", HOSTS, ids=lambda host: host.name)
async def test_every_option_means_the_same_in_every_host(host: Host, option: str) -> None:
    options = OPTIONS[option]
    layer = scratchpad(**options)
    storage = MemoryStorage()
    calls = _calls(options)

    seen = await host.run(layer, storage, calls)

    offered = [] if options.get("read_only") else ["update", "read"]
    if options.get("edit_tool"):
        offered.append("edit")
    assert len(seen.tools) == len(set(seen.tools))
    assert sorted(seen.tools) == sorted({*host.extra_tools, *(host.names[t] for t in offered)})
    texts = seen.texts
    if UPDATE in calls:
        assert texts["c1"] == "Scratchpad updated (currentGoal, completedSteps)."
    if REFUSED in calls:
        assert "does not fit the scratchpad's schema" in texts["c2"]
        assert "completedSteps" in texts["c2"]
        assert f"call {host.names['update']} again" in texts["c2"]
    if EDIT in calls:
        assert texts["c3"] == "Scratchpad edited (completedSteps)."
        assert "nowhere" in texts["c4"]
        assert f"call {host.names['edit']} again" in texts["c4"]
    assert await _stored(layer, storage) == _expected_state(options)
    if option == "history_limit":
        handle = await layer.open(storage, thread_id=THREAD)
        assert len(await handle.history(10)) == 1  # the journal keeps one entry


# -- the HTTP app ------------------------------------------------------------------------

#: The options that mean something over HTTP: the API has no edit endpoint.
HTTP_OPTIONS = [option for option in OPTIONS if not OPTIONS[option].get("edit_tool")]


@pytest.mark.asyncio
@pytest.mark.parametrize("option", HTTP_OPTIONS)
async def test_every_option_means_the_same_over_http(option: str) -> None:
    """The update the model sends, as a ``PATCH``: applied (or, read-only, refused with a
    409); the schema refusal as a 422 problem naming the field, with no hint for a model."""
    options = OPTIONS[option]
    layer = scratchpad(**options)
    storage = MemoryStorage()
    thread, resource = _scope(layer)
    path = f"/api/scopes/{layer.scope}/{resource or thread}"
    pad = create_app(storage, layers=[layer])
    async with pad.lifespan():
        transport = httpx.ASGITransport(app=pad)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            update = await client.patch(path, json=UPDATE.args)
            refused = await client.patch(path, json=REFUSED.args)

    if options.get("read_only"):
        assert update.status_code == 409, update.text
        assert update.headers["content-type"] == "application/problem+json"
        assert update.json()["reason"] == "read_only"
    else:
        assert update.status_code == 200, update.text
        assert update.json()["state"] == _expected_state(options)
    if "schema" in options and not options.get("read_only"):
        assert refused.status_code == 422, refused.text
        assert refused.headers["content-type"] == "application/problem+json"
        problem = refused.json()
        assert problem["reason"] == "schema"
        assert "completedSteps" in problem["detail"]
        assert "call " not in problem["detail"].lower()  # no tool to call over HTTP
    elif "schema" not in options:
        assert refused.status_code == 200  # no schema: any JSON object merges
    stored = await _stored(layer, storage)
    expected = _expected_state(options)
    if "schema" not in options:
        expected = {**expected, **REFUSED.args}
    assert stored == expected
    if option == "history_limit":
        handle = await layer.open(storage, thread_id=THREAD)
        assert len(await handle.history(10)) == 1  # the journal keeps one entry


# -- storage failures --------------------------------------------------------------------

SECRET_PATH = "/var/lib/acme/secret-notes.db"
SECRET_HOST = "db-7.internal.acme"
SECRET_PASSWORD = "hunter2-Zq9"
DRIVER_TEXT = "disk I/O error"
LEAKS = (
    SECRET_PATH,
    SECRET_HOST,
    SECRET_PASSWORD,
    DRIVER_TEXT,
    "OSError",
    "InjectedFault",
    "DriverError",
    "postgresql://",
)


class DriverError(Exception):
    """An exception of a database driver's own type, as a backend may let through."""


def _storage_errors() -> dict[str, Exception]:
    """A failure as each kind of backend reports it, every one naming a file, a host and a
    password (a driver's message often quotes the connection string)."""
    dsn = f"postgresql://app:{SECRET_PASSWORD}@{SECRET_HOST}:5432/notes"
    where = f"{DRIVER_TEXT} at {SECRET_PATH} on {dsn}"
    return {
        "os": OSError(5, where),
        "storage": StorageError(where),
        "driver": DriverError(where),
    }


def _faulty(mode: Literal["failed", "unknown"]) -> FaultyStorage:
    error = OSError(5, f"{DRIVER_TEXT} at {SECRET_PATH} on {SECRET_HOST}")
    if mode == "failed":
        return FaultyStorage(MemoryStorage(), fail_on={"commit"}, error=error)
    # The write lands, but its acknowledgement comes after the write timeout.
    return FaultyStorage(MemoryStorage(), stall_on={"commit"}, stall_at="after", stall_for=1.0)


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", ["failed", "unknown"])
@pytest.mark.parametrize("host", HOSTS, ids=lambda host: host.name)
async def test_storage_details_never_reach_the_model(
    host: Host, mode: Literal["failed", "unknown"], caplog: pytest.LogCaptureFixture
) -> None:
    layer = scratchpad(schema=TaskNotes, edit_tool=True, write_timeout=0.2)
    storage = _faulty(mode)
    caplog.set_level(logging.WARNING, logger="noetic_scratchpad")

    seen = await host.run(layer, storage, [UPDATE])

    text = seen.texts["c1"]
    for leak in LEAKS:
        assert leak not in text, f"{host.name} showed the model {leak!r}: {text!r}"
    if mode == "failed":
        assert "was not saved" in text
    else:
        assert "may or may not have been saved" in text
    assert host.names["update"] in text  # what to call again, by the name the model knows
    if mode == "failed":  # the operator still learns where and why
        assert SECRET_PATH in caplog.text


@pytest.mark.asyncio
@pytest.mark.parametrize("error", sorted(_storage_errors()))
@pytest.mark.parametrize("host", HOSTS, ids=lambda host: host.name)
async def test_nothing_the_model_is_sent_carries_storage_details(
    host: Host, error: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Storage fails on every write of a run, with an error of each type a backend may
    raise: the instructions, the block, the tool list and every tool result the model is
    sent hold no path, host, password, driver message or exception name; the operator's
    log has them."""
    layer = scratchpad(schema=TaskNotes, edit_tool=True)
    failing = FaultyStorage(MemoryStorage(), fail_on={"commit"}, error=_storage_errors()[error])
    caplog.set_level(logging.WARNING, logger="noetic_scratchpad")

    seen = await host.run(layer, failing, [UPDATE, REFUSED_EDIT])

    assert seen.everything
    for leak in LEAKS:
        assert leak not in seen.everything, f"{host.name} sent the model {leak!r}"
    assert "was not saved" in seen.texts[UPDATE.call_id]
    assert SECRET_PATH in caplog.text


@pytest.mark.asyncio
@pytest.mark.parametrize("error", sorted(_storage_errors()))
@pytest.mark.parametrize("host", [h for h in HOSTS if h.name != "mcp"], ids=lambda host: host.name)
async def test_a_failed_read_before_the_run_stops_it_before_the_model_is_called(
    host: Host, error: str
) -> None:
    """In process, the state is read before the model is called: a backend failing there
    fails the run with its own error, for the application (docs/reliability.md, "Not
    guaranteed"), and the model is sent nothing, so none of it."""
    failing = FaultyStorage(
        MemoryStorage(), fail_on={"get", "get_revision"}, error=_storage_errors()[error]
    )
    with pytest.raises(type(_storage_errors()[error])):
        await host.run(scratchpad(schema=TaskNotes), failing, [UPDATE])
    assert failing.calls.get("commit", 0) == 0  # no tool call was made


@pytest.mark.asyncio
@pytest.mark.parametrize("error", sorted(_storage_errors()))
async def test_a_failed_read_over_mcp_shows_no_storage_detail_whatever_the_error(
    error: str,
) -> None:
    """Over MCP the model reads through a tool (and the client through a resource): the
    backend's own error type, a driver's or an OSError, reaches neither."""
    failing = FaultyStorage(
        MemoryStorage(), fail_on={"get", "get_revision"}, error=_storage_errors()[error]
    )
    answers: list[str] = []
    async with Client(create_server(scratchpad(), failing)) as client:
        try:
            answers.append(repr(await client.call_tool("scratchpad_read", {})))
        except MCPError as exc:
            answers.append(f"{exc} {exc.error!r}")
        try:
            answers.append(repr(await client.read_resource("scratchpad://thread/default")))
        except MCPError as exc:
            answers.append(f"{exc} {exc.error!r}")
    for answer in answers:
        assert not [leak for leak in LEAKS if leak in answer], answer


@pytest.mark.asyncio
@pytest.mark.parametrize("error", sorted(_storage_errors()))
async def test_the_http_apps_answers_carry_no_storage_detail(
    error: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The HTTP app's own text for the model's view, a read and an update, with storage
    failing on every read and write."""
    failing = FaultyStorage(
        MemoryStorage(),
        fail_on={"get", "get_revision", "commit"},
        error=_storage_errors()[error],
    )
    caplog.set_level(logging.WARNING)
    pad = create_app(failing, layers=[scratchpad(schema=TaskNotes)])
    async with pad.lifespan():
        transport = httpx.ASGITransport(app=pad, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            answers = [
                await client.get(f"/api/scopes/thread/{THREAD}/view"),
                await client.get(f"/api/scopes/thread/{THREAD}"),
                await client.patch(f"/api/scopes/thread/{THREAD}", json={"currentGoal": "x"}),
            ]
    for answer in answers:
        assert answer.status_code >= 500, answer.text
        assert not [leak for leak in LEAKS if leak in answer.text], answer.text
    assert SECRET_PATH in caplog.text


@pytest.mark.asyncio
async def test_a_failed_read_shows_the_model_no_storage_detail_over_mcp(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # As a backend reports it: a StorageError whose text names the file and the host.
    error = StorageError(f"{DRIVER_TEXT} at {SECRET_PATH} on {SECRET_HOST}")
    storage = FaultyStorage(MemoryStorage(), fail_on={"get", "get_revision"}, error=error)
    caplog.set_level(logging.WARNING, logger="noetic_scratchpad")
    async with Client(create_server(scratchpad(), storage)) as client:
        result = await client.call_tool("scratchpad_read", {})
    content = result.content[0]
    assert isinstance(content, TextContent)
    assert result.is_error
    assert "could not be read" in content.text
    assert "scratchpad_read" in content.text
    assert not [leak for leak in LEAKS if leak in content.text]
    assert SECRET_PATH in caplog.text


# -- one text, written by the core ---------------------------------------------------------

#: The hosts that wrap a ScratchpadCore and hand its text back in their own shape.
CORE_HOSTS = [host for host in HOSTS if host.name in ("pydantic-ai", "agents-sdk", "mcp")]


@pytest.mark.asyncio
@pytest.mark.parametrize("case", ["schema", "edit", "storage"])
@pytest.mark.parametrize("host", CORE_HOSTS, ids=lambda host: host.name)
async def test_a_failed_call_reads_as_the_core_writes_it(host: Host, case: str) -> None:
    """The model reads, word for word, the text the core gives for the same call under the
    host's name for the tool (the Agents SDK marks it ``Error:``, its one shape of its own)."""
    layer = scratchpad(schema=TaskNotes, edit_tool=True)
    call = {"schema": REFUSED, "edit": REFUSED_EDIT, "storage": UPDATE}[case]

    def storage() -> StorageBackend:
        return _faulty("failed") if case == "storage" else MemoryStorage()

    seen = await host.run(layer, storage(), [call])

    async with ScratchpadCore(layer, storage=storage()) as core:
        expected = await core.call(
            THREAD, call.kind, call.args, tool=host.names[call.kind], call_id=call.call_id
        )
    assert not expected.ok
    assert seen.texts[call.call_id].removeprefix("Error: ") == expected.text


# -- options a host cannot honour ---------------------------------------------------------


@pytest.mark.asyncio
async def test_an_agents_sdk_agent_without_the_edit_tool_is_refused() -> None:
    """``tools=[notes.tool]`` with ``edit_tool=True`` would drop the edit tool silently."""
    async with Scratchpad(storage=MemoryStorage(), edit_tool=True) as notes:
        model = ScriptedAgentsModel([[reply("Done.")]])
        agent = AgentsAgent(
            name="a", instructions=notes.instructions(), tools=[notes.tool], model=model
        )
        with pytest.raises(ScratchpadConfigError, match="scratchpad_edit"):
            await Runner.run(agent, "go", context={"thread_id": THREAD})


#: Tool names a host cannot offer, and what its refusal says.
BAD_NAMES = [
    ("x", "x", "edit_tool_name 'x' is also the update tool's name"),
    ("scratchpad_update", "a/b", "edit_tool_name 'a/b' is not a name providers accept"),
]


@pytest.mark.parametrize(("tool_name", "edit_tool_name", "says"), BAD_NAMES)
@pytest.mark.parametrize("host", [Scratchpad, ScratchpadCapability])
def test_edit_tool_names_a_host_cannot_offer_are_refused_at_construction(
    host: Any, tool_name: str, edit_tool_name: str, says: str
) -> None:
    with pytest.raises(ScratchpadConfigError, match=re.escape(says)):
        host(
            storage=MemoryStorage(),
            edit_tool=True,
            tool_name=tool_name,
            edit_tool_name=edit_tool_name,
        )
