"""The ``[otel]`` spans: one per update, edit, revert, read and reset, with the GenAI
memory conventions' attributes, nested under the current span, a refusal's reason and
error status, and a note's contents only when the application opts in."""

from __future__ import annotations

import json
import os
import textwrap
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest
from opentelemetry import trace
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from pydantic import BaseModel

from noetic_scratchpad import ScratchpadValidationError, StorageError, scratchpad, tracing
from noetic_scratchpad.core import ScratchpadCore
from noetic_scratchpad.server import create_app
from noetic_scratchpad.storage import MemoryStorage
from noetic_scratchpad.testing import FaultyStorage
from tests.conftest import run_python
from tests.server.helpers import api_client
from tests.spans import attributes, memory_spans, recording

ROOT = Path(__file__).resolve().parent.parent


class Task(BaseModel):
    goal: str = ""
    steps: list[str] = []


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    yield from recording()


@pytest.mark.asyncio
async def test_an_update_is_one_upsert_memory_span_with_the_conventions_attributes(
    spans: InMemorySpanExporter,
) -> None:
    """An update from code: one span named by its operation, the layer as the store, the
    scope as the record, the new revision; no contents by default."""
    async with ScratchpadCore(scratchpad(schema=Task)) as core:
        handle = await core.handle("t1", read=False)
        spans.clear()
        await handle.update({"goal": "ship"})
    [span] = memory_spans(spans)
    assert span.name == "upsert_memory"
    assert span.kind == SpanKind.INTERNAL
    assert span.status.status_code == StatusCode.UNSET
    assert attributes(span) == {
        "gen_ai.operation.name": "upsert_memory",
        "gen_ai.memory.store.id": "scratchpad",
        "gen_ai.memory.record.id": "t1",
        "gen_ai.memory.record.count": 1,
        "scratchpad.operation": "update",
        "scratchpad.scope": "thread",
        "scratchpad.source": "api",
        "scratchpad.revision": 1,
        "scratchpad.wrote": True,
    }


@pytest.mark.asyncio
async def test_edit_and_revert_are_spans_of_their_own_operation(
    spans: InMemorySpanExporter,
) -> None:
    async with ScratchpadCore(scratchpad(schema=Task, edit_tool=True)) as core:
        handle = await core.handle(("t1", "alice"), read=False)
        await handle.update({"goal": "a", "steps": ["x"]})
        await handle.edit([{"op": "set", "path": ["goal"], "value": "b"}])
        await handle.revert(1)
    update, edit, revert = memory_spans(spans)
    assert [update.name, edit.name, revert.name] == [
        "upsert_memory",
        "upsert_memory",
        "update_memory",
    ]
    assert attributes(edit)["scratchpad.operation"] == "edit"
    assert attributes(edit)["scratchpad.revision"] == 2
    assert attributes(revert)["scratchpad.operation"] == "revert"
    assert attributes(revert)["scratchpad.source"] == "revert"
    assert attributes(revert)["scratchpad.revision"] == 3
    assert attributes(revert)["gen_ai.operation.name"] == "update_memory"


@pytest.mark.asyncio
async def test_a_retried_call_is_a_span_that_wrote_no_record(spans: InMemorySpanExporter) -> None:
    """The same call id and arguments again: applied before, so nothing is written."""
    async with ScratchpadCore() as core:
        handle = await core.handle("t1", read=False)
        for _ in range(2):
            await handle.call("update", {"goal": "ship"}, call_id="c1")
    first, retry = memory_spans(spans)
    assert attributes(first)["scratchpad.wrote"] is True
    assert attributes(retry)["scratchpad.wrote"] is False
    assert attributes(retry)["gen_ai.memory.record.count"] == 0
    assert attributes(retry)["scratchpad.revision"] == 1
    assert retry.status.status_code == StatusCode.UNSET


@pytest.mark.asyncio
async def test_a_span_is_a_child_of_the_current_span(spans: InMemorySpanExporter) -> None:
    tracer = trace.get_tracer("the-application")
    async with ScratchpadCore() as core:
        handle = await core.handle("t1", read=False)
        with tracer.start_as_current_span("tool call") as parent:
            await handle.update({"goal": "ship"})
    [span] = memory_spans(spans)
    assert span.parent is not None
    assert span.parent.span_id == parent.get_span_context().span_id
    assert span.context is not None
    assert span.context.trace_id == parent.get_span_context().trace_id


@pytest.mark.asyncio
async def test_a_refusal_sets_error_status_and_its_reason_but_no_message_by_default(
    spans: InMemorySpanExporter,
) -> None:
    """The model's refused values may be quoted in the error's message: without the opt-in
    the span says why (the reason), not what."""
    async with ScratchpadCore(scratchpad(schema=Task)) as core:
        result = await core.call("t1", "update", {"goal": "secret-value", "steps": "no"}, tool="u")
    assert isinstance(result.error, ScratchpadValidationError)
    [span] = memory_spans(spans)
    assert span.status.status_code == StatusCode.ERROR
    assert span.status.description == "schema"
    assert attributes(span)["scratchpad.refusal.reason"] == "schema"
    assert attributes(span)["error.type"] == "ScratchpadValidationError"
    assert attributes(span)["scratchpad.source"] == "tool"
    assert "scratchpad.revision" not in attributes(span)
    assert span.events == ()  # no exception event: it would carry the message
    assert "secret-value" not in repr(span.to_json())


@pytest.mark.asyncio
async def test_contents_are_recorded_only_when_the_application_opts_in(
    spans: InMemorySpanExporter,
) -> None:
    async with ScratchpadCore(scratchpad(schema=Task)) as core:
        handle = await core.handle("t1", read=False)
        await handle.update({"goal": "private"})
        [quiet] = memory_spans(spans)
        assert "gen_ai.memory.records" not in attributes(quiet)
        assert "private" not in quiet.to_json()

        spans.clear()
        tracing.configure(capture_content=True)
        assert tracing.capturing_content()
        await handle.update({"steps": ["a"]})
        with pytest.raises(ScratchpadValidationError):
            await handle.update({"steps": "not a list"})
    written, refused = memory_spans(spans)
    records = json.loads(str(attributes(written)["gen_ai.memory.records"]))
    assert records == [{"id": "t1", "content": {"goal": "private", "steps": ["a"]}}]
    assert refused.status.description is not None
    assert "steps" in refused.status.description  # the message, opted in
    assert [event.name for event in refused.events] == ["exception"]


@pytest.mark.asyncio
async def test_a_read_tool_call_and_a_refresh_are_search_memory_spans(
    spans: InMemorySpanExporter,
) -> None:
    async with ScratchpadCore(scratchpad(scope="resource")) as core:
        await (await core.handle(("t1", "alice"), read=False)).update({"goal": "ship"})
        handle = await core.handle(("t2", "alice"), read=False)
        spans.clear()
        tracing.configure(capture_content=True)
        read = await core.read(("t1", "alice"), tool="notes_read", update_tool="notes_update")
        assert "ship" in read.text
        await handle.refresh()
    tool, refresh = memory_spans(spans)
    for span in (tool, refresh):
        assert span.name == "search_memory"
        assert attributes(span)["gen_ai.operation.name"] == "search_memory"
        assert attributes(span)["gen_ai.memory.store.id"] == "scratchpad"
        assert attributes(span)["gen_ai.memory.record.id"] == "alice"
        assert attributes(span)["scratchpad.scope"] == "resource"
        assert attributes(span)["gen_ai.memory.record.count"] == 1
        assert attributes(span)["scratchpad.revision"] == 1
        records = json.loads(str(attributes(span)["gen_ai.memory.records"]))
        assert records == [{"id": "alice", "content": {"goal": "ship"}}]


@pytest.mark.asyncio
async def test_an_empty_read_counts_no_record(spans: InMemorySpanExporter) -> None:
    async with ScratchpadCore() as core:
        await core.read("t9", tool="notes_read", update_tool="notes_update")
    [span] = memory_spans(spans)
    assert attributes(span)["gen_ai.memory.record.count"] == 0
    assert "gen_ai.memory.records" not in attributes(span)


@pytest.mark.asyncio
async def test_a_storage_failure_is_an_error_span_without_the_drivers_words(
    spans: InMemorySpanExporter,
) -> None:
    error = StorageError("disk I/O error at /srv/notes.db")
    faulty = FaultyStorage(MemoryStorage(), fail_on={"commit", "get_revision", "get"}, error=error)
    async with ScratchpadCore(storage=faulty) as core:
        failed = await core.call("t1", "update", {"goal": "x"}, tool="notes_update")
        unread = await core.read("t1", tool="notes_read", update_tool="notes_update")
    assert not failed.ok
    assert not unread.ok
    write, read = memory_spans(spans)
    for span in (write, read):
        assert span.status.status_code == StatusCode.ERROR
        assert attributes(span)["error.type"] == "StorageError"
        assert "/srv/notes.db" not in span.to_json()
    assert write.name == "upsert_memory"
    assert read.name == "search_memory"


@pytest.mark.asyncio
async def test_the_http_apps_read_and_reset_are_search_and_delete_memory_spans(
    spans: InMemorySpanExporter,
) -> None:
    pad = create_app("memory://", layers=[scratchpad()])
    async with api_client(pad) as client:
        assert (await client.patch("/api/scopes/thread/t1", json={"goal": "a"})).status_code == 200
        spans.clear()
        assert (await client.get("/api/scopes/thread/t1")).status_code == 200
        [read] = memory_spans(spans)
        assert read.name == "search_memory"
        assert attributes(read)["gen_ai.memory.record.id"] == "t1"
        assert attributes(read)["gen_ai.memory.record.count"] == 1
        assert attributes(read)["scratchpad.revision"] == 1
        spans.clear()
        assert (await client.delete("/api/scopes/thread/t1")).status_code == 204
        assert (await client.delete("/api/scopes/thread/t1")).status_code == 404
    deleted, nothing = memory_spans(spans)
    for span in (deleted, nothing):
        assert span.name == "delete_memory"
        assert attributes(span)["gen_ai.memory.store.id"] == "scratchpad"
        assert attributes(span)["gen_ai.memory.record.id"] == "t1"
        assert attributes(span)["scratchpad.scope"] == "thread"
        assert span.status.status_code == StatusCode.UNSET
    assert attributes(deleted)["gen_ai.memory.record.count"] == 1
    assert attributes(nothing)["gen_ai.memory.record.count"] == 0


@pytest.mark.asyncio
async def test_a_write_under_a_sampled_out_parent_exports_no_span(
    spans: InMemorySpanExporter,
) -> None:
    """Sampled out (a non-recording parent): the write runs, no span is exported."""
    from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

    unsampled = NonRecordingSpan(
        SpanContext(trace_id=1, span_id=2, is_remote=False, trace_flags=TraceFlags(0))
    )
    async with ScratchpadCore() as core:
        handle = await core.handle("t1", read=False)
        with trace.use_span(unsampled):
            await handle.update({"goal": "x"})
        assert handle.revision == 1
    assert memory_spans(spans) == []


def test_the_library_works_unchanged_without_opentelemetry() -> None:
    """Importing the package, writing and reading need no ``opentelemetry``: a process
    where it cannot be imported runs an update and a read, and ``TRACER`` is ``None``."""
    script = """
import asyncio, sys

class NoOpenTelemetry:
    def find_spec(self, name, path=None, target=None):
        if name == "opentelemetry" or name.startswith("opentelemetry."):
            raise ImportError(f"no module named {name!r}")
        return None

sys.meta_path.insert(0, NoOpenTelemetry())
from noetic_scratchpad import tracing
from noetic_scratchpad.core import ScratchpadCore

async def main():
    async with ScratchpadCore() as core:
        handle = await core.handle("t1", read=False)
        await handle.update({"goal": "ship"})
        read = await core.read("t1", tool="r", update_tool="u")
        await handle.refresh()
        print(tracing.TRACER, handle.revision, "ship" in read.text)

asyncio.run(main())
assert not any(name.startswith("opentelemetry") for name in sys.modules)
"""
    done = run_python("-c", script, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["None", "1", "True"]


_PROVIDER_SCRIPT = textwrap.dedent(
    """
    import asyncio, os
    from opentelemetry import trace
    from noetic_scratchpad import scratchpad, tracing
    from noetic_scratchpad.storage import MemoryStorage

    async def main():
        layer = scratchpad()
        pad = await layer.open(MemoryStorage(), thread_id="t")
        print(tracing.untraced())
        if os.environ.get("SET_LATER"):  # the application names its provider late
            os.environ["OTEL_PYTHON_TRACER_PROVIDER"] = os.environ["SET_LATER"]
        await pad.update({"goal": "ship"})  # the write's own test loads it, or not
        print(type(trace._TRACER_PROVIDER).__name__)

    asyncio.run(main())
    """
)


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, ["True", "NoneType"]),
        ({"OTEL_PYTHON_TRACER_PROVIDER": "sdk_tracer_provider"}, ["False", "TracerProvider"]),
        ({"SET_LATER": "sdk_tracer_provider"}, ["True", "TracerProvider"]),
    ],
)
def test_whether_a_write_is_traced_follows_opentelemetrys_provider_and_environment(
    env: dict[str, str], expected: list[str]
) -> None:
    """The write path asks whether a provider is set without OpenTelemetry's lookup of the
    environment on every call, yet answers as ``get_tracer_provider`` would: no provider,
    no span; ``OTEL_PYTHON_TRACER_PROVIDER`` set before or after the import loads one."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    done = run_python("-c", _PROVIDER_SCRIPT, cwd=ROOT, env={**clean, **env})
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == expected


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    backend: str = request.param
    return backend


@pytest.mark.anyio
async def test_spans_nest_on_asyncio_and_under_trio(spans: InMemorySpanExporter) -> None:
    """The current span travels in a context variable, which both loops carry across the
    write's awaits: the write's span is the child, and the parent is current again after."""
    tracer = trace.get_tracer("the-application")
    async with ScratchpadCore() as core:
        handle = await core.handle("t1", read=False)
        with tracer.start_as_current_span("tool call") as parent:
            await handle.update({"goal": "ship"})
            await handle.refresh()
            assert trace.get_current_span() is parent
    update, read = memory_spans(spans)
    for span in (update, read):
        assert span.parent is not None
        assert span.parent.span_id == parent.get_span_context().span_id


def _docs_block(heading: str) -> str:
    """The first Python block under ``heading`` in docs/operations.md."""
    text = (Path(__file__).parent.parent / "docs" / "operations.md").read_text(encoding="utf-8")
    section = text[text.index(heading) :]
    start = section.index("```python\n") + len("```python\n")
    return section[start : section.index("```\n", start)]


class _Collector(BaseHTTPRequestHandler):
    """An OTLP/HTTP trace receiver: keeps each request's path and body."""

    received: ClassVar[list[tuple[str, bytes]]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.received.append((self.path, body))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass  # the test's output stays clean


def test_the_docs_otlp_setup_sends_the_spans_to_a_collector() -> None:
    """The OTLP block of docs/operations.md, run as it is in a process of its own (the
    global provider is set once per process): an update under the application's span
    reaches an OTLP/HTTP collector as a child of that span, with the service's name."""
    script = _docs_block("### With a plain OTLP exporter") + textwrap.dedent(
        """
        import asyncio

        from noetic_scratchpad.core import ScratchpadCore

        async def main():
            async with ScratchpadCore() as core:
                handle = await core.handle("t1", read=False)
                with trace.get_tracer("app").start_as_current_span("tool call"):
                    await handle.update({"goal": "ship"})

        asyncio.run(main())
        provider.shutdown()  # flushes the batch
        """
    )
    _Collector.received.clear()
    server = HTTPServer(("127.0.0.1", 0), _Collector)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        env = {
            **os.environ,
            "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{server.server_port}",
        }
        done = run_python("-c", script, cwd=ROOT, env=env)
    finally:
        server.shutdown()
        server.server_close()
    assert done.returncode == 0, done.stderr
    assert [path for path, _ in _Collector.received] == ["/v1/traces"]
    request = ExportTraceServiceRequest.FromString(_Collector.received[0][1])
    [resource] = request.resource_spans
    service = {a.key: a.value.string_value for a in resource.resource.attributes}
    assert service["service.name"] == "support-agent"
    by_name = {span.name: span for scope in resource.scope_spans for span in scope.spans}
    assert set(by_name) == {"tool call", "upsert_memory"}
    update = by_name["upsert_memory"]
    assert update.parent_span_id == by_name["tool call"].span_id
    values = {a.key: a.value for a in update.attributes}
    assert values["gen_ai.operation.name"].string_value == "upsert_memory"
    assert values["gen_ai.memory.record.id"].string_value == "t1"
    assert values["scratchpad.revision"].int_value == 1
