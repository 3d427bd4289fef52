"""The example backend of docs/storage.md ("A complete backend"), taken from the page as it
is, so that the contract suite runs the very code a reader copies."""

from __future__ import annotations

import re
import types
from functools import cache
from pathlib import Path

from noetic_scratchpad.storage import StorageBackend

DOC = Path(__file__).resolve().parents[2] / "docs" / "storage.md"


def example_source() -> str:
    """The page's Python block that defines ``DictStorage``."""
    blocks = re.findall(r"```python[^\n]*\n(.*?)```", DOC.read_text(encoding="utf-8"), re.DOTALL)
    (source,) = [block for block in blocks if "class DictStorage(StorageBackend)" in block]
    return source


@cache
def example_backend() -> type[StorageBackend]:
    """``DictStorage``, defined by running the page's block in a module of its own."""
    module = types.ModuleType("storage_doc_example")
    exec(compile(example_source(), str(DOC), "exec"), module.__dict__)
    backend: type[StorageBackend] = module.DictStorage
    return backend
