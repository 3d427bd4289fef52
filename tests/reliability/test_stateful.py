"""Stateful property test: one process's sequences of scratchpad operations, against a model.

A hypothesis ``RuleBasedStateMachine`` drives the memory, SQLite and PostgreSQL backends
through random sequences of:

- updates through ``AgentHarness.update_state`` and through a handle bound by the layer's
  ``init`` (as a host's own loop does, see docs/own-loop.md), fresh or kept across steps;
- two "sides" (two harness pairs on two storage instances; for SQLite one file, for
  PostgreSQL one table; for memory one store) writing interleaved;
- batches of concurrent writes in which one is cancelled at a random point (its outcome is
  unknown: the model keeps both possible states until the next read says which);
- updates that must be refused (schema violations, values JSON cannot hold, arguments that
  are not an object): the caller gets the error and nothing changes;
- ``noetic-scratchpad reset --thread/--resource ID --yes`` through ``cli.main``;
- closing and reopening one side's storage.

The model is a plain dict per scope with its own deep merge. After every step each scope
is read (through side 0 and side 1 by turns) and must equal the model: one of its possible
states after a cancelled write, and then the read tells which. Scopes of both kinds share
tricky ids: threads ``u1``, ``a``, ``a/b`` and resources ``u1``, ``a`` are five independent
scratchpads.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import itertools
import json
import logging
import math
from collections.abc import Awaitable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)
from pydantic import BaseModel, ConfigDict

from noetic_scratchpad import (
    Agent,
    AgentHarness,
    ExecutionContext,
    ScopedStorage,
    ScratchpadUpdateError,
    ScratchpadValidationError,
    ScriptedModel,
    StorageOutcomeUnknownError,
    open_storage,
    scratchpad,
)
from noetic_scratchpad import cli as scratchpad_cli
from noetic_scratchpad.layer import ContextLayer
from noetic_scratchpad.storage import StorageBackend, register_backend
from tests.conftest import postgres_test_url, require_postgres

T = TypeVar("T")

LAYER_ID = "scratchpad"
#: Seconds one step may take before it counts as hung (a write that never returns).
STEP_TIMEOUT = 20.0

FIELDS = ("goal", "steps", "notes", "meta", "count")
FORBIDDEN_KEYS = frozenset({"__proto__", "constructor"})


class Notes(BaseModel):
    """The schema under test: free-form fields, one typed field, no extras."""

    model_config = ConfigDict(extra="forbid")

    goal: Any = None
    steps: Any = None
    notes: Any = None
    meta: Any = None
    count: int = 0


# -- the model ---------------------------------------------------------------------------------


def strip(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: strip(v) for k, v in value.items() if k not in FORBIDDEN_KEYS}
    if isinstance(value, list):
        return [strip(v) for v in value]
    return value


def model_merge(base: dict[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    """Deep merge as the contract states it: dicts merge recursively, everything else
    (lists, scalars, None) replaces; forbidden keys are dropped at every depth."""
    merged = dict(base)
    for key, value in update.items():
        if key in FORBIDDEN_KEYS:
            continue
        current = merged.get(key)
        if isinstance(value, dict) and isinstance(current, dict):
            merged[key] = model_merge(current, value)
        else:
            merged[key] = strip(value)
    return merged


def canonical(value: Any) -> str:
    """JSON text that tells ``True`` from ``1`` and ignores key order."""
    return json.dumps(value, sort_keys=True)


def dedupe(states: list[dict[str, Any]]) -> list[dict[str, Any]]:
    seen: dict[str, dict[str, Any]] = {}
    for state in states:
        seen.setdefault(canonical(state), state)
    return list(seen.values())


# -- what the rules draw -----------------------------------------------------------------------


@dataclass(frozen=True)
class Scope:
    kind: str  # "thread" or "resource"
    id: str

    def __repr__(self) -> str:
        return f"{self.kind}({self.id!r})"

    @property
    def thread_id(self) -> str:
        # A resource's context gets the thread of the same name: the resource must still win.
        return self.id

    @property
    def resource_id(self) -> str | None:
        return self.id if self.kind == "resource" else None


SCOPES = (
    Scope("thread", "u1"),
    Scope("thread", "a"),
    Scope("thread", "a/b"),
    Scope("resource", "u1"),
    Scope("resource", "a"),
)


@dataclass(frozen=True)
class Write:
    """One update: through side 0 or 1, via the harness, a fresh handle or a kept one."""

    side: int
    scope: Scope
    via: str  # "harness", "handle" or "kept-handle"
    values: dict[str, Any]

    def __repr__(self) -> str:
        return f"Write({self.side}, {self.scope!r}, {self.via!r}, {self.values!r})"


@dataclass(frozen=True)
class Bad:
    """An update that must be refused with ``error``; ``payload`` is a dict or raw text."""

    label: str
    payload: Any
    error: type[ScratchpadUpdateError]

    def __repr__(self) -> str:
        return f"Bad({self.label!r}, {self.payload!r})"


leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.text(alphabet="ab/", max_size=2),
)
json_values = st.recursive(
    leaves,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.sampled_from(["x", "y", "z", "__proto__"]), inner, max_size=3),
    ),
    max_leaves=6,
)
# Dicts are what deep merge is about: draw them often.
field_values = st.one_of(
    st.dictionaries(st.sampled_from(["x", "y", "z"]), json_values, max_size=3), json_values
)


def value_for(name: str) -> st.SearchStrategy[Any]:
    return st.integers(-5, 5) if name == "count" else field_values


def updates(fields: list[str]) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries({name: value_for(name) for name in fields})


some_updates = st.lists(st.sampled_from(FIELDS), min_size=1, max_size=3, unique=True).flatmap(
    updates
)
sides = st.integers(0, 1)
scopes = st.sampled_from(SCOPES)
vias = st.sampled_from(["harness", "handle", "kept-handle"])
writes = st.builds(Write, sides, scopes, vias, some_updates)


@st.composite
def concurrent_batches(draw: st.DrawFn) -> list[Write]:
    """1 to 4 writes, each to one field of its own, so their order does not matter; often
    all to one scope through one side, where they queue behind each other and share
    commits (a batch that one of them leads)."""
    names = draw(st.permutations(FIELDS))
    size = draw(st.integers(1, 4))
    shared = draw(st.booleans())
    side, scope = draw(sides), draw(scopes)
    return [
        Write(
            side if shared else draw(sides),
            scope if shared else draw(scopes),
            draw(vias),
            {name: draw(value_for(name))},
        )
        for name in names[:size]
    ]


def extra_key(extra: Any, good: dict[str, Any]) -> Bad:
    return Bad("extra key", {**good, "bogus": extra}, ScratchpadValidationError)


def wrong_type(wrong: Any, good: dict[str, Any]) -> Bad:
    return Bad("wrong type", {**good, "count": wrong}, ScratchpadValidationError)


def not_json(name: str, value: Any) -> Bad:
    return Bad("not JSON", {name: {"x": value}}, ScratchpadUpdateError)


bad_updates = st.one_of(
    st.builds(extra_key, json_values, st.one_of(st.just({}), some_updates)),
    st.builds(
        wrong_type,
        st.sampled_from(["many", [1], {"x": 1}, None, 1.5]),
        st.one_of(st.just({}), some_updates),
    ),
    st.builds(
        not_json,
        st.sampled_from(["goal", "notes"]),
        st.sampled_from([math.nan, math.inf, b"raw", frozenset({1})]),
    ),
    st.sampled_from(
        [
            Bad("text, not JSON", "not json {", ScratchpadUpdateError),
            Bad("a JSON list", "[1, 2]", ScratchpadUpdateError),
        ]
    ),
)


# -- the system under test -------------------------------------------------------------------


@dataclass
class Side:
    """What one process would hold: a backend, a thread- and a resource-scoped layer, a
    harness for each, and the handles kept between steps."""

    backend: StorageBackend
    layers: dict[str, ContextLayer]
    harnesses: dict[str, AgentHarness]
    handles: dict[Scope, Any] = field(default_factory=dict)


def new_side(backend: StorageBackend, name: str) -> Side:
    layers: dict[str, ContextLayer] = {
        "thread": scratchpad(schema=Notes),
        "resource": scratchpad(schema=Notes, scope="resource"),
    }
    harnesses = {
        kind: AgentHarness(
            name=f"{name}-{kind}",
            agent=Agent(model=ScriptedModel([])),
            context_layers=[layer],
            storage=backend,  # shared by the side's two harnesses; the machine closes it
        )
        for kind, layer in layers.items()
    }
    return Side(backend, layers, harnesses)


#: In-memory stores the CLI may open, by the host part of a ``statefulmem://`` URL: the
#: CLI refuses memory:// (another process could not see it), but in this process it can
#: run its real code path on the machine's own store.
_MEMORY_STORES: dict[str, StorageBackend] = {}
_MEMORY_SCHEME = "statefulmem"
_registered = False


class _Borrowed:
    """A backend lent to the CLI: everything passes through, except that closing it
    leaves the machine's store open."""

    def __init__(self, backend: StorageBackend) -> None:
        self._backend = backend

    def __getattr__(self, name: str) -> Any:
        return getattr(self._backend, name)

    async def aclose(self) -> None:
        return None


async def _open_borrowed(url: str, **_options: Any) -> Any:
    return _Borrowed(_MEMORY_STORES[urlsplit(url).netloc])


def lend_to_cli(backend: StorageBackend, token: str) -> str:
    global _registered
    if not _registered:
        register_backend(_MEMORY_SCHEME, _open_borrowed)
        _registered = True
    _MEMORY_STORES[token] = backend
    return f"{_MEMORY_SCHEME}://{token}"


def run_cli(argv: list[str]) -> tuple[int, str]:
    """``cli.main(argv)`` with its output captured; the logging setup it changes (handlers
    and levels) is put back, so the rest of the suite logs as before."""
    root, library = logging.getLogger(), logging.getLogger("noetic_scratchpad")
    handlers, levels = list(root.handlers), (root.level, library.level)
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            code = scratchpad_cli.main(argv)
    finally:
        for handler in [h for h in root.handlers if h not in handlers]:
            root.removeHandler(handler)
        root.setLevel(levels[0])
        library.setLevel(levels[1])
    return code, out.getvalue()


_counter = itertools.count()


class ScratchpadMachine(RuleBasedStateMachine):
    """The machine; ``kind`` and ``tmp_path`` are set by the test that runs it."""

    kind = "memory"
    tmp_path = Path(".")

    def __init__(self) -> None:
        super().__init__()
        self.runner = asyncio.Runner()
        self.number = next(_counter)
        self.url = self._url()
        self.cli_url = self.url
        self.model: dict[Scope, list[dict[str, Any]]] = {scope: [{}] for scope in SCOPES}
        self.sides: list[Side] = []
        self.checks = 0
        self.run(self._open())

    def _url(self) -> str:
        if self.kind == "memory":
            return "memory://"
        if self.kind == "sqlite":
            return f"sqlite:///{self.tmp_path / f'stateful-{self.number}.db'}"
        return postgres_test_url()

    async def _open(self) -> None:
        if self.kind == "memory":
            # Two memory:// stores would be two worlds: both sides share one.
            shared = await open_storage(self.url)
            self.cli_url = lend_to_cli(shared, f"m{self.number}")
            self.sides = [new_side(shared, "side0"), new_side(shared, "side1")]
        else:
            self.sides = [new_side(await open_storage(self.url), f"side{i}") for i in range(2)]

    def run(self, coro: Awaitable[T]) -> T:
        async def bounded() -> T:
            async with asyncio.timeout(STEP_TIMEOUT):
                return await coro

        return self.runner.run(bounded())

    def teardown(self) -> None:
        try:
            self.run(self._close_all())
        finally:
            self.runner.close()
            _MEMORY_STORES.pop(f"m{self.number}", None)

    async def _close_all(self) -> None:
        backends: list[StorageBackend] = []
        for side in self.sides:
            for harness in side.harnesses.values():
                await harness.aclose()
            if side.backend not in backends:
                backends.append(side.backend)
        for backend in backends:
            await backend.aclose()
        if self.kind == "postgres":
            async with await open_storage(self.url) as cleanup:
                await cleanup.drop_table()  # type: ignore[attr-defined]

    # -- operations ----------------------------------------------------------------------

    async def _handle(self, write: Write) -> Any:
        """A handle bound by the layer's init, built as ``AgentHarness._scoped`` builds it
        (and docs/own-loop.md shows): kept on the side for ``kept-handle``."""
        side = self.sides[write.side]
        if write.via == "kept-handle" and write.scope in side.handles:
            return side.handles[write.scope]
        layer = side.layers[write.scope.kind]
        ctx = ExecutionContext(thread_id=write.scope.thread_id, resource_id=write.scope.resource_id)
        scoped = ScopedStorage.for_layer(side.backend, layer, ctx)
        await layer.hooks.init(storage=scoped, scope_key=scoped.scope_key, ctx=ctx)
        handle = ctx.context[LAYER_ID]
        if write.via == "kept-handle":
            side.handles[write.scope] = handle
        return handle

    async def _write(self, write: Write) -> Any:
        """Apply ``write``; returns the state the caller sees afterwards."""
        if write.via == "harness":
            harness = self.sides[write.side].harnesses[write.scope.kind]
            return await harness.update_state(
                LAYER_ID,
                write.values,
                thread_id=write.scope.thread_id,
                resource_id=write.scope.resource_id,
            )
        handle = await self._handle(write)
        await handle.update(write.values)
        return handle.snapshot

    async def _refuse(self, side: int, scope: Scope, via: str, bad: Bad) -> None:
        write = Write(side, scope, via, bad.payload if isinstance(bad.payload, dict) else {})
        if isinstance(bad.payload, str):  # raw tool arguments: the model's tool path
            handle = await self._handle(write)
            await handle.call("update", bad.payload, call_id="bad-call")
        else:
            await self._write(write)

    async def _settle(self) -> None:
        """Wait for every other task on the loop that has work: a cancelled write that a
        batch had already taken runs to its end in the background, and may land. An open
        core's resident tasks (its group's host, a keeper, the watch of other processes'
        writes, a writer's worker waiting for its next burst) live until it closes."""
        me = asyncio.current_task()
        while pending := [
            t for t in asyncio.all_tasks() if t is not me and not t.done() and not _idle(t)
        ]:
            await asyncio.wait(pending, timeout=0.05)

    def _apply(self, write: Write) -> None:
        self.model[write.scope] = dedupe(
            [model_merge(state, write.values) for state in self.model[write.scope]]
        )

    def _check_returned(self, write: Write, returned: Any) -> None:
        expected = self.model[write.scope]
        assert canonical(returned) in {canonical(s) for s in expected}, (
            f"{write!r} returned {returned!r}; the model says "
            f"{' or '.join(repr(s) for s in expected)}"
        )

    # -- rules ---------------------------------------------------------------------------

    @rule(write=writes)
    def update(self, write: Write) -> None:
        """A write through either side: the state it returns is the model's merge."""
        returned = self.run(self._write(write))
        self._apply(write)
        self._check_returned(write, returned)

    @rule(
        batch=concurrent_batches(),
        victim_at=st.integers(0, 3),
        ticks=st.integers(0, 30),
        how=st.sampled_from(["cancel", "timeout"]),
    )
    def cancelled_write(self, batch: list[Write], victim_at: int, ticks: int, how: str) -> None:
        """The writes of ``batch`` start in order as concurrent tasks; the one at
        ``victim_at`` is cancelled after ``ticks`` event-loop turns (``cancel``) or by
        ``asyncio.timeout`` after ``ticks`` tenths of a millisecond. The others must all
        land; the cancelled one may or may not have."""
        victim_at %= len(batch)
        victim = batch[victim_at]
        others = batch[:victim_at] + batch[victim_at + 1 :]

        async def cut_short() -> Any:
            async with asyncio.timeout(ticks / 10_000):
                return await self._write(victim)

        async def scenario() -> tuple[Any, list[Any]]:
            tasks = [
                asyncio.create_task(
                    cut_short() if i == victim_at and how == "timeout" else self._write(write)
                )
                for i, write in enumerate(batch)
            ]
            if how == "cancel":
                for _ in range(ticks):
                    await asyncio.sleep(0)
                tasks[victim_at].cancel()
            outcomes = await asyncio.gather(*tasks, return_exceptions=True)
            await self._settle()
            return outcomes[victim_at], outcomes[:victim_at] + outcomes[victim_at + 1 :]

        victim_outcome, other_outcomes = self.run(scenario())
        # Timing decides where the cancellation lands, so a failure may not replay: say
        # everything about the step here.
        step = f"cancelled_write({batch!r}, victim_at={victim_at}, ticks={ticks}, how={how!r})"
        for write, outcome in zip(others, other_outcomes, strict=True):
            if isinstance(outcome, BaseException):
                raise AssertionError(
                    f"{write!r} failed with {type(outcome).__name__} while {victim!r} was "
                    f"cancelled beside it, in {step}"
                ) from outcome
            self._apply(write)
        if isinstance(
            victim_outcome, asyncio.CancelledError | TimeoutError | StorageOutcomeUnknownError
        ):
            before = self.model[victim.scope]
            self._apply(victim)
            self.model[victim.scope] = dedupe(before + self.model[victim.scope])
        elif isinstance(victim_outcome, BaseException):
            raise AssertionError(
                f"the cancelled {victim!r} raised {type(victim_outcome).__name__}, not a "
                f"cancellation, in {step}"
            ) from victim_outcome
        else:
            self._apply(victim)

    @rule(side=sides, scope=scopes, via=vias, bad=bad_updates)
    def refused_update(self, side: int, scope: Scope, via: str, bad: Bad) -> None:
        """An update the gate or the parser refuses raises its error and changes nothing;
        the same path still writes afterwards."""
        with pytest.raises(bad.error):
            self.run(self._refuse(side, scope, via, bad))
        follow = Write(side, scope, via, {"count": 1})
        returned = self.run(self._write(follow))
        self._apply(follow)
        self._check_returned(follow, returned)

    @rule(scope=scopes)
    def reset(self, scope: Scope) -> None:
        """``noetic-scratchpad reset --thread/--resource ID --yes``: that scope only."""
        argv = ["reset", f"--{scope.kind}", scope.id, "--yes", "--storage", self.cli_url]
        code, output = self.run(asyncio.to_thread(run_cli, argv))
        # A scope with nothing stored is "not found" (exit 1), as for show and history; only
        # a scope whose every possible state is empty may have nothing stored.
        nothing_stored = code == 1 and "no scratchpad stored" in output
        assert code == 0 or (nothing_stored and self.model[scope] == [{}]), (
            f"{argv} exited {code}: {output}"
        )
        self.model[scope] = [{}]

    @precondition(lambda self: self.kind != "memory")
    @rule(side=sides)
    def reopen(self, side: int) -> None:
        """Close one side's storage and open the URL again, with new harnesses and layers."""

        async def reopen() -> None:
            old = self.sides[side]
            for harness in old.harnesses.values():
                await harness.aclose()
            await old.backend.aclose()
            self.sides[side] = new_side(await open_storage(self.url), f"side{side}")

        self.run(reopen())

    @precondition(lambda self: self.kind == "memory")
    @rule(side=sides)
    def new_harnesses(self, side: int) -> None:
        """Memory cannot be reopened: new harnesses, layers and handles on the same store."""
        old = self.sides[side]
        self.run(old.harnesses["thread"].aclose())
        self.run(old.harnesses["resource"].aclose())
        self.sides[side] = new_side(old.backend, f"side{side}")

    @invariant()
    def every_scope_reads_as_the_model(self) -> None:
        """``read_state`` of every scope, through side 0 and side 1 by turns, is the model's
        state (one of its states, after a cancelled write: the read tells which)."""
        number = self.checks % 2
        self.checks += 1
        harnesses = self.sides[number].harnesses

        async def read_all() -> list[Any]:
            return [
                await harnesses[scope.kind].read_state(
                    LAYER_ID, thread_id=scope.thread_id, resource_id=scope.resource_id
                )
                for scope in SCOPES
            ]

        for scope, state in zip(SCOPES, self.run(read_all()), strict=True):
            expected = self.model[scope]
            matching = [s for s in expected if canonical(s) == canonical(state)]
            assert matching, (
                f"side {number} reads {scope!r} as {state!r}; the model says "
                f"{' or '.join(repr(s) for s in expected)}"
            )
            self.model[scope] = matching


#: Tasks that live as long as a core is open, whatever they wait for.
_RESIDENTS = frozenset({"GroupHost._host", "TaskOwner._keep", "RemoteEvents._run"})


def _idle(task: asyncio.Task[Any]) -> bool:
    """Whether ``task`` is one of an open core's resident tasks with no write to finish: a
    resident, or a writer's worker waiting for its next burst (not running one)."""
    chain: list[str] = []
    awaited: Any = task.get_coro()
    while awaited is not None:
        code = getattr(awaited, "cr_code", None) or getattr(awaited, "ag_code", None)
        if code is not None:
            chain.append(code.co_qualname)
        awaited = getattr(awaited, "cr_await", None) or getattr(awaited, "ag_await", None)
    if _RESIDENTS.intersection(chain):
        return True
    if "Worker._reside" in chain:
        after = chain[chain.index("Worker._reside") + 1 :]
        return bool(after) and after[0].endswith("Event.wait")
    return False


# -- the tests ---------------------------------------------------------------------------------

#: Examples per backend, 20 steps each: about 6 s per backend, 20 s for the file.
BUDGETS = {"memory": 30, "sqlite": 20, "postgres": 12}


@pytest.mark.parametrize("kind", ["memory", "sqlite", "postgres"])
def test_operation_sequences_match_the_model(kind: str, tmp_path: Path) -> None:
    if kind == "postgres":
        require_postgres()

    machine = type(
        f"ScratchpadMachine_{kind}", (ScratchpadMachine,), {"kind": kind, "tmp_path": tmp_path}
    )
    run_state_machine_as_test(
        machine,
        settings=settings(
            max_examples=BUDGETS[kind],
            stateful_step_count=20,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )
