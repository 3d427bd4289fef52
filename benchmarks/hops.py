"""``python -m benchmarks.hops [--storage URL] [--verbose]``: how many module-to-module hops
one tool call's update takes, from the provider adapter's parse to its ``UpdateApplied``.

The harness runs an agent over the OpenAI Responses adapter and the real ``openai`` SDK on
a mock transport; the model calls ``scratchpad/update`` once. A profiler (on every thread:
SQLite runs its transactions in a thread of its own) records each first entry into a
function of the package, from the moment ``parse_response`` is entered until the bus is
handed the ``UpdateApplied``. A hop is such an entry whose caller (the nearest frame of the
package up the stack, or for a task or thread just started, the package frame that ran
last) is in another module. Resuming a coroutine is not an entry, so an ``await`` that
suspends is counted once (a frame is entered while it stands at its first ``RESUME``).

This counts what runs, not what the imports say: a module walked twice is counted twice.
"""

from __future__ import annotations

import argparse
import asyncio
import dis
import functools
import json
import sys
import tempfile
import threading
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from types import CodeType, FrameType
from typing import Any

PACKAGE = "noetic_scratchpad"
START = ("noetic_scratchpad.adapters.openai", "parse_response")
STOP = ("noetic_scratchpad.events.bus", "emit")


@dataclass
class Trace:
    """The hops recorded between :data:`START` and :data:`STOP`."""

    on: bool = False
    done: bool = False
    last: str | None = None
    hops: list[tuple[str, str, str]] = field(default_factory=list)  # (from, to, function)

    def profile(self, frame: FrameType, event: str, arg: Any) -> None:
        if event != "call" or self.done:
            return
        module = frame.f_globals.get("__name__", "")
        if not module.startswith(PACKAGE):
            return
        where = (module, frame.f_code.co_name)
        if not self.on:
            if where != START:
                return
            self.on = True
        if frame.f_lasti > _first_resume(frame.f_code):  # a coroutine resumed, not entered
            return
        caller = _package_caller(frame) or self.last
        if caller is not None and caller != module:
            self.hops.append((caller, module, frame.f_code.co_name))
        self.last = module
        if where == STOP:
            self.done = True


@functools.cache
def _first_resume(code: CodeType) -> int:
    """Where a frame of ``code`` stands when it is entered: its first ``RESUME``
    instruction (Python 3.11+); a resumed coroutine stands past it."""
    for instruction in dis.get_instructions(code):
        if instruction.opname == "RESUME":
            return instruction.offset
    return 0


def _package_caller(frame: FrameType) -> str | None:
    back = frame.f_back
    while back is not None:
        module: str = back.f_globals.get("__name__", "")
        if module.startswith(PACKAGE):
            return module
        back = back.f_back
    return None


def _responses(call_id: str, arguments: str) -> list[dict[str, Any]]:
    usage = {
        "input_tokens": 10,
        "output_tokens": 5,
        "total_tokens": 15,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens_details": {"reasoning_tokens": 0},
    }

    def payload(output: dict[str, Any]) -> dict[str, Any]:
        return {
            "id": "resp_1",
            "object": "response",
            "created_at": 0,
            "model": "m",
            "output": [output],
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "status": "completed",
            "usage": usage,
        }

    call = {
        "type": "function_call",
        "id": f"fc_{call_id}",
        "call_id": call_id,
        "name": "scratchpad__update",
        "arguments": arguments,
        "status": "completed",
    }
    done = {
        "type": "message",
        "id": "msg_1",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": "Done.", "annotations": []}],
    }
    return [payload(call), payload(done)]


async def trace_one_call(storage: str) -> Trace:
    """Run one agent turn whose model calls ``scratchpad/update`` once; its trace."""
    import openai

    try:  # the openai SDK's own HTTP client, where it ships one
        import httpx2 as httpx
    except ImportError:  # pragma: no cover - depends on the installed SDK
        import httpx  # type: ignore[no-redef]

    from noetic_scratchpad import Agent, AgentHarness, open_storage, scratchpad
    from noetic_scratchpad.adapters import OpenAIResponsesModel

    answers = _responses("c1", json.dumps({"currentGoal": "Deploy v2"}))
    sent: list[bytes] = []

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(request.content)
        return httpx.Response(200, json=answers[len(sent) - 1])

    client = openai.AsyncOpenAI(
        api_key="test",
        base_url="http://openai.test/v1",
        http_client=httpx.AsyncClient(transport=httpx.MockTransport(answer)),
        max_retries=0,
    )
    trace = Trace()
    # Before storage opens: the SQLite connection's thread inherits the profiler.
    threading.setprofile(trace.profile)
    sys.setprofile(trace.profile)
    try:
        backend = await open_storage(storage)
        # The watch of other processes' writes polls in a task of its own, beside this
        # call, not on its path: left out, so its entries cannot be mistaken for hops.
        backend.announces = False  # type: ignore[attr-defined]
        harness = AgentHarness(
            "hops",
            Agent(model=OpenAIResponsesModel(client, "m")),
            context_layers=[scratchpad()],
            storage=backend,
        )
        # A listener, as an application has: with none, a write builds no event at all.
        harness.events.subscribe(lambda event: None)
        async with backend, harness:
            await harness.run("Plan the deploy.", thread_id="t1")
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
    if not trace.done:
        raise RuntimeError("the trace never reached the UpdateApplied event")
    return trace


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.hops",
        description="Count the module-to-module hops of one tool call's update.",
    )
    parser.add_argument("--storage", help="storage URL (default: SQLite in a temporary file)")
    parser.add_argument("--verbose", action="store_true", help="print every hop")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        storage = args.storage or f"sqlite:///{Path(tmp) / 'hops.db'}"
        trace = asyncio.run(trace_one_call(storage))
    modules = {module for hop in trace.hops for module in hop[:2]}
    if args.verbose:
        for number, (caller, callee, function) in enumerate(trace.hops, 1):
            print(f"{number:3} {caller} -> {callee}.{function}")
    walked = Counter(callee for _, callee, _ in trace.hops)
    print(f"{len(trace.hops)} hops through {len(modules)} modules")
    print("most entered: " + ", ".join(f"{m} ({n})" for m, n in walked.most_common(5)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
