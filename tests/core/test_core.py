"""``ScratchpadCore``: storage, bus and layers owned once, for every host."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from pydantic import BaseModel

from noetic_scratchpad import EventBus, ScratchpadConfigError, UpdateApplied, scratchpad
from noetic_scratchpad.core import RunScope, ScratchpadCore, as_scope, format_output
from noetic_scratchpad.errors import ScratchpadValidationError, StorageError
from noetic_scratchpad.storage import MemoryStorage, open_storage
from noetic_scratchpad.testing import FaultyStorage, capture_events

NAMES = {"update": "notes_update", "edit": "notes_edit"}


class Task(BaseModel):
    goal: str = ""
    steps: list[str] = []


@pytest.mark.asyncio
async def test_a_url_is_opened_once_and_closed_by_the_core(tmp_path: Path) -> None:
    core = ScratchpadCore(storage=f"sqlite:///{tmp_path / 'notes.db'}")
    assert core.opened is None
    with pytest.raises(RuntimeError, match="not open yet"):
        _ = core.backend
    async with core:
        backend = core.backend
        assert await core.open() is backend  # once
        await (await core.handle("t1")).update({"goal": "ship"})
    assert core.opened is None
    async with ScratchpadCore(storage=f"sqlite:///{tmp_path / 'notes.db'}") as again:
        assert (await again.handle("t1")).snapshot == {"goal": "ship"}


@pytest.mark.asyncio
async def test_a_backend_passed_in_stays_open_and_a_bus_passed_in_is_only_drained() -> None:
    backend = MemoryStorage()
    bus = EventBus()
    async with ScratchpadCore(storage=backend, events=bus) as core:
        assert core.backend is backend
        assert core.events is bus
    assert not bus.closed
    assert await backend.get("anything") is None  # still usable: not closed


@pytest.mark.asyncio
async def test_its_own_bus_is_closed_and_a_reopened_core_gets_a_new_one() -> None:
    core = ScratchpadCore()
    async with core:
        first = core.events
    assert first.closed
    async with core:
        assert core.events is not first
        assert not core.events.closed


@pytest.mark.asyncio
async def test_handles_read_unless_told_not_to_and_write_through_the_same_scope() -> None:
    async with ScratchpadCore(scratchpad(scope="resource")) as core:
        writer = await core.handle(RunScope("t1", "alice"), read=False)
        await writer.update({"goal": "a"})
        assert (await core.handle(("t2", "alice"))).snapshot == {"goal": "a"}
        assert (await core.handle("t1", read=False)).snapshot == ""  # no read: the initial text
        assert writer.scope == "resource"


@pytest.mark.asyncio
async def test_a_tool_call_returns_the_text_the_model_reads() -> None:
    async with ScratchpadCore(scratchpad(schema=Task, edit_tool=True)) as core:
        with capture_events(core.events) as events:
            done = await core.call("t1", "update", '{"goal": "ship"}', tool="notes_update")
            assert done.ok
            assert done.error is None
            assert "goal" in done.text
            refused = await core.call("t1", "update", '{"goal": 3}', tool="notes_update")
        assert not refused.ok
        assert isinstance(refused.error, ScratchpadValidationError)
        assert "goal" in refused.text
        assert "call notes_update again" in refused.text  # the host's name for the tool
        assert [type(e) for e in events.of(UpdateApplied)] == [UpdateApplied]
        assert await core.block("t1") == (await core.handle("t1")).block()
        assert "ship" in await core.block("t1")


@pytest.mark.asyncio
async def test_a_storage_failure_reads_as_one_sentence_and_the_details_go_to_the_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # As a backend reports a failure: a StorageError with the driver's words in it.
    error = StorageError("disk I/O error at /srv/notes.db")
    faulty = FaultyStorage(MemoryStorage(), fail_on={"commit", "get_revision"}, error=error)
    async with ScratchpadCore(storage=faulty) as core:
        with caplog.at_level(logging.WARNING, logger="noetic_scratchpad.core"):
            failed = await core.call("t1", "update", {"goal": "x"}, tool="notes_update")
            unread = await core.read("t1", tool="notes_read", update_tool="notes_update")
    assert isinstance(failed.error, StorageError)
    assert failed.text.startswith("This call was not saved")
    assert "notes_update again later" in failed.text
    assert "/srv/notes.db" not in failed.text  # the driver's message stays in the log
    assert isinstance(unread.error, StorageError)
    assert "notes_read again later" in unread.text
    assert "/srv/notes.db" not in unread.text
    assert "/srv/notes.db" in caplog.text


@pytest.mark.asyncio
async def test_a_read_names_an_empty_scratchpad_and_the_tool_that_writes_it() -> None:
    async with ScratchpadCore(scratchpad(scope="resource")) as core:
        empty = await core.read(("t1", "alice"), tool="r", update_tool="notes_update")
        assert empty.text == (
            "The scratchpad of resource 'alice' is empty. Call notes_update to write your notes."
        )
        await core.call(("t1", "alice"), "update", {"goal": "g"}, tool="notes_update")
        assert (await core.read(("t9", "alice"), tool="r", update_tool="u")).text.startswith(
            "<scratchpad"
        )


@pytest.mark.asyncio
async def test_tools_come_under_the_hosts_names() -> None:
    core = ScratchpadCore(scratchpad(edit_tool=True))
    tools = core.tools(NAMES)
    assert [(t.function, t.name) for t in tools] == [
        ("update", "notes_update"),
        ("edit", "notes_edit"),
    ]
    assert "notes_update" in tools[1].description  # the edit tool points at the update tool


@pytest.mark.asyncio
async def test_layers_are_found_by_id_or_object() -> None:
    profile = scratchpad(scope="resource")
    core = ScratchpadCore([scratchpad(), profile])
    assert core.layer() is core.layers[0]
    assert core.layer(profile) is profile
    with pytest.raises(KeyError, match="no layer 'nope'"):
        core.layer("nope")
    with pytest.raises(ScratchpadConfigError, match="layers is empty"):
        ScratchpadCore([])
    with pytest.raises(ScratchpadConfigError, match="storage URL as storage="):
        ScratchpadCore("sqlite:///notes.db")  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", ["", None, 3, ("t", 4), ("a", "b", "c")])
def test_a_scope_that_is_not_one_is_refused_clearly(bad: object) -> None:
    with pytest.raises(ScratchpadConfigError, match="non-empty thread id"):
        as_scope(bad, source="scope_from(ctx)")


@pytest.mark.asyncio
async def test_a_core_over_an_opened_url_backend_shares_it(tmp_path: Path) -> None:
    backend = await open_storage(f"sqlite:///{tmp_path / 'x.db'}")
    try:
        async with ScratchpadCore(storage=backend) as one, ScratchpadCore(storage=backend) as two:
            await one.call("t", "update", {"goal": "g"}, tool="u")
            assert (await two.handle("t")).snapshot == {"goal": "g"}
    finally:
        await backend.aclose()


@pytest.mark.asyncio
async def test_init_runs_the_layers_init_and_returns_the_state_it_loaded() -> None:
    pad = scratchpad()
    async with ScratchpadCore(pad) as core:
        await core.call("t1", "update", {"goal": "start"}, tool="notes_update")
        ctx = core.context("t1")
        assert await core.init(pad, ctx) == {"goal": "start"}
        assert ctx.context["scratchpad"].snapshot == {"goal": "start"}  # bound by its init


@pytest.mark.asyncio
async def test_failure_is_the_one_text_for_a_tool_of_the_hosts_that_wrote_the_scratchpad(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with ScratchpadCore(scratchpad(schema=Task)) as core:
        refused = await core.call("t1", "update", {"goal": 3}, tool="notes_update")
    assert isinstance(refused.error, ScratchpadValidationError)
    again = core.failure(refused.error, tool="search")
    assert (again.ok, again.error) == (False, refused.error)
    assert again.text == refused.text.replace("notes_update", "search")
    with caplog.at_level(logging.WARNING, logger="noetic_scratchpad.core"):
        failed = core.failure(StorageError("no space at /srv/x.db"), tool="search", call_id="c9")
    assert failed.text.startswith("This call was not saved")
    assert "/srv/x.db" not in failed.text
    assert "/srv/x.db" in caplog.text
    assert "call_id=c9" in caplog.text


@pytest.mark.parametrize(
    ("value", "text"), [("as is", "as is"), (None, "null"), ({"a": [1]}, '{"a":[1]}')]
)
def test_a_tools_result_reads_as_text_or_json(value: object, text: str) -> None:
    assert format_output(value) == text


@pytest.mark.asyncio
async def test_count_tokens_sizes_every_block_the_core_renders() -> None:
    """The core's ``count_tokens`` is the one counter its contexts, and so its blocks, use."""

    def one_a_character(text: str) -> int:
        return len(text)

    notes = {"steps": [f"step {i}: checked the invoice batch" for i in range(9)]}
    async with ScratchpadCore(storage=MemoryStorage(), count_tokens=one_a_character) as core:
        assert core.tokenize is one_a_character
        assert core.context("t1").tokenize is one_a_character
        await (await core.handle("t1", read=False)).update(notes)
        block = await core.block("t1", budget=200)
    assert "[scratchpad view truncated:" in block  # the estimate would fit it whole
    assert len(block) <= 200


def test_count_tokens_that_is_not_callable_is_refused_when_the_core_is_built() -> None:
    with pytest.raises(ScratchpadConfigError, match="count_tokens must be a function"):
        ScratchpadCore(count_tokens=42)  # type: ignore[arg-type]
