"""A view cut to its budget, in every host: the model cannot erase what it did not see.

300 steps are stored and the default budget shows the model some of them (the first and
the latest, the middle left out). The model resends the list it sees plus one step, as
models do: every host refuses it with the same text, naming the edit tool (append) and the
read tool as the host names them, and the 300 steps are kept. An append through the edit
tool makes 301; a part read by path shows hidden steps; the whole list resent (after
reading it) is applied. Code's writes are not checked: ``handle.update`` and the HTTP API
replace the list as asked.
"""

from __future__ import annotations

import json
import re

import pytest

from noetic_scratchpad import scratchpad
from noetic_scratchpad.layer import ScratchpadLayer
from noetic_scratchpad.server import create_app
from noetic_scratchpad.storage import MemoryStorage, StorageBackend
from tests.integrations.test_host_matrix import HOSTS, THREAD, Call, Host

try:
    import httpx2 as httpx
except ImportError:  # pragma: no cover - depends on the installed SDKs
    import httpx  # type: ignore[no-redef]

STEPS = [f"step {i}: matched the payout of batch {i} to its invoice" for i in range(300)]


async def _stored_steps(layer: ScratchpadLayer, storage: StorageBackend) -> list[str]:
    steps: list[str] = (await layer.open(storage, thread_id=THREAD)).state["steps"]
    return steps


async def _seed(layer: ScratchpadLayer, storage: StorageBackend) -> list[str]:
    """Store the 300 steps as the application does; the steps the model's view shows."""
    handle = await layer.open(storage, thread_id=THREAD)
    await handle.update({"goal": "reconcile the payouts", "steps": STEPS})
    block = handle.block()
    body = block.removeprefix("<scratchpad>\n").rsplit("\n[scratchpad view truncated", 1)[0]
    shown: list[str] = json.loads(body)["steps"]
    return [step for step in shown if step in STEPS]


def _append(call_id: str, *steps: str) -> Call:
    operation = {
        "op": "append",
        "path": ["steps"],
        "value_json": None,
        "values_json": [json.dumps(step) for step in steps],
        "index": None,
    }
    return Call("edit", {"operations": [operation]}, call_id)


def refused_text(host: Host, shown: int, *, edit_tool: bool) -> str:
    """The text every host gives the model for the resent list, word for word."""
    names = host.names
    hidden = 300 - shown
    fix = (
        f"To add items to a list, call {names['edit']} with an append operation at its path "
        f'(such as ["steps"]): it keeps the items you do not see; to rewrite it, first call '
        if edit_tool
        else "To rewrite it, first call "
    )
    return (
        f"The update would replace what the scratchpad's view shows only in part "
        f'(["steps"] shows {shown} of its 300 items (the first 3 and the last {shown - 3})): '
        f"the {hidden} items not shown would be lost, so nothing was written; the scratchpad "
        f"is unchanged. {fix}{names['read']} with its path to see the hidden part, then call "
        f"{names['update']} with the whole value, the hidden part included."
    )


@pytest.mark.asyncio
@pytest.mark.parametrize("host", HOSTS, ids=lambda host: host.name)
async def test_a_resent_cut_list_is_refused_and_an_append_keeps_every_step(host: Host) -> None:
    layer = scratchpad(edit_tool=True)
    storage = MemoryStorage()
    seen_steps = await _seed(layer, storage)
    assert 3 < len(seen_steps) < 300  # the view shows some steps, not all
    resend = Call("update", {"steps": [*seen_steps, "step 300: filed the report"]}, "c1")
    read = Call("read", {"path": ["steps"], "start": 100, "end": 103}, "c3")

    seen = await host.run(
        layer, storage, [resend, _append("c2", "step 300: filed the report"), read]
    )

    assert seen.texts["c1"].removeprefix("Error: ") == refused_text(
        host, len(seen_steps), edit_tool=True
    )
    assert seen.texts["c2"] == "Scratchpad edited (steps)."
    assert seen.texts["c3"] == (
        '["steps"], items 100 to 102 of 301:\n' + json.dumps(STEPS[100:103], indent=2)
    )
    assert host.names["read"] in seen.tools
    stored = await _stored_steps(layer, storage)
    assert stored == [*STEPS, "step 300: filed the report"]  # 301: nothing lost

    # The application's own write is not checked: it replaces the list as asked.
    handle = await layer.open(storage, thread_id=THREAD)
    await handle.update({"steps": STEPS[:110]})
    assert await _stored_steps(layer, storage) == STEPS[:110]


@pytest.mark.asyncio
@pytest.mark.parametrize("host", HOSTS, ids=lambda host: host.name)
async def test_without_the_edit_tool_the_refusal_says_to_read_and_the_whole_list_is_applied(
    host: Host,
) -> None:
    layer = scratchpad()
    storage = MemoryStorage()
    seen_steps = await _seed(layer, storage)
    resend = Call("update", {"steps": [*seen_steps, "step 300"]}, "c1")
    whole = Call("update", {"steps": [*STEPS, "step 300"]}, "c2")  # after reading them all

    seen = await host.run(layer, storage, [resend, whole])

    assert seen.texts["c1"].removeprefix("Error: ") == refused_text(
        host, len(seen_steps), edit_tool=False
    )
    assert "edit" not in seen.texts["c1"]
    assert seen.texts["c2"] == "Scratchpad updated (steps)."
    assert await _stored_steps(layer, storage) == [*STEPS, "step 300"]


@pytest.mark.asyncio
@pytest.mark.parametrize("host", HOSTS, ids=lambda host: host.name)
async def test_rewritten_text_notes_must_keep_the_part_the_view_hid(host: Host) -> None:
    """Text notes (a template, no schema) count as text: a rewrite from the view's start and
    end alone is refused; one that keeps the hidden middle is applied."""
    layer = scratchpad(template="Notes:\n")
    storage = MemoryStorage()
    text = "\n".join(
        f"{i}. checked the payout of batch {i} against its invoice" for i in range(400)
    )
    handle = await layer.open(storage, thread_id=THREAD)
    await handle.update({"notes": text})
    notice = handle.block().rsplit("\n", 2)[-2]
    assert notice.startswith("[scratchpad view truncated: about ")
    match = re.search(r"the text shows ([\d,]+) of its ([\d,]+) characters", notice)
    assert match is not None
    assert int(match[2].replace(",", "")) == len(text)
    seen = await host.run(
        layer,
        storage,
        [
            Call("update", {"notes": text[:300] + text[-300:] + "\n400. done"}, "c1"),
            Call("update", {"notes": text + "\n400. done"}, "c2"),
        ],
    )
    assert (
        seen.texts["c1"]
        .removeprefix("Error: ")
        .startswith(
            "The update would replace what the scratchpad's view shows only in part (the text "
            f"shows {match[1]} of its {match[2]} characters"
        )
    )
    assert f"first call {host.names['read']} with its path" in seen.texts["c1"]
    assert seen.texts["c2"] == "Scratchpad updated (notes)."
    assert (await layer.open(storage, thread_id=THREAD)).state == text + "\n400. done"


@pytest.mark.asyncio
async def test_the_http_api_replaces_a_cut_list_as_asked() -> None:
    """A ``PATCH`` is the application's write: not checked against any view."""
    layer = scratchpad()
    storage = MemoryStorage()
    await _seed(layer, storage)
    pad = create_app(storage, layers=[layer])
    async with pad.lifespan():
        transport = httpx.ASGITransport(app=pad)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            response = await client.patch(
                f"/api/scopes/thread/{THREAD}", json={"steps": STEPS[:110]}
            )
    assert response.status_code == 200, response.text
    assert await _stored_steps(layer, storage) == STEPS[:110]


@pytest.mark.asyncio
async def test_a_hosts_own_budget_is_the_view_the_write_is_checked_against() -> None:
    """The Agents SDK shows the block in its ``budget=``; a list that view shows whole may
    be replaced (the layer's smaller budget would have cut it), and one it cuts may not."""
    from agents import Agent as AgentsAgent
    from agents import Runner

    from noetic_scratchpad.integrations.openai_agents import Scratchpad
    from tests.integrations.agents_sdk_fakes import ScriptedAgentsModel, raw_tool_call, reply

    steps = STEPS[:120]  # some 1,870 tokens: whole in 3,000, cut in the layer's 1,500 and 500
    storage = MemoryStorage()
    layer = scratchpad()
    handle = await layer.open(storage, thread_id=THREAD)
    await handle.update({"steps": steps})
    replace = json.dumps({"steps": ["all 120 steps done"]})
    for budget, applied in ((3000, True), (500, False)):
        call_id = f"c-{budget}"  # another call, not a retry of the first
        model = ScriptedAgentsModel([[raw_tool_call(call_id, replace)], [reply("Done.")]])
        async with Scratchpad(layer, storage=storage, budget=budget) as notes:
            agent = AgentsAgent(
                name="a", instructions=notes.instructions(), tools=notes.tools, model=model
            )
            await Runner.run(agent, "go", context={"thread_id": THREAD})
        text = model.calls[-1].outputs()[call_id]
        stored = (await layer.open(storage, thread_id=THREAD)).state["steps"]
        if applied:
            assert text == "Scratchpad updated (steps)."
            assert stored == ["all 120 steps done"]
            await handle.update({"steps": steps})  # back to 120, for the next budget
        else:
            assert text.startswith("Error: The update would replace what the scratchpad's")
            assert stored == steps


@pytest.mark.asyncio
async def test_mcp_read_with_null_part_arguments_is_the_whole_block() -> None:
    from mcp import Client
    from mcp.types import TextContent

    from noetic_scratchpad.integrations.mcp import create_server

    layer = scratchpad()
    storage = MemoryStorage()
    await _seed(layer, storage)
    handle = await layer.open(storage, thread_id="default")
    await handle.update({"steps": STEPS})
    async with Client(create_server(layer, storage)) as client:
        whole = await client.call_tool("scratchpad_read", {"path": None, "start": None})
        part = await client.call_tool("scratchpad_read", {"path": ["steps"], "start": 299})
    texts = []
    for result in (whole, part):
        content = result.content[0]
        assert isinstance(content, TextContent)
        assert not result.is_error
        texts.append(content.text)
    assert texts[0] == handle.block()
    assert texts[1] == '["steps"], items 299 to 299 of 300:\n' + json.dumps([STEPS[299]], indent=2)
