"""The scratchpad's MCP server, driven the way a desktop assistant drives it, offline.

    pip install "noetic-scratchpad[mcp]"
    python examples/mcp_client.py

This starts ``noetic-scratchpad mcp`` as a subprocess on stdio (as an MCP client config
does), lists its tools, writes notes, sends an update the schema refuses (the error text
is what the model reads), reads the notes back as a tool and as a resource, and checks that
a call naming another thread is refused: the server keeps the one thread it was started
for (``--thread``, else ``default``). No model and no network: the calls a model would
make are written out below.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from mcp import Client, StdioServerParameters
from mcp.types import CallToolResult, TextContent, TextResourceContents
from pydantic import BaseModel, ConfigDict

HERE = Path(__file__).resolve().parent
# The server imports this model by name, from this file.
SCHEMA = ["--schema", "mcp_client:TaskNotes"]


class TaskNotes(BaseModel):
    model_config = ConfigDict(extra="forbid")

    currentGoal: str
    completedSteps: list[str] = []
    blockers: list[str] = []


def show(label: str, result: CallToolResult) -> None:
    text = "\n".join(c.text for c in result.content if isinstance(c, TextContent))
    status = "tool error" if result.is_error else "ok"
    print(f"{label} -> {status}:\n  " + text.replace("\n", "\n  "))


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "scratchpad.db"
        # What a client config says, as {"command": ..., "args": [...]}; `python -m` here so
        # the example also runs from a checkout. The client passes on only a few variables.
        server = StdioServerParameters(
            command=sys.executable,
            args=["-m", "noetic_scratchpad", "mcp", "--storage", f"sqlite:///{db}", *SCHEMA],
            cwd=HERE,  # where the schema's module is
            env={k: v for k, v in os.environ.items() if k == "PYTHONPATH"},
        )
        async with Client(server) as client:
            tools = (await client.list_tools()).tools
            print("tools:", ", ".join(tool.name for tool in tools))

            calls: list[tuple[str, dict[str, Any]]] = [
                ("scratchpad_read", {}),
                (
                    "scratchpad_update",
                    {"update": {"currentGoal": "Fix the login bug", "completedSteps": ["repro"]}},
                ),
                ("scratchpad_update", {"update": {"blockers": "no staging logs"}}),  # not a list
                ("scratchpad_update", {"update": {"blockers": ["no staging logs"]}}),
                ("scratchpad_read", {}),
                # Refused: the thread is the server's to choose, not the model's.
                ("scratchpad_update", {"update": {"currentGoal": "Other task"}, "thread": "t2"}),
            ]
            results = []
            for name, arguments in calls:
                results.append(result := await client.call_tool(name, arguments))
                show(f"{name} {json.dumps(arguments)}", result)
            assert results[-1].is_error, "a pinned server refuses another thread"

            resource = await client.read_resource("scratchpad://thread/default")
            content = resource.contents[0]
            assert isinstance(content, TextResourceContents)
            print(f"resource {content.uri} ({content.mime_type}):\n{content.text}")
            state = json.loads(content.text)
            assert state["blockers"] == ["no staging logs"], state
            assert state["currentGoal"] == "Fix the login bug", state


if __name__ == "__main__":
    asyncio.run(main())
