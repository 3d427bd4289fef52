"""A refusal made through the HTTP API reads for a developer: neither the problem document
nor the ``UpdateRejected`` event (the logs, the inspector) tells anyone to call a tool."""

from __future__ import annotations

from typing import Any

import pytest

from noetic_scratchpad import UpdateRejected, scratchpad
from noetic_scratchpad.server import create_app
from noetic_scratchpad.testing import capture_events

from .helpers import TaskNotes, api_client

#: Words only the model's hints use: an HTTP client or an operator calls no tool.
MODEL_HINTS = ("scratchpad/update", "scratchpad/edit", "call ", "Call ", "again")


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("layer", "body", "status", "reason"),
    [
        (scratchpad(schema=TaskNotes), {"blockers": "not a list"}, 422, "schema"),
        (scratchpad(max_state_bytes=64), {"goal": "x" * 100}, 422, "too_large"),
        (scratchpad(read_only=True), {"goal": "x"}, 409, "read_only"),
    ],
    ids=["schema", "too_large", "read_only"],
)
async def test_http_refusals_carry_no_hint_for_the_model(
    layer: Any, body: dict[str, Any], status: int, reason: str
) -> None:
    pad = create_app("memory://", layers=[layer])
    with capture_events(pad.events) as events:
        async with api_client(pad) as client:
            answer = await client.patch("/api/scopes/thread/t1", json=body)
    assert answer.status_code == status, answer.text
    document = answer.json()
    assert document["reason"] == reason
    (rejected,) = events.of(UpdateRejected)
    assert rejected.reason == reason
    for text in (document["detail"], rejected.message):
        leaked = [hint for hint in MODEL_HINTS if hint in text]
        assert not leaked, f"{text!r} speaks to the model: {leaked}"
