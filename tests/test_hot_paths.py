"""The shortcuts on the per-turn path give exactly the answers of the slow paths they skip.

- The render uses orjson when the state holds no float: the body is still byte for byte
  ``json.dumps(state, indent=2, ensure_ascii=False)``.
- The schema gate checks only the fields an update writes when no user code takes part in
  validation: the verdict is the one of validating the whole merged state.
- The layer skips re-checking a state it produced itself (same object or same JSON); a
  state that someone else stored still gets checked.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Annotated, Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator

from noetic_scratchpad import (
    ExecutionContext,
    ScratchpadConflictError,
    StateDiscarded,
    _json,
    open_storage,
    scratchpad,
)
from noetic_scratchpad._runtime import _asyncio
from noetic_scratchpad.layer import ScratchpadLayer
from noetic_scratchpad.merge import merge_state
from noetic_scratchpad.render import contains_float, dumps_pretty
from noetic_scratchpad.schema import SchemaGate
from noetic_scratchpad.storage import MemoryStorage, ScopedStorage, StorageBackend
from noetic_scratchpad.storage.base import Revision
from noetic_scratchpad.testing import capture_events

SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
)
JSON = st.recursive(
    SCALARS,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=25,
)
OBJECTS = st.dictionaries(st.text(max_size=6), JSON, max_size=6)


@given(OBJECTS)
@settings(max_examples=300)
def test_pretty_body_is_json_dumps_whatever_the_values(state: dict[str, Any]) -> None:
    """Floats in any notation, integers past 64 bits and any text render exactly as
    ``json.dumps(indent=2, ensure_ascii=False)``, whether the caller says the state holds
    floats or lets the renderer look."""
    expected = json.dumps(state, indent=2, ensure_ascii=False)
    assert dumps_pretty(state) == expected
    assert dumps_pretty(state, has_floats=contains_float(state)) == expected


def test_contains_float_looks_at_every_depth_and_distrusts_unknown_types() -> None:
    """A float anywhere says yes; plain JSON without one says no; a tuple or a dict
    subclass says yes (the fast renderer cannot vouch for what it does not know)."""
    assert contains_float({"a": [1, {"b": [None, 2.5]}]}) is True
    assert contains_float({"a": [1, "x", None, True, {"b": []}]}) is False
    assert contains_float({"a": (1,)}) is True

    class Sub(dict[str, Any]):
        pass

    assert contains_float({"a": Sub()}) is True


class Step(BaseModel):
    model_config = ConfigDict(extra="forbid")
    title: Annotated[str, Field(max_length=12)]
    done: bool = False


class Notes(BaseModel):
    model_config = ConfigDict(extra="forbid", str_max_length=40)
    goal: str
    steps: list[Step] = []
    count: Annotated[int, Field(ge=0)] = 0
    tags: dict[str, int] = {}
    renamed: str = Field(default="", alias="Renamed")


VALID = {"goal": "ship it", "steps": [{"title": "plan"}], "count": 1, "tags": {"a": 1}}
UPDATE_VALUES = st.one_of(
    SCALARS,
    st.lists(
        st.fixed_dictionaries(
            {}, optional={"title": st.text(max_size=15), "done": st.booleans() | st.integers()}
        ),
        max_size=2,
    ),
    st.fixed_dictionaries({}, optional={"title": st.text(max_size=3), "x": st.integers()}),
    st.dictionaries(st.text(max_size=4), st.integers() | st.text(max_size=3), max_size=3),
)


class Shared(BaseModel):
    """A model two fields use, so pydantic puts it among the schema's definitions."""

    model_config = ConfigDict(extra="forbid")
    title: Annotated[str, Field(max_length=12)]
    done: bool = False


class NotesByName(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)
    goal: str
    steps: list[Shared] = []
    current: Shared | None = None
    count: Annotated[int, Field(ge=0)] = 0
    tags: dict[str, int] = {}
    renamed: str = Field(default="", alias="Renamed")


class NotesStrict(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)
    goal: str
    steps: list[Shared] = []
    current: Shared | None = None
    count: int = 0
    tags: dict[str, int] = {}
    renamed: str = Field(default="", validation_alias="Renamed")


VALID_SHARED = {**VALID, "current": {"title": "now"}}
UPDATES = st.dictionaries(
    st.sampled_from(["goal", "steps", "current", "count", "tags", "Renamed", "renamed", "extra"]),
    UPDATE_VALUES,
    max_size=3,
)


@pytest.mark.parametrize(
    ("schema", "valid"),
    [(Notes, VALID), (NotesByName, VALID_SHARED), (NotesStrict, VALID_SHARED)],
)
@given(update=UPDATES)
@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
def test_checking_only_written_fields_gives_the_whole_state_verdict(
    schema: type[BaseModel], valid: dict[str, Any], update: dict[str, Any]
) -> None:
    """For a model without validators, the errors of the written fields alone (prior state
    valid) are exactly the errors of validating the whole merged state: with extra keys
    forbidden, allowed or ignored, fields by alias and by name, strict mode, string limits
    from the config, and a nested model that two fields share."""
    gate = SchemaGate(schema)
    assert gate.fields_independent
    assert gate.errors(valid) == []
    merged = merge_state(valid, update)
    assert gate.errors_after_update(merged, update.keys()) == gate.errors(merged)


class Tree(BaseModel):
    """A model that holds itself: pydantic refers to it by reference, from the top down."""

    model_config = ConfigDict(extra="forbid")
    name: str = ""
    children: list[Tree] = []


@pytest.mark.parametrize(
    "update",
    [
        {"children": [{"name": 1}]},
        {"children": [{"name": "a", "children": [{"x": 1}]}]},
        {"name": "renamed", "children": [{"children": [{"name": "leaf"}]}]},
        {"other": 1},
    ],
)
def test_a_recursive_models_written_fields_get_the_whole_models_verdict(
    update: dict[str, Any],
) -> None:
    gate = SchemaGate(Tree)
    assert gate.fields_independent
    merged = merge_state({"name": "root"}, update)
    assert gate.errors_after_update(merged, update.keys()) == gate.errors(merged)


class WithFieldValidator(BaseModel):
    a: int = 0
    b: int = 0

    @field_validator("b")
    @classmethod
    def below_ten(cls, value: int) -> int:
        return value


class WithModelValidator(BaseModel):
    low: int = 0
    high: int = 0

    @model_validator(mode="after")
    def ordered(self) -> WithModelValidator:
        if self.low > self.high:
            raise ValueError("low must not exceed high")
        return self


class WithAnnotatedValidator(BaseModel):
    a: Annotated[int, AfterValidator(lambda value: value)] = 0


class WithPostInit(BaseModel):
    a: int = 0

    def model_post_init(self, context: Any) -> None:
        return None


class NestedValidator(BaseModel):
    inner: WithFieldValidator = WithFieldValidator()


@pytest.mark.parametrize(
    "schema",
    [WithFieldValidator, WithModelValidator, WithAnnotatedValidator, WithPostInit, NestedValidator],
)
def test_any_user_code_in_validation_means_the_whole_state_is_checked(schema: Any) -> None:
    """A validator or model_post_init anywhere may compare fields, so the gate never
    checks fields alone for such a schema."""
    assert SchemaGate(schema).fields_independent is False


def test_a_cross_field_rule_still_rejects_an_update_of_one_field() -> None:
    """With a model validator comparing two fields, writing only one of them is still
    judged against the other one stored before."""
    gate = SchemaGate(WithModelValidator)
    merged = merge_state({"low": 1, "high": 5}, {"low": 9})
    assert [error["type"] for error in gate.errors_after_update(merged, ["low"])] == ["value_error"]


async def _bound(layer: ScratchpadLayer, backend: StorageBackend) -> tuple[ScopedStorage, Any]:
    """``layer`` initialised for thread ``t1`` on ``backend``: its storage and handle."""
    storage = ScopedStorage(backend, layer.id, "t1")
    ctx = ExecutionContext(thread_id="t1")
    await layer.init(storage=storage, scope_key="t1", ctx=ctx)
    return storage, ctx.context[layer.id]


@pytest.mark.asyncio
async def test_a_state_stored_by_someone_else_is_checked_before_it_is_merged() -> None:
    """After the layer wrote a valid state, another writer stores one that breaks the
    schema: the next update does not trust it because the layer once wrote that scope; it
    starts from the initial state, as for any stored state that fails the schema."""
    layer = scratchpad(schema=Notes)
    backend = MemoryStorage()
    storage, handle = await _bound(layer, backend)
    await handle.update({"goal": "first", "count": 1})

    await backend.set(storage.full_key("state"), {"goal": "first", "count": -5})
    await handle.update({"goal": "second"})

    assert await backend.get(storage.full_key("state")) == {"goal": "second"}


@pytest.mark.asyncio
async def test_a_copy_stored_by_someone_else_merges_and_a_changed_one_is_discarded() -> None:
    """A stored state equal to one the layer wrote (same JSON, another object, another
    revision) is checked and merged; one that differs by a single bad value is reported
    at init and discarded."""
    layer = scratchpad(schema=Notes)
    backend = MemoryStorage()
    storage, handle = await _bound(layer, backend)
    await handle.update({"goal": "kept", "tags": {"x": 1}})

    key = storage.full_key("state")
    await backend.set(key, {"goal": "kept", "tags": {"x": 1}})  # a copy, same JSON
    await handle.update({"count": 2})
    assert await backend.get(key) == {"goal": "kept", "tags": {"x": 1}, "count": 2}

    await backend.set(key, {"goal": "kept", "tags": {"x": "one"}})
    other = ExecutionContext(thread_id="t1")
    with capture_events(other.events) as events:
        await layer.init(storage=storage, scope_key="t1", ctx=other)
    assert len(events.of(StateDiscarded)) == 1


class _JsonbLike(MemoryStorage):
    """Hands ``commit`` a decoded copy with keys in another order, as PostgreSQL does."""

    async def commit(self, key: str, fn: Any, *, keep: int) -> Revision:
        def reordered(current: Revision) -> Any:
            value = current.value
            if isinstance(value, dict):
                value = {k: value[k] for k in sorted(value, key=lambda k: (len(k), k))}
            copied = _json.loads(_json.dumps(value)) if value is not None else None
            return fn(Revision(copied, current.revision))

        return await super().commit(key, reordered, keep=keep)


@pytest.mark.asyncio
async def test_a_reordered_copy_of_the_state_it_wrote_is_not_validated_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Storage that hands back decoded copies with its own key order (jsonb) still lets the
    layer recognize the state it wrote, by its revision, so the whole state is not
    validated on every write; a state someone else changed is."""
    layer = scratchpad(schema=Notes)
    backend = _JsonbLike()
    storage, handle = await _bound(layer, backend)
    await handle.update({"goal": "first", "count": 1, "tags": {"b": 2, "a": 1}})

    checked: list[Any] = []
    full_check = SchemaGate.errors

    def spy(self: SchemaGate, state: Any) -> Any:
        checked.append(state)
        return full_check(self, state)

    monkeypatch.setattr(SchemaGate, "errors", spy)
    await handle.update({"count": 2})
    await handle.update({"count": 3})
    assert checked == []

    await backend.set(storage.full_key("state"), {"goal": "changed", "count": 3})
    await handle.update({"count": 4})
    assert len(checked) == 1
    assert await backend.get(storage.full_key("state")) == {"goal": "changed", "count": 4}


@pytest.fixture
def checks(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every state the layer validates as a whole, in order (validation always passes
    here)."""
    seen: list[Any] = []
    monkeypatch.setattr(SchemaGate, "errors", lambda gate, state: seen.append(state) or [])
    return seen


@pytest.mark.asyncio
async def test_many_scopes_written_in_turn_are_not_checked_again(
    tmp_path: Path, checks: list[Any]
) -> None:
    """Writers on more scopes than the layer remembers states for: SQLite hands each
    writer the very state it wrote last, which the writer's handle recognizes without
    validating it."""
    layer = scratchpad(schema=Notes)
    backend = await open_storage(f"sqlite:///{tmp_path / 'many.db'}")
    try:
        handles = []
        for scope in range(20):
            ctx = ExecutionContext(thread_id=f"t{scope}")
            storage = ScopedStorage(backend, layer.id, f"t{scope}")
            await layer.init(storage=storage, scope_key=f"t{scope}", ctx=ctx)
            handles.append(ctx.context[layer.id])
            await handles[-1].update({"goal": f"scope {scope}", "count": 0})
        checks.clear()  # what init and the first writes looked at

        for count in (1, 2):
            for handle in handles:
                await handle.update({"count": count})
        assert checks == []
        stored = await backend.get(handles[7].storage.full_key("state"))
        assert stored == {"goal": "scope 7", "count": 2}
    finally:
        await backend.aclose()


@pytest.mark.asyncio
async def test_the_state_init_checked_is_not_validated_again_at_the_first_write(
    tmp_path: Path, checks: list[Any]
) -> None:
    """On SQLite the first write after init reads (and decodes) the row init loaded and
    checked: its revision is the one init checked, so it is not validated again. A row
    another process rewrote in between has another revision, and is validated before the
    update merges into it."""
    layer = scratchpad(schema=Notes)
    url = f"sqlite:///{tmp_path / 'first.db'}"
    backend = await open_storage(url)
    other = await open_storage(url)  # another process's connection to the same file
    try:
        key = ScopedStorage(backend, layer.id, "t1").full_key("state")
        await backend.set(key, {"goal": "loaded", "tags": {"a": 1}})
        _, handle = await _bound(layer, backend)
        checks.clear()  # what init looked at

        await handle.update({"count": 1})
        assert checks == []
        _, second = await _bound(layer, backend)
        loaded = {"goal": "loaded", "tags": {"a": 1}, "count": 1}
        assert checks == [loaded]  # init checks what it loads
        rewritten = {"goal": "rewritten", "tags": {"a": 1}, "count": 1}
        await other.set(key, rewritten)
        await second.update({"count": 2})
        assert checks == [loaded, rewritten]
        assert await backend.get(key) == {**rewritten, "count": 2}
    finally:
        await other.aclose()
        await backend.aclose()


@pytest.mark.asyncio
@pytest.mark.parametrize("backend_kind", ["memory", "sqlite"])
async def test_a_state_deleted_and_rewritten_to_the_same_count_of_writes_is_checked(
    backend_kind: str, tmp_path: Path
) -> None:
    """Init checks a valid state at revision 2; another process resets the scope and
    writes a state that breaks the schema, twice. Revisions never repeat, so the first
    write does not take that state for the one init checked: it is found bad and the
    update starts over from the initial state, as for any bad stored state."""
    layer = scratchpad(schema=Notes)
    url = "memory://" if backend_kind == "memory" else f"sqlite:///{tmp_path / 'aba.db'}"
    backend = await open_storage(url)
    other = backend if backend_kind == "memory" else await open_storage(url)
    try:
        key = ScopedStorage(backend, layer.id, "t1").full_key("state")
        await backend.set(key, {"goal": "valid", "count": 1})
        await backend.set(key, {"goal": "valid", "count": 2})
        _, handle = await _bound(layer, backend)
        assert handle.revision == 2
        await other.delete(key)
        await other.set(key, {"goal": "bad", "count": -1})
        await other.set(key, {"goal": "bad", "count": -2})
        await handle.update({"goal": "mine"})
        assert await backend.get(key) == {"goal": "mine"}
        assert handle.revision == 5
    finally:
        if other is not backend:
            await other.aclose()
        await backend.aclose()


@pytest.mark.asyncio
@pytest.mark.parametrize("backend_kind", ["memory", "sqlite"])
async def test_expected_revision_is_not_met_by_a_reset_scope_at_the_same_count(
    backend_kind: str, tmp_path: Path
) -> None:
    """``expected_revision`` names one stored state: after a reset and as many writes as
    before, the scope is at another revision and the conditional write is refused."""
    layer = scratchpad(schema=Notes)
    url = "memory://" if backend_kind == "memory" else f"sqlite:///{tmp_path / 'aba.db'}"
    backend = await open_storage(url)
    try:
        storage, handle = await _bound(layer, backend)
        await handle.update({"goal": "first"})
        seen = handle.revision
        await backend.delete(storage.full_key("state"))
        _, other = await _bound(layer, backend)
        await other.update({"goal": "someone else's"})
        with pytest.raises(ScratchpadConflictError):
            await handle.update({"goal": "mine"}, expected_revision=seen)
        assert await backend.get(storage.full_key("state")) == {"goal": "someone else's"}
    finally:
        await backend.aclose()


@pytest.mark.asyncio
async def test_recall_after_float_updates_renders_floats_as_json_does() -> None:
    """The renderer's float hint follows the writes: after an update that adds a float
    the block shows it as ``json.dumps`` writes it (``1e-05``, not orjson's ``0.00001``)."""
    layer = scratchpad()
    ctx = ExecutionContext(thread_id="t1")
    await layer.init(
        storage=ScopedStorage(MemoryStorage(), layer.id, "t1"), scope_key="t1", ctx=ctx
    )
    handle = ctx.context[layer.id]
    await handle.update({"a": 1})
    first = await layer.recall(state=handle.state, budget=10_000, ctx=ctx)
    assert first is not None
    await handle.update({"ratio": 1e-05, "big": 1e16})
    second = await layer.recall(state=handle.state, budget=10_000, ctx=ctx)
    assert second is not None
    body = json.dumps(handle.state, indent=2, ensure_ascii=False)
    assert second.items[0].content == f"<scratchpad>\n{body}\n</scratchpad>"
    assert '"ratio": 1e-05' in body


def test_states_remembered_for_re_checks_stay_within_their_memory_bound() -> None:
    """The layer remembers the JSON of states it wrote (to skip re-checking them when
    storage reads them back) in at most ~2 MB: 20,000 writes of distinct small states leave
    less than 4 MB behind, not 20,000 of orjson's 4 KB working buffers (80 MB)."""
    import gc
    import tracemalloc

    layer = scratchpad(schema=Notes)
    gc.collect()
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        for i in range(20_000):
            layer.apply_update({"goal": f"goal {i}"}, {"count": i})
        gc.collect()
        after, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert after - before < 4 * 1024 * 1024


@pytest.mark.asyncio
@pytest.mark.parametrize("history_limit", [50, 0])
@pytest.mark.parametrize("backend_kind", ["memory", "sqlite"])
async def test_a_write_encodes_its_state_once(
    backend_kind: str, history_limit: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pipeline encodes the new state for its size check and hands that JSON to the
    backend in its ``Commit``: the backend stores it instead of encoding the state again."""
    url = "memory://" if backend_kind == "memory" else f"sqlite:///{tmp_path / 'pad.db'}"
    backend = await open_storage(url)
    try:
        layer = scratchpad(history_limit=history_limit)
        handle = await layer.open(backend, thread_id="t1")
        await handle.update({"goal": "warm up"})
        encoded: list[Any] = []
        dumps = _json.dumps

        def counting(value: Any) -> bytes:
            encoded.append(value)
            return dumps(value)

        monkeypatch.setattr(_json, "dumps", counting)
        await handle.update({"goal": "ship", "steps": ["a", "b"]})
        monkeypatch.undo()
        states = [value for value in encoded if value == {"goal": "ship", "steps": ["a", "b"]}]
        assert len(states) == 1
    finally:
        await backend.aclose()


@pytest.mark.asyncio
@pytest.mark.parametrize("backend_kind", ["memory", "sqlite"])
async def test_a_write_never_looks_up_the_running_loop(
    backend_kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """asyncio's running-loop lookup (``asyncio.current_task()`` without a loop too) makes
    a ``getpid`` system call on Python 3.11. A memory write never suspends, so its write
    timeout needs no timer and no loop; a SQLite write arms one on the loop of the future
    it waits on (it looked the loop up twice, for the limit and for its task)."""
    url = "memory://" if backend_kind == "memory" else f"sqlite:///{tmp_path / 'pad.db'}"
    backend = await open_storage(url)
    try:
        handle = await scratchpad(write_timeout=30.0).open(backend, thread_id="t1")
        await handle.update({"goal": "warm up"})
        calls: list[Any] = []
        lookup = _asyncio.running_asyncio_loop

        def counting() -> Any:
            calls.append(None)
            return lookup()

        current_task = asyncio.current_task

        def counting_tasks(loop: Any = None) -> Any:
            if loop is None:
                calls.append(None)
            return current_task(loop)

        monkeypatch.setattr(_asyncio, "running_asyncio_loop", counting)
        monkeypatch.setattr(asyncio, "current_task", counting_tasks)
        await handle.update({"goal": "ship"})
        assert calls == []
        assert handle.state == {"goal": "ship"}
    finally:
        await backend.aclose()
