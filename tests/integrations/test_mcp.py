"""The MCP server: in memory through the SDK's own ``Client`` (fast), and end to end as
``python -m noetic_scratchpad mcp`` over a real stdio subprocess."""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from conftest import run_python
from mcp import Client, MCPError, StdioServerParameters, stdio_client
from mcp.types import CallToolResult, TextContent, TextResourceContents
from pydantic import BaseModel, ConfigDict

from noetic_scratchpad import (
    EventBus,
    StorageError,
    UpdateApplied,
    UpdateRejected,
    open_storage,
    scratchpad,
)
from noetic_scratchpad.integrations.mcp import (
    DEFAULT_MAX_MESSAGE_BYTES,
    EDIT_TOOL,
    READ_TOOL,
    UPDATE_TOOL,
    create_server,
    serve_stdio,
)
from noetic_scratchpad.keys import state_key
from noetic_scratchpad.layer import ScratchpadLayer, unreadable_resource_text
from noetic_scratchpad.storage import MemoryStorage, StorageBackend
from noetic_scratchpad.testing import FaultyStorage, capture_events
from tests.storage.corrupt import corrupt_row

pytestmark = pytest.mark.anyio

#: The in-memory tests run on both loops the library supports.
BOTH_LOOPS = pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])


class TaskNotes(BaseModel):
    model_config = ConfigDict(extra="forbid")

    currentGoal: str
    completedSteps: list[str] = []
    blockers: list[str] = []


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # SQLite and the subprocesses need asyncio; BOTH_LOOPS overrides it


@pytest.fixture(params=["auto", "legacy"])
def mode(request: pytest.FixtureRequest) -> str:
    """``auto``: the SDK's in-process path (2026 protocol); ``legacy``: JSON-RPC over
    in-memory streams with the initialize handshake, as older desktop clients speak."""
    value: str = request.param
    return value


@asynccontextmanager
async def connect(
    layer: ScratchpadLayer | None = None,
    storage: StorageBackend | None = None,
    *,
    mode: str = "auto",
    default_id: str = "default",
    allow_scope_argument: bool = False,
    events: EventBus | None = None,
) -> AsyncIterator[Client]:
    server = create_server(
        layer,
        storage or MemoryStorage(),
        default_id=default_id,
        allow_scope_argument=allow_scope_argument,
        events=events,
    )
    async with Client(server, mode=mode) as client:
        yield client


def text_of(result: CallToolResult) -> str:
    assert len(result.content) == 1
    content = result.content[0]
    assert isinstance(content, TextContent)
    return content.text


async def stored(storage: StorageBackend, layer: ScratchpadLayer, thread: str) -> Any:
    return (await layer.open(storage, thread_id=thread, resource_id=thread)).state


# -- in memory ---------------------------------------------------------------------------


@BOTH_LOOPS
async def test_lists_both_tools_with_the_schema_fields_under_update(mode: str) -> None:
    async with connect(scratchpad(schema=TaskNotes), mode=mode) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}

    assert set(tools) == {READ_TOOL, UPDATE_TOOL}
    update = tools[UPDATE_TOOL].input_schema
    assert update["required"] == ["update"]
    assert set(update["properties"]) == {"update"}  # pinned: no `thread` to name
    fields = update["properties"]["update"]
    assert set(fields["properties"]) == {"currentGoal", "completedSteps", "blockers"}
    assert fields.get("required", []) == []  # a partial update is fine
    assert "`update`" in (tools[UPDATE_TOOL].description or "")
    read = tools[READ_TOOL]
    # A pinned server takes no scope; a part by path (the state may outgrow the budget).
    assert set(read.input_schema["properties"]) == {"path", "start", "end"}
    assert read.input_schema.get("required", []) == []
    assert read.annotations is not None
    assert read.annotations.read_only_hint is True


@BOTH_LOOPS
async def test_update_then_read_returns_the_block_and_stores_the_state(mode: str) -> None:
    layer, storage, bus = scratchpad(schema=TaskNotes), MemoryStorage(), EventBus()
    with capture_events(bus) as events:
        async with connect(layer, storage, mode=mode, events=bus) as client:
            written = await client.call_tool(
                UPDATE_TOOL, {"update": {"currentGoal": "Ship v2", "completedSteps": ["tests"]}}
            )
            read = await client.call_tool(READ_TOOL, {})

    assert not written.is_error
    assert text_of(written) == "Scratchpad updated (currentGoal, completedSteps)."
    assert not read.is_error
    block = text_of(read)
    assert block.startswith("<scratchpad>\n")
    assert block.endswith("\n</scratchpad>")
    assert json.loads(block.removeprefix("<scratchpad>").removesuffix("</scratchpad>")) == {
        "currentGoal": "Ship v2",
        "completedSteps": ["tests"],
    }
    assert await stored(storage, layer, "default") == {
        "currentGoal": "Ship v2",
        "completedSteps": ["tests"],
    }
    assert [(e.source, e.scope_key) for e in events.of(UpdateApplied)] == [("tool", "default")]


@BOTH_LOOPS
async def test_each_thread_has_its_own_scratchpad_and_the_default_comes_from_the_server(
    mode: str,
) -> None:
    layer, storage = scratchpad(), MemoryStorage()
    allowed = connect(layer, storage, mode=mode, default_id="desk", allow_scope_argument=True)
    async with allowed as client:
        await client.call_tool(UPDATE_TOOL, {"update": {"goal": "desk goal"}})
        await client.call_tool(UPDATE_TOOL, {"update": {"goal": "a/b goal"}, "thread": "a/b"})
        empty = await client.call_tool(READ_TOOL, {"thread": "a"})
        other = await client.call_tool(READ_TOOL, {"thread": "a/b"})

    assert await stored(storage, layer, "desk") == {"goal": "desk goal"}
    assert await stored(storage, layer, "a/b") == {"goal": "a/b goal"}
    assert await stored(storage, layer, "default") == ""
    assert text_of(empty) == (
        "The scratchpad of thread 'a' is empty. Call scratchpad_update to write your notes."
    )
    assert '"a/b goal"' in text_of(other)


@BOTH_LOOPS
async def test_a_refused_update_is_a_tool_error_that_names_the_tool_and_the_field(
    mode: str,
) -> None:
    layer, storage, bus = scratchpad(schema=TaskNotes), MemoryStorage(), EventBus()
    with capture_events(bus) as events:
        async with connect(layer, storage, mode=mode, events=bus) as client:
            await client.call_tool(UPDATE_TOOL, {"update": {"currentGoal": "Fix login"}})
            refused = await client.call_tool(UPDATE_TOOL, {"update": {"completedSteps": "bisect"}})

    assert refused.is_error
    message = text_of(refused)
    assert "completedSteps" in message
    assert "call scratchpad_update again" in message
    assert "scratchpad/update" not in message
    assert await stored(storage, layer, "default") == {"currentGoal": "Fix login"}
    assert [e.reason for e in events.of(UpdateRejected)] == ["schema"]


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"currentGoal": "x"}, ["needs `update`", "'currentGoal' at the top level"]),
        ({}, ["needs `update`", '{"update": {"currentGoal": "..."}}']),
        ({"update": {"a": 1}, "goal": "x"}, ["takes only `update`, not", "'goal'"]),
        ({"update": ["a", "b"]}, ["`update` must be an object", "not a JSON array"]),
        ({"update": "not json"}, ["not valid JSON", "scratchpad_update"]),
    ],
)
async def test_malformed_calls_come_back_saying_what_to_send(
    arguments: dict[str, Any], expected: list[str]
) -> None:
    storage = MemoryStorage()
    async with connect(scratchpad(), storage) as client:
        result = await client.call_tool(UPDATE_TOOL, arguments)

    assert result.is_error
    for part in expected:
        assert part in text_of(result)
    assert await storage.list("") == []  # nothing was written


async def test_an_update_sent_as_json_text_is_applied() -> None:
    layer, storage = scratchpad(), MemoryStorage()
    async with connect(layer, storage) as client:
        result = await client.call_tool(UPDATE_TOOL, {"update": '{"goal": "from text"}'})
    assert not result.is_error
    assert await stored(storage, layer, "default") == {"goal": "from text"}


async def test_a_read_only_layer_offers_no_update_tool() -> None:
    async with connect(scratchpad(read_only=True)) as client:
        names = [tool.name for tool in (await client.list_tools()).tools]
        refused = await client.call_tool(UPDATE_TOOL, {"update": {"goal": "x"}})
    assert names == [READ_TOOL]
    assert refused.is_error
    assert "no tool 'scratchpad_update'" in text_of(refused)


async def test_a_storage_failure_is_a_tool_error_and_the_next_call_works() -> None:
    layer, inner = scratchpad(), MemoryStorage()
    faulty = FaultyStorage(inner, fail_on=["update", "commit"], faults=1)  # the write path
    async with connect(layer, faulty) as client:
        failed = await client.call_tool(UPDATE_TOOL, {"update": {"goal": "x"}})
        retried = await client.call_tool(UPDATE_TOOL, {"update": {"goal": "x"}})
    assert failed.is_error
    assert "This call was not saved: the scratchpad's storage failed" in text_of(failed)
    assert f"call {UPDATE_TOOL} again later" in text_of(failed)
    assert "InjectedFault" not in text_of(failed)  # details are for the operator
    assert not retried.is_error
    assert await stored(inner, layer, "default") == {"goal": "x"}


async def test_an_update_is_one_round_trip_and_a_read_one_read() -> None:
    """Through the core: an update binds to its scope without reading it first (the write
    merges into whatever is stored), and a read is one read."""
    storage = FaultyStorage(MemoryStorage())  # counts the calls; injects nothing
    async with connect(scratchpad(), storage) as client:
        storage.calls.clear()
        await client.call_tool(UPDATE_TOOL, {"update": {"goal": "x"}})
        assert storage.calls == {"commit": 1}
        storage.calls.clear()
        read = await client.call_tool(READ_TOOL, {})
        assert storage.calls == {"get_revision": 1}
    assert "x" in text_of(read)


async def test_a_resource_read_that_storage_fails_is_one_sentence_and_the_log_says_why(
    caplog: pytest.LogCaptureFixture,
) -> None:
    error = StorageError("disk I/O error at /srv/secret.db")
    storage = FaultyStorage(MemoryStorage(), fail_on={"get", "get_revision"}, error=error)
    caplog.set_level(logging.WARNING, logger="noetic_scratchpad")
    async with connect(scratchpad(), storage) as client:
        with pytest.raises(MCPError) as raised:
            await client.read_resource("scratchpad://thread/default")
    assert str(raised.value) == unreadable_resource_text()
    assert "/srv/secret.db" not in str(raised.value)
    assert "/srv/secret.db" in caplog.text


async def test_a_corrupt_row_is_reported_as_one_no_retry_fixes(tmp_path: Path) -> None:
    """A stored row that cannot be read back: the model is told not to retry (the storage
    error text says to try again), and after a reset, updates work."""
    layer = scratchpad()
    async with await open_storage(f"sqlite:///{tmp_path / 'pad.db'}") as storage:
        key = state_key("scratchpad", "thread", "default")
        await corrupt_row(storage, key, "not-json")
        async with connect(layer, storage) as client:
            refused = await client.call_tool(UPDATE_TOOL, {"update": {"goal": "x"}})
            await storage.delete(key)
            written = await client.call_tool(UPDATE_TOOL, {"update": {"goal": "x"}})
    assert refused.is_error
    assert "cannot be read" in text_of(refused)
    assert f"Do not call {UPDATE_TOOL} again" in text_of(refused)
    assert "again in a moment" not in text_of(refused)
    assert not written.is_error


@BOTH_LOOPS
async def test_the_state_is_a_resource_and_a_resource_template(mode: str) -> None:
    layer, storage = scratchpad(), MemoryStorage()
    async with connect(layer, storage, mode=mode, allow_scope_argument=True) as client:
        resources = (await client.list_resources()).resources
        templates = (await client.list_resource_templates()).resource_templates
        await client.call_tool(UPDATE_TOOL, {"update": {"goal": "default goal"}})
        await client.call_tool(UPDATE_TOOL, {"update": {"goal": "slash"}, "thread": "a/b"})
        default = await client.read_resource("scratchpad://thread/default")
        slashed = await client.read_resource("scratchpad://thread/a%2Fb")
        empty = await client.read_resource("scratchpad://thread/nobody")
        with pytest.raises(MCPError, match="Resource not found"):
            await client.read_resource("scratchpad://resource/default")

    assert [r.uri for r in resources] == ["scratchpad://thread/default"]
    assert [t.uri_template for t in templates] == ["scratchpad://thread/{thread}"]
    contents = [default.contents[0], slashed.contents[0], empty.contents[0]]
    assert all(isinstance(c, TextResourceContents) for c in contents)
    assert all(c.mime_type == "application/json" for c in contents)
    texts = [c.text for c in contents if isinstance(c, TextResourceContents)]
    assert [json.loads(t) for t in texts] == [{"goal": "default goal"}, {"goal": "slash"}, ""]


async def test_a_resource_scoped_layer_takes_resource_ids() -> None:
    layer, storage = scratchpad(scope="resource"), MemoryStorage()
    async with connect(layer, storage, default_id="u42", allow_scope_argument=True) as client:
        tools = (await client.list_tools()).tools
        await client.call_tool(UPDATE_TOOL, {"update": {"likes": "tea"}})
        await client.call_tool(UPDATE_TOOL, {"update": {"likes": "coffee"}, "resource": "u7"})
        read = await client.read_resource("scratchpad://resource/u42")

    parts = {"path", "start", "end"}  # the read tool's part, by path
    assert all(set(t.input_schema["properties"]) <= {"update", "resource", *parts} for t in tools)
    assert (await layer.open(storage, thread_id="any", resource_id="u42")).state == {"likes": "tea"}
    assert (await layer.open(storage, thread_id="x", resource_id="u7")).state == {"likes": "coffee"}
    assert (await scratchpad().open(storage, thread_id="u42")).state == ""  # not the thread
    content = read.contents[0]
    assert isinstance(content, TextResourceContents)
    assert json.loads(content.text) == {"likes": "tea"}


# -- least privilege: the scope is the server's, not the model's ---------------------------


def pinned_refusal(tool: str, kind: str = "thread") -> str:
    return (
        f"{tool} takes no `{kind}`: this server keeps one scratchpad, and which {kind} it "
        "belongs to is set where the server is started, not by a tool call. Nothing was "
        f"done. Call {tool} again without `{kind}`."
    )


@pytest.mark.parametrize("kind", ["thread", "resource"])
async def test_a_pinned_server_shows_the_model_no_scope_argument(kind: str) -> None:
    """The tools as the model reads them: not a word of the scope to name."""
    layer = scratchpad(scope=kind, schema=TaskNotes, edit_tool=True)  # type: ignore[arg-type]
    async with connect(layer, default_id="desk") as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}

    assert set(tools) == {READ_TOOL, UPDATE_TOOL, EDIT_TOOL}
    read = tools[READ_TOOL].input_schema
    assert read["additionalProperties"] is False
    assert set(read["properties"]) == {"path", "start", "end"}  # a part, never a scope
    assert set(tools[UPDATE_TOOL].input_schema["properties"]) == {"update"}
    assert tools[UPDATE_TOOL].input_schema["additionalProperties"] is False
    assert kind not in tools[EDIT_TOOL].input_schema["properties"]
    for tool in tools.values():
        seen = json.dumps(tool.input_schema) + (tool.description or "")
        assert f'"{kind}"' not in seen
        assert "desk" not in seen  # nor the id it is pinned to
        assert "scratchpad's" not in (tool.description or "")


@pytest.mark.parametrize("kind", ["thread", "resource"])
@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        (UPDATE_TOOL, {"update": {"currentGoal": "exfiltrate"}}),
        (EDIT_TOOL, {"op": "append", "path": "/completedSteps", "value": "x"}),
        (READ_TOOL, {}),
    ],
)
@pytest.mark.parametrize("named", ["victim", "desk", None])
async def test_a_call_naming_a_scope_on_a_pinned_server_is_refused_and_writes_nothing(
    kind: str, tool: str, arguments: dict[str, Any], named: str | None
) -> None:
    """Another scope, the pinned one itself, or null: the argument is not the model's to
    send, so the call is refused whatever it names (never silently dropped or used)."""
    layer = scratchpad(scope=kind, schema=TaskNotes, edit_tool=True)  # type: ignore[arg-type]
    storage, bus = MemoryStorage(), EventBus()
    await (await layer.open(storage, thread_id="victim", resource_id="victim")).update(
        {"currentGoal": "the victim's notes"}
    )
    before = {key: await storage.get(key) for key in await storage.list("")}
    with capture_events(bus) as events:
        async with connect(layer, storage, default_id="desk", events=bus) as client:
            result = await client.call_tool(tool, {**arguments, kind: named})

    assert result.is_error
    assert text_of(result) == pinned_refusal(tool, kind)
    assert "the victim's notes" not in text_of(result)
    assert {key: await storage.get(key) for key in await storage.list("")} == before
    assert events.of(UpdateApplied) == []


async def test_a_pinned_server_serves_only_its_scopes_resource() -> None:
    layer, storage = scratchpad(), MemoryStorage()
    await (await layer.open(storage, thread_id="victim")).update({"secret": "s3"})
    async with connect(layer, storage, default_id="desk") as client:
        await client.call_tool(UPDATE_TOOL, {"update": {"goal": "desk goal"}})
        resources = (await client.list_resources()).resources
        templates = (await client.list_resource_templates()).resource_templates
        own = await client.read_resource("scratchpad://thread/desk")
        with pytest.raises(MCPError) as refused:
            await client.read_resource("scratchpad://thread/victim")

    assert [r.uri for r in resources] == ["scratchpad://thread/desk"]
    assert templates == []
    content = own.contents[0]
    assert isinstance(content, TextResourceContents)
    assert json.loads(content.text) == {"goal": "desk goal"}
    assert str(refused.value) == (
        "Resource not found: scratchpad://thread/victim; this server's resources are "
        "scratchpad://thread/desk"
    )


@pytest.mark.parametrize("kind", ["thread", "resource"])
async def test_with_the_scope_argument_allowed_the_model_names_any_scope(kind: str) -> None:
    layer = scratchpad(scope=kind)  # type: ignore[arg-type]
    storage = MemoryStorage()
    async with connect(layer, storage, default_id="desk", allow_scope_argument=True) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        other = await client.call_tool(UPDATE_TOOL, {"update": {"goal": "o"}, kind: "other"})
        own = await client.call_tool(UPDATE_TOOL, {"update": {"goal": "d"}})
        templates = (await client.list_resource_templates()).resource_templates

    scope_param = {"type": "string", "description": f"Which {kind}'s scratchpad (default: 'desk')."}
    assert tools[READ_TOOL].input_schema["properties"][kind] == scope_param
    assert tools[UPDATE_TOOL].input_schema["properties"][kind] == scope_param
    assert not other.is_error
    assert not own.is_error
    assert await stored(storage, layer, "other") == {"goal": "o"}
    assert await stored(storage, layer, "desk") == {"goal": "d"}
    assert [t.uri_template for t in templates] == [f"scratchpad://{kind}/{{{kind}}}"]


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"update": {"a": 1}, "goal": "x"}, ["takes only `update` and `thread`", "'goal'"]),
        ({"update": {"a": 1}, "thread": ""}, ["`thread` is wrong", "non-empty string"]),
        ({"update": {"a": 1}, "thread": 7}, ["`thread` is wrong", "'default'"]),
    ],
)
async def test_a_wrong_scope_argument_where_it_is_allowed_says_what_to_send(
    arguments: dict[str, Any], expected: list[str]
) -> None:
    storage = MemoryStorage()
    async with connect(scratchpad(), storage, allow_scope_argument=True) as client:
        result = await client.call_tool(UPDATE_TOOL, arguments)

    assert result.is_error
    for part in expected:
        assert part in text_of(result)
    assert await storage.list("") == []


def test_the_scope_argument_option_is_a_bool() -> None:
    with pytest.raises(TypeError, match="allow_scope_argument must be True or False"):
        create_server(None, MemoryStorage(), allow_scope_argument="yes")  # type: ignore[arg-type]


@BOTH_LOOPS
async def test_concurrent_calls_from_two_clients_lose_no_update() -> None:
    layer, storage = scratchpad(), MemoryStorage()
    server = create_server(layer, storage)

    async def client_writes(name: str) -> None:
        async with Client(server) as client, anyio.create_task_group() as group:
            for i in range(25):
                update = {"update": {name: {f"n{i}": i}}}
                group.start_soon(client.call_tool, UPDATE_TOOL, update)

    async with anyio.create_task_group() as group:
        group.start_soon(client_writes, "a")
        group.start_soon(client_writes, "b")

    state = await stored(storage, layer, "default")
    assert state == {name: {f"n{i}": i for i in range(25)} for name in ("a", "b")}


# -- without the extra -------------------------------------------------------------------

BLOCK_MCP = "import sys; sys.modules['mcp'] = None; "


def test_importing_without_mcp_names_the_extra(tmp_path: Path) -> None:
    result = run_python("-c", BLOCK_MCP + "import noetic_scratchpad.integrations.mcp", cwd=tmp_path)
    assert result.returncode == 1
    assert 'pip install "noetic-scratchpad[mcp]"' in result.stderr


def test_the_cli_without_mcp_names_the_extra_and_its_other_commands_work(tmp_path: Path) -> None:
    code = BLOCK_MCP + "from noetic_scratchpad.cli import main; sys.exit(main(sys.argv[1:]))"
    served = run_python("-c", code, "mcp", "--storage", "memory://", cwd=tmp_path)
    version = run_python("-c", code, "--version", cwd=tmp_path)
    assert served.returncode == 1
    assert served.stdout == ""
    assert 'pip install "noetic-scratchpad[mcp]"' in served.stderr
    assert version.returncode == 0, version.stderr
    assert version.stdout.startswith("noetic-scratchpad ")


@pytest.mark.parametrize("limit", [0, -5, 2.5])
async def test_serve_stdio_refuses_a_message_limit_that_cannot_work(limit: Any) -> None:
    storage = MemoryStorage()
    with pytest.raises(ValueError, match="max_message_bytes must be a whole number of bytes"):
        await serve_stdio(storage, max_message_bytes=limit)


# -- over stdio, end to end --------------------------------------------------------------

SCHEMA_MODULE = """
from pydantic import BaseModel, ConfigDict

print("the schema module was imported")  # must reach stderr, never the protocol
LIMIT = 3


class TaskNotes(BaseModel):
    model_config = ConfigDict(extra="forbid")

    currentGoal: str
    completedSteps: list[str] = []
"""


def server_args(db: Path, *extra: str) -> list[str]:
    return ["-m", "noetic_scratchpad", "mcp", "--storage", f"sqlite:///{db}", *extra]


def closed(db: Path) -> bool:
    """Whether every connection to ``db`` was closed: SQLite removes the write-ahead log
    when its last connection closes."""
    return db.exists() and not Path(f"{db}-wal").exists()


def stderr_logs(tmp_path: Path) -> str:
    return "".join(log.read_text() for log in sorted(tmp_path.glob("stderr-*.txt")))


@asynccontextmanager
async def stdio_connect(tmp_path: Path, db: Path, *extra: str) -> AsyncIterator[Client]:
    """A client of ``python -m noetic_scratchpad mcp`` started in ``tmp_path``, its stderr
    in ``tmp_path/stderr-*.txt``."""
    # The code under test, not an installed copy: the SDK passes on only a few variables.
    env = {k: v for k, v in os.environ.items() if k == "PYTHONPATH"}
    params = StdioServerParameters(
        command=sys.executable, args=server_args(db, *extra), cwd=tmp_path, env=env
    )
    log = tmp_path / f"stderr-{os.urandom(4).hex()}.txt"
    with log.open("w") as errlog:
        async with Client(stdio_client(params, errlog=errlog)) as client:
            yield client


@pytest.mark.slow
async def test_over_stdio_tools_refusals_and_resources_work_end_to_end(tmp_path: Path) -> None:
    (tmp_path / "notes_schema.py").write_text(SCHEMA_MODULE)
    db = tmp_path / "scratchpad.db"
    async with stdio_connect(tmp_path, db, "--schema", "notes_schema:TaskNotes") as client:
        names = sorted(tool.name for tool in (await client.list_tools()).tools)
        written = await client.call_tool(UPDATE_TOOL, {"update": {"currentGoal": "Ship"}})
        refused = await client.call_tool(UPDATE_TOOL, {"update": {"completedSteps": 3}})
        read = await client.call_tool(READ_TOOL, {})
        resource = await client.read_resource("scratchpad://thread/default")

    assert names == [READ_TOOL, UPDATE_TOOL]
    assert text_of(written) == "Scratchpad updated (currentGoal)."
    assert refused.is_error
    assert "completedSteps" in text_of(refused)
    assert "scratchpad_update" in text_of(refused)
    assert '"currentGoal": "Ship"' in text_of(read)
    content = resource.contents[0]
    assert isinstance(content, TextResourceContents)
    assert json.loads(content.text) == {"currentGoal": "Ship"}
    assert closed(db)
    errors = stderr_logs(tmp_path)
    assert "the schema module was imported" in errors
    assert "Traceback" not in errors
    async with await open_storage(f"sqlite:///{db}") as backend:
        assert await stored(backend, scratchpad(), "default") == {"currentGoal": "Ship"}


@pytest.mark.slow
async def test_the_command_pins_its_thread_unless_told_to_allow_any(tmp_path: Path) -> None:
    db = tmp_path / "scratchpad.db"
    async with stdio_connect(tmp_path, db, "--thread", "desk") as client:
        pinned_tools = (await client.list_tools()).tools
        refused = await client.call_tool(UPDATE_TOOL, {"update": {"goal": "x"}, "thread": "victim"})
        written = await client.call_tool(UPDATE_TOOL, {"update": {"goal": "desk"}})
    async with stdio_connect(tmp_path, db, "--thread", "desk", "--allow-any-thread") as client:
        allowed_tools = (await client.list_tools()).tools
        other = await client.call_tool(UPDATE_TOOL, {"update": {"goal": "o"}, "thread": "other"})

    assert all("thread" not in json.dumps(t.input_schema) for t in pinned_tools)
    assert all("thread" in t.input_schema["properties"] for t in allowed_tools)
    assert refused.is_error
    assert text_of(refused) == pinned_refusal(UPDATE_TOOL)
    assert not written.is_error
    assert not other.is_error
    async with await open_storage(f"sqlite:///{db}") as backend:
        assert await stored(backend, scratchpad(), "victim") == ""
        assert await stored(backend, scratchpad(), "desk") == {"goal": "desk"}
        assert await stored(backend, scratchpad(), "other") == {"goal": "o"}


@pytest.mark.slow
async def test_two_stdio_servers_on_one_sqlite_file_lose_no_update(tmp_path: Path) -> None:
    db, count = tmp_path / "shared.db", 30

    async def client_writes(name: str) -> None:
        async with (
            stdio_connect(tmp_path, db, "--thread", "shared") as client,
            anyio.create_task_group() as group,
        ):
            for i in range(count):
                update = {"update": {name: {f"n{i}": i}}}
                group.start_soon(client.call_tool, UPDATE_TOOL, update)

    async with anyio.create_task_group() as group:
        group.start_soon(client_writes, "a")
        group.start_soon(client_writes, "b")

    async with await open_storage(f"sqlite:///{db}") as backend:
        state = await stored(backend, scratchpad(), "shared")
    assert state == {name: {f"n{i}": i for i in range(count)} for name in ("a", "b")}


class RawServer:
    """The server as a bare subprocess: JSON-RPC lines in, every stdout line kept."""

    def __init__(self, process: anyio.abc.Process) -> None:
        self.process = process
        self.lines: list[str] = []
        self._buffer = b""
        self._next_id = 0

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self._next_id += 1
        await self.send({"jsonrpc": "2.0", "id": self._next_id, "method": method, "params": params})
        with anyio.fail_after(20):
            while True:
                message = json.loads(await self.read_line())
                if message.get("id") == self._next_id:
                    return message  # type: ignore[no-any-return]

    async def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.send(json.dumps(message).encode() + b"\n")

    async def read_line(self) -> str:
        assert self.process.stdout is not None
        while b"\n" not in self._buffer:
            self._buffer += await self.process.stdout.receive()
        line, _, self._buffer = self._buffer.partition(b"\n")
        self.lines.append(line.decode())
        return line.decode()

    async def close_stdin(self) -> tuple[int, str]:
        """Close stdin, as a client that is done does: the exit code and the stderr."""
        assert self.process.stdin is not None
        await self.process.stdin.aclose()
        await self.rest()
        with anyio.fail_after(20):
            code = await self.process.wait()
        assert self.process.stderr is not None
        return code, (await self.process.stderr.receive(1 << 20)).decode()

    async def rest(self) -> None:
        """Keep everything the server writes until it closes stdout."""
        assert self.process.stdout is not None
        async for chunk in self.process.stdout:
            self._buffer += chunk
        self.lines.extend(part.decode() for part in self._buffer.split(b"\n") if part)


@asynccontextmanager
async def raw_server(tmp_path: Path, *args: str) -> AsyncIterator[RawServer]:
    command = [sys.executable, *args]
    async with await anyio.open_process(command, cwd=tmp_path) as process:
        server = RawServer(process)
        initialized = await server.request(
            "initialize",
            {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "raw-test", "version": "1"},
            },
        )
        assert initialized["result"]["serverInfo"]["name"] == "noetic-scratchpad"
        await server.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        yield server


@pytest.mark.slow
async def test_stdout_carries_only_json_rpc_messages(tmp_path: Path) -> None:
    (tmp_path / "notes_schema.py").write_text(SCHEMA_MODULE)
    db = tmp_path / "scratchpad.db"
    args = server_args(db, "--schema", "notes_schema:TaskNotes")
    async with raw_server(tmp_path, "-X", "dev", "-W", "default", *args) as server:
        calls = [
            {"name": UPDATE_TOOL, "arguments": {"update": {"currentGoal": "G"}}},
            {"name": UPDATE_TOOL, "arguments": {"update": {"currentGoal": 1}}},
            {"name": UPDATE_TOOL, "arguments": {"update": "{oops"}},
            {"name": READ_TOOL, "arguments": {"thread": "other"}},
        ]
        results = [await server.request("tools/call", call) for call in calls]
        await server.request("resources/read", {"uri": "scratchpad://thread/default"})
        await server.request("resources/read", {"uri": "file:///etc/passwd"})
        code, stderr = await server.close_stdin()

    assert code == 0, stderr
    assert [r["result"]["isError"] for r in results] == [False, True, True, True]
    assert len(server.lines) == 7
    for line in server.lines:
        assert json.loads(line)["jsonrpc"] == "2.0", line
    assert "the schema module was imported" in stderr
    assert closed(db)


@pytest.mark.slow
async def test_a_message_over_the_limit_is_refused_and_the_next_one_is_answered(
    tmp_path: Path,
) -> None:
    db, limit = tmp_path / "scratchpad.db", 2000
    async with raw_server(tmp_path, *server_args(db, "--max-message-bytes", str(limit))) as server:
        big = {"update": {"goal": "x" * 50_000}}
        call = {"jsonrpc": "2.0", "id": "big-1", "method": "tools/call"}
        await server.send({**call, "params": {"name": UPDATE_TOOL, "arguments": big}})
        refused = json.loads(await server.read_line())  # answered before the next request
        answered = await server.request(
            "tools/call", {"name": UPDATE_TOOL, "arguments": {"update": {"goal": "small"}}}
        )
        assert server.process.stdin is not None
        # A line over the limit with no id to answer: logged, and the stream goes on.
        await server.process.stdin.send(b"x" * 100_000 + b"\n")
        after_garbage = await server.request("tools/call", {"name": READ_TOOL, "arguments": {}})
        code, stderr = await server.close_stdin()

    assert refused["id"] == "big-1"
    assert refused["error"]["code"] == -32600
    assert "Message too large" in refused["error"]["message"]
    assert "--max-message-bytes" in refused["error"]["message"]
    assert refused["error"]["data"]["limit"] == limit
    assert refused["error"]["data"]["size"] > 50_000
    assert answered["result"]["isError"] is False
    assert '"goal": "small"' in after_garbage["result"]["content"][0]["text"]
    assert code == 0, stderr
    assert "refused request 'big-1'" in stderr
    assert "no request id could be read" in stderr
    assert "Traceback" not in stderr


@pytest.mark.slow
async def test_the_command_refuses_a_message_over_the_default_limit(tmp_path: Path) -> None:
    async with raw_server(tmp_path, *server_args(tmp_path / "scratchpad.db")) as server:
        update = {"update": {"goal": "x" * DEFAULT_MAX_MESSAGE_BYTES}}
        refused = await server.request("tools/call", {"name": UPDATE_TOOL, "arguments": update})
        answered = await server.request("tools/call", {"name": READ_TOOL, "arguments": {}})
    assert refused["error"]["code"] == -32600
    assert refused["error"]["data"]["limit"] == DEFAULT_MAX_MESSAGE_BYTES
    assert "is empty" in answered["result"]["content"][0]["text"]


@pytest.mark.slow
@pytest.mark.skipif(sys.platform == "win32", reason="no SIGTERM on Windows")
async def test_sigterm_stops_the_server_and_closes_storage(tmp_path: Path) -> None:
    db = tmp_path / "scratchpad.db"
    async with raw_server(tmp_path, *server_args(db)) as server:
        result = await server.request(
            "tools/call", {"name": UPDATE_TOOL, "arguments": {"update": {"goal": "kept"}}}
        )
        assert result["result"]["isError"] is False
        server.process.send_signal(signal.SIGTERM)  # stdin stays open
        with anyio.fail_after(10):
            code = await server.process.wait()
    assert code == 0
    assert closed(db)
    async with await open_storage(f"sqlite:///{db}") as backend:
        assert await stored(backend, scratchpad(), "default") == {"goal": "kept"}


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--schema", "no_such_module:Model"], "cannot import 'no_such_module'"),
        (["--schema", "notes_schema:Missing"], "module 'notes_schema' has no 'Missing'"),
        (["--schema", "notes_schema"], "give the model as module:Model"),
        (
            ["--schema", "broken_schema:Model"],
            "importing 'broken_schema' failed: ZeroDivisionError",
        ),
        (["--schema", "notes_schema:LIMIT"], "notes_schema:LIMIT: unusable scratchpad schema"),
        (["--scope", "resource", "--thread", "t"], "--thread does not apply to --scope resource"),
        (["--resource", "u1"], "--resource does not apply to --scope thread; use --thread"),
        (["--thread", ""], "--thread: a thread id must be a non-empty string"),
        (
            ["--allow-any-resource"],
            "--allow-any-resource does not apply to --scope thread; use --allow-any-thread",
        ),
        (
            ["--scope", "resource", "--allow-any-thread"],
            "--allow-any-thread does not apply to --scope resource; use --allow-any-resource",
        ),
        (["--max-message-bytes", "0"], "--max-message-bytes: give a whole number of bytes"),
        (["--max-message-bytes", "1e6"], "--max-message-bytes: give a whole number of bytes"),
    ],
)
def test_bad_options_are_usage_errors_before_anything_is_served(
    tmp_path: Path, extra: list[str], message: str
) -> None:
    (tmp_path / "notes_schema.py").write_text(SCHEMA_MODULE)
    (tmp_path / "broken_schema.py").write_text("1 / 0\n")
    db = tmp_path / "scratchpad.db"
    result = run_python(*server_args(db, *extra), cwd=tmp_path)
    assert result.returncode == 2
    assert result.stdout == ""
    assert message in result.stderr
    assert not db.exists()  # refused before storage was opened


def test_the_help_documents_the_command(tmp_path: Path) -> None:
    result = run_python("-m", "noetic_scratchpad", "mcp", "--help", cwd=tmp_path)
    assert result.returncode == 0
    options = (
        "--storage",
        "--schema",
        "--scope",
        "--thread",
        "--allow-any-thread",
        "--resource",
        "--allow-any-resource",
        "--max-message-bytes",
    )
    for option in options:
        assert option in result.stdout
    assert f"(default: {DEFAULT_MAX_MESSAGE_BYTES}," in " ".join(result.stdout.split())
    assert "scratchpad://thread/{thread}" in result.stdout


def test_a_storage_url_that_cannot_be_opened_fails_before_serving(tmp_path: Path) -> None:
    result = run_python(
        "-m", "noetic_scratchpad", "mcp", "--storage", "nosuch://x", cwd=tmp_path, stdin="{}\n"
    )
    assert result.returncode == 2  # a usage error: the usage, then one line
    assert result.stdout == ""
    assert result.stderr.startswith("usage: noetic-scratchpad mcp ")
    assert "noetic-scratchpad mcp: error: --storage: unknown storage scheme 'nosuch'" in (
        result.stderr
    )


def test_the_config_snippet_in_the_docs_is_this_command() -> None:
    """The JSON a user copies from docs/integrations/mcp.md names the installed command and
    arguments this parser turns into the ``mcp`` command with SQLite storage."""
    from noetic_scratchpad.cli.mcp import cmd_mcp
    from noetic_scratchpad.cli.parser import build_parser

    page = Path(__file__).resolve().parents[2] / "docs" / "integrations" / "mcp.md"
    snippet = page.read_text().split("```json\n", 1)[1].split("```", 1)[0]
    entry = json.loads(snippet)["mcpServers"]["scratchpad"]
    assert entry["command"] == "noetic-scratchpad"
    args = build_parser().parse_args(entry["args"])
    assert args.handler is cmd_mcp
    assert args.storage.startswith("sqlite:////")


class Ticket(BaseModel):
    """Notes on the customer's support ticket"""

    customer: str = ""
    promised: list[str] = []


@pytest.mark.asyncio
async def test_the_server_instructions_and_examples_speak_the_schemas_words() -> None:
    """The instructions name the schema's fields and this server's tools; the example of
    a refused call is an update of the schema's first field."""
    server = create_server(scratchpad(schema=Ticket), MemoryStorage())
    async with Client(server) as client:
        assert client.instructions == (
            "A scratchpad: your working notes for the task, kept between conversations. "
            "Call scratchpad_read when you start or resume a task, and scratchpad_update "
            "whenever your notes change (customer, promised), passing only what changes."
        )
        refused = await client.call_tool(UPDATE_TOOL, {})
    assert refused.is_error
    assert '{"update": {"customer": "..."}}' in text_of(refused)
    own = create_server(scratchpad(instructions="Use {read_tool} first."), MemoryStorage())
    async with Client(own) as client:
        assert client.instructions == "Use scratchpad_read first."
