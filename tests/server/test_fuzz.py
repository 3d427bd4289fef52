"""Schemathesis against the served OpenAPI document: generated requests, valid and not,
never get a 500, and every response conforms to the document (status, content type,
headers, body schema). The app runs under uvicorn on a loopback port, with a token, a
schema-checked thread layer and a plain resource layer."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
import uvicorn
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode
from schemathesis.config import SchemathesisConfig

from noetic_scratchpad import scratchpad
from noetic_scratchpad.server import create_app

from .helpers import AUTH, TOKEN, TaskNotes, free_socket

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def api_url() -> Iterator[str]:
    pad = create_app(
        "memory://",
        layers=[scratchpad(schema=TaskNotes), scratchpad(scope="resource")],
        token=TOKEN,
    )
    sock = free_socket()
    config = uvicorn.Config(pad, log_config=None, lifespan="on", ws="none", access_log=False)
    server = uvicorn.Server(config)
    # A thread of its own: schemathesis calls the API synchronously.
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


# 412 is a refusal like any other 4xx here. Valid requests may get it: an If-Match the
# fuzzer makes up names a state that is not the stored one. Invalid ones may too: RFC 9110
# (13.2.2) evaluates preconditions before the content is processed. Every other status
# schemathesis expects is kept.
CONFIG = SchemathesisConfig.from_dict(
    {
        "checks": {
            "positive_data_acceptance": {
                "expected-statuses": ["2xx", "3xx", "401", "403", "404", "409", "412", "429", "5xx"]
            },
            "negative_data_rejection": {
                "expected-statuses": [
                    *("400", "401", "403", "404", "405", "406", "409", "412"),
                    *("415", "422", "428", "429", "5xx"),
                ]
            },
        }
    }
)


@pytest.fixture(scope="module")
def api_schema(api_url: str) -> Any:
    return schemathesis.openapi.from_url(f"{api_url}/openapi.json", config=CONFIG, headers=AUTH)


# Every operation but the event streams, which never end by themselves (test_events.py
# covers them). Listed here, and checked against the document below, because
# schemathesis's lazy pytest loader does not run on this pytest.
OPERATIONS = [
    ("GET", "/api/scopes"),
    ("GET", "/api/session"),
    ("POST", "/api/session"),
    ("DELETE", "/api/session"),
    ("POST", "/api/scopes"),
    *(
        (method, f"/api/scopes/{kind}/{{scope_id}}{action}")
        for kind in ("thread", "resource")
        for method, action in (
            ("GET", ""),
            ("PATCH", ""),
            ("DELETE", ""),
            ("GET", "/view"),
            ("GET", "/history"),
            ("POST", "/revert"),
            ("GET", "/export"),
            ("DELETE", "/erase"),
        )
    ),
]


def test_the_list_of_fuzzed_operations_is_the_documents(api_schema: Any) -> None:
    documented = {
        (operation.method.upper(), operation.path)
        for result in api_schema.get_all_operations()
        for operation in [result.ok()]
        if not operation.path.endswith("/events")
    }
    assert documented == set(OPERATIONS)


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
@pytest.mark.parametrize(("method", "path"), OPERATIONS)
def test_the_api_never_fails_and_conforms_to_its_document(
    api_schema: Any, method: str, path: str, mode: GenerationMode
) -> None:
    operation = api_schema[path][method]

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(
        max_examples=40,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )
    def check(case: schemathesis.Case) -> None:
        case.call_and_validate(headers=AUTH)

    check()
