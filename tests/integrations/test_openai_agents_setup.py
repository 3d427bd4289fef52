"""The OpenAI Agents SDK integration's setup: scope from the run context, instructions
functions, read-only, configuration errors, the missing extra, and the docs' snippet."""

from __future__ import annotations

import ast
import importlib
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import agents
import pytest
from agents import Agent, RunContextWrapper, Runner, set_tracing_disabled

from noetic_scratchpad import ScratchpadConfigError
from noetic_scratchpad.core import RunScope as CoreRunScope
from noetic_scratchpad.integrations.openai_agents import RunScope, Scratchpad
from noetic_scratchpad.storage import MemoryStorage
from tests.integrations.agents_sdk_fakes import (
    ScriptedAgentsModel,
    agent_for,
    block_of,
    reply,
    tool_call,
)


@pytest.fixture(autouse=True)
def _no_tracing() -> None:
    set_tracing_disabled(True)  # no trace export: nothing leaves the process


@pytest.mark.asyncio
async def test_the_scope_comes_from_the_run_context() -> None:
    backend = MemoryStorage()
    notes = Scratchpad(storage=backend, scope="resource")
    model = ScriptedAgentsModel([[tool_call("c1", lang="fr")], [reply("ok")], [reply("ok")]])
    user = SimpleNamespace(thread_id="t1", resource_id="alice")  # attributes work too
    await Runner.run(agent_for(notes, model), "Go.", context=user)
    other_thread = {"thread_id": "t2", "resource_id": "alice"}
    await Runner.run(agent_for(notes, model), "Again.", context=other_thread)
    assert block_of(model.calls[2].system_instructions) == {"lang": "fr"}  # alice's, shared

    by_ticket = Scratchpad(storage=backend, scope_from=lambda ctx: RunScope(ctx.context.ticket))
    second = ScriptedAgentsModel([[tool_call("c1", ticket="T-9")], [reply("ok")]])
    await Runner.run(agent_for(by_ticket, second), "Go.", context=SimpleNamespace(ticket="T-9"))
    handle = await by_ticket.handle(RunContextWrapper(context=SimpleNamespace(ticket="T-9")))
    assert handle.snapshot == {"ticket": "T-9"}


@pytest.mark.asyncio
async def test_max_scopes_is_deprecated_and_changes_nothing() -> None:
    """It bounded a cache of handles per scope; no handle is kept any more (see
    ``test_a_tool_call_writes_without_reading_and_each_model_call_reads_once``)."""
    with pytest.warns(DeprecationWarning, match="max_scopes=.*does nothing"):
        notes = Scratchpad(storage=MemoryStorage(), max_scopes=2)
    for thread in ("t1", "t2", "t3"):
        model = ScriptedAgentsModel([[tool_call("c1", thread=thread)], [reply("ok")]])
        await Runner.run(agent_for(notes, model), "Go.", context={"thread_id": thread})
    model = ScriptedAgentsModel([[reply("ok")]])
    await Runner.run(agent_for(notes, model), "Again.", context={"thread_id": "t1"})
    assert block_of(model.calls[0].system_instructions) == {"thread": "t1"}


def test_run_scope_is_the_cores_and_keeps_its_shape() -> None:
    scope = RunScope("t1", resource_id="alice")
    assert isinstance(scope, CoreRunScope)
    assert (scope.thread_id, scope.resource_id) == ("t1", "alice")
    assert RunScope("t2").resource_id is None


@pytest.mark.asyncio
async def test_a_run_without_a_thread_id_fails_and_says_how_to_give_one() -> None:
    notes = Scratchpad(storage=MemoryStorage())
    model = ScriptedAgentsModel([[reply("never")]])
    with pytest.raises(ScratchpadConfigError, match=r"context=\{'thread_id': '...'\}"):
        await Runner.run(agent_for(notes, model), "Go.")
    assert model.calls == []


@pytest.mark.asyncio
async def test_a_scope_function_giving_no_thread_is_refused_as_every_host_refuses_it() -> None:
    notes = Scratchpad(storage=MemoryStorage(), scope_from=lambda ctx: "")
    model = ScriptedAgentsModel([[reply("never")]])
    with pytest.raises(ScratchpadConfigError, match=r"scope_from\(run_context\).*non-empty"):
        await Runner.run(agent_for(notes, model), "Go.", context={})
    assert model.calls == []


@pytest.mark.asyncio
async def test_instructions_compose_with_an_instructions_function() -> None:
    notes = Scratchpad(storage=MemoryStorage())
    await (await notes.handle(RunContextWrapper(context={"thread_id": "t1"}))).update({"a": 1})

    async def persona(run_context: RunContextWrapper[Any], agent: Agent[Any]) -> str:
        return f"You help {run_context.context['user']} as {agent.name}."

    model = ScriptedAgentsModel([[reply("ok")]])
    agent = Agent(name="Ada", instructions=notes.instructions(persona), model=model)
    await Runner.run(agent, "Hi.", context={"thread_id": "t1", "user": "Bob"})
    text = model.calls[0].system_instructions or ""
    assert text.startswith("You help Bob as Ada.\n\n<scratchpad>")
    assert block_of(text) == {"a": 1}


@pytest.mark.asyncio
async def test_a_read_only_scratchpad_is_shown_but_its_tool_is_not_offered() -> None:
    backend = MemoryStorage()
    writer = Scratchpad(storage=backend)
    await (await writer.handle(RunContextWrapper(context={"thread_id": "t1"}))).update({"a": 1})
    notes = Scratchpad(storage=backend, read_only=True)
    model = ScriptedAgentsModel([[reply("ok")]])
    await Runner.run(agent_for(notes, model), "Hi.", context={"thread_id": "t1"})
    assert model.calls[0].tools == []
    assert block_of(model.calls[0].system_instructions) == {"a": 1}


@pytest.mark.asyncio
async def test_a_bad_tool_name_is_refused_at_construction() -> None:
    with pytest.raises(ScratchpadConfigError, match="tool_name 'scratchpad/update'"):
        Scratchpad(tool_name="scratchpad/update")


def test_a_storage_of_another_type_is_refused_and_a_password_never_shown() -> None:
    with pytest.raises(ScratchpadConfigError, match="storage must be a URL"):
        Scratchpad(storage=42)  # type: ignore[arg-type]
    notes = Scratchpad(storage="postgresql://app:s3cret@db/notes")
    assert "s3cret" not in repr(notes)
    assert notes.storage_url == "postgresql://app:***@db/notes"


def test_importing_without_the_sdk_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "agents", None)  # as if it were not installed
    monkeypatch.delitem(sys.modules, "noetic_scratchpad.integrations.openai_agents")
    with pytest.raises(ImportError) as raised:
        importlib.import_module("noetic_scratchpad.integrations.openai_agents")
    assert 'pip install "noetic-scratchpad[openai-agents]"' in str(raised.value)


DOC = Path(__file__).parents[2] / "docs" / "integrations" / "openai-agents.md"


@pytest.mark.asyncio
async def test_the_three_lines_in_the_docs_run_as_they_are(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    source = DOC.read_text().split("```python", 1)[1].split("\n", 1)[1].split("```", 1)[0]
    assert "notes = Scratchpad(" in source
    model = ScriptedAgentsModel([[tool_call("c1", currentGoal="Fix login")], [reply("On it.")]])

    def offline_agent(**options: Any) -> Agent[Any]:
        return Agent(model=model, **options)  # the snippet's agent, on the scripted model

    monkeypatch.setattr(agents, "Agent", offline_agent)
    monkeypatch.chdir(tmp_path)  # the snippet's sqlite:///scratchpad.db lands here
    namespace: dict[str, Any] = {}
    code = compile(source, str(DOC), "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    try:
        await eval(code, namespace)  # the snippet awaits Runner.run at top level
    finally:
        await namespace["notes"].aclose()
    assert namespace["result"].final_output == "On it."
    assert model.calls[1].outputs() == {"c1": "Scratchpad updated (currentGoal)."}
    # The page's run places the block last, after the call's output; the instructions stay.
    assert model.calls[1].system_instructions == "You are careful."
    assert model.calls[1].input[-1] == {
        "role": "developer",
        "content": '<scratchpad>\n{\n  "currentGoal": "Fix login"\n}\n</scratchpad>',
    }
    async with Scratchpad(storage="sqlite:///scratchpad.db") as notes:
        handle = await notes.handle(RunContextWrapper(context={"thread_id": "ticket-42"}))
        assert handle.snapshot == {"currentGoal": "Fix login"}
