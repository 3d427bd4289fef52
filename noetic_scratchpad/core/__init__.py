"""The scratchpad core: storage, bus and layers owned once, for every host.

:class:`ScratchpadCore` is what the harness, the framework integrations, the MCP server,
the HTTP app and the CLI wrap; :class:`RunScope` is whose scratchpad a call means.
"""

from .core import ScratchpadCore, ToolResult, format_output
from .scope import RunScope, ScopeLike, as_scope

__all__ = ("RunScope", "ScopeLike", "ScratchpadCore", "ToolResult", "as_scope", "format_output")
