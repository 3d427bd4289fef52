"""A host given no storage says so, once, loudly: its notes live in ``memory://`` and end
with the process, where the CLI (a SQLite file by default) will not find them. A host
given storage says nothing of the kind."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pytest

from noetic_scratchpad import scratchpad
from noetic_scratchpad.core import ScratchpadCore
from noetic_scratchpad.integrations.openai_agents import Scratchpad
from noetic_scratchpad.integrations.pydantic_ai import ScratchpadCapability, ScratchpadToolset
from noetic_scratchpad.runtime import Agent, AgentHarness, ScriptedModel
from noetic_scratchpad.server import create_app
from noetic_scratchpad.storage import ENV_VAR
from noetic_scratchpad.storage import owned as owned_module

WARNING = "no storage given: the scratchpad keeps its notes in memory://"


def harness(storage: str | None) -> ScratchpadCore:
    agent = Agent(model=ScriptedModel(["Hi."]), instructions="", tools=[])
    return AgentHarness("a", agent, {}, [scratchpad()], storage).core


def pydantic_ai_capability(storage: str | None) -> ScratchpadCore:
    return ScratchpadCapability(storage=storage).core


def pydantic_ai_toolset(storage: str | None) -> ScratchpadCore:
    return ScratchpadToolset(storage=storage).core


def agents_sdk(storage: str | None) -> ScratchpadCore:
    return Scratchpad(storage=storage).core


def http_app(storage: str | None) -> ScratchpadCore:
    return create_app(storage).core


HOSTS: dict[str, Callable[[str | None], ScratchpadCore]] = {
    "harness": harness,
    "pydantic-ai capability": pydantic_ai_capability,
    "pydantic-ai toolset": pydantic_ai_toolset,
    "agents sdk": agents_sdk,
    "http": http_app,
}


@pytest.fixture(autouse=True)
def fresh(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.delenv(ENV_VAR, raising=False)
    owned_module._say_memory_is_the_default.cache_clear()
    yield
    owned_module._say_memory_is_the_default.cache_clear()


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "noetic_scratchpad.storage" and r.levelno == logging.WARNING
    ]


@pytest.mark.asyncio
@pytest.mark.parametrize("host", HOSTS)
async def test_a_host_without_storage_says_once_that_its_notes_end_with_the_process(
    host: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="noetic_scratchpad")
    for _ in range(2):  # two hosts in one process: said once
        core = HOSTS[host](None)
        await core.open()
        await core.aclose()
    [said] = warnings(caplog)
    assert said.startswith(WARNING)
    assert "storage='sqlite:///scratchpad.db'" in said
    assert ENV_VAR in said
    opened = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert opened.count("scratchpad storage opened: memory://") == 2


@pytest.mark.asyncio
@pytest.mark.parametrize("host", HOSTS)
async def test_a_host_given_storage_or_the_environment_says_nothing_of_it(
    host: str, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    caplog.set_level(logging.INFO, logger="noetic_scratchpad")
    core = HOSTS[host]("memory://")  # chosen: the application knows
    await core.open()
    await core.aclose()
    monkeypatch.setenv(ENV_VAR, "memory://")
    core = HOSTS[host](None)
    await core.open()
    await core.aclose()
    assert warnings(caplog) == []
