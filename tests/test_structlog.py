"""A structlog application gets the library's log records as key-value records.

The library logs through stdlib ``logging`` (loggers ``noetic_scratchpad.*``); structlog's
stdlib integration (``ProcessorFormatter`` on a stdlib handler, as docs/operations.md
shows) renders them, and ``ExtraAdder`` takes the record's ``scratchpad`` fields as they
are: one key per field, values as JSON has them.
"""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest
import structlog
from pydantic import BaseModel, ConfigDict

from noetic_scratchpad import ScratchpadValidationError, scratchpad
from noetic_scratchpad.events import EventBus
from noetic_scratchpad.keys import state_key
from noetic_scratchpad.portability import Subject, erase_subject
from noetic_scratchpad.storage import open_storage


class Notes(BaseModel):
    model_config = ConfigDict(extra="forbid")
    steps: list[str] = []


@pytest.fixture
def structlog_lines() -> Iterator[io.StringIO]:
    """The configuration of docs/operations.md, writing JSON lines into a buffer."""
    shared: list[Any] = [
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.stdlib.ExtraAdder(allow=("scratchpad",)),
        structlog.processors.TimeStamper(fmt="iso"),
    ]
    structlog.configure(
        processors=[*shared, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=False,
    )
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=shared,
        processors=[
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            structlog.processors.JSONRenderer(),
        ],
    )
    buffer = io.StringIO()
    handler = logging.StreamHandler(buffer)
    handler.setFormatter(formatter)
    package = logging.getLogger("noetic_scratchpad")
    app = logging.getLogger("app")
    level = package.level
    for logger in (package, app):
        logger.addHandler(handler)
    package.setLevel(logging.INFO)
    app.setLevel(logging.INFO)
    try:
        yield buffer
    finally:
        for logger in (package, app):
            logger.removeHandler(handler)
        package.setLevel(level)
        structlog.reset_defaults()


def records(buffer: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in buffer.getvalue().splitlines()]


@pytest.mark.asyncio
async def test_a_refused_update_reaches_structlog_with_its_fields_intact(
    structlog_lines: io.StringIO,
) -> None:
    async with await open_storage("memory://") as storage:
        handle = await scratchpad(schema=Notes).open(storage, thread_id="t1", events=EventBus())
        with pytest.raises(ScratchpadValidationError):
            await handle.update({"steps": "not a list"})
    structlog.get_logger("app").info("request done", user="u7")  # the app's own, alike

    found = records(structlog_lines)
    refused = next(r for r in found if r["logger"] == "noetic_scratchpad.events")
    assert refused["level"] == "warning"
    assert refused["event"].startswith("update_rejected layer_id=scratchpad scope_key=t1")
    fields = refused["scratchpad"]
    assert fields["kind"] == "update_rejected"
    assert fields["layer_id"] == "scratchpad"
    assert fields["scope_key"] == "t1"
    assert fields["scope"] == "thread"
    assert fields["hook"] == "api"
    assert fields["reason"] == "schema"
    assert fields["errors"][0]["loc"] == ["steps"]
    assert fields["errors"][0]["type"] == "list_type"
    assert "input" not in fields["errors"][0]  # what the model wrote stays out of logs
    assert "not a list" not in json.dumps(refused)
    assert "timestamp" in refused
    app = next(r for r in found if r["logger"] == "app")
    assert app == {**app, "event": "request done", "user": "u7", "level": "info"}


@pytest.mark.asyncio
async def test_an_erasure_is_logged_as_fields(structlog_lines: io.StringIO) -> None:
    async with await open_storage("memory://") as storage:
        await storage.set(state_key("scratchpad", "resource", "alice"), {"n": 1})
        await erase_subject(storage, Subject("alice"))
    erased = next(
        r for r in records(structlog_lines) if r["logger"] == "noetic_scratchpad.portability"
    )
    assert erased["scratchpad"] == {
        "operation": "erase",
        "keys_deleted": 1,
        "scopes": 1,
        "complete": True,
    }
    assert "alice" not in json.dumps(erased)  # an erasure log names no one
