"""The bad-input matrix (issue 6) through the layer's write paths.

Every bad update gets a clear error (``update`` from code, the tool path) or an
``UpdateRejected`` event with a reason (every path; the store hook never raises), and the
stored state stays byte-for-byte what it was.
"""

from __future__ import annotations

import json
from datetime import datetime
from decimal import Decimal
from typing import Any

import anyio
import pytest

from noetic_scratchpad import ScratchpadLayer, ScratchpadUpdateError, UpdateRejected, scratchpad
from noetic_scratchpad.items import FunctionCall
from noetic_scratchpad.layer import refusal_text
from noetic_scratchpad.merge import MAX_DEPTH
from noetic_scratchpad.testing import capture_events

from .conftest import Bind, BoundScope

#: Every async test runs twice: on asyncio and under trio (``anyio_backend`` in conftest).
pytestmark = pytest.mark.anyio

PRIOR = {"goal": "keep me", "steps": ["one", {"nested": [1, 2.5, None]}], "note": "ünïcode ✓"}
LIMIT = 2_000


def nested_text(depth: int) -> str:
    return '{"a": ' + '{"n": ' * depth + "1" + "}" * depth + "}"


def nested_value(depth: int) -> dict[str, Any]:
    value: Any = 1
    for _ in range(depth):
        value = {"n": value}
    return {"a": value}


def cyclic_dict() -> dict[str, Any]:
    value: dict[str, Any] = {"x": 1}
    value["self"] = value
    return {"a": value}


def cyclic_list() -> dict[str, Any]:
    value: list[Any] = [1]
    value.append(value)
    return {"a": value}


class Opaque:
    def __repr__(self) -> str:
        return "<Opaque>"


# (case id, arguments as the model writes them, reason, words the message must contain)
TEXT_CASES: list[tuple[str, str, str, str]] = [
    ("not-json", "{goal: 'x'", "malformed", "not valid JSON"),
    ("truncated-json", '{"goal": "x"', "malformed", "not valid JSON"),
    ("array", '["goal", "x"]', "malformed", "a JSON array, not an object"),
    ("string", '"set goal to x"', "malformed", "a JSON string, not an object"),
    ("number", "42", "malformed", "a JSON number, not an object"),
    ("null", "null", "malformed", "a JSON null, not an object"),
    ("nan", '{"goal": NaN}', "malformed", "NaN is not a JSON number"),
    ("infinity", '{"goal": Infinity}', "malformed", "Infinity is not a JSON number"),
    ("minus-infinity", '{"goal": [-Infinity]}', "malformed", "-Infinity is not a JSON number"),
    ("overflow-to-inf", '{"goal": 1e400}', "malformed", "inf is not a JSON number at $.goal"),
    ("past-cap", nested_text(MAX_DEPTH), "malformed", f"deeper than {MAX_DEPTH} levels"),
    ("ten-thousand-deep", nested_text(10_000), "malformed", "nested far too deeply"),
    ("oversized", json.dumps({"log": "x" * LIMIT}), "too_large", "over its limit of 2,000"),
]

# (case id, a Python value handed to update(), reason, words the message must contain)
VALUE_CASES: list[tuple[str, Any, str, str]] = [
    ("list", ["goal", "x"], "malformed", "a JSON array, not an object"),
    ("pairs", (("goal", "x"),), "malformed", "a JSON tuple, not an object"),
    ("none", None, "malformed", "a JSON null, not an object"),
    ("int-key", {1: "x"}, "malformed", "the key 1 is a int, not a string"),
    ("tuple-key", {"a": {("x", 1): 2}}, "malformed", "is a tuple, not a string at $.a"),
    ("nan", {"goal": float("nan")}, "malformed", "nan is not a JSON number at $.goal"),
    ("inf", {"goal": [float("inf")]}, "malformed", "inf is not a JSON number at $.goal[0]"),
    ("bytes", {"goal": b"raw"}, "malformed", "a bytes is not a JSON value at $.goal"),
    ("datetime", {"at": datetime(2026, 12, 2)}, "malformed", "a datetime is not a JSON value"),
    ("set", {"tags": {"a", "b"}}, "malformed", "a set is not a JSON value at $.tags"),
    ("decimal", {"price": Decimal("1.10")}, "malformed", "a Decimal is not a JSON value"),
    ("object", {"o": Opaque()}, "malformed", "a Opaque is not a JSON value at $.o"),
    ("cyclic-dict", cyclic_dict(), "malformed", "contains itself (a cycle) at $.a.self"),
    ("cyclic-list", cyclic_list(), "malformed", "contains itself (a cycle) at $.a[1]"),
    ("past-cap", nested_value(MAX_DEPTH), "malformed", f"deeper than {MAX_DEPTH} levels"),
    ("ten-thousand-deep", nested_value(10_000), "malformed", f"deeper than {MAX_DEPTH}"),
    ("oversized", {"log": "x" * LIMIT}, "too_large", "over its limit of 2,000"),
]


#: Runs a test once per case of TEXT_CASES, as ``arguments``, ``reason`` and ``words``.
each_bad_text = pytest.mark.parametrize(
    ("arguments", "reason", "words"), [c[1:] for c in TEXT_CASES], ids=[c[0] for c in TEXT_CASES]
)


def layer_under_test() -> ScratchpadLayer:
    return scratchpad(max_state_bytes=LIMIT)


async def bound_with_prior(bind: Bind) -> BoundScope:
    scope = await bind(layer_under_test())
    await scope.handle.update(PRIOR)
    return scope


@each_bad_text
async def test_store_hook_drops_bad_arguments(
    bind: Bind, arguments: str, reason: str, words: str
) -> None:
    """The store hook drops the call with UpdateRejected(hook="store", reason=...), does not
    raise, returns None and leaves the stored state byte-for-byte as it was."""
    scope = await bound_with_prior(bind)
    before = await scope.stored_bytes()
    item = FunctionCall(call_id="bad", name="scratchpad/update", arguments=arguments)

    with capture_events(scope.ctx.events) as events, anyio.fail_after(10):
        result = await scope.layer.hooks.store(new_items=[item], state=PRIOR, ctx=scope.ctx)

    assert result is None
    assert await scope.stored_bytes() == before
    [rejected] = list(events)
    assert isinstance(rejected, UpdateRejected)
    assert (rejected.hook, rejected.reason, rejected.call_id) == ("store", reason, "bad")
    assert words in rejected.message
    # Said to no reader in particular: what to do is the model's text, rendered by its host.
    assert "scratchpad/update" not in rejected.message
    assert "Condense" not in rejected.message


@each_bad_text
async def test_tool_path_raises_a_readable_error(
    bind: Bind, arguments: str, reason: str, words: str
) -> None:
    """The tool path raises ScratchpadUpdateError with the reason and a message the model can
    act on; an UpdateRejected(hook="tool") event says the same; nothing changes."""
    scope = await bound_with_prior(bind)
    before = await scope.stored_bytes()

    with (
        capture_events(scope.ctx.events) as events,
        anyio.fail_after(10),
        pytest.raises(ScratchpadUpdateError) as info,
    ):
        await scope.handle.call("update", arguments, call_id="bad")

    assert info.value.reason == reason
    assert words in info.value.message
    model_text = refusal_text(info.value, "scratchpad/update")
    assert "scratchpad/update" in model_text or "Condense the scratchpad" in model_text
    assert await scope.stored_bytes() == before
    assert [(e.hook, e.reason, e.message) for e in events.of(UpdateRejected)] == [
        ("tool", reason, info.value.message)
    ]


@pytest.mark.parametrize(
    ("values", "reason", "words"), [c[1:] for c in VALUE_CASES], ids=[c[0] for c in VALUE_CASES]
)
async def test_update_from_code_raises_a_clear_error(
    bind: Bind, values: Any, reason: str, words: str
) -> None:
    """``await handle.update(values)`` with a bad value raises ScratchpadUpdateError naming
    what and where; an UpdateRejected(hook="api") event is emitted; nothing changes; no
    RecursionError and no hang for cyclic or 10,000-deep values."""
    scope = await bound_with_prior(bind)
    before = await scope.stored_bytes()

    with (
        capture_events(scope.ctx.events) as events,
        anyio.fail_after(10),
        pytest.raises(ScratchpadUpdateError) as info,
    ):
        await scope.handle.update(values)

    assert type(info.value) is ScratchpadUpdateError
    assert info.value.reason == reason
    assert words in info.value.message
    assert await scope.stored_bytes() == before
    assert scope.handle.snapshot == PRIOR
    assert [(e.hook, e.reason) for e in events.of(UpdateRejected)] == [("api", reason)]


async def test_too_large_message_gives_the_sizes_and_asks_to_condense(bind: Bind) -> None:
    """An update that would push the state past max_state_bytes names both sizes."""
    scope = await bound_with_prior(bind)
    update = {"log": "y" * (LIMIT - 50)}
    size = len(json.dumps({**PRIOR, **update}, ensure_ascii=False, separators=(",", ":")).encode())

    assert size > LIMIT
    with pytest.raises(ScratchpadUpdateError) as info:
        await scope.handle.update(update)

    assert (info.value.limit, info.value.size) == (LIMIT, size)
    assert refusal_text(info.value, "scratchpad/update") == (
        f"The scratchpad would grow to {size:,} bytes, over its limit of {LIMIT:,}. "
        "Condense the scratchpad: replace long lists or notes with a short summary "
        "(writing a key replaces its value) and try again."
    )


async def test_an_update_that_fits_exactly_is_accepted(bind: Bind) -> None:
    """The limit is inclusive: a state of exactly max_state_bytes is stored."""
    scope = await bind(scratchpad(max_state_bytes=20))
    await scope.handle.update({"k": "x" * 10})  # {"k":"xxxxxxxxxx"} is 18 bytes

    assert len(await scope.stored_bytes()) == 18
    await scope.handle.update({"k": "x" * 12})
    assert len(await scope.stored_bytes()) == 20
    with pytest.raises(ScratchpadUpdateError):
        await scope.handle.update({"k": "x" * 13})
    assert await scope.stored() == {"k": "x" * 12}


async def test_forbidden_keys_are_stripped_on_every_path(bind: Bind) -> None:
    """``__proto__`` and ``constructor`` never reach storage, at any depth, on any path."""
    scope = await bind(scratchpad())
    poisoned = {
        "__proto__": {"admin": True},
        "a": {"constructor": {"prototype": 1}, "b": [{"__proto__": 1, "c": 2}]},
    }
    await scope.handle.update(poisoned)
    await scope.handle.call("update", json.dumps({"d": {"__proto__": 1}}), call_id="t1")
    item = FunctionCall(
        call_id="s1", name="scratchpad/update", arguments='{"constructor": 1, "e": 2}'
    )
    await scope.layer.hooks.store(new_items=[item], state=scope.handle.state, ctx=scope.ctx)

    assert await scope.stored() == {"a": {"b": [{"c": 2}]}, "d": {}, "e": 2}
    assert b"__proto__" not in await scope.stored_bytes()
    assert b"constructor" not in await scope.stored_bytes()


async def test_a_bad_call_does_not_block_the_next_good_one(bind: Bind) -> None:
    """After every kind of rejection the same scope still accepts a valid update."""
    scope = await bound_with_prior(bind)
    for _, values, _, _ in VALUE_CASES:
        with pytest.raises(ScratchpadUpdateError):
            await scope.handle.update(values)

    await scope.handle.update({"goal": "still writable"})

    assert await scope.stored() == {**PRIOR, "goal": "still writable"}


async def test_float_subclass_and_enum_values_are_stored_as_plain_json(bind: Bind) -> None:
    """A float subclass (as numpy.float64 is) or an enum member is stored as its plain value,
    not refused as a storage failure."""
    import enum

    class Ratio(float):
        pass

    class Level(enum.IntEnum):
        HIGH = 3

    scope = await bind(scratchpad())
    await scope.handle.update({"ratio": Ratio(0.25), "level": Level.HIGH})

    assert await scope.stored_bytes() == b'{"ratio":0.25,"level":3}'
    assert [type(value) for value in scope.handle.state.values()] == [float, int]  # type: ignore[union-attr]


# -- lone surrogates: invalid Unicode that no storage can hold ------------------------------

# (case id, a Python value handed to update(), where the message must say it is)
SURROGATE_VALUES: list[tuple[str, Any, str]] = [
    ("value", {"goal": "\ud800"}, "$.goal"),
    ("low-half-in-text", {"goal": "fix \udfff login"}, "$.goal"),
    ("deep-value", {"a": {"b": ["ok", "x\udc00"]}}, "$.a.b[1]"),
    ("key", {"go\ud800al": 1}, "the key 'go\\ud800al'"),
    ("deep-key", {"a": [{"\udbff": 1}]}, "$.a[0]"),
    ("str-subclass", {"goal": type("Text", (str,), {})("\ud800")}, "$.goal"),
]

# (case id, tool-call arguments as the model writes them: JSON escapes of one half of a pair)
SURROGATE_TEXTS: list[tuple[str, str]] = [
    ("value", '{"goal": "\\ud800"}'),
    ("low-half", '{"goal": "done \\ude00"}'),
    ("deep-value", '{"a": {"b": ["\\ud83d"]}}'),
    ("key", '{"\\ud800": "x"}'),
    ("raw-character", '{"goal": "\ud800"}'),  # the character itself, as a Python str holds it
]


def assert_names_a_lone_surrogate(message: str) -> None:
    assert "lone surrogate" in message
    assert "invalid Unicode" in message
    assert "remove it" in message  # how to fix it
    assert "try again later" not in message.lower()
    message.encode()  # the message itself holds no lone surrogate: it can be logged


@pytest.mark.parametrize(
    ("values", "where"), [c[1:] for c in SURROGATE_VALUES], ids=[c[0] for c in SURROGATE_VALUES]
)
async def test_lone_surrogate_from_code_is_malformed_not_a_storage_failure(
    bind: Bind, values: Any, where: str
) -> None:
    """A lone surrogate in a string or key, at any depth, is refused before storage as
    ``malformed`` (never ``storage`` with "try again later": retrying cannot help), with a
    message saying what is wrong, where, and how to fix it; nothing is written."""
    scope = await bound_with_prior(bind)
    before = await scope.stored_bytes()

    with (
        capture_events(scope.ctx.events) as events,
        anyio.fail_after(10),
        pytest.raises(ScratchpadUpdateError) as info,
    ):
        await scope.handle.update(values)

    assert type(info.value) is ScratchpadUpdateError
    assert info.value.reason == "malformed"
    assert_names_a_lone_surrogate(info.value.message)
    assert where in info.value.message
    assert await scope.stored_bytes() == before
    assert scope.handle.snapshot == PRIOR
    assert [(e.hook, e.reason, e.message) for e in events.of(UpdateRejected)] == [
        ("api", "malformed", info.value.message)
    ]


@pytest.mark.parametrize(
    "arguments", [c[1] for c in SURROGATE_TEXTS], ids=[c[0] for c in SURROGATE_TEXTS]
)
async def test_lone_surrogate_in_tool_arguments_is_malformed(bind: Bind, arguments: str) -> None:
    """Tool arguments whose JSON escapes half a surrogate pair are refused as ``malformed``
    on the tool path and dropped as ``malformed`` by the store hook; nothing is written."""
    scope = await bound_with_prior(bind)
    before = await scope.stored_bytes()

    with (
        capture_events(scope.ctx.events) as events,
        anyio.fail_after(10),
        pytest.raises(ScratchpadUpdateError) as info,
    ):
        await scope.handle.call("update", arguments, call_id="tool")
    item = FunctionCall(call_id="store", name="scratchpad/update", arguments=arguments)
    with capture_events(scope.ctx.events) as stored_events, anyio.fail_after(10):
        result = await scope.layer.hooks.store(new_items=[item], state=PRIOR, ctx=scope.ctx)

    assert info.value.reason == "malformed"
    assert_names_a_lone_surrogate(info.value.message)
    assert result is None
    assert await scope.stored_bytes() == before
    assert [(e.hook, e.reason) for e in events.of(UpdateRejected)] == [("tool", "malformed")]
    assert [(e.hook, e.reason) for e in stored_events.of(UpdateRejected)] == [
        ("store", "malformed")
    ]


async def test_a_whole_surrogate_pair_is_one_character_and_is_stored(bind: Bind) -> None:
    """Both halves of a pair, escaped in JSON, are the character they encode: accepted."""
    scope = await bind(scratchpad())

    await scope.handle.call("update", '{"mood": "\\ud83d\\ude00"}', call_id="ok")

    assert await scope.stored() == {"mood": "\U0001f600"}
