"""The scratchpad as an MCP server, on the official ``mcp`` SDK (the ``[mcp]`` extra).

Two tools, ``scratchpad_read`` and ``scratchpad_update``, and the state as a resource,
``scratchpad://thread/{thread}``. The server serves one thread (``default_id``; or, for a
resource-scoped layer, one resource): the model cannot name another unless
``allow_scope_argument=True``, when each tool takes an optional ``thread`` (``resource``)::

    server = create_server(scratchpad(schema=TaskNotes), storage)  # an mcp.server.Server
    await serve_stdio("sqlite:///scratchpad.db", layer=scratchpad(schema=TaskNotes))

The command ``noetic-scratchpad mcp --storage URL`` runs ``serve_stdio``. Every update is
a read-modify-write of the latest stored state (``ScratchpadHandle.call``), so clients of
one server, or servers sharing one SQLite file, never lose each other's writes.

Modules: ``server`` (the tools, the resources, the low-level server), ``stdio``, and what
it reads stdin with: ``lines`` (linear, size-limited) and ``oversize`` (refusing a message
over the limit).
"""

from __future__ import annotations

from ..._extras import needs_extra

with needs_extra("noetic_scratchpad.integrations.mcp", "mcp", "the MCP SDK", ("mcp",)):
    from .lines import DEFAULT_MAX_MESSAGE_BYTES
    from .server import EDIT_TOOL, READ_TOOL, UPDATE_TOOL, ScratchpadMCP, create_server
    from .stdio import serve_stdio

__all__ = (
    "DEFAULT_MAX_MESSAGE_BYTES",
    "EDIT_TOOL",
    "READ_TOOL",
    "UPDATE_TOOL",
    "ScratchpadMCP",
    "create_server",
    "serve_stdio",
)
