"""The OpenTelemetry SDK's in-memory exporter on the global tracer provider, for the
tests of the ``[otel]`` spans (a global provider can be set once per process)."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import Decision, ParentBased, Sampler, SamplingResult

from noetic_scratchpad import tracing

EXPORTER = InMemorySpanExporter()
_on = [False]


class _WhileRecording(Sampler):
    """Samples only inside :func:`recording`: the other tests of the session, which run
    with this provider set, get spans that record nothing."""

    def should_sample(
        self, parent_context: Context | None, *args: Any, **kwargs: Any
    ) -> SamplingResult:
        return SamplingResult(Decision.RECORD_AND_SAMPLE if _on[0] else Decision.DROP)

    def get_description(self) -> str:
        return "while recording"


class _Exporting(SimpleSpanProcessor):
    def on_end(self, span: ReadableSpan) -> None:
        if _on[0]:
            super().on_end(span)


@functools.cache
def install() -> TracerProvider:
    """The global SDK provider, exporting to :data:`EXPORTER` (set up once)."""
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider(sampler=ParentBased(_WhileRecording()))
        trace.set_tracer_provider(provider)
    provider.add_span_processor(_Exporting(EXPORTER))
    return provider


def recording() -> Iterator[InMemorySpanExporter]:
    """A fixture's body: spans exported from a clean slate, contents off again after."""
    install()
    EXPORTER.clear()
    _on[0] = True
    try:
        yield EXPORTER
    finally:
        _on[0] = False
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
