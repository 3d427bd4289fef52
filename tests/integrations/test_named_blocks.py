"""Two named scratchpads on one agent, in every host: a task and a user profile.

In each host the model writes the task's notes through the task's tool, the profile's
through the profile's, and makes one call the profile's schema refuses. Each host must
offer both tools under its own names, with descriptions naming their block; show each
block under its own tag; store each write in its own layer only; and name the profile's
tool in the refusal. Hosts are driven offline as in ``test_host_matrix``.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from typing import Any

import pytest
from agents import Agent as AgentsAgent
from agents import RunConfig, Runner, set_tracing_disabled
from mcp import Client
from mcp.types import TextContent
from pydantic import BaseModel
from pydantic_ai import Agent as PydanticAgent
from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from noetic_scratchpad import ScratchpadConfigError, scratchpad
from noetic_scratchpad.integrations.mcp import create_server
from noetic_scratchpad.integrations.openai_agents import Scratchpad, chain_filters
from noetic_scratchpad.integrations.pydantic_ai import ScratchpadCapability, ScratchpadToolset
from noetic_scratchpad.items import FunctionCall, Message
from noetic_scratchpad.layer import ScratchpadLayer
from noetic_scratchpad.runtime import Agent, AgentHarness, ScriptedModel
from noetic_scratchpad.server import create_app
from noetic_scratchpad.storage import MemoryStorage, StorageBackend
from tests.integrations.agents_sdk_fakes import ScriptedAgentsModel, raw_tool_call, reply
from tests.integrations.test_host_matrix import Call, ProviderHarness, _harness_outputs

try:
    import httpx2 as httpx
except ImportError:  # pragma: no cover - depends on the installed SDKs
    import httpx  # type: ignore[no-redef]

THREAD, RESOURCE = "t1", "u1"


class Profile(BaseModel):
    """What we know about the user"""

    language: str = ""
    likes: list[str] = []


def layers() -> tuple[ScratchpadLayer, ScratchpadLayer]:
    profile = scratchpad(name="profile", scope="resource", schema=Profile, edit_tool=True)
    return scratchpad(name="task"), profile


def _operation(op: str, path: list[str], value: str | None = None) -> dict[str, Any]:
    return {"op": op, "path": path, "value_json": value, "values_json": None, "index": None}


#: (tool, arguments, call id): the task's write, the profile's, a refused profile write,
#: an edit of the profile and a refused one.
CALLS = [
    ("task", {"goal": "ship"}, "c1"),
    ("profile", {"language": "fr"}, "c2"),
    ("profile", {"likes": "cats"}, "c3"),
    ("profile_edit", {"operations": [_operation("set", ["likes"], '["cats"]')]}, "c4"),
    ("profile_edit", {"operations": [_operation("delete", ["nowhere"])]}, "c5"),
]
TASK_BLOCK = '<scratchpad name="task">\n{\n  "goal": "ship"\n}\n</scratchpad>'
PROFILE_BLOCK = '<scratchpad name="profile">\n{\n  "language": "fr"\n}\n</scratchpad>'
EDITED_PROFILE_BLOCK = (
    '<scratchpad name="profile">\n{\n  "language": "fr",\n  "likes": [\n    "cats"\n  ]\n}'
    "\n</scratchpad>"
)
#: The tools' names in pydantic-ai, the Agents SDK and MCP.
NAMES = {"task": "task_update", "profile": "profile_update", "profile_edit": "profile_edit"}
EDITED_PROFILE = {"language": "fr", "likes": ["cats"]}
EDIT_DESCRIPTION = 'Edit your scratchpad "profile" (the <scratchpad name="profile"> block) in place'
TASK_DESCRIPTION = 'Update your scratchpad "task" (the <scratchpad name="task"> block): '
PROFILE_DESCRIPTION = (
    'Update your scratchpad "profile" (the <scratchpad name="profile"> block): What we know '
    "about the user. Its fields: language, likes."
)


@dataclasses.dataclass
class Seen:
    """What the model was offered (tool name -> description), the texts it read back by
    call id, and every text of the last request it was sent."""

    tools: dict[str, str]
    texts: dict[str, str]
    last_request: list[str]


def strings(value: Any) -> Iterator[str]:
    """Every string in a JSON-like value."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from strings(item)


async def stored(task: ScratchpadLayer, profile: ScratchpadLayer, storage: StorageBackend) -> Any:
    return (
        (await task.open(storage, thread_id=THREAD, resource_id=RESOURCE)).state,
        (await profile.open(storage, thread_id="elsewhere", resource_id=RESOURCE)).state,
    )


def check(seen: Seen, names: dict[str, str], *, refusal_prefix: str = "") -> None:
    """What every host must show: both tools, each naming its block; both blocks, each
    under its own tag, on the request after the writes; the profile's tool in its refusal."""
    # Each block's read tool too: the state may outgrow the block's budget (the default).
    reads = {names[block][: -len("update")] + "read" for block in ("task", "profile")}
    assert sorted(seen.tools) == sorted({*names.values(), *reads})
    assert seen.tools[names["task"]].startswith(TASK_DESCRIPTION)
    assert seen.tools[names["profile"]].startswith(PROFILE_DESCRIPTION)
    assert seen.tools[names["profile_edit"]].startswith(EDIT_DESCRIPTION)
    assert seen.tools[names["profile_edit"]].endswith(
        f"use {names['profile']} to merge new values into fields."
    )
    assert seen.texts["c1"] == "Scratchpad updated (goal)."
    assert seen.texts["c2"] == "Scratchpad updated (language)."
    refusal = seen.texts["c3"].removeprefix(refusal_prefix)
    assert "likes" in refusal
    assert refusal.endswith(
        f"Fix these fields and call {names['profile']} again with only the fields to change."
    )
    assert seen.texts["c4"] == "Scratchpad edited (likes)."
    refused_edit = seen.texts["c5"].removeprefix(refusal_prefix)
    assert "nowhere" in refused_edit
    assert f"call {names['profile_edit']} again" in refused_edit
    text = "\n".join(seen.last_request)
    assert TASK_BLOCK in text
    assert EDITED_PROFILE_BLOCK in text
    assert text.count("</scratchpad>") == 2


async def check_stored(
    task: ScratchpadLayer, profile: ScratchpadLayer, storage: StorageBackend
) -> None:
    assert await stored(task, profile, storage) == ({"goal": "ship"}, EDITED_PROFILE)


# -- the harness ---------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_two_named_blocks_in_the_harness() -> None:
    task, profile = layers()
    storage = MemoryStorage()
    names = {"task": "task/update", "profile": "profile/update", "profile_edit": "profile/edit"}
    turns: list[Any] = [
        [FunctionCall(call_id=call_id, name=names[which], arguments=json.dumps(args))]
        for which, args, call_id in CALLS
    ]
    model = ScriptedModel([*turns, "Done."])
    async with AgentHarness("a", Agent(model=model), {}, [task, profile], storage) as harness:
        await harness.run("go", thread_id=THREAD, resource_id=RESOURCE)
    texts: dict[str, str] = {}
    for request in model.requests:
        texts.update(_harness_outputs(request))
    last = [item.content for item in model.requests[-1].items if isinstance(item, Message)]
    tools = {spec.name: spec.description for spec in model.requests[0].tools}
    check(Seen(tools, texts, last), names)
    await check_stored(task, profile, storage)


def test_two_layers_with_one_name_are_refused_by_the_harness() -> None:
    with pytest.raises(
        ScratchpadConfigError, match=r"several context layers have the id \['task'\]"
    ):
        AgentHarness(
            "a",
            Agent(model=ScriptedModel(["Done."])),
            {},
            [scratchpad(name="task"), scratchpad(name="task", scope="resource")],
            MemoryStorage(),
        )


def _provider_tools(api: str, body: dict[str, Any]) -> dict[str, str]:
    if api == "chat":
        return {t["function"]["name"]: t["function"]["description"] for t in body["tools"]}
    return {tool["name"]: tool["description"] for tool in body["tools"]}


@pytest.mark.asyncio
@pytest.mark.parametrize("api", ["responses", "chat", "anthropic"])
async def test_two_named_blocks_in_the_harness_over_each_provider(api: str) -> None:
    task, profile = layers()
    storage = MemoryStorage()
    names = {"task": "task__update", "profile": "profile__update", "profile_edit": "profile__edit"}
    # The matrix's provider host, its calls made by layer rather than by function.
    provider = ProviderHarness(api)  # type: ignore[arg-type]
    provider.names = names
    sent: list[dict[str, Any]] = []
    model = provider._model([Call(which, args, call_id) for which, args, call_id in CALLS], sent)  # type: ignore[arg-type]
    async with AgentHarness("a", Agent(model=model), {}, [task, profile], storage) as harness:
        await harness.run("go", thread_id=THREAD, resource_id=RESOURCE)
    await model.client.close()
    texts = provider._outputs(sent)
    check(Seen(_provider_tools(api, sent[0]), texts, list(strings(sent[-1]))), names)
    await check_stored(task, profile, storage)


# -- pydantic-ai ---------------------------------------------------------------------------


async def _run_pydantic_ai(*capabilities: Any, toolsets: Any = ()) -> Seen:
    names = NAMES
    turns = [
        [ToolCallPart(names[which], args, tool_call_id=call_id)] for which, args, call_id in CALLS
    ]
    turns.append([TextPart("Done.")])
    seen = Seen({}, {}, [])
    count = 0

    async def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        nonlocal count
        if not seen.tools:
            seen.tools = {tool.name: tool.description or "" for tool in info.function_tools}
        for message in messages:
            if isinstance(message, ModelRequest):
                for part in message.parts:
                    if isinstance(part, RetryPromptPart | ToolReturnPart) and part.tool_call_id:
                        seen.texts[part.tool_call_id] = str(part.content)
        # The request being made: its parts, and its instructions (the toolsets' blocks).
        seen.last_request = list(
            strings(ModelMessagesTypeAdapter.dump_python(messages[-1:], mode="json"))
        )
        count += 1
        return ModelResponse(parts=turns[count - 1])

    agent = PydanticAgent(
        FunctionModel(answer), capabilities=list(capabilities), toolsets=list(toolsets)
    )
    await agent.run("go", deps={"thread_id": THREAD, "resource_id": RESOURCE})
    return seen


@pytest.mark.asyncio
async def test_two_named_blocks_in_pydantic_ai() -> None:
    task, profile = layers()
    storage = MemoryStorage()
    async with (
        ScratchpadCapability(task, storage=storage) as task_notes,
        ScratchpadCapability(profile, storage=storage) as profile_notes,
    ):
        assert (task_notes.id, profile_notes.id) == ("task", "profile")
        seen = await _run_pydantic_ai(task_notes, profile_notes)
    check(seen, NAMES)
    await check_stored(task, profile, storage)


@pytest.mark.asyncio
async def test_two_named_blocks_as_pydantic_ai_toolsets() -> None:
    task, profile = layers()
    storage = MemoryStorage()
    toolsets = [
        ScratchpadToolset(task, storage=storage),
        ScratchpadToolset(profile, storage=storage),
    ]
    assert [toolset.id for toolset in toolsets] == ["task", "profile"]
    seen = await _run_pydantic_ai(toolsets=toolsets)
    check(seen, NAMES)
    await check_stored(task, profile, storage)


def test_two_pydantic_ai_scratchpads_with_one_name_are_refused_when_the_agent_is_built() -> None:
    """The capability's id is the layer's: pydantic-ai refuses one id twice."""
    storage = MemoryStorage()
    first, second = (ScratchpadCapability(storage=storage) for _ in range(2))
    with pytest.raises(UserError, match="Capability id 'scratchpad' is used by multiple"):
        PydanticAgent(FunctionModel(lambda m, i: ModelResponse([])), capabilities=[first, second])


@pytest.mark.asyncio
async def test_two_pydantic_ai_toolsets_with_one_name_are_refused_at_the_first_run() -> None:
    """Toolsets have no construction-time check in pydantic-ai: the clash of tool names is
    refused when the run lists the tools, before the model is called."""
    storage = MemoryStorage()
    toolsets = [ScratchpadToolset(storage=storage), ScratchpadToolset(storage=storage)]
    with pytest.raises(UserError, match="conflicts with existing tool"):
        await _run_pydantic_ai(toolsets=toolsets)


# -- the OpenAI Agents SDK -------------------------------------------------------------------


@pytest.mark.asyncio
async def test_two_named_blocks_in_the_agents_sdk() -> None:
    set_tracing_disabled(True)
    task, profile = layers()
    storage = MemoryStorage()
    names = NAMES
    turns: list[list[Any]] = [
        [raw_tool_call(call_id, json.dumps(args), name=names[which])]
        for which, args, call_id in CALLS
    ]
    model = ScriptedAgentsModel([*turns, [reply("Done.")]])
    async with (
        Scratchpad(task, storage=storage) as task_notes,
        Scratchpad(profile, storage=storage) as profile_notes,
    ):
        agent = AgentsAgent(
            name="a",
            instructions=profile_notes.instructions(task_notes.instructions("Be brief.")),
            tools=[*task_notes.tools, *profile_notes.tools],
            model=model,
        )
        run_config = RunConfig(
            call_model_input_filter=chain_filters(
                task_notes.input_filter, profile_notes.input_filter
            )
        )
        context = {"thread_id": THREAD, "resource_id": RESOURCE}
        await Runner.run(agent, "go", context=context, run_config=run_config)
    tools = {tool.name: getattr(tool, "description", "") for tool in model.calls[0].tools}
    texts: dict[str, str] = {}
    for call in model.calls:
        texts.update(call.outputs())
    last = model.calls[-1]
    assert last.system_instructions == "Be brief."  # both blocks moved after the conversation
    check(Seen(tools, texts, list(strings(last.input))), names, refusal_prefix="Error: ")
    await check_stored(task, profile, storage)


@pytest.mark.asyncio
async def test_two_agents_sdk_scratchpads_with_one_name_are_refused() -> None:
    set_tracing_disabled(True)
    storage = MemoryStorage()
    async with Scratchpad(storage=storage) as first, Scratchpad(storage=storage) as second:
        agent = AgentsAgent(
            name="a",
            instructions=first.instructions(),
            tools=[*first.tools, *second.tools],
            model=ScriptedAgentsModel([[reply("Done.")]]),
        )
        with pytest.raises(ScratchpadConfigError, match="two tools named 'scratchpad_update'"):
            await Runner.run(agent, "go", context={"thread_id": THREAD})


# -- MCP -------------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_two_named_blocks_on_one_mcp_server() -> None:
    task, profile = layers()
    storage = MemoryStorage()
    names = NAMES
    seen = Seen({}, {}, [])
    server = create_server([task, profile], storage, allow_scope_argument=True)
    async with Client(server) as client:
        listed = (await client.list_tools()).tools
        seen.tools = {tool.name: tool.description or "" for tool in listed}
        assert client.instructions is not None
        instructions = client.instructions.split("\n\n")
        for which, args, call_id in CALLS:
            scope = {"thread": THREAD} if which == "task" else {"resource": RESOURCE}
            sent = dict(args) if which == "profile_edit" else {"update": args}
            seen.texts[call_id] = _text(await client.call_tool(names[which], {**sent, **scope}))
        for read, scope in (
            ("task_read", {"thread": THREAD}),
            ("profile_read", {"resource": RESOURCE}),
        ):
            seen.last_request.append(_text(await client.call_tool(read, scope)))
        resources = {str(r.uri) for r in (await client.list_resources()).resources}
        profile_state = await client.read_resource(f"scratchpad://profile/resource/{RESOURCE}")
        # The server's own refusals name the tool of the block called, and list every tool.
        shapeless = await client.call_tool("profile_update", {"language": "de"})
        unknown = await client.call_tool("scratchpad_update", {"update": {}})
    check(seen, names)
    assert instructions[0].startswith(
        'The scratchpad "task" (the <scratchpad name="task"> block): your working notes'
    )
    assert "Call task_read when you start" in instructions[0]
    assert instructions[1].startswith('The scratchpad "profile" (the <scratchpad name="profile">')
    assert "Call profile_read when you start" in instructions[1]
    assert "profile_update whenever your notes change (language, likes)" in instructions[1]
    assert resources == {
        "scratchpad://task/thread/default",
        "scratchpad://profile/resource/default",
    }
    assert [shapeless.is_error, unknown.is_error] == [True, True]
    assert _text(shapeless) == (
        "profile_update needs `update`, the object of fields to change, for example "
        '{"update": {"language": "..."}}. You sent \'language\' at the top level. Call '
        "profile_update again with the fields under `update`."
    )
    assert _text(unknown) == (
        "There is no tool 'scratchpad_update' here; the tools are task_read, task_update, "
        "profile_read, profile_update, profile_edit."
    )
    contents = profile_state.contents[0]
    assert json.loads(getattr(contents, "text", "")) == EDITED_PROFILE
    await check_stored(task, profile, storage)


def _text(result: Any) -> str:
    content = result.content[0]
    assert isinstance(content, TextContent)
    return content.text


@pytest.mark.asyncio
async def test_a_pinned_mcp_server_keeps_each_named_block_on_its_scope() -> None:
    """Pinned (the default): each layer's tools write its kind of scope of ``default_id``,
    take no scope argument, and the resources are those two scopes'."""
    task, profile = layers()
    storage = MemoryStorage()
    async with Client(create_server([task, profile], storage, default_id="alice")) as client:
        listed = {tool.name: tool.input_schema for tool in (await client.list_tools()).tools}
        await client.call_tool("task_update", {"update": {"goal": "ship"}})
        await client.call_tool("profile_update", {"update": {"language": "fr"}})
        refused = await client.call_tool("profile_update", {"update": {}, "resource": "bob"})
        resources = {str(r.uri) for r in (await client.list_resources()).resources}
    assert all(
        "thread" not in s["properties"] and "resource" not in s["properties"]
        for s in listed.values()
    )
    assert refused.is_error
    assert _text(refused).startswith("profile_update takes no `resource`")
    assert resources == {"scratchpad://task/thread/alice", "scratchpad://profile/resource/alice"}
    assert (await task.open(storage, thread_id="alice")).state == {"goal": "ship"}
    assert (await profile.open(storage, thread_id="x", resource_id="alice")).state == {
        "language": "fr"
    }


def test_an_mcp_server_refuses_two_layers_with_one_name() -> None:
    with pytest.raises(ScratchpadConfigError, match="several scratchpads are named 'task'"):
        create_server(
            [scratchpad(name="task"), scratchpad(name="task", scope="resource")], MemoryStorage()
        )


# -- HTTP ------------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_two_named_blocks_over_http() -> None:
    """The app serves one layer per kind of scope: the task's threads and the profile's
    resources, each stored under its layer and shown in its block."""
    task, profile = layers()
    storage = MemoryStorage()
    pad = create_app(storage, layers=[task, profile])
    thread_path, resource_path = f"/api/scopes/thread/{THREAD}", f"/api/scopes/resource/{RESOURCE}"
    async with pad.lifespan():
        transport = httpx.ASGITransport(app=pad)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            wrote_task = await client.patch(thread_path, json={"goal": "ship"})
            wrote_profile = await client.patch(resource_path, json={"language": "fr"})
            refused = await client.patch(resource_path, json={"likes": "cats"})
            task_view = (await client.get(thread_path + "/view")).json()
            profile_view = (await client.get(resource_path + "/view")).json()
            listed = (await client.get("/api/scopes")).json()
    assert wrote_task.status_code == 200, wrote_task.text
    assert wrote_profile.status_code == 200, wrote_profile.text
    assert refused.status_code == 422
    assert (task_view["layer"], task_view["text"]) == ("task", TASK_BLOCK)
    assert (profile_view["layer"], profile_view["text"]) == ("profile", PROFILE_BLOCK)
    layers_listed = {(s["kind"], s["id"], s["layer"]) for s in listed["scopes"]}
    assert layers_listed == {("thread", THREAD, "task"), ("resource", RESOURCE, "profile")}
    assert await stored(task, profile, storage) == ({"goal": "ship"}, {"language": "fr"})
