"""The web inspector in a real browser: Debian's chromium, driven by Playwright.

It opens the page with the token in the URL's fragment (which never reaches the server),
sees a scope appear when an update is made through the API, sees a rejected update listed
with its reason, and follows the selected scope's state live, its events listed apart from
other scopes'; its history panel shows each revision with a diff and who wrote it, live,
and reverts one after a confirm; the model's view shows the block the model reads, its
tokens against the budget, and the cut. The model's view test saves the screenshot that
docs/server.md shows. Runs in CI always (``.ci/run`` installs chromium);
elsewhere it is skipped, with the reason, where chromium is missing.
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import IN_CI

from noetic_scratchpad import scratchpad
from noetic_scratchpad.server import ScratchpadApp, create_app

from .helpers import AUTH, TOKEN, TaskNotes, served

pytestmark = pytest.mark.slow
READ_TOKEN = "read-only-token-fedcba9876543210"

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "images" / "inspector.png"
#: Set to refresh docs/images/inspector.png from the live test; otherwise the screenshot
#: goes to the test's temporary folder, and a test run leaves the checkout as it was.
REFRESH_DOCS = "NOETIC_SCRATCHPAD_REFRESH_SCREENSHOT"


def require_chromium() -> None:
    if os.path.exists(CHROMIUM):
        return
    if IN_CI:
        pytest.fail(f"{CHROMIUM} is missing: .ci/run installs it (apt-get install chromium)")
    pytest.skip(f"{CHROMIUM} is missing (apt-get install chromium); CI installs it")


SEED = {
    "billing-migration": {
        "currentGoal": "Move billing to the payments platform without downtime",
        "completedSteps": ["Mapped the invoice fields", "Dual-write enabled in staging"],
        "blockers": [],
    },
    "onboarding-user-118": {
        "currentGoal": "Set up the workspace for a new team",
        "completedSteps": ["Created the project"],
    },
}


@asynccontextmanager
async def signed_in_inspector(
    height: int, *, read_only: bool = False
) -> AsyncIterator[tuple[ScratchpadApp, httpx.AsyncClient, Any]]:
    """A served app with two layers and the ``SEED`` scopes, an API client, and the
    inspector open in chromium, signed in with the token in the URL's fragment and live
    (``read_only``: with the app's read-only token instead)."""
    from playwright.async_api import async_playwright, expect

    pad = create_app(
        "memory://",
        layers=[scratchpad(schema=TaskNotes), scratchpad(scope="resource")],
        token=TOKEN,
        read_only_token=READ_TOKEN,
    )
    async with (
        served(pad) as server,
        httpx.AsyncClient(base_url=server.url, headers=AUTH) as api,
        async_playwright() as playwright,
    ):
        for scope_id, state in SEED.items():
            await api.patch(f"/api/scopes/thread/{scope_id}", json=state)
        browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = await browser.new_page(viewport={"width": 1400, "height": height})
            await page.goto(f"{server.url}/#token={READ_TOKEN if read_only else TOKEN}")
            await expect(page.locator("#status")).to_have_text("live")
            yield pad, api, page
        finally:
            await browser.close()


@pytest.mark.asyncio
async def test_the_inspector_follows_scopes_state_and_events_live() -> None:
    require_chromium()
    from playwright.async_api import expect

    async with signed_in_inspector(height=760) as (pad, api, page):
        assert TOKEN not in page.url  # the fragment is dropped once used

        # A scope appears when an update is made through the API.
        ticket = page.locator('tr.scope[data-id="support-ticket-4821"]')
        await expect(ticket).to_have_count(0)
        await api.patch(
            "/api/scopes/thread/support-ticket-4821",
            json={"currentGoal": "Refund the duplicate charge on order 4821"},
        )
        await expect(ticket).to_be_visible()
        await ticket.click()
        state = page.locator("#state-body")
        await expect(state).to_contain_text("Refund the duplicate charge")

        # The selected scope's state follows the writes.
        await api.patch(
            "/api/scopes/thread/support-ticket-4821",
            json={"completedSteps": ["Found the duplicate", "Refund issued"]},
        )
        await expect(state.locator('[data-key="completedSteps"]')).to_contain_text("Refund issued")

        # A rejected update is listed, with its reason and the field at fault.
        refused = await api.patch(
            "/api/scopes/thread/support-ticket-4821", json={"blockers": "waiting on bank"}
        )
        assert refused.status_code == 422
        rejected = page.locator(".event.rejected")
        await expect(rejected).to_have_count(1)
        await expect(rejected).to_contain_text("rejected (schema)")
        await expect(rejected).to_contain_text("blockers: Input should be a valid list")
        await expect(state.locator(".notice")).to_contain_text("rejected (schema)")
        # The events pane shows the selected scope's events; "all scopes" shows every one.
        await expect(page.locator(".event.applied")).to_have_count(2)
        await expect(page.locator(".event")).to_have_count(3)
        await expect(page.locator(".event .scope-id")).to_have_text(
            ["thread support-ticket-4821"] * 3
        )
        await page.check("#all-events")
        await expect(page.locator(".event.applied")).to_have_count(4)
        await page.uncheck("#all-events")
        await expect(page.locator(".event.applied")).to_have_count(2)

        # A write by another process sharing the storage raises no event here: the
        # page polls, and shows it within a few seconds.
        elsewhere = await scratchpad(schema=TaskNotes).open(pad.storage, thread_id="batch-job")
        await elsewhere.update({"currentGoal": "Nightly reconciliation"})
        other = page.locator('tr.scope[data-id="batch-job"]')
        await expect(other).to_be_visible(timeout=8000)
        await other.click()
        await expect(state).to_contain_text("Nightly reconciliation")
        await elsewhere.update({"completedSteps": ["Matched 1,204 payouts"]})
        await expect(state).to_contain_text("Matched 1,204 payouts", timeout=8000)
        await expect(page.locator(".event")).to_have_count(0)  # none of batch-job's here
        await expect(page.locator("#no-events")).to_have_text("No events for this scope yet.")
        await page.check("#all-events")
        await expect(page.locator(".event.applied")).to_have_count(4)
        await page.uncheck("#all-events")
        await ticket.click()
        await expect(state).to_contain_text("Refund issued")
        await expect(page.locator(".event")).to_have_count(3)


@pytest.mark.asyncio
async def test_the_history_panel_shows_each_revision_and_reverts_after_a_confirm(
    tmp_path: Path,
) -> None:
    require_chromium()
    from playwright.async_api import Dialog, expect

    ticket_url = "/api/scopes/thread/support-ticket-4821"
    async with signed_in_inspector(height=900) as (_, api, page):
        # Two updates through the API; the panel follows them as they arrive.
        await api.patch(ticket_url, json={"currentGoal": "Refund the duplicate charge"})
        await page.locator('tr.scope[data-id="support-ticket-4821"]').click()
        history = page.locator("#history")
        first = history.locator('.rev[data-revision="1"]')
        await expect(first).to_contain_text("api")
        await expect(first.locator(".diff .add")).to_have_text(
            '+ currentGoal: "Refund the duplicate charge"'
        )
        await api.patch(
            ticket_url,
            json={
                "currentGoal": "Refund the duplicate charge on order 4821",
                "completedSteps": ["Found the duplicate", "Refund issued"],
            },
        )
        second = history.locator('.rev[data-revision="2"]')
        await expect(second.locator(".current")).to_have_text("current")
        await expect(second.locator(".diff .del")).to_have_text(
            '- currentGoal: "Refund the duplicate charge"'
        )
        await expect(second.locator(".diff .add")).to_have_text(
            [
                '+ currentGoal: "Refund the duplicate charge on order 4821"',
                '+ completedSteps: ["Found the duplicate","Refund issued"]',
            ]
        )
        state = page.locator("#state-body")
        await expect(state.locator('[data-key="completedSteps"]')).to_be_visible()

        # Revert asks first: dismissed, nothing happens.
        questions: list[str] = []
        answered = asyncio.Event()

        async def answer(dialog: Dialog, accept: bool) -> None:
            questions.append(dialog.message)
            await (dialog.accept() if accept else dialog.dismiss())
            answered.set()

        page.once("dialog", lambda dialog: answer(dialog, False))
        await first.locator("button.revert").click()
        await asyncio.wait_for(answered.wait(), 5)
        assert "revision 1" in questions[0]
        assert (await api.get(ticket_url)).json()["revision"] == 2

        # Confirmed: the state is back to revision 1's, and the revert is listed.
        page.once("dialog", lambda dialog: answer(dialog, True))
        await first.locator("button.revert").click()
        await expect(state.locator('[data-key="completedSteps"]')).to_have_count(0)
        await expect(state.locator('[data-key="currentGoal"]')).to_contain_text(
            '"Refund the duplicate charge"'
        )
        revert = history.locator('.rev[data-revision="3"]')
        await expect(revert.locator(".source")).to_have_text("revert")
        await expect(revert).to_contain_text("to r1")
        await expect(revert.locator(".diff .del")).to_contain_text(
            ['- completedSteps: ["Found the duplicate","Refund issued"]']
        )
        stored = (await api.get(ticket_url)).json()
        assert stored["revision"] == 3
        assert stored["state"] == {"currentGoal": "Refund the duplicate charge"}
        assert len(questions) == 2

        # A refused update shows beside the history, as in the screenshot.
        refused = await api.patch(ticket_url, json={"blockers": "waiting on the bank"})
        assert refused.status_code == 422
        await expect(state.locator(".notice")).to_contain_text("rejected (schema)")
        await expect(page.locator(".event.rejected")).to_have_count(1)

        screenshot = tmp_path / "history.png"
        await page.screenshot(path=str(screenshot))
    assert screenshot.stat().st_size > 10_000


@pytest.mark.asyncio
async def test_the_model_view_shows_the_block_its_tokens_the_cut_and_who_wrote_what(
    tmp_path: Path,
) -> None:
    """The block the model reads, as the API renders it, against the budget; with a
    smaller budget the cut is marked and the part the model does not see shown apart.
    The history says who wrote each revision; the events are the selected scope's."""
    require_chromium()
    from playwright.async_api import expect

    ticket_url = "/api/scopes/thread/support-ticket-4821"
    steps = [f"Matched payout {4100 + i} to its invoice" for i in range(24)]
    async with signed_in_inspector(height=900) as (pad, api, page):
        await api.patch(
            ticket_url,
            json={"currentGoal": "Refund the duplicate charge on order 4821"},
            headers={"User-Agent": "support-console/3.2"},
        )
        await page.locator('tr.scope[data-id="support-ticket-4821"]').click()
        model = page.locator("#model-view")
        block = model.locator("pre.block")
        await expect(block).to_contain_text("Refund the duplicate charge on order 4821")
        whole = (await api.get(ticket_url + "/view")).json()
        assert await block.text_content() == whole["text"]
        summary = page.locator("#view-summary")
        await expect(summary).to_have_text(
            f"{whole['tokens']} / 1500 tokens (estimated: ~4 characters a token)"
        )
        await expect(model.locator(".cut-notice")).to_have_count(0)

        # The model's tool call, on the app's bus: the view follows it.
        handle = await scratchpad(schema=TaskNotes).open(
            pad.storage, thread_id="support-ticket-4821", events=pad.events
        )
        await handle.call("update", {"completedSteps": steps}, call_id="call_7")
        await expect(block).to_contain_text("Matched payout 4123 to its invoice")

        # A budget too small for the notes: the cut is marked, the rest shown apart.
        await page.fill("#budget", "120")
        await page.press("#budget", "Enter")
        notice = model.locator(".cut-notice")
        await expect(notice).to_contain_text("[scratchpad view truncated: about ")
        await expect(model.locator("pre.hidden-part")).to_contain_text("Matched payout 4123")
        await expect(block).not_to_contain_text("Matched payout 4123")
        cut = (await api.get(ticket_url + "/view", params={"budget": 120})).json()
        assert await block.text_content() == cut["text"]
        assert await model.locator("pre.hidden-part").text_content() == cut["cut"]["hidden"]
        await expect(summary).to_contain_text(
            f"{cut['tokens']} / 120 tokens (estimated: ~4 characters a token) · cut: about "
            f"{cut['omitted_tokens']} of {cut['total_tokens']} left out"
        )
        await expect(page.locator("#view-meter")).to_have_class(re.compile(r"\bcut\b"))

        # Who wrote each revision.
        history = page.locator("#history")
        await expect(history.locator('.rev[data-revision="1"] .by')).to_have_text(
            "by HTTP · with the token · 127.0.0.1 · support-console/3.2"
        )
        second = history.locator('.rev[data-revision="2"]')
        await expect(second.locator(".call")).to_have_text("call call_7")
        await expect(second.locator(".by")).to_have_text("by the model")

        # The events pane: this scope's two writes, not the seeded scopes'.
        await expect(page.locator(".event.applied")).to_have_count(2)
        await expect(page.locator("#event-count")).to_contain_text("of thread support-ticket-4821")

        screenshot = SCREENSHOT if os.environ.get(REFRESH_DOCS) else tmp_path / "inspector.png"
        await page.screenshot(path=str(screenshot))
    assert screenshot.stat().st_size > 10_000


@pytest.mark.asyncio
async def test_the_inspector_asks_for_the_token_and_refuses_a_wrong_one() -> None:
    require_chromium()
    from playwright.async_api import async_playwright, expect

    pad = create_app("memory://", token=TOKEN)
    async with served(pad) as server, async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = await browser.new_page()
            await page.goto(server.url + "/")
            await expect(page.locator("#login")).to_be_visible()
            await page.fill("#token", "wrong-token")
            await page.click("#signin")
            await expect(page.locator("#login-error")).to_have_text("That token was refused.")
            await page.fill("#token", TOKEN)
            await page.click("#signin")
            await expect(page.locator("#status")).to_have_text("live")
            await expect(page.locator("#login")).to_be_hidden()
            await page.reload()  # the session cookie carries on
            await expect(page.locator("#status")).to_have_text("live")
            await page.click("#signout")
            await expect(page.locator("#login")).to_be_visible()
        finally:
            await browser.close()


@pytest.mark.asyncio
async def test_signed_in_with_the_read_only_token_the_inspector_reads_and_offers_no_revert() -> (
    None
):
    require_chromium()
    from playwright.async_api import expect

    ticket_url = "/api/scopes/thread/support-ticket-4821"
    async with signed_in_inspector(height=900, read_only=True) as (_, api, page):
        await api.patch(ticket_url, json={"currentGoal": "Refund the duplicate charge"})
        await api.patch(ticket_url, json={"currentGoal": "Refund order 4821"})
        await page.locator('tr.scope[data-id="support-ticket-4821"]').click()
        await expect(page.locator("#state-body")).to_contain_text("Refund order 4821")
        button = page.locator('#history .rev[data-revision="1"] button.revert')
        await expect(button).to_be_disabled()
        await expect(button).to_have_attribute(
            "title", "Signed in with the read-only token: it cannot revert"
        )
        await expect(page.locator("#signout")).to_be_visible()


@pytest.mark.asyncio
async def test_the_inspector_names_the_block_of_a_named_scratchpad() -> None:
    """A task per thread and a profile per user: each scope says which block it is, and the
    model's view shows the block under its own tag."""
    require_chromium()
    from playwright.async_api import async_playwright, expect

    pad = create_app(
        "memory://",
        layers=[
            scratchpad(name="task", schema=TaskNotes),
            scratchpad(name="profile", scope="resource"),
        ],
        token=TOKEN,
    )
    async with (
        served(pad) as server,
        httpx.AsyncClient(base_url=server.url, headers=AUTH) as api,
        async_playwright() as playwright,
    ):
        await api.patch("/api/scopes/thread/ticket-9", json={"currentGoal": "Refund order 9"})
        await api.patch("/api/scopes/resource/alice", json={"language": "fr"})
        browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = await browser.new_page(viewport={"width": 1400, "height": 760})
            await page.goto(f"{server.url}/#token={TOKEN}")
            await expect(page.locator("#status")).to_have_text("live")
            profile = page.locator('tr.scope[data-id="alice"]')
            await expect(profile.locator(".layer")).to_have_text("profile")
            await expect(page.locator('tr.scope[data-id="ticket-9"] .layer')).to_have_text("task")
            await profile.click()
            await expect(page.locator("#state-title")).to_have_text("resource alice (profile)")
            block = page.locator("#model-view pre.block")
            await expect(block).to_have_text(
                '<scratchpad name="profile">\n{\n  "language": "fr"\n}\n</scratchpad>'
            )
        finally:
            await browser.close()
