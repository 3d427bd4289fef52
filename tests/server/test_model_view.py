"""``GET .../view``, the model's view of a scope, and who wrote each revision.

The view is the block a host renders (``handle.block``, ``recall``): the same text, its
tokens against the budget in the app's ``count_tokens``, and the part a cut leaves out.
Each history entry of a write over HTTP says who sent it.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from noetic_scratchpad import ScratchpadConfigError, ViewTruncated, scratchpad
from noetic_scratchpad.server import create_app
from noetic_scratchpad.testing import capture_events

from .helpers import AUTH, TOKEN, TaskNotes, api_client
from .test_api import assert_problem

T1 = "/api/scopes/thread/t1"
STEPS = {"steps": [f"step {i}: reconciled the invoice batch" for i in range(80)]}


def block(state: Any) -> str:
    body = state if isinstance(state, str) else json.dumps(state, indent=2, ensure_ascii=False)
    return f"<scratchpad>\n{body}\n</scratchpad>"


@pytest.mark.asyncio
async def test_the_view_is_the_block_the_model_reads_when_it_fits() -> None:
    pad = create_app("memory://")
    async with api_client(pad) as client:
        await client.patch(T1, json={"goal": "ship v2", "steps": ["tests"]})
        response = await client.get(T1 + "/view")
    assert response.status_code == 200, response.text
    view = response.json()
    text = block({"goal": "ship v2", "steps": ["tests"]})
    assert view == {
        "kind": "thread",
        "id": "t1",
        "layer": "scratchpad",
        "revision": 1,
        "budget": 1500,  # the layer's
        "counter": "estimate",
        "empty": False,
        "text": text,
        "tokens": -(-len(text) // 4),
        "total_tokens": -(-len(text) // 4),
        "omitted_tokens": 0,
        "cut": None,
    }


@pytest.mark.asyncio
async def test_a_cut_view_marks_the_cut_and_returns_what_the_model_does_not_see() -> None:
    layer = scratchpad()
    pad = create_app("memory://", layers=[layer])
    async with api_client(pad) as client:
        await client.patch(T1, json=STEPS)
        with capture_events(pad.events) as events:
            view = (await client.get(T1 + "/view", params={"budget": 300})).json()
        handle = await layer.open(pad.storage, thread_id="t1")
    assert view["text"] == handle.block(300)  # what a host shows, to the character
    assert view["tokens"] <= 300 == view["budget"]
    assert view["omitted_tokens"] > 0
    assert view["total_tokens"] == -(-len(block(STEPS)) // 4)
    cut = view["cut"]
    assert cut["notice"].startswith("[scratchpad view truncated: about ")
    assert view["text"].endswith("\n" + cut["notice"] + "\n</scratchpad>")
    # The list is shortened: its first and latest items shown, the middle listed apart.
    [part] = cut["parts"]
    assert (part["path"], part["kind"], part["total"]) == (["steps"], "list", 80)
    shown = view["text"][len("<scratchpad>\n") : -len("\n" + cut["notice"] + "\n</scratchpad>")]
    assert len(shown) == cut["shown_chars"]
    visible = json.loads(shown)["steps"]
    assert visible[0] == STEPS["steps"][0]
    assert visible[-1] == STEPS["steps"][-1]  # the latest step is seen
    head = visible.index(next(item for item in visible if item.startswith("[")))
    hidden = STEPS["steps"][head : 80 - (len(visible) - head - 1)]
    assert len(hidden) == 80 - part["shown"]
    first, last = head, head + len(hidden) - 1
    assert cut["hidden"] == (
        f'["steps"], items {first} to {last}:\n' + json.dumps(hidden, indent=2)
    )
    assert f'["steps"] shows {part["shown"]} of its 80 items' in cut["notice"]
    assert events.of(ViewTruncated) == []  # a preview: no model saw it


@pytest.mark.asyncio
async def test_the_view_counts_with_the_apps_count_tokens() -> None:
    """One token a character (the stand-in for a real tokenizer): the same notes that fit
    the layer's budget by the estimate are cut."""
    pad = create_app("memory://", count_tokens=len)
    async with api_client(pad) as client:
        await client.patch(T1, json=STEPS)
        view = (await client.get(T1 + "/view")).json()
    assert view["counter"] == "count_tokens"
    assert view["total_tokens"] == len(block(STEPS))
    assert -(-len(block(STEPS)) // 4) <= 1500 < view["total_tokens"]
    assert view["cut"] is not None
    assert len(view["text"]) == view["tokens"] <= 1500


def test_a_count_tokens_that_is_not_a_function_is_refused_at_once() -> None:
    with pytest.raises(ScratchpadConfigError, match="count_tokens must be a function"):
        create_app("memory://", count_tokens=4)  # type: ignore[arg-type]


@pytest.mark.asyncio
async def test_an_empty_scratchpad_shows_no_block_and_a_tiny_budget_no_text() -> None:
    pad = create_app("memory://", layers=[scratchpad(), scratchpad(scope="resource")])
    async with api_client(pad) as client:
        await client.patch(T1, json={"goal": "x"})
        await client.post(T1 + "/revert", json={"revision": 0})  # the initial state: ""
        empty = (await client.get(T1 + "/view")).json()
        await client.patch("/api/scopes/resource/u1", json={"name": "Ada"})
        tiny = (await client.get("/api/scopes/resource/u1/view", params={"budget": 3})).json()
        reset = await client.delete(T1)
        assert reset.status_code == 204
        missing = await client.get(T1 + "/view")
    assert (empty["revision"], empty["empty"], empty["text"], empty["cut"]) == (2, True, None, None)
    assert tiny["kind"] == "resource"
    assert (tiny["text"], tiny["tokens"], tiny["empty"]) == (None, 0, False)
    assert tiny["omitted_tokens"] == tiny["total_tokens"] > 0
    assert tiny["cut"]["notice"] is None
    assert tiny["cut"]["hidden"] == json.dumps({"name": "Ada"}, indent=2)
    assert_problem(missing, 404, "not-found")


@pytest.mark.asyncio
async def test_a_text_state_is_shown_as_the_text_itself() -> None:
    pad = create_app("memory://", layers=[scratchpad(template="Goal: ?")])
    async with api_client(pad) as client:
        # Text notes are rewritten whole, under "notes".
        written = await client.patch(T1, json={"notes": "Goal: ship"})
        assert written.status_code == 200
        view = (await client.get(T1 + "/view")).json()
    assert view["text"] == "<scratchpad>\nGoal: ship\n</scratchpad>"


@pytest.mark.asyncio
@pytest.mark.parametrize("budget", ["-1", "x", "10000001", "1.5"])
async def test_a_bad_budget_is_a_400(budget: str) -> None:
    pad = create_app("memory://")
    async with api_client(pad) as client:
        await client.patch(T1, json={"goal": "x"})
        response = await client.get(T1 + "/view", params={"budget": budget})
    assert_problem(response, 400, "invalid-parameter")


@pytest.mark.asyncio
async def test_the_view_needs_the_token_and_takes_only_get() -> None:
    pad = create_app("memory://", token=TOKEN)
    async with api_client(pad) as client:
        assert_problem(await client.get(T1 + "/view"), 401, "unauthorized")
        await client.patch(T1, json={"goal": "x"}, headers=AUTH)
        assert (await client.get(T1 + "/view", headers=AUTH)).status_code == 200
        refused = await client.post(T1 + "/view", headers=AUTH, json={})
    assert_problem(refused, 405)
    assert refused.headers["allow"] == "GET"


@pytest.mark.asyncio
async def test_the_openapi_document_describes_the_view_and_the_caller() -> None:
    pad = create_app("memory://")
    async with api_client(pad) as client:
        document = (await client.get("/openapi.json")).json()
    operation = document["paths"]["/api/scopes/thread/{scope_id}/view"]["get"]
    assert set(operation["responses"]) == {"200", "400", "404", "409", "503"}
    assert [p.get("name") for p in operation["parameters"]][1:] == ["budget"]
    schemas = document["components"]["schemas"]
    assert "cut" in schemas["View"]["required"]
    assert "caller" in schemas["HistoryEntry"]["required"]


# -- who wrote each revision ---------------------------------------------------------------


@pytest.mark.asyncio
async def test_each_revision_says_who_wrote_it() -> None:
    layer = scratchpad(schema=TaskNotes)
    pad = create_app("memory://", layers=[layer], token=TOKEN)
    async with api_client(pad, headers=AUTH) as client:
        await client.patch(T1, json={"currentGoal": "ship"}, headers={"User-Agent": "billing/2.1"})
        handle = await layer.open(pad.storage, thread_id="t1")
        await handle.call("update", {"completedSteps": ["tests"]}, call_id="c7")
        await handle.update({"blockers": ["review"]})
        # A session: the inspector's cookie instead of the token.
        started = await client.post("/api/session")
        assert started.status_code == 204
        client.headers.pop("Authorization")
        reverted = await client.post(
            T1 + "/revert", json={"revision": 1}, headers={"User-Agent": "Mozilla/5.0"}
        )
        assert reverted.status_code == 200, reverted.text
        entries = (await client.get(T1 + "/history")).json()["entries"]
    by_revision = {entry["revision"]: entry for entry in entries}
    assert by_revision[1]["source"] == "api"
    assert by_revision[1]["caller"] == {
        "auth": "token",
        "address": "127.0.0.1",
        "agent": "billing/2.1",
    }
    assert (by_revision[2]["source"], by_revision[2]["call_id"]) == ("tool", "c7")
    assert by_revision[2]["caller"] is None  # the model's tool call
    assert (by_revision[3]["source"], by_revision[3]["caller"]) == ("api", None)  # code
    assert by_revision[4]["source"] == "revert"
    assert by_revision[4]["caller"]["auth"] == "session"
    assert by_revision[4]["caller"]["agent"] == "Mozilla/5.0"


@pytest.mark.asyncio
async def test_without_a_token_the_caller_says_so_and_a_long_agent_is_cut() -> None:
    pad = create_app("memory://")
    async with api_client(pad) as client:
        await client.patch(T1, json={"goal": "x"}, headers={"User-Agent": "a" * 5000})
        (entry,) = (await client.get(T1 + "/history")).json()["entries"]
    assert entry["caller"]["auth"] == "none"
    assert entry["caller"]["agent"] == "a" * 120
