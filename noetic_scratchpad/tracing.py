"""OpenTelemetry spans for the scratchpad's reads and writes (the ``[otel]`` extra).

With ``opentelemetry-api`` installed and a tracer provider set by the application
(Logfire's, or an SDK ``TracerProvider`` with any exporter), each write through a handle
(an update, an edit, a revert: the model's tool call in any host, or code's
``handle.update``), each read of a scope's state (a run's start, a refresh, the read tool,
the HTTP app's ``GET``) and the HTTP app's reset is one span, a child of whatever span is
current: pydantic-ai's ``execute_tool`` span, the MCP SDK's, an application's own around
an Agents SDK run or a request. While no provider is set, no span is opened; without the
package, :data:`TRACER` is ``None`` and nothing here runs.

The spans follow the OpenTelemetry GenAI semantic conventions for memory operations
(``gen_ai.memory.client``, development stability): the span name is the operation
(``upsert_memory`` for an update or an edit, which may create or change keys without the
caller choosing which; ``update_memory`` for a revert; ``search_memory`` for a read;
``delete_memory`` for a reset), the store (``gen_ai.memory.store.id``) is the layer, the
record (``gen_ai.memory.record.id``) one scope's scratchpad. What the conventions have no
name for carries a ``scratchpad.`` prefix: the operation as the library names it, the kind
of scope, the source of a write, the revision, a refusal's reason.

A note's contents (``gen_ai.memory.records``, which may hold personal data) are recorded
only when the application opts in: :func:`configure` with ``capture_content=True``. The
messages of errors, which can quote what the model wrote, follow the same switch.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from . import _json

if TYPE_CHECKING:
    from opentelemetry.trace import Span, Tracer

__all__ = (
    "OPERATIONS",
    "TRACER",
    "capturing_content",
    "configure",
    "memory_span",
)

try:
    from opentelemetry import trace as _trace
    from opentelemetry.trace import SpanKind, StatusCode
except ImportError:  # pragma: no cover - the [otel] extra is not installed
    _trace = None  # type: ignore[assignment]

#: Our operations and the ``gen_ai.operation.name`` each is reported as.
OPERATIONS: Mapping[str, str] = {
    "update": "upsert_memory",
    "edit": "upsert_memory",
    "revert": "update_memory",
    "read": "search_memory",
    "reset": "delete_memory",
}

# The conventions' names.
OPERATION_NAME = "gen_ai.operation.name"
STORE_ID = "gen_ai.memory.store.id"
RECORD_ID = "gen_ai.memory.record.id"
RECORD_COUNT = "gen_ai.memory.record.count"
RECORDS = "gen_ai.memory.records"
ERROR_TYPE = "error.type"
# Ours, where the conventions have none.
OPERATION = "scratchpad.operation"
SCOPE = "scratchpad.scope"
SOURCE = "scratchpad.source"
REVISION = "scratchpad.revision"
WROTE = "scratchpad.wrote"
REFUSAL_REASON = "scratchpad.refusal.reason"

#: The library's tracer, bound once (a proxy until the application sets a provider), or
#: ``None`` without ``opentelemetry-api``: the hot path tests it and does nothing more.
TRACER: Tracer | None = None if _trace is None else _trace.get_tracer("noetic_scratchpad")


def _no_provider() -> object:  # pragma: no cover - only without opentelemetry
    return None


#: OpenTelemetry's own ``get_tracer_provider``, and the class of what it returns while the
#: application has set no provider: the write path asks them (no call into the package)
#: and then opens no span at all, for a fraction of what a no-op span costs.
global_provider = _no_provider if _trace is None else _trace.get_tracer_provider
UNSET: type = type(None) if _trace is None else _trace.ProxyTracerProvider

# While no provider is set, ``get_tracer_provider`` asks ``os.environ`` whether one is to
# be loaded (``OTEL_PYTHON_TRACER_PROVIDER``): a KeyError raised and caught in three Python
# frames, on every write and read (7% of a write on memory storage). :func:`untraced`
# reads the same two facts directly: the provider OpenTelemetry holds, and the
# environment's own mapping (``os.environ._data``, its encoded keys). Where either is not
# where this version of Python or OpenTelemetry keeps it, it asks OpenTelemetry.
#: The environment's own mapping, the key ``OTEL_PYTHON_TRACER_PROVIDER`` has in it, and
#: OpenTelemetry's module holding the provider set (``HOLDER``: ``None`` where either is not
#: where this version of Python or OpenTelemetry keeps it). The write path reads them too.
ENVIRON: Any = getattr(os.environ, "_data", None)
PROVIDER_KEY: Any = None
HOLDER: Any = None
if _trace is not None and isinstance(ENVIRON, dict) and hasattr(_trace, "_TRACER_PROVIDER"):
    try:
        PROVIDER_KEY = os.environ.encodekey(_trace.OTEL_PYTHON_TRACER_PROVIDER)  # type: ignore[attr-defined]
        HOLDER = _trace
    except Exception:  # pragma: no cover - another layout: ask OpenTelemetry
        HOLDER = None


def untraced() -> bool:
    """Whether a write or a read opens no span: no tracer provider set, which is what
    ``isinstance(global_provider(), UNSET)`` answers. (``ScratchpadHandle.apply`` makes
    the same test inline: a call into this module on every write would be a hop more.)"""
    holder = HOLDER
    if (
        holder is not None
        and holder._TRACER_PROVIDER is None  # noqa: SLF001 - what get_tracer_provider reads
        and PROVIDER_KEY not in ENVIRON
    ):
        return True
    return isinstance(global_provider(), UNSET)


_settings = {"capture_content": False}


def configure(*, capture_content: bool) -> None:
    """Whether spans carry the scratchpad's contents (``gen_ai.memory.records``: the
    state written or read) and the messages of errors. Off by default: they may hold
    personal data. Applies to every span that ends after the call."""
    _settings["capture_content"] = bool(capture_content)


def capturing_content() -> bool:
    """Whether :func:`configure` opted in to contents."""
    return _settings["capture_content"]


def start(
    span: Span,
    operation: str,
    *,
    layer_id: str,
    scope_key: str,
    scope: str | None,
    source: str | None = None,
) -> None:
    """Set what a recording ``span`` of ``operation`` knows from its start."""
    span.set_attribute(OPERATION_NAME, OPERATIONS[operation])
    span.set_attribute(OPERATION, operation)
    span.set_attribute(STORE_ID, layer_id)
    span.set_attribute(RECORD_ID, scope_key)
    if scope is not None:
        span.set_attribute(SCOPE, scope)
    if source is not None:
        span.set_attribute(SOURCE, source)


def written(span: Span, *, revision: int, wrote: bool, state: Any, scope_key: str) -> None:
    """Record a write's outcome on a recording ``span``."""
    span.set_attribute(REVISION, revision)
    span.set_attribute(WROTE, wrote)
    span.set_attribute(RECORD_COUNT, 1 if wrote else 0)
    records(span, scope_key, state)


def read(span: Span, *, revision: int | None, state: Any, scope_key: str) -> None:
    """Record a read's outcome on a recording ``span``."""
    if revision is not None:
        span.set_attribute(REVISION, revision)
    span.set_attribute(RECORD_COUNT, 1 if state else 0)
    if state:
        records(span, scope_key, state)


def records(span: Span, scope_key: str, state: Any) -> None:
    """``gen_ai.memory.records``, as the conventions' JSON (a list of records, each with
    its ``id`` and ``content``), when the application opted in to contents."""
    if not _settings["capture_content"]:
        return
    try:
        text = _json.dumps([{"id": scope_key, "content": state}]).decode()
    except ValueError:  # not JSON: the record is left out rather than guessed
        return
    span.set_attribute(RECORDS, text)


def failed(span: Span, exc: BaseException) -> None:
    """Mark a recording ``span`` failed by ``exc``: error status, ``error.type`` (the
    exception's class), a refusal's reason; the message only with contents opted in."""
    reason = getattr(exc, "reason", None)
    kind = type(exc).__qualname__
    span.set_attribute(ERROR_TYPE, kind)
    if isinstance(reason, str):
        span.set_attribute(REFUSAL_REASON, reason)
    if _settings["capture_content"]:
        span.record_exception(exc)
        span.set_status(StatusCode.ERROR, str(exc))
    else:
        span.set_status(StatusCode.ERROR, reason if isinstance(reason, str) else kind)


@contextmanager
def memory_span(
    operation: str, *, layer_id: str, scope_key: str, scope: str | None
) -> Iterator[Span | None]:
    """A span of ``operation`` around the block, a child of the current span; ``None``
    without ``opentelemetry-api``, while no provider is set, or when it records nothing
    (sampled out). An exception marks it failed (:func:`failed`) and
    propagates. For paths where a call more does not matter (a read, a reset); the write
    path uses :data:`TRACER` itself."""
    tracer = TRACER
    if tracer is None or isinstance(global_provider(), UNSET):
        yield None
        return
    with tracer.start_as_current_span(
        OPERATIONS[operation],
        kind=SpanKind.INTERNAL,
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        recording = span.is_recording()
        if recording:
            start(span, operation, layer_id=layer_id, scope_key=scope_key, scope=scope)
        try:
            yield span if recording else None
        except Exception as exc:
            if recording:
                failed(span, exc)
            raise
