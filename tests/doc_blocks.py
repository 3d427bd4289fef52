"""The Python blocks of README.md and docs/: how they are found, chained and run.

A block's info string says how it runs (GitHub shows every one of them as Python):

- ```` ```python ````: a complete program, run alone (``python block.py``).
- ```` ```python continues ````: runs after the blocks before it on the page, back to the
  last one that does not continue, in one interpreter and one namespace.
- ```` ```python await ````: uses ``await`` (and ``async with``/``async for``) at top level,
  as in ``python -m asyncio`` or a notebook; combines with ``continues``.
- ```` ```python skip: REASON ````: shown, not run (it needs a service this machine has not,
  named in REASON); the reason is required.

A block followed by a line ``prints:`` and a ```` ```text ```` block promises that output:
the chain it ends must print exactly that.

Run as a script (``python tests/doc_blocks.py CHAIN.json``), it runs one chain: the blocks
in order, sharing one namespace and one event loop, with the network's models replaced by
scripted ones (pydantic-ai's model names, the Agents SDK's default model) and fake API keys,
so no block reaches a network.
"""

from __future__ import annotations

import ast
import asyncio
import json
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
FENCE = re.compile(r"^```python([^\n]*)\n(.*?)^```\n", re.DOTALL | re.MULTILINE)
PRINTS = re.compile(r"\s*prints:\s*\n```text\n(.*?)^```", re.DOTALL | re.MULTILINE)
WORDS = {"continues", "await"}


@dataclass(frozen=True)
class Block:
    page: str  # relative to the repository
    line: int  # of the opening fence
    code: str
    continues: bool
    awaits: bool
    skip: str | None  # the reason, for a block not run
    prints: str | None = None  # the output the page shows after it

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def parse_info(info: str, where: str) -> tuple[bool, bool, str | None]:
    """``(continues, awaits, skip reason)`` of a fence's info string after ``python``."""
    info = info.strip()
    if info.startswith("skip"):
        reason = info.removeprefix("skip").lstrip(":").strip()
        if not reason:
            raise ValueError(f"{where}: a skipped block must say why (```python skip: REASON)")
        return False, False, reason
    words = info.split()
    unknown = set(words) - WORDS
    if unknown:
        raise ValueError(f"{where}: unknown words {sorted(unknown)} after ```python")
    return "continues" in words, "await" in words, None


def blocks(page: Path) -> list[Block]:
    text = page.read_text(encoding="utf-8")
    found = []
    for match in FENCE.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        name = page.relative_to(ROOT).as_posix()
        continues, awaits, skip = parse_info(match.group(1), f"{name}:{line}")
        shown = PRINTS.match(text, match.end())
        prints = shown.group(1) if shown else None
        found.append(Block(name, line, match.group(2), continues, awaits, skip, prints))
    return found


def chains(page: Path) -> list[list[Block]]:
    """The page's blocks grouped into chains: a block and the ``continues`` blocks after it.
    A skipped block is a chain of its own."""
    grouped: list[list[Block]] = []
    for block in blocks(page):
        if block.continues:
            if not grouped or grouped[-1][0].skip is not None:
                raise ValueError(f"{block.where}: continues no block that runs")
            grouped[-1].append(block)
        else:
            grouped.append([block])
    return grouped


# -- the runner (in the subprocess) ---------------------------------------------------------


def _install_fakes(code: str) -> None:
    """Models that answer without a network: a pydantic-ai model name becomes ``TestModel``
    (it calls each tool once with arguments from its schema, then answers), and the Agents
    SDK's default model the scripted model of ``agents_sdk_fakes``, which updates the
    scratchpad once and then answers."""
    os.environ.setdefault("OPENAI_API_KEY", "sk-docs-test-no-network")
    os.environ["OPENAI_AGENTS_DISABLE_TRACING"] = "1"  # no trace export: nothing leaves
    os.environ.setdefault("ANTHROPIC_API_KEY", "sk-ant-docs-test-no-network")
    if "pydantic_ai" not in code and "from agents" not in code:
        return  # importing either framework takes seconds: only for the blocks that use one
    try:
        from pydantic_ai import models
        from pydantic_ai.models.test import TestModel
    except ImportError:
        pass
    else:
        real_infer = models.infer_model

        def infer_model(model: Any, *args: Any, **kwargs: Any) -> Any:
            return TestModel() if isinstance(model, str) else real_infer(model, *args, **kwargs)

        models.infer_model = infer_model  # type: ignore[assignment]
    try:
        from agents.models.multi_provider import MultiProvider
    except ImportError:
        return
    sys.path.insert(0, str(ROOT))
    from tests.integrations.agents_sdk_fakes import ScriptedAgentsModel, reply, tool_call

    class DocsModel(ScriptedAgentsModel):
        """Updates the scratchpad on a run's first call, answers once the tool has."""

        def _next(self, system_instructions: Any, input: Any, tools: Any, **kw: Any) -> Any:
            self.turns = [[tool_call("docs-1", currentGoal="Fix the login page")]]
            answered = isinstance(input, list) and any(
                isinstance(item, dict) and item.get("type") == "function_call_output"
                for item in input
            )
            if answered or not any(tool.name == "scratchpad_update" for tool in tools):
                self.turns = [[reply("Noted.")]]
            return super()._next(system_instructions, input, tools, **kw)

    def get_model(self: Any, model_name: str | None) -> Any:
        return DocsModel([])

    MultiProvider.get_model = get_model  # type: ignore[method-assign]


def run_chain(chain: list[dict[str, Any]]) -> None:
    _install_fakes("\n".join(block["code"] for block in chain))
    namespace: dict[str, Any] = {"__name__": "__main__", "__builtins__": __builtins__}
    loop = asyncio.new_event_loop()
    try:
        for block in chain:
            flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT if block["awaits"] else 0
            code = compile(block["code"], block["where"], "exec", flags=flags)
            result = eval(code, namespace)  # the docs' own code, run as a test
            if asyncio.iscoroutine(result):
                loop.run_until_complete(result)
    finally:
        # As asyncio.run ends a program: the tasks a page leaves running (a core it never
        # closes, and that core's watch) are cancelled and awaited first, so that each
        # page's code runs as it would in the reader's program.
        pending = asyncio.all_tasks(loop)
        for task in pending:
            task.cancel()
        if pending:
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()


if __name__ == "__main__":
    run_chain(json.loads(Path(sys.argv[1]).read_text(encoding="utf-8")))
