"""The library logs through the standard ``logging`` module and prints nothing on stdout
(SPEC.md section 3): a CLI or an MCP stdio server embedding it keeps its stdout clean."""

from __future__ import annotations

import logging
import os
import textwrap
from pathlib import Path
from typing import Any

import pytest
from conftest import run_python

from noetic_scratchpad import (
    Agent,
    AgentHarness,
    EventBus,
    ScriptedModel,
    StateDiscarded,
    Tool,
    UpdateApplied,
    UpdateRejected,
    ViewTruncated,
    scratchpad,
)
from noetic_scratchpad.context import ExecutionContext
from noetic_scratchpad.items import FunctionCall

REPO = Path(__file__).resolve().parents[1]

#: Emits every kind of diagnostic through the library: the events themselves, a failing
#: sync and async subscriber, and a harness run whose tool raises and whose update is refused.
EMITTING_SCRIPT = textwrap.dedent(
    """
    import asyncio

    from noetic_scratchpad import (
        Agent, AgentHarness, EventBus, ScriptedModel, StateDiscarded, Tool, UpdateApplied,
        UpdateRejected, ViewTruncated, scratchpad,
    )
    from noetic_scratchpad.items import FunctionCall


    def broken(event):
        raise RuntimeError("sync subscriber bug")


    async def broken_async(event):
        raise RuntimeError("async subscriber bug")


    async def explode(args, ctx):
        raise RuntimeError("disk on fire")


    async def main():
        bus = EventBus()
        bus.subscribe(broken)
        bus.subscribe(broken_async)
        bus.emit(UpdateApplied(layer_id="scratchpad", scope_key="t1", source="api", keys=("a",)))
        bus.emit(UpdateRejected(
            layer_id="scratchpad", scope_key="t1", hook="tool", reason="schema",
            message="blockers: Input should be a valid list", errors=(),
        ))
        bus.emit(StateDiscarded(layer_id="scratchpad", scope_key="u7", reason="not an object"))
        bus.emit(ViewTruncated(
            layer_id="scratchpad", scope_key="t1", budget=10, total_tokens=30, omitted_tokens=25
        ))
        await bus.aclose() if hasattr(bus, "aclose") else await bus.drain()

        tool = Tool("explode", "Always fails.", {"type": "object", "properties": {}}, explode)
        model = ScriptedModel([
            [
                FunctionCall(call_id="a", name="explode", arguments="{}"),
                FunctionCall(call_id="b", name="scratchpad/update", arguments='"not an object"'),
            ],
            "Sorry.",
        ])
        harness = AgentHarness(
            "h", Agent(model=model, tools=[tool]), {}, [scratchpad()], "memory://",
            context_budget=40,
        )
        async with harness:
            await harness.update_state(
                "scratchpad", {f"note{i}": "x" * 40 for i in range(20)}, thread_id="t"
            )
            await harness.run("go", thread_id="t")


    asyncio.run(main())
    """
)


def run_script(tmp_path: Path, prelude: str = "") -> Any:
    script = tmp_path / "emit.py"
    script.write_text(prelude + EMITTING_SCRIPT, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "NOETIC_SCRATCHPAD_STORAGE"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    completed = run_python(str(script), cwd=tmp_path, env=env)
    assert completed.returncode == 0, completed.stderr
    return completed


@pytest.mark.slow
def test_library_prints_nothing_when_the_application_configures_no_logging(
    tmp_path: Path,
) -> None:
    """With logging left unconfigured, rejected updates, truncated views, failing
    subscribers and failing tools print nothing at all: stdout and stderr stay empty."""
    completed = run_script(tmp_path)

    assert completed.stdout == ""
    assert completed.stderr == ""


@pytest.mark.slow
def test_configured_logging_receives_the_diagnostics_and_stdout_stays_empty(
    tmp_path: Path,
) -> None:
    """``logging.basicConfig`` on stderr shows every diagnostic, with its fields, under
    loggers named ``noetic_scratchpad.*``; nothing goes to stdout."""
    prelude = (
        "import logging, sys\n"
        "logging.basicConfig(stream=sys.stderr, level=logging.DEBUG,\n"
        "                    format='%(levelname)s %(name)s %(message)s')\n"
    )
    completed = run_script(tmp_path, prelude)

    assert completed.stdout == ""
    lines = completed.stderr.splitlines()
    ours = [line for line in lines if " noetic_scratchpad" in line]
    assert any(
        line.startswith("WARNING noetic_scratchpad.events update_rejected")
        and "scope_key=t1" in line
        and "reason=schema" in line
        and "hook=tool" in line
        for line in ours
    ), completed.stderr
    assert any(
        line.startswith("INFO noetic_scratchpad.events view_truncated")
        and "omitted_tokens=25" in line
        for line in ours
    ), completed.stderr
    assert any(
        line.startswith("WARNING noetic_scratchpad.events state_discarded") for line in ours
    ), completed.stderr
    assert any(
        line.startswith("ERROR noetic_scratchpad.events event handler failed") for line in ours
    ), completed.stderr
    assert any(
        line.startswith("WARNING noetic_scratchpad.runtime tool failed")
        and "tool=explode" in line
        and "disk on fire" in line
        for line in ours
    ), completed.stderr
    assert not any("update_applied layer_id=" in line for line in ours)  # routine: not logged


def sample_diagnostics() -> list[Any]:
    return [
        UpdateApplied(layer_id="scratchpad", scope_key="t1", source="tool", keys=("goal",)),
        UpdateRejected(
            layer_id="scratchpad",
            scope_key="t1",
            hook="store",
            reason="schema",
            message="goal: Input should be a valid string",
            errors=({"type": "string_type", "loc": ("goal",), "input": "sk-secret-value"},),
            call_id="c1",
        ),
        StateDiscarded(layer_id="scratchpad", scope_key="u7", reason="not an object"),
        ViewTruncated(
            layer_id="scratchpad", scope_key="t1", budget=10, total_tokens=30, omitted_tokens=25
        ),
    ]


def test_events_are_stdlib_log_records_with_their_fields(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """``caplog`` on logger ``noetic_scratchpad`` sees each diagnostic as a record of
    ``noetic_scratchpad.events`` whose message names the kind and the fields; the event itself
    is on the record as ``scratchpad_event``. Values the model wrote (pydantic's ``input``)
    stay out of the log; routine ``UpdateApplied`` is not logged; ``ViewTruncated`` is info."""
    caplog.set_level(logging.DEBUG, logger="noetic_scratchpad")
    bus = EventBus()
    events = sample_diagnostics()
    for event in events:
        bus.emit(event)

    records = [r for r in caplog.records if r.name.startswith("noetic_scratchpad")]
    assert [(r.name, r.levelname, r.getMessage().split(" ")[0]) for r in records] == [
        ("noetic_scratchpad.events", "WARNING", "update_rejected"),
        ("noetic_scratchpad.events", "WARNING", "state_discarded"),
        ("noetic_scratchpad.events", "INFO", "view_truncated"),
    ]
    rejected, discarded, truncated = (r.getMessage() for r in records)
    for field in (
        "layer_id=scratchpad",
        "scope_key=t1",
        "hook=store",
        "reason=schema",
        "call_id=c1",
        'message="goal: Input should be a valid string"',
        "errors=goal:string_type",
    ):
        assert field in rejected, rejected
    assert "sk-secret-value" not in rejected
    assert 'reason="not an object"' in discarded
    assert "scope_key=u7" in discarded
    assert "budget=10 total_tokens=30 omitted_tokens=25" in truncated
    assert [r.scratchpad_event for r in records] == events[1:]  # type: ignore[attr-defined]


def test_the_noetic_scratchpad_logger_level_silences_the_library(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """``logging.getLogger("noetic_scratchpad").setLevel(logging.CRITICAL)`` is all it takes
    to silence every diagnostic, the failing-subscriber errors included."""
    caplog.set_level(logging.DEBUG)
    bus = EventBus()

    def broken(event: object) -> None:
        raise RuntimeError("subscriber bug")

    def ours() -> list[str]:
        return [r.getMessage() for r in caplog.records if r.name.startswith("noetic_scratchpad")]

    bus.subscribe(broken)
    for event in sample_diagnostics():
        bus.emit(event)
    assert len(ours()) == 7  # three diagnostics, four failures of the subscriber
    caplog.clear()

    package = logging.getLogger("noetic_scratchpad")
    level = package.level
    package.setLevel(logging.CRITICAL)  # what an application does; put back for the next test
    try:
        for event in sample_diagnostics():
            bus.emit(event)
    finally:
        package.setLevel(level)

    assert ours() == []


def test_the_package_installs_a_null_handler_and_no_other() -> None:
    """As a library should: a ``NullHandler`` on ``noetic_scratchpad`` (so stdlib's
    last-resort handler never prints its records), and no handler that writes anywhere."""
    handlers = logging.getLogger("noetic_scratchpad").handlers
    assert [type(handler) for handler in handlers] == [logging.NullHandler]


@pytest.mark.asyncio
async def test_harness_diagnostics_go_to_the_runtime_logger(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A raising tool is logged by ``noetic_scratchpad.runtime`` with the tool, call id and
    error in the message."""

    async def explode(args: dict[str, Any], ctx: ExecutionContext) -> str:
        raise RuntimeError("disk on fire")

    tool = Tool("explode", "Always fails.", {"type": "object", "properties": {}}, explode)
    model = ScriptedModel([[FunctionCall(call_id="a", name="explode", arguments="{}")], "ok"])
    caplog.set_level(logging.DEBUG, logger="noetic_scratchpad")
    async with AgentHarness("h", Agent(model=model, tools=[tool]), {}, [scratchpad()]) as harness:
        await harness.run("go", thread_id="t")

    (record,) = [r for r in caplog.records if r.name == "noetic_scratchpad.runtime"]
    assert record.levelname == "WARNING"
    message = record.getMessage()
    assert message.startswith("tool failed ")
    assert "tool=explode" in message
    assert "call_id=a" in message
    assert "error='RuntimeError: disk on fire'" in message


def cli(*args: str, cwd: Path) -> Any:
    env = {k: v for k, v in os.environ.items() if k != "NOETIC_SCRATCHPAD_STORAGE"}
    return run_python("-m", "noetic_scratchpad", *args, cwd=cwd, env=env)


@pytest.mark.slow
def test_cli_logs_go_to_stderr_and_never_to_stdout(tmp_path: Path) -> None:
    """``--log-level debug demo`` prints exactly what the quiet demo prints on stdout; the
    library's log lines (the rejected update among them) are on stderr."""
    quiet = cli("demo", "--storage", "memory://", cwd=tmp_path)
    verbose = cli("--log-level", "debug", "demo", "--storage", "memory://", cwd=tmp_path)

    assert quiet.returncode == 0, quiet.stderr
    assert verbose.returncode == 0, verbose.stderr
    assert quiet.stderr == ""
    assert verbose.stdout == quiet.stdout
    rejected = [line for line in verbose.stderr.splitlines() if "update_rejected" in line]
    assert len(rejected) == 1, verbose.stderr
    assert " WARNING noetic_scratchpad.events: update_rejected " in rejected[0]
    assert "reason=schema" in rejected[0]
    assert "hook=tool" in rejected[0]
