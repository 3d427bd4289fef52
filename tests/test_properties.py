"""Property-based tests (hypothesis) of the merge, the render and the layer's write paths."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import math
import re
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict, Field

from noetic_scratchpad import (
    ExecutionContext,
    ScratchpadUpdateError,
    UpdateApplied,
    UpdateRejected,
    _json,
    scratchpad,
)
from noetic_scratchpad.items import FunctionCall
from noetic_scratchpad.layer.journal import entry_of, undo
from noetic_scratchpad.merge import (
    FORBIDDEN_KEYS,
    MAX_DEPTH,
    deep_merge,
    merge_noting,
    merge_state,
    to_json_value,
)
from noetic_scratchpad.render import estimate_tokens, render_block, render_view
from noetic_scratchpad.storage import MemoryStorage, ScopedStorage
from noetic_scratchpad.testing import capture_events

KEYS = st.text(max_size=8) | st.sampled_from(
    ["__proto__", "constructor", "_previous", "a", "b", "goal"]
)
TEXT = st.text(max_size=30) | st.sampled_from(["</scratchpad>", "</SCRATCHPAD >", "<\\/x"])
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | TEXT
)
JSON = st.recursive(
    SCALARS,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(KEYS, children, max_size=4),
    max_leaves=25,
)
OBJECTS = st.dictionaries(KEYS, JSON, max_size=6)
STATES = st.one_of(TEXT, OBJECTS)


def keys_at_any_depth(value: Any) -> set[str]:
    found: set[str] = set()
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            found.update(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return found


def clean(value: dict[str, Any]) -> dict[str, Any]:
    """What a state looks like after it went through a write path."""
    result: dict[str, Any] = to_json_value(value)
    return result


@given(base=OBJECTS, update=OBJECTS)
def test_merge_of_json_is_json(base: dict[str, Any], update: dict[str, Any]) -> None:
    """The merge of two JSON objects is a JSON object (strictly: no NaN, string keys)."""
    merged = deep_merge(base, update)

    assert json.loads(json.dumps(merged, allow_nan=False)) == merged


@given(state=STATES, update=OBJECTS)
def test_merge_never_mutates_its_inputs(
    state: str | dict[str, Any], update: dict[str, Any]
) -> None:
    """merge_state leaves the prior state and the update exactly as they were."""
    state_before, update_before = copy.deepcopy(state), copy.deepcopy(update)

    merge_state(state, update)

    assert state == state_before
    assert update == update_before


@given(base=OBJECTS, update=OBJECTS)
def test_merge_is_idempotent(base: dict[str, Any], update: dict[str, Any]) -> None:
    """Applying the same update twice equals applying it once."""
    once = deep_merge(base, update)

    assert deep_merge(once, update) == once


@given(base=OBJECTS, update=OBJECTS)
def test_a_merge_noting_its_undo_merges_as_merge_state_and_the_undo_restores(
    base: dict[str, Any], update: dict[str, Any]
) -> None:
    """A journaled write merges and notes its undo in one walk (``merge_noting``): the
    same state as ``merge_state``, and an undo that gives back the state it merged into,
    the same undo as the journal makes for that write on its own."""
    base, update = clean(base), clean(update)
    restore: list[list[Any]] = []
    remove: list[list[str]] = []
    merged = merge_noting(base, update, MAX_DEPTH, [], restore, remove)
    assert merged == merge_state(base, update, cleaned=True)
    noted = {"restore": restore, "remove": remove} if remove else {"restore": restore}
    entry = entry_of(
        source="tool", call_id=None, keys=tuple(update), applied=update, stored=base, base=base
    )
    assert entry["undo"] == noted
    assert undo(merged, entry) == base


@given(state=TEXT, update=OBJECTS)
def test_merge_into_text_is_idempotent_without_a_previous_key(
    state: str, update: dict[str, Any]
) -> None:
    """On a text state the second application merges into the object the first one made.

    (An update that itself writes ``_previous`` overwrites the kept text the second time:
    the text only wins while the state is still text.)
    """
    update = {key: value for key, value in update.items() if key != "_previous"}
    once = merge_state(state, update)

    assert merge_state(once, update) == once


@given(state=STATES, update=OBJECTS)
def test_stripped_keys_never_appear(state: str | dict[str, Any], update: dict[str, Any]) -> None:
    """After a merge, __proto__ and constructor appear nowhere the update could put them."""
    if isinstance(state, dict):
        state = clean(state)  # stored states never hold them either

    merged = merge_state(state, update)

    assert not keys_at_any_depth(merged) & FORBIDDEN_KEYS


@given(state=STATES, budget=st.integers(min_value=0, max_value=400))
def test_render_never_exceeds_the_budget(state: str | dict[str, Any], budget: int) -> None:
    """The view fits its budget, is whole when it fits, and can never be closed early."""
    full = render_block(state)

    view = render_view(state, budget)

    if estimate_tokens(full) <= budget:
        assert (view.text, view.omitted_tokens) == (full, 0)
    if view.text is None:
        assert view.omitted_tokens == view.total_tokens == estimate_tokens(full)
        return
    assert view.tokens == estimate_tokens(view.text) <= budget
    assert view.text.startswith("<scratchpad>\n")
    assert view.text.endswith("\n</scratchpad>")
    assert len(re.findall("</scratchpad", view.text, re.IGNORECASE)) == 1
    if view.truncated:
        assert f"about {view.omitted_tokens} of {view.total_tokens} tokens left out" in view.text


@given(state=OBJECTS)
def test_object_body_is_json_dumps(state: dict[str, Any]) -> None:
    """The body of an object state reads back as the state (escaping loses nothing)."""
    state = clean(state)
    block = render_block(state)

    body = block.removeprefix("<scratchpad>\n").removesuffix("\n</scratchpad>")
    assert json.loads(body) == state
    expected = json.dumps(state, indent=2, ensure_ascii=False)
    for separator in ("\u2028", "\u2029", "\x85"):  # shown as escapes, never raw
        expected = expected.replace(separator, f"\\u{ord(separator):04x}")
    assert body == re.sub("</(scratchpad)", r"<\\/\1", expected, flags=re.IGNORECASE)


# -- the write paths ----------------------------------------------------------------------


class Notes(BaseModel):
    model_config = ConfigDict(extra="forbid")

    goal: str = ""
    a: list[int] = []
    b: dict[str, int] = {}
    short: str = Field(default="", max_length=5)


NOTES_UPDATES = st.dictionaries(
    st.sampled_from(["goal", "a", "b", "short", "extra", "__proto__"]), JSON, max_size=3
)
BAD_VALUES = st.sampled_from(
    [float("nan"), float("inf"), b"x", {1, 2}, object(), (lambda: None), {3: "int key"}]
)


async def write_and_compare(
    schema: Any, prior: dict[str, Any], update: Any, via_store: bool
) -> None:
    layer = scratchpad(schema=schema, max_state_bytes=400)
    backend = MemoryStorage()
    ctx = ExecutionContext(thread_id="t")
    storage = ScopedStorage(backend, "scratchpad", "t")
    await layer.hooks.init(storage=storage, scope_key="t", ctx=ctx)
    handle = ctx.context["scratchpad"]
    try:
        await handle.update(prior)
    except ScratchpadUpdateError:
        return  # the prior itself is not a valid state: nothing to compare against
    before = _json.dumps(await storage.get("state"))
    base = handle.state  # what is stored, or the initial state while nothing is

    with capture_events(ctx.events) as events:
        if via_store:
            arguments = json.dumps(update) if _is_json(update) else repr(update)
            item = FunctionCall(call_id="c", name="scratchpad/update", arguments=arguments)
            await layer.hooks.store(new_items=[item], state=handle.state, ctx=ctx)
        else:
            with contextlib.suppress(ScratchpadUpdateError):
                await handle.update(update)

    after = _json.dumps(await storage.get("state"))
    if not list(events):  # an update with no key once cleaned writes nothing
        assert clean(update) == {}
        assert after == before
        return
    [event] = list(events)
    if isinstance(event, UpdateRejected):
        assert after == before
    else:
        assert isinstance(event, UpdateApplied)
        assert after == _json.dumps(layer.apply_update(base, clean(update)))
        assert len(after) <= 400


def _is_json(value: Any) -> bool:
    try:
        to_json_value(value)
    except ValueError:
        return False
    return True


PROPERTY_SETTINGS = settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


@PROPERTY_SETTINGS
@given(prior=OBJECTS, update=OBJECTS, via_store=st.booleans())
def test_schemaless_write_is_applied_exactly_or_changes_nothing(
    prior: dict[str, Any], update: dict[str, Any], via_store: bool
) -> None:
    """Without a schema a JSON update is merged exactly, or (too large) leaves the stored
    state byte-for-byte as it was."""
    asyncio.run(write_and_compare(None, prior, update, via_store))


@PROPERTY_SETTINGS
@given(prior=NOTES_UPDATES, update=NOTES_UPDATES, via_store=st.booleans())
def test_schema_write_is_applied_exactly_or_changes_nothing(
    prior: dict[str, Any], update: dict[str, Any], via_store: bool
) -> None:
    """With a schema an update either passes the gate and is stored merged, or is rejected
    and the stored state is byte-for-byte what it was."""
    asyncio.run(write_and_compare(Notes, prior, update, via_store))


@PROPERTY_SETTINGS
@given(prior=OBJECTS, update=OBJECTS, bad=BAD_VALUES, via_store=st.booleans())
def test_update_holding_a_non_json_value_changes_nothing(
    prior: dict[str, Any], update: dict[str, Any], bad: Any, via_store: bool
) -> None:
    """A value JSON cannot hold anywhere in the update is rejected; nothing changes."""
    update = {**update, "bad": {"deep": [bad]}}
    asyncio.run(write_and_compare(None, prior, update, via_store))


@given(state=STATES, budget=st.integers(min_value=0, max_value=300))
def test_recall_hook_never_exceeds_the_budget(state: str | dict[str, Any], budget: int) -> None:
    """The recall hook's token count never exceeds its budget, and equals the estimate."""
    if isinstance(state, dict):
        state = clean(state)
    ctx = ExecutionContext(thread_id="t")

    result = asyncio.run(scratchpad().hooks.recall(state=state, budget=budget, ctx=ctx))

    if result is not None:
        content = result.items[0].content  # type: ignore[union-attr]
        assert result.token_count == math.ceil(len(content) / 4) <= budget
