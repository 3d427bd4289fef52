"""The run loop: context assembly, tool execution, exactly-once writes and error outputs."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from noetic_scratchpad import (
    MaxStepsExceededError,
    ScratchpadConfigError,
    ScratchpadValidationError,
    UpdateApplied,
    UpdateRejected,
    ViewTruncated,
    scratchpad,
)
from noetic_scratchpad.context import ExecutionContext
from noetic_scratchpad.items import FunctionCall, FunctionCallOutput, Item, Message
from noetic_scratchpad.layer import ScratchpadConfig, ScratchpadLayer, StoreResult
from noetic_scratchpad.runtime import (
    Agent,
    AgentHarness,
    ModelRequest,
    RunResult,
    ScriptedModel,
    Tool,
)
from noetic_scratchpad.storage import MemoryStorage, StorageBackend
from noetic_scratchpad.testing import FaultyStorage, capture_events
from tests.runtime.helpers import TaskNotes, blocks, update_call


def make_harness(
    model: Any, *layers: Any, tools: tuple[Tool, ...] = (), **options: Any
) -> AgentHarness:
    return AgentHarness(
        name="test",
        agent=Agent(model=model, instructions="You are careful.", tools=tools),
        params={"temperature": 0},
        context_layers=list(layers) or [scratchpad()],
        storage=options.pop("storage", "memory://"),
        **options,
    )


@pytest.mark.asyncio
async def test_run_assembles_context_in_order_and_feeds_tool_output_back() -> None:
    """By default (``placement="end"``) the request holds the instructions, the
    conversation, then the scratchpad block, as stored when the request is built: the tool
    output of step 1 is in the request of step 2, before the block that shows its write;
    the final text is ``output``."""
    model = ScriptedModel([[update_call("c1", goal="ship v2")], "On it."])
    async with make_harness(model, scratchpad(schema=None)) as harness:
        await harness.update_state("scratchpad", {"goal": "draft"}, thread_id="t1")
        result = await harness.run("Ship it", thread_id="t1")

    first, second = model.requests
    assert first.items == [
        Message(role="system", content="You are careful."),
        Message(role="user", content="Ship it"),
        Message(role="developer", content='<scratchpad>\n{\n  "goal": "draft"\n}\n</scratchpad>'),
    ]
    assert first.params == {"temperature": 0}
    assert [spec.name for spec in first.tools] == ["scratchpad/update", "scratchpad/read"]
    assert first.tools[0].strict is False
    assert second.items[:2] == first.items[:2]  # the prefix a provider caches is unchanged
    assert second.items[-3:] == [
        update_call("c1", goal="ship v2"),
        FunctionCallOutput(call_id="c1", output="Scratchpad updated (goal).", is_error=False),
        Message(role="developer", content='<scratchpad>\n{\n  "goal": "ship v2"\n}\n</scratchpad>'),
    ]
    assert blocks(second) == ['<scratchpad>\n{\n  "goal": "ship v2"\n}\n</scratchpad>']
    assert (first.step, second.step) == (1, 2)
    assert isinstance(result, RunResult)
    assert result.output == "On it."
    assert result.steps == 2
    assert result.states == {"scratchpad": {"goal": "ship v2"}}
    assert result.items[0] == Message(role="user", content="Ship it")
    assert result.items[-1] == Message(role="assistant", content="On it.")
    assert not any(  # the run's conversation keeps no block: the next run's prefix is its own
        isinstance(item, Message) and "<scratchpad>" in item.content for item in result.items
    )
    assert result.execution_id == first.execution_id == second.execution_id


@pytest.mark.asyncio
async def test_placement_start_puts_the_block_between_instructions_and_conversation() -> None:
    """``placement="start"``, the seed's order: instructions, the block, the conversation;
    every request shows the block as stored then."""
    model = ScriptedModel([[update_call("c1", goal="ship v2")], "On it."])
    harness = make_harness(model, scratchpad(schema=None), placement="start")
    async with harness:
        await harness.update_state("scratchpad", {"goal": "draft"}, thread_id="t1")
        await harness.run("Ship it", thread_id="t1")

    first, second = model.requests
    assert first.items == [
        Message(role="system", content="You are careful."),
        Message(role="developer", content='<scratchpad>\n{\n  "goal": "draft"\n}\n</scratchpad>'),
        Message(role="user", content="Ship it"),
    ]
    assert second.items[:3] == [
        Message(role="system", content="You are careful."),
        Message(role="developer", content='<scratchpad>\n{\n  "goal": "ship v2"\n}\n</scratchpad>'),
        Message(role="user", content="Ship it"),
    ]
    assert second.items[-1] == FunctionCallOutput(
        call_id="c1", output="Scratchpad updated (goal).", is_error=False
    )


def test_an_unknown_placement_is_refused_at_construction() -> None:
    with pytest.raises(ScratchpadConfigError, match="placement must be one of 'end', 'start'"):
        make_harness(ScriptedModel(["ok"]), placement="before")


class SpyScratchpad(ScratchpadLayer):
    """A scratchpad that records the function calls its store hook was shown."""

    def __init__(self, config: ScratchpadConfig) -> None:
        super().__init__(config)
        self.store_saw: list[str] = []

    async def store(self, **kwargs: Any) -> StoreResult | None:
        self.store_saw.extend(
            item.call_id for item in kwargs["new_items"] if isinstance(item, FunctionCall)
        )
        return await super().store(**kwargs)


@pytest.mark.asyncio
async def test_update_call_is_applied_exactly_once_on_the_tool_path() -> None:
    """The store hook sees the model's call but skips it: one UpdateApplied, source "tool";
    feeding the same response to ``store`` again afterwards applies nothing either."""
    layer = SpyScratchpad(ScratchpadConfig())
    model = ScriptedModel([[update_call("c1", step="one")], "ok"])
    async with make_harness(model, layer) as harness:
        with capture_events(harness.events) as events:
            result = await harness.run("go", thread_id="t")
        seen_in_run = list(layer.store_saw)
        again = await layer.store(
            new_items=[update_call("c1", step="one")],
            state=result.states["scratchpad"],
            ctx=result.context,
        )
        stored = await harness.read_state("scratchpad", thread_id="t")

    assert seen_in_run == ["c1"]
    applied = events.of(UpdateApplied)
    assert [(e.source, e.call_id, e.keys) for e in applied] == [("tool", "c1", ("step",))]
    assert again is None
    assert stored == {"step": "one"}


@pytest.mark.asyncio
async def test_rejected_update_is_an_error_output_the_model_corrects() -> None:
    """A schema violation comes back as ``is_error=True`` with the reason and the fix; the
    state is untouched until the corrected call lands."""
    model = ScriptedModel(
        [
            [update_call("bad", currentGoal="deploy", blockers="db locked")],
            [update_call("good", currentGoal="deploy", blockers=["db locked"])],
            "Noted.",
        ]
    )
    async with make_harness(model, scratchpad(schema=TaskNotes)) as harness:
        with capture_events(harness.events) as events:
            result = await harness.run("go", thread_id="t")

    error = model.requests[1].items[-1]
    assert isinstance(error, FunctionCallOutput)
    assert error.call_id == "bad"
    assert error.is_error is True
    assert "blockers: Input should be a valid list" in error.output
    assert "call scratchpad/update again" in error.output
    assert blocks(model.requests[1]) == []
    assert [(e.hook, e.reason, e.call_id) for e in events.of(UpdateRejected)] == [
        ("tool", "schema", "bad")
    ]
    assert result.states["scratchpad"] == {"currentGoal": "deploy", "blockers": ["db locked"]}


async def explode(args: dict[str, Any], ctx: ExecutionContext) -> str:
    raise RuntimeError("disk on fire")


EXPLODING = Tool(
    name="explode",
    description="Always fails.",
    parameters={"type": "object", "properties": {}},
    execute=explode,
)


@pytest.mark.asyncio
async def test_bad_calls_become_error_outputs_and_never_crash_the_run() -> None:
    """Malformed JSON, a non-object, an unknown tool, a raising tool and a reused call id
    each come back as an error output that says what went wrong."""
    model = ScriptedModel(
        [
            [
                FunctionCall(call_id="a", name="scratchpad/update", arguments="{not json"),
                FunctionCall(call_id="b", name="scratchpad/update", arguments="[1, 2]"),
                FunctionCall(call_id="c", name="web/search", arguments="{}"),
                FunctionCall(call_id="d", name="explode", arguments="{}"),
                FunctionCall(call_id="e", name="explode", arguments='"text"'),
                FunctionCall(call_id="d", name="explode", arguments="{}"),
            ],
            "Sorry.",
        ]
    )
    async with make_harness(model, tools=(EXPLODING,)) as harness:
        result = await harness.run("go", thread_id="t")

    outputs = [item for item in result.items if isinstance(item, FunctionCallOutput)]
    assert [(o.call_id, o.is_error) for o in outputs] == [
        ("a", True),
        ("b", True),
        ("c", True),
        ("d", True),
        ("e", True),
        ("d", True),
    ]
    assert outputs[0].output.startswith("The arguments are not valid JSON")
    assert outputs[1].output.startswith("The arguments are a JSON array, not an object.")
    assert outputs[2].output == (
        "There is no tool named 'web/search'. Available tools: scratchpad/update, scratchpad/read, "
        "explode."
    )
    assert outputs[3].output == "The tool 'explode' failed: RuntimeError: disk on fire"
    assert (
        outputs[4].output
        == "The arguments of 'explode' must be a JSON object; call it again with one."
    )
    assert outputs[5] == outputs[3]  # "d" again, same arguments: not run again, its output
    assert result.output == "Sorry."
    assert result.states["scratchpad"] == ""


@pytest.mark.asyncio
async def test_tool_reads_and_writes_through_context_handle() -> None:
    """A tool sees ``ctx.context["scratchpad"].snapshot`` (a copy) and writes with
    ``update``; its write is an "api" event and the next request shows it."""
    seen: list[Any] = []

    async def remember(args: dict[str, Any], ctx: ExecutionContext) -> dict[str, Any]:
        pad = ctx.context["scratchpad"]
        seen.append(pad.snapshot)
        pad.snapshot["mutated"] = True  # a copy: the stored state must not change
        await pad.update({"facts": [*pad.snapshot.get("facts", []), args["fact"]]})
        return pad.snapshot

    tool = Tool(
        name="remember",
        description="Remember a fact.",
        parameters={"type": "object", "properties": {"fact": {"type": "string"}}},
        execute=remember,
    )
    model = ScriptedModel(
        [
            [FunctionCall(call_id="r1", name="remember", arguments='{"fact": "sky is blue"}')],
            [FunctionCall(call_id="r2", name="remember", arguments='{"fact": "grass is green"}')],
            "Got them.",
        ]
    )
    async with make_harness(model, tools=(tool,)) as harness:
        await harness.update_state("scratchpad", {"facts": []}, thread_id="t")
        with capture_events(harness.events) as events:
            result = await harness.run("go", thread_id="t")

    assert seen == [{"facts": []}, {"facts": ["sky is blue"]}]
    assert [e.source for e in events.of(UpdateApplied)] == ["api", "api"]
    assert result.states["scratchpad"] == {"facts": ["sky is blue", "grass is green"]}
    *_, output = (item for item in model.requests[1].items if isinstance(item, FunctionCallOutput))
    assert output == FunctionCallOutput(call_id="r1", output='{"facts":["sky is blue"]}')
    assert blocks(model.requests[2]) == [
        '<scratchpad>\n{\n  "facts": [\n    "sky is blue",\n    "grass is green"\n  ]\n}\n'
        "</scratchpad>"
    ]


@pytest.mark.asyncio
async def test_step_limit_raises_a_clear_error_and_keeps_the_writes() -> None:
    """A model that keeps calling tools stops at ``max_steps`` with MaxStepsExceededError;
    the updates made before the limit stay stored."""
    model = ScriptedModel([[update_call(f"c{i}", count=i)] for i in range(1, 10)])
    async with make_harness(model, max_steps=5) as harness:
        with pytest.raises(MaxStepsExceededError) as caught:
            await harness.run("loop", thread_id="t")
        with pytest.raises(MaxStepsExceededError, match="limit of 2 step"):
            await harness.run("loop", thread_id="t2", max_steps=2)
        state = await harness.read_state("scratchpad", thread_id="t")

    message = str(caught.value)
    assert "limit of 5 step(s)" in message
    assert "scratchpad/update" in message
    assert "Raise max_steps" in message
    assert len(model.requests) == 7
    assert state == {"count": 5}


@pytest.mark.asyncio
async def test_scope_decides_what_later_runs_see() -> None:
    """A resource-scoped scratchpad follows the user to a new thread; a thread-scoped one
    starts empty on a new thread and is still there on the old one."""
    turns: list[Any] = [[update_call("w", note="likes tea")], "ok", "ok", "ok"]
    resource_model = ScriptedModel(list(turns))
    thread_model = ScriptedModel([*turns, "ok"])
    async with make_harness(resource_model, scratchpad(scope="resource")) as harness:
        await harness.run("hi", thread_id="t1", resource_id="user-7")
        await harness.run("again", thread_id="t2", resource_id="user-7")
        await harness.run("other", thread_id="t3", resource_id="user-8")
    async with make_harness(thread_model, scratchpad(scope="thread")) as harness:
        await harness.run("hi", thread_id="t1", resource_id="user-7")
        await harness.run("again", thread_id="t2", resource_id="user-7")
        await harness.run("back", thread_id="t1", resource_id="user-7")

    block = '<scratchpad>\n{\n  "note": "likes tea"\n}\n</scratchpad>'
    assert [blocks(r) for r in resource_model.requests[2:]] == [[block], []]
    assert [blocks(r) for r in thread_model.requests[2:]] == [[], [block]]


@pytest.mark.asyncio
async def test_update_state_costs_one_storage_round_trip() -> None:
    """What a web endpoint calls: the write merges into the stored state inside storage,
    nothing is read before it (one ``commit``, no ``get``/``get_revision``)."""
    storage = FaultyStorage(MemoryStorage())
    async with make_harness(ScriptedModel([]), scratchpad(), storage=storage) as harness:
        await harness.update_state("scratchpad", {"goal": "a"}, thread_id="t")
        storage.calls.clear()
        new = await harness.update_state("scratchpad", {"step": 2}, thread_id="t")
    assert new == {"goal": "a", "step": 2}
    assert dict(storage.calls) == {"commit": 1}


@pytest.mark.asyncio
async def test_read_state_and_update_state_outside_a_run() -> None:
    """``update_state`` merges through the gate (events say "api") and raises on a schema
    violation with the state unchanged; ``read_state`` returns a copy."""
    model = ScriptedModel(["hi"])
    async with make_harness(model, scratchpad(schema=TaskNotes, scope="resource")) as harness:
        assert await harness.read_state("scratchpad", thread_id="t", resource_id="u") == {}
        with capture_events(harness.events) as events:
            new = await harness.update_state(
                "scratchpad", {"currentGoal": "seed"}, thread_id="t", resource_id="u"
            )
            with pytest.raises(ScratchpadValidationError) as caught:
                await harness.update_state(
                    "scratchpad", {"blockers": "nope"}, thread_id="t", resource_id="u"
                )
        read = await harness.read_state("scratchpad", thread_id="other", resource_id="u")
        read["currentGoal"] = "changed by the caller"
        again = await harness.read_state("scratchpad", thread_id="t", resource_id="u")
        await harness.run("hello", thread_id="t9", resource_id="u")
        with pytest.raises(KeyError, match="no layer 'memory'"):
            await harness.read_state("memory", thread_id="t")

    assert new == {"currentGoal": "seed"}
    assert caught.value.errors[0]["loc"] == ["blockers"]
    assert [e.source for e in events.of(UpdateApplied)] == ["api"]
    assert [(e.hook, e.reason) for e in events.of(UpdateRejected)] == [("api", "schema")]
    assert again == {"currentGoal": "seed"}
    assert blocks(model.requests[0]) == [
        '<scratchpad>\n{\n  "currentGoal": "seed"\n}\n</scratchpad>'
    ]


@pytest.mark.asyncio
async def test_concurrent_runs_on_one_thread_lose_nothing(storage: StorageBackend) -> None:
    """Twenty runs on one thread at once, each writing its own key in two steps, all land."""
    runs = 20

    def turn(request: ModelRequest) -> list[Item]:
        user = request.messages("user")[0]
        if request.step == 1:
            return [update_call(f"{user}-1", **{user: "started"})]
        if request.step == 2:
            return [update_call(f"{user}-2", **{user: "done"})]
        return [Message(role="assistant", content=f"{user} finished")]

    model = ScriptedModel([turn] * (runs * 3))
    harness = make_harness(model, storage=storage)
    outputs: list[str] = []

    async def one(index: int) -> None:
        result = await harness.run(f"run{index}", thread_id="shared")
        outputs.append(result.output)

    async with anyio.create_task_group() as tg:
        for index in range(runs):
            tg.start_soon(one, index)
    state = await harness.read_state("scratchpad", thread_id="shared")
    await harness.aclose()

    assert state == {f"run{i}": "done" for i in range(runs)}
    assert sorted(outputs) == sorted(f"run{i} finished" for i in range(runs))


@pytest.mark.asyncio
async def test_layer_budgets_cut_the_recall_to_the_context_budget() -> None:
    """With a context budget under the scratchpad's minimum the block is cut to fit and a
    ViewTruncated event reports it; storage keeps everything."""
    model = ScriptedModel(["ok"])
    async with make_harness(model, context_budget=40) as harness:
        notes = {f"note{i}": "x" * 40 for i in range(20)}
        await harness.update_state("scratchpad", notes, thread_id="t")
        with capture_events(harness.events) as events:
            await harness.run("go", thread_id="t")
        stored = await harness.read_state("scratchpad", thread_id="t")

    (block,) = blocks(model.requests[0])
    assert len(block) <= 40 * 4
    assert "scratchpad view truncated" in block
    (truncated,) = events.of(ViewTruncated)
    assert truncated.budget == 40
    assert stored == notes


@pytest.mark.asyncio
async def test_storage_the_harness_opened_is_closed_and_a_passed_backend_is_not() -> None:
    """``aclose`` closes a backend opened from a URL; a backend passed in stays usable."""

    class Tracked(MemoryStorage):
        closed = 0

        async def aclose(self) -> None:
            Tracked.closed += 1

    backend = Tracked()
    harness = make_harness(ScriptedModel([]), storage=backend)
    assert harness.storage is backend
    async with harness:
        pass
    assert Tracked.closed == 0
    await backend.set("k", 1)
    assert await backend.get("k") == 1

    owned = make_harness(ScriptedModel([]), storage="memory://")
    with pytest.raises(RuntimeError, match="has not opened its storage"):
        _ = owned.storage
    async with owned:
        assert isinstance(owned.storage, MemoryStorage)
    with pytest.raises(RuntimeError, match="async with harness"):
        _ = owned.storage


@pytest.mark.asyncio
async def test_the_harness_wraps_its_core_and_a_reopened_one_reports_on_a_new_bus() -> None:
    """``harness.core`` owns the storage and the bus: ``harness.storage`` and
    ``harness.events`` are the core's. After ``aclose`` the harness's own bus is closed; a
    run on the reopened harness reports on a new one."""
    model = ScriptedModel(
        [[update_call("c1", goal="a")], "ok", [update_call("c2", goal="b")], "ok"]
    )
    harness = make_harness(model)
    async with harness:
        assert harness.storage is harness.core.backend
        assert harness.events is harness.core.events
        first = harness.events
        await harness.run("go", thread_id="t1")
    assert first.closed
    await harness.open()
    assert harness.events is not first
    with capture_events(harness.events) as events:
        result = await harness.run("again", thread_id="t1")
    await harness.aclose()
    assert [e.call_id for e in events.of(UpdateApplied)] == ["c2"]
    assert result.states["scratchpad"] == {"goal": "b"}


@pytest.mark.asyncio
async def test_a_harness_without_layers_runs_and_has_no_layer() -> None:
    """No context layers: the agent runs alone, and no layer is found by id."""
    model = ScriptedModel(["hello"])
    async with AgentHarness("a", Agent(model=model), {}, []) as harness:
        result = await harness.run("hi", thread_id="t1")
        with pytest.raises(KeyError, match="no layer 'scratchpad'"):
            harness.layer("scratchpad")
    assert (result.output, result.states, model.requests[0].tools) == ("hello", {}, [])


def test_storage_url_defaults_to_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """No storage argument: ``$NOETIC_SCRATCHPAD_STORAGE``, else ``memory://``."""
    agent = Agent(model=ScriptedModel([]))
    assert AgentHarness("a", agent, {}, [scratchpad()]).storage_url == "memory://"
    monkeypatch.setenv("NOETIC_SCRATCHPAD_STORAGE", "sqlite:///from-env.db")
    assert AgentHarness("a", agent, {}, [scratchpad()]).storage_url == "sqlite:///from-env.db"
    assert AgentHarness("a", agent, {}, [scratchpad()], "memory://").storage_url == "memory://"


def test_a_storage_of_another_type_is_refused_and_a_password_never_shown() -> None:
    """A storage that is neither a URL nor a backend fails at construction; the URL shown
    (``storage_url``, ``repr``) hides a password."""
    agent = Agent(model=ScriptedModel([]))
    with pytest.raises(ScratchpadConfigError, match="storage must be a URL"):
        AgentHarness("a", agent, {}, [scratchpad()], 42)  # type: ignore[arg-type]
    harness = AgentHarness("a", agent, {}, [scratchpad()], "postgresql://app:s3cret@db/notes")
    assert harness.storage_url == "postgresql://app:***@db/notes"
    assert "s3cret" not in repr(harness)


def test_configuration_mistakes_fail_at_construction() -> None:
    """Two layers with one id, an agent tool named like a layer tool and bad limits are
    config errors when the harness is built."""
    agent = Agent(model=ScriptedModel([]))
    with pytest.raises(ScratchpadConfigError, match="several context layers have the id"):
        AgentHarness("a", agent, {}, [scratchpad(), scratchpad()])
    clash = Tool("scratchpad/update", "mine", {"type": "object"}, explode)
    with pytest.raises(ScratchpadConfigError, match="has the name of a layer's tool"):
        AgentHarness("a", Agent(model=ScriptedModel([]), tools=[clash]), {}, [scratchpad()])
    with pytest.raises(ScratchpadConfigError, match="max_steps"):
        AgentHarness("a", agent, {}, [scratchpad()], max_steps=0)
    with pytest.raises(ScratchpadConfigError, match="must be a JSON schema of type"):
        Tool("t", "no params", {"type": "string"}, explode)
    with pytest.raises(ScratchpadConfigError, match="several tools named"):
        Agent(model=ScriptedModel([]), tools=[EXPLODING, EXPLODING])


@pytest.mark.asyncio
async def test_read_only_scratchpad_offers_no_tool_and_refuses_the_call() -> None:
    """A read-only scratchpad is shown but not offered as a tool; a model calling it anyway
    gets an unknown-tool error and nothing is written."""
    model = ScriptedModel([[update_call("x", a=1)], "fine"])
    async with make_harness(model, scratchpad(read_only=True, template="Rules: be brief")) as h:
        result = await h.run("go", thread_id="t")

    assert model.requests[0].tools == []
    assert blocks(model.requests[0]) == ["<scratchpad>\nRules: be brief\n</scratchpad>"]
    output = result.items[2]
    assert isinstance(output, FunctionCallOutput)
    assert output.is_error
    assert output.output == "There is no tool named 'scratchpad/update'. Available tools: none."
    assert result.states["scratchpad"] == "Rules: be brief"


@pytest.mark.anyio
async def test_a_run_works_under_trio(anyio_backend: str) -> None:
    """The harness, the layer and the memory backend run on trio as well."""
    model = ScriptedModel([[update_call("c", done=True)], "done"])
    async with make_harness(model) as harness:
        result = await harness.run("go", thread_id="t")
    assert result.states == {"scratchpad": {"done": True}}
    assert result.output == "done"


@pytest.fixture
def anyio_backend() -> str:
    return "trio"
