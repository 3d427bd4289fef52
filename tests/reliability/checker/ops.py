"""Performing one checker operation through one write path, and reading every scope.

A worker writes through *channels*. Per kind of scope (thread, resource) there are two
harnesses, each opening its own backend on the storage URL (so one process has several
writers on one SQLite file): one with the default ``write_timeout``, one with a tiny one.
Per kind there are also two layers driven from an own loop (``ExecutionContext`` +
``ScopedStorage`` + ``hooks.init`` + ``handle.update``) on the normal harness's backend, so
their writes share that backend's commit groups with the harness's writes. Every channel
has its own event bus, and every event is logged as it is emitted.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any, cast

import anyio

from noetic_scratchpad import (
    Agent,
    AgentHarness,
    EventBus,
    ExecutionContext,
    ModelRequest,
    ScopedStorage,
    ScratchpadEvent,
    ScratchpadLayer,
    ScratchpadUpdateError,
    ScriptedModel,
    StateDiscarded,
    StorageBackend,
    StorageError,
    UpdateApplied,
    UpdateRejected,
    scratchpad,
)
from noetic_scratchpad.items import FunctionCall, FunctionCallOutput, LLMResponse

from .log import LogWriter, Record
from .scenario import SCOPES, Kind, Notes, OpSpec, Outcome, Scope

UPDATE_TOOL = "scratchpad/update"
KINDS: tuple[Kind, ...] = ("thread", "resource")
LAYER_ID = "scratchpad"


@dataclass(frozen=True, slots=True)
class Result:
    """What the caller of one operation saw."""

    outcome: Outcome
    error: str = ""
    #: Why it was not acknowledged: an UpdateRejected reason (tool path), the exception's
    #: class (``ScratchpadValidationError``, ``StorageError``, ...), or ``"cancelled"``.
    reason: str = ""
    spurious: bool = False  # a CancelledError reached a task that nobody cancelled
    unexpected: bool = False  # an exception the contract does not name


def scoped_storage(backend: StorageBackend, layer: ScratchpadLayer, ctx: ExecutionContext) -> Any:
    """The ``ScopedStorage`` a harness gives ``layer`` for ``ctx``: ``ScopedStorage.for_layer``
    as docs/own-loop.md shows it. The first release had no ``for_layer`` and a constructor
    without the scope's kind; the checker still builds that one, to run against that code
    and show what it catches."""
    for_layer = getattr(ScopedStorage, "for_layer", None)
    if for_layer is not None:
        return for_layer(backend, layer, ctx)
    return cast(Any, ScopedStorage)(backend, layer.id, ctx.scope_key(layer.scope))


def context_ids(scope: Scope, other_id: str) -> tuple[str, str | None]:
    """``(thread_id, resource_id)`` of an execution that writes ``scope``."""
    if scope.kind == "thread":
        return scope.id, other_id or None
    return other_id or "other", scope.id


def _layer(kind: Kind, write_timeout: float | None = None) -> ScratchpadLayer:
    if write_timeout is None:
        return scratchpad(scope=kind, schema=Notes)
    return scratchpad(scope=kind, schema=Notes, write_timeout=write_timeout)


class ScriptBook:
    """The model of a harness: each run gets its own ``ScriptedModel``, by execution id."""

    def __init__(self) -> None:
        self.scripts: dict[str, ScriptedModel] = {}

    async def __call__(self, request: ModelRequest) -> LLMResponse:
        return await self.scripts[request.execution_id](request)


class Channel:
    """One way into the storage: a harness (tool and api ops) or an own-loop layer."""

    def __init__(
        self,
        name: str,
        kind: Kind,
        layer: ScratchpadLayer,
        storage: str | StorageBackend | None = None,
        backend_of: AgentHarness | None = None,
    ) -> None:
        self.name = name
        self.kind = kind
        self.layer = layer
        self.bus = EventBus()
        self.book = ScriptBook()
        self.harness: AgentHarness | None = None
        self.backend_of = backend_of
        if storage is not None:
            self.harness = AgentHarness(
                name=name,
                agent=Agent(model=self.book),
                context_layers=[layer],
                storage=storage,
                events=self.bus,
            )

    def backend(self) -> StorageBackend:
        owner = self.harness or self.backend_of
        assert owner is not None
        return owner.storage


class Workbench:
    """A worker's channels, the event log, and :meth:`perform`."""

    def __init__(
        self, storage: str | StorageBackend, worker: str, log: LogWriter, tiny_timeout: float
    ) -> None:
        self.worker = worker
        self.log = log
        self.rejected: dict[str, str] = {}  # call id -> reason of its UpdateRejected
        self.channels: dict[tuple[str, Kind, bool], Channel] = {}
        for kind in KINDS:
            normal = Channel(f"harness:{kind}", kind, _layer(kind), storage)
            tiny = Channel(f"harness:{kind}:tiny", kind, _layer(kind, tiny_timeout), storage)
            assert normal.harness is not None
            self.channels[("harness", kind, False)] = normal
            self.channels[("harness", kind, True)] = tiny
            for is_tiny, timeout in ((False, None), (True, tiny_timeout)):
                name = f"handle:{kind}" + (":tiny" if is_tiny else "")
                channel = Channel(name, kind, _layer(kind, timeout), backend_of=normal.harness)
                self.channels[("handle", kind, is_tiny)] = channel
        for channel in self.channels.values():
            channel.bus.subscribe(self._recorder(channel.name))

    async def open(self) -> None:
        for channel in self.channels.values():
            if channel.harness is not None:
                await channel.harness.open()

    async def aclose(self) -> None:
        for channel in self.channels.values():
            if channel.harness is not None:
                await channel.harness.aclose()

    def _recorder(self, channel: str) -> Callable[[ScratchpadEvent], None]:
        def record(event: ScratchpadEvent) -> None:
            if event.origin is not None:  # another worker's write, which that worker records
                return
            entry: Record = {
                "t": "event",
                "w": self.worker,
                "channel": channel,
                "event": event.kind,
                "scope_key": event.scope_key,
                "at": time.monotonic(),
            }
            if isinstance(event, UpdateApplied):
                entry.update(hook=event.source, call_id=event.call_id, revision=event.revision)
            elif isinstance(event, UpdateRejected):
                entry.update(hook=event.hook, call_id=event.call_id, reason=event.reason)
                if event.call_id is not None:
                    self.rejected[event.call_id] = event.reason
            self.log.write(entry)

        return record

    # -- one operation -------------------------------------------------------------------

    async def perform(self, spec: OpSpec) -> Result:
        channel = self.channels[
            "harness" if spec.via != "handle" else "handle", spec.scope.kind, spec.tiny
        ]
        base: Record = {
            "w": self.worker,
            "uid": spec.uid,
            "kind": spec.scope.kind,
            "scope": spec.scope.id,
            "via": spec.via,
            "bad": spec.bad,
            "channel": channel.name,
            "cancel": spec.cancel,
        }
        start = time.monotonic()
        self.log.write({"t": "begin", **base, "start": start})
        result = await _cancelling(spec, lambda: _guarded(self._body(spec, channel)))
        self.log.write(
            {
                "t": "op",
                **base,
                "outcome": result.outcome,
                "reason": result.reason,
                "error": result.error[:300],
                "spurious": result.spurious,
                "unexpected": result.unexpected,
                "start": start,
                "end": time.monotonic(),
            }
        )
        return result

    async def _body(self, spec: OpSpec, channel: Channel) -> Result:
        value: object = "not-an-int" if spec.bad else 1
        payload = {"acks": {spec.uid: value}}
        thread_id, resource_id = context_ids(spec.scope, spec.other_id)
        try:
            if spec.via == "tool":
                return await self._tool(spec, channel, payload, thread_id, resource_id)
            if spec.via == "api":
                assert channel.harness is not None
                await channel.harness.update_state(
                    LAYER_ID, payload, thread_id=thread_id, resource_id=resource_id
                )
            else:
                ctx = ExecutionContext(
                    thread_id=thread_id, resource_id=resource_id, events=channel.bus
                )
                storage = scoped_storage(channel.backend(), channel.layer, ctx)
                try:
                    await channel.layer.hooks.init(
                        storage=storage, scope_key=storage.scope_key, ctx=ctx
                    )
                except StorageError as exc:  # loading failed: nothing was sent
                    return Result("unknown", f"init: {exc}", reason="init")
                await ctx.context[LAYER_ID].update(payload)
        except ScratchpadUpdateError as exc:
            return Result("refused", exc.message, reason=type(exc).__name__)
        except StorageError as exc:
            return Result("unknown", str(exc), reason=type(exc).__name__)
        except Exception as exc:
            return Result("unknown", f"{type(exc).__name__}: {exc}", "unexpected", unexpected=True)
        return Result("acked")

    async def _tool(
        self,
        spec: OpSpec,
        channel: Channel,
        payload: dict[str, Any],
        thread_id: str,
        resource_id: str | None,
    ) -> Result:
        arguments = json.dumps([payload] if spec.malformed else payload)
        call = FunctionCall(call_id=spec.uid, name=UPDATE_TOOL, arguments=arguments)
        execution_id = f"x-{spec.uid}"
        channel.book.scripts[execution_id] = ScriptedModel([[call], "ok"])
        assert channel.harness is not None
        try:
            result = await channel.harness.run(
                "go", thread_id=thread_id, resource_id=resource_id, execution_id=execution_id
            )
        finally:
            del channel.book.scripts[execution_id]
        output = next(
            item
            for item in result.items
            if isinstance(item, FunctionCallOutput) and item.call_id == spec.uid
        )
        if not output.is_error:
            return Result("acked")
        reason = self.rejected.pop(spec.uid, "")
        if reason in ("timeout", "unconfirmed", "storage"):  # it may have landed
            return Result("unknown", output.output, reason=reason)
        return Result("refused", output.output, reason=reason or "no-event")


async def _guarded(body: Awaitable[Result]) -> Result:
    """``await body``; a ``CancelledError`` in a task no one cancelled is reported, not raised
    (a cancellation meant for another task leaked into this one)."""
    try:
        return await body
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if task is not None and task.cancelling() == 0:
            return Result("unknown", "CancelledError without a cancel", "spurious", spurious=True)
        raise


async def _cancelling(spec: OpSpec, body: Callable[[], Coroutine[Any, Any, Result]]) -> Result:
    """Run ``body`` under the cancellation ``spec`` asks for; a cancelled op is ``unknown``."""
    cancelled = Result("unknown", f"cancelled ({spec.cancel}, {spec.delay:.4f} s)", "cancelled")
    if spec.cancel == "timeout":
        try:
            async with asyncio.timeout(spec.delay):
                return await body()
        except TimeoutError:
            return cancelled
    if spec.cancel == "move_on":
        result: Result | None = None
        with anyio.move_on_after(spec.delay):
            result = await body()
        return cancelled if result is None else result
    if spec.cancel == "cancel":
        task: asyncio.Task[Result] = asyncio.create_task(body())
        done, _ = await asyncio.wait({task}, timeout=spec.delay)
        we_cancelled = not done
        if we_cancelled:
            task.cancel()
            await asyncio.wait({task})
        if task.cancelled():
            if we_cancelled:
                return cancelled
            return Result("unknown", "CancelledError without a cancel", "spurious", spurious=True)
        return task.result()
    return await body()


# -- the end of a run ------------------------------------------------------------------------


class Reader:
    """Reads every scope through harnesses of its own (one per kind), as ``read`` records
    with the read's start and end; a state the schema gate discarded on the way is noted in
    ``discarded``. ``async with Reader(storage, scopes) as reader:``."""

    def __init__(self, storage: str | StorageBackend, scopes: tuple[Scope, ...] = SCOPES) -> None:
        self.scopes = scopes
        self.discarded: dict[tuple[Kind, str], str] = {}
        self.harnesses: dict[Kind, AgentHarness] = {}
        for kind in KINDS:
            bus = EventBus()
            bus.subscribe(self._noter(kind))
            self.harnesses[kind] = AgentHarness(
                name=f"reader:{kind}",
                agent=Agent(model=ScriptedModel([])),
                context_layers=[_layer(kind)],
                storage=storage,
                events=bus,
            )

    def _noter(self, kind: Kind) -> Callable[[ScratchpadEvent], None]:
        def note(event: ScratchpadEvent) -> None:
            if isinstance(event, StateDiscarded):
                self.discarded[kind, event.scope_key] = event.reason

        return note

    async def __aenter__(self) -> Reader:
        for harness in self.harnesses.values():
            await harness.open()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        for harness in self.harnesses.values():
            await harness.aclose()

    async def read_all(self, *, final: bool = False) -> list[Record]:
        records: list[Record] = []
        for scope in self.scopes:
            thread_id, resource_id = context_ids(scope, "")
            self.discarded.pop((scope.kind, scope.id), None)
            start = time.monotonic()
            state = await self.harnesses[scope.kind].read_state(
                LAYER_ID, thread_id=thread_id, resource_id=resource_id
            )
            records.append(
                {
                    "t": "read",
                    "kind": scope.kind,
                    "scope": scope.id,
                    "state": state,
                    "discarded": self.discarded.get((scope.kind, scope.id)),
                    "start": start,
                    "end": time.monotonic(),
                    "final": final,
                }
            )
        return records


async def read_loop(
    reader: Reader, log: LogWriter, rng: random.Random, stop: Callable[[], bool]
) -> int:
    """Read every scope again and again until ``stop()``; the reads go to ``log``. A read
    that fails (storage busy, say) is skipped. Returns the number of failed rounds."""
    failed = 0
    while not stop():
        await asyncio.sleep(rng.uniform(0.05, 0.3))
        try:
            records = await reader.read_all()
        except StorageError:
            failed += 1
            continue
        for record in records:
            log.write(record)
    return failed


async def reset_in_process(backend: StorageBackend, scope: Scope) -> int:
    """Delete a scope's keys as ``noetic-scratchpad reset`` does (list the scope's prefix,
    delete each key), through the view a harness uses; for ``memory://``, which no other
    process can reach. Returns the number of keys deleted."""
    layer = _layer(scope.kind)
    thread_id, resource_id = context_ids(scope, "")
    ctx = ExecutionContext(thread_id=thread_id, resource_id=resource_id)
    storage = scoped_storage(backend, layer, ctx)
    keys: list[str] = await storage.list()
    for key in keys:
        await storage.delete(key)
    return len(keys)
