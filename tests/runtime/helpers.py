"""Small builders shared by the runtime tests."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict

from noetic_scratchpad.items import FunctionCall, Message
from noetic_scratchpad.runtime import ModelRequest


class TaskNotes(BaseModel):
    """The seed's structured scratchpad."""

    model_config = ConfigDict(extra="forbid")

    currentGoal: str
    completedSteps: list[str]
    blockers: list[str]


def update_call(call_id: str, **values: Any) -> FunctionCall:
    """The model's ``scratchpad/update`` call with ``values`` as its arguments."""
    return FunctionCall(call_id=call_id, name="scratchpad/update", arguments=json.dumps(values))


def blocks(request: ModelRequest) -> list[str]:
    """The ``<scratchpad>`` blocks a request carries."""
    return [
        item.content
        for item in request.items
        if isinstance(item, Message) and item.content.startswith("<scratchpad>")
    ]
