"""Text notes: with a template and no schema the model rewrites its notes whole, and the
journal keeps every old text."""

from __future__ import annotations

import pytest

from noetic_scratchpad import ScratchpadConfigError, scratchpad
from noetic_scratchpad.core import ScratchpadCore
from noetic_scratchpad.layer import LayerFunction

TEMPLATE = "# Task\n\n- [ ] nothing yet"


def test_the_update_tool_asks_for_the_whole_new_text() -> None:
    layer = scratchpad(template=TEMPLATE)
    provided = layer.provides["update"]
    assert isinstance(provided, LayerFunction)
    assert provided.parameters["required"] == ["notes"]
    assert provided.parameters["properties"]["notes"]["type"] == "string"
    assert provided.description == (
        "Rewrite your scratchpad: your notes for this task, as text. Send the whole new text "
        "as `notes`: it replaces the old text, so keep what still matters."
    )


@pytest.mark.asyncio
async def test_the_model_rewrites_its_text_and_the_journal_keeps_the_old_one() -> None:
    async with ScratchpadCore(scratchpad(template=TEMPLATE)) as core:
        assert TEMPLATE in await core.block("t1")  # the template is the first version
        first = await core.call(
            "t1", "update", '{"notes": "# Task\\n\\n- [x] read logs"}', tool="u"
        )
        assert first.text == "Scratchpad updated (notes)."
        await core.call("t1", "update", {"notes": "# Task\n\n- [x] read logs\n- [ ] fix"}, tool="u")
        handle = await core.handle("t1")
        assert handle.state == "# Task\n\n- [x] read logs\n- [ ] fix"  # text, no _previous
        assert handle.revision == 2
        history = await handle.history()
        assert [entry.revision for entry in history] == [2, 1]
        assert history[0].update == {"notes": "# Task\n\n- [x] read logs\n- [ ] fix"}
        await handle.revert(1)
        assert handle.state == "# Task\n\n- [x] read logs"
        await handle.revert(0)
        assert handle.state == TEMPLATE


@pytest.mark.parametrize(
    ("update", "held"),
    [
        ('{"goal": "x"}', "'goal'"),
        ('{"notes": "x", "extra": 1}', "'notes', 'extra'"),
        ('{"notes": ["x"]}', "'notes' ('notes' as a JSON array)"),
    ],
)
@pytest.mark.asyncio
async def test_anything_but_the_new_text_is_refused_and_nothing_is_lost(
    update: str, held: str
) -> None:
    async with ScratchpadCore(scratchpad(template=TEMPLATE)) as core:
        await core.call("t1", "update", {"notes": "kept"}, tool="notes_update")
        refused = await core.call("t1", "update", update, tool="notes_update")
        assert not refused.ok
        assert refused.text == (
            "The scratchpad holds text, so an update is the whole new text under 'notes' (a "
            f"string), and nothing else; this one held {held}. Nothing was written. Call "
            'notes_update with a JSON object of the fields to change, for example {"notes": '
            '"..."}.'
        )
        assert (await core.handle("t1")).state == "kept"


def test_text_notes_cannot_have_the_edit_tool() -> None:
    with pytest.raises(
        ScratchpadConfigError, match="edit_tool=True needs notes that are an object"
    ):
        scratchpad(template=TEMPLATE, edit_tool=True)


@pytest.mark.asyncio
async def test_without_a_template_the_notes_stay_an_object() -> None:
    async with ScratchpadCore(scratchpad()) as core:
        await core.call("t1", "update", {"goal": "g"}, tool="u")
        assert (await core.handle("t1")).state == {"goal": "g"}


@pytest.mark.asyncio
async def test_an_empty_update_writes_nothing_over_text_notes() -> None:
    async with ScratchpadCore(scratchpad(template=TEMPLATE)) as core:
        result = await core.call("t1", "update", "{}", tool="u")
        assert result.text.startswith("Nothing was written")
        handle = await core.handle("t1")
        assert (handle.state, handle.revision) == (TEMPLATE, 0)
