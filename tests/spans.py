"""The OpenTelemetry SDK's in-memory exporter on the global tracer provider, for the
tests of the ``[otel]`` spans (a global provider can be set once per process)."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from noetic_scratchpad import tracing

EXPORTER = InMemorySpanExporter()
MEMORY_OPERATIONS = {"upsert_memory", "update_memory", "search_memory", "delete_memory"}


@functools.cache
def install() -> TracerProvider:
    """The global SDK provider, exporting to :data:`EXPORTER` (set up once)."""
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    provider.add_span_processor(SimpleSpanProcessor(EXPORTER))
    return provider


def recording() -> Iterator[InMemorySpanExporter]:
    """A fixture's body: spans exported from a clean slate, contents off again after."""
    install()
    EXPORTER.clear()
    try:
        yield EXPORTER
    finally:
        tracing.configure(capture_content=False)
        EXPORTER.clear()


def memory_spans(exporter: InMemorySpanExporter) -> list[ReadableSpan]:
    """The scratchpad's spans, in the order they ended."""
    return [
        span
        for span in exporter.get_finished_spans()
        if span.instrumentation_scope is not None
        and span.instrumentation_scope.name == "noetic_scratchpad"
    ]


def attributes(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def ancestors(span: ReadableSpan, exporter: InMemorySpanExporter) -> list[ReadableSpan]:
    """The finished spans above ``span``, nearest first."""
    by_id = {s.context.span_id: s for s in exporter.get_finished_spans() if s.context}
    chain: list[ReadableSpan] = []
    parent = span.parent
    while parent is not None and parent.span_id in by_id:
        above = by_id[parent.span_id]
        chain.append(above)
        parent = above.parent
    return chain
