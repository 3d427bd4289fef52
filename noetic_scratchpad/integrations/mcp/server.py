"""``ScratchpadMCP``: the scratchpad's MCP tools and resources, and the low-level
``mcp.server.Server`` that answers with them."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote, unquote

from mcp import types
from mcp.server import Server, ServerRequestContext
from mcp.shared.exceptions import MCPError

from ... import __version__
from ..._json import json_kind
from ...core import RunScope, ScratchpadCore
from ...errors import StorageError
from ...events import EventBus
from ...keys import check_scope_id
from ...layer import (
    HostTool,
    ScratchpadHandle,
    ScratchpadLayer,
    scratchpad,
    unreadable_resource_text,
)
from ...render import Tokenizer
from ...storage import StorageBackend

__all__ = (
    "EDIT_TOOL",
    "READ_TOOL",
    "UPDATE_TOOL",
    "ScratchpadMCP",
    "ToolArgumentError",
    "create_server",
)

READ_TOOL = "scratchpad_read"
UPDATE_TOOL = "scratchpad_update"
EDIT_TOOL = "scratchpad_edit"
#: The layer's functions by the names this server gives them.
_NAMES = {"update": UPDATE_TOOL, "edit": EDIT_TOOL}
SERVER_NAME = "noetic-scratchpad"
logger = logging.getLogger("noetic_scratchpad.integrations.mcp")


class ToolArgumentError(ValueError):
    """A tool call's arguments are wrong; the message tells the model what to send."""


class ScratchpadMCP:
    """The scratchpad's MCP tools and resources over one storage backend.

    A thin adapter over a :class:`~noetic_scratchpad.core.ScratchpadCore` on the backend,
    which stays the caller's: the core binds a handle per call (nothing is cached between
    calls, so memory does not grow with the number of threads), applies the calls and
    writes the text the model reads. What is this server's own is the tools' shape (the
    scope argument, the update's fields under ``update``) and the resources.

    ``default_id``: the thread (or, for a resource-scoped layer, the resource) the server
    serves. It is *pinned*: the tools take no ``thread`` (``resource``) argument, a call
    that sends one anyway is refused as a tool error with nothing written, and the only
    resource is that scope's, so a model told by injected text to reach another scope
    cannot. ``allow_scope_argument=True`` lets the model name any scope instead: the tools
    then take ``thread`` (``resource``), ``default_id`` is the scope of a call that names
    none, and every scope is a resource (``scratchpad://thread/{thread}``).
    ``events``: the bus every write reports on (default, the core's own, at ``.events``).
    ``count_tokens``: the model's token counter that sizes ``scratchpad_read``'s block to
    the layer's budget (default, about four characters a token).
    """

    def __init__(
        self,
        layer: ScratchpadLayer,
        storage: StorageBackend,
        *,
        default_id: str = "default",
        allow_scope_argument: bool = False,
        events: EventBus | None = None,
        count_tokens: Tokenizer | None = None,
    ) -> None:
        if not isinstance(layer, ScratchpadLayer):
            raise TypeError(f"{layer!r} is not a scratchpad layer; pass scratchpad(...)")
        self.core = ScratchpadCore(layer, storage=storage, events=events, count_tokens=count_tokens)
        """What applies the calls and owns the bus; the backend stays the caller's."""
        self.layer = layer
        self.kind = layer.scope
        self.default_id = check_scope_id(default_id, self.kind)
        if not isinstance(allow_scope_argument, bool):
            raise TypeError(
                f"allow_scope_argument must be True or False, not {allow_scope_argument!r}"
            )
        self.pinned = not allow_scope_argument
        """Whether every call is on ``default_id`` (the model cannot name another scope)."""
        # The model's tools by name: update, and edit with edit_tool=True; none read-only.
        self._writers: dict[str, HostTool] = {
            tool.name: tool for tool in self.core.tools(_NAMES) if tool.exposed
        }

    @property
    def storage(self) -> StorageBackend:
        """The backend the server was given (the caller's to close)."""
        return self.core.backend

    @property
    def events(self) -> EventBus:
        """The bus every write reports on."""
        return self.core.events

    # -- tools ---------------------------------------------------------------------------

    def tools(self) -> list[types.Tool]:
        """The tools as the client lists them: read, update, and edit with
        ``edit_tool=True``; only read for a read-only layer."""
        kind = self.kind
        scope_param: dict[str, Any] | None = None
        if not self.pinned:
            scope_param = {
                "type": "string",
                "description": f"Which {kind}'s scratchpad (default: {self.default_id!r}).",
            }
        read = types.Tool(
            name=READ_TOOL,
            description="Read your scratchpad: your notes for this task, as last saved.",
            input_schema={
                "type": "object",
                "properties": {} if scope_param is None else {kind: scope_param},
                "additionalProperties": False,
            },
            annotations=types.ToolAnnotations(read_only_hint=True, open_world_hint=False),
        )
        return [read, *(self._writer(tool, scope_param) for tool in self._writers.values())]

    def _writer(self, tool: HostTool, scope_param: dict[str, Any] | None) -> types.Tool:
        """The update tool (the layer's fields under ``update``) or the edit tool (the
        layer's parameters), each with the scope argument beside them unless pinned."""
        if tool.function == "update":
            fields = tool.parameters
            # JSON-schema refs are resolved from the root: the fields' definitions go there.
            defs: dict[str, Any] = {
                k: fields.pop(k) for k in ("$defs", "definitions") if k in fields
            }
            schema: dict[str, Any] = {
                "type": "object",
                "properties": {"update": fields},
                "required": ["update"],
                "additionalProperties": False,
                **defs,
            }
            description = f"{tool.description} Put the fields to change under `update`."
        else:
            schema, description = tool.parameters, tool.description
        if scope_param is not None:
            schema["properties"][self.kind] = scope_param
        return types.Tool(
            name=tool.name,
            description=description,
            input_schema=schema,
            annotations=types.ToolAnnotations(
                read_only_hint=False,
                idempotent_hint=tool.function == "update",  # an append is not
                open_world_hint=False,
            ),
        )

    async def call_tool(
        self, name: str, arguments: Mapping[str, Any] | None
    ) -> types.CallToolResult:
        """Run one tool call. What the model can fix comes back as a tool error (``isError``)
        whose text says what to change, never as a protocol error."""
        args = dict(arguments or {})
        try:
            if name == READ_TOOL:
                scope = self._scope(args, READ_TOOL)
                result = await self.core.read(scope, tool=READ_TOOL, update_tool=UPDATE_TOOL)
            elif name == UPDATE_TOOL and name in self._writers:
                scope, update = self._scope(args, UPDATE_TOOL), self._update_of(args)
                # A read-modify-write of the latest stored state, serialized by the backend.
                result = await self.core.call(scope, "update", update, tool=UPDATE_TOOL)
            elif name == EDIT_TOOL and name in self._writers:
                scope = self._scope(args, EDIT_TOOL)
                result = await self.core.call(scope, "edit", args, tool=EDIT_TOOL)
            else:
                names = ", ".join(tool.name for tool in self.tools())
                raise ToolArgumentError(f"There is no tool {name!r} here; the tools are {names}.")
        except ToolArgumentError as exc:
            logger.debug("%s refused: %s", name, exc)
            return tool_result(str(exc), error=True)
        return tool_result(result.text, error=not result.ok)

    async def read_text(self, scope_id: str) -> str:
        """``scratchpad_read``'s output for ``scope_id``: the ``<scratchpad>`` block the
        layer would show, or the sentence saying it is empty (or could not be read)."""
        scope = self._as_scope(scope_id)
        return (await self.core.read(scope, tool=READ_TOOL, update_tool=UPDATE_TOOL)).text

    def _update_of(self, args: dict[str, Any]) -> Any:
        """Pop ``update``, the fields to change, from the update tool's arguments; a
        ``ToolArgumentError`` saying what to send when the shape is not this tool's."""
        example = f'{{"update": {self.layer.texts.example}}}'
        if "update" not in args:
            stray = f" You sent {', '.join(map(repr, args))} at the top level." if args else ""
            raise ToolArgumentError(
                f"{UPDATE_TOOL} needs `update`, the object of fields to change, for example "
                f"{example}.{stray} Call {UPDATE_TOOL} again with the fields under `update`."
            )
        update = args.pop("update")
        if args:
            takes = "`update`" if self.pinned else f"`update` and `{self.kind}`"
            raise ToolArgumentError(
                f"{UPDATE_TOOL} takes only {takes}, not "
                f"{', '.join(map(repr, args))}. Call {UPDATE_TOOL} again with every field to "
                f"change under `update`, for example {example}."
            )
        if not isinstance(update, Mapping | str):  # a string is the object as JSON text
            raise ToolArgumentError(
                f"`update` must be an object of the fields to change, not a JSON "
                f"{json_kind(update)}. Call {UPDATE_TOOL} again, for example {example}."
            )
        return update

    def _scope(self, args: dict[str, Any], tool: str) -> RunScope:
        """Pop the thread (or resource) argument: the call's scope, the default when the
        call names none; refused on a pinned server, which takes none."""
        if self.pinned:
            if self.kind in args:
                raise ToolArgumentError(
                    f"{tool} takes no `{self.kind}`: this server keeps one scratchpad, and "
                    f"which {self.kind} it belongs to is set where the server is started, "
                    f"not by a tool call. Nothing was done. Call {tool} again without "
                    f"`{self.kind}`."
                )
            return self._as_scope(self.default_id)
        value = args.pop(self.kind, None)
        if value is None:
            return self._as_scope(self.default_id)
        try:
            return self._as_scope(check_scope_id(value, self.kind))
        except ValueError as exc:
            raise ToolArgumentError(
                f"`{self.kind}` is wrong: {exc}. Call {tool} again with a {self.kind} id, or "
                f"without `{self.kind}` for {self.default_id!r}."
            ) from None

    def _as_scope(self, scope_id: str) -> RunScope:
        """The scope an id of this server's kind names (a resource's id is its thread's)."""
        return RunScope(scope_id, scope_id if self.kind == "resource" else None)

    async def open(self, scope_id: str) -> ScratchpadHandle:
        """A handle on the scope ``scope_id``, its state freshly read."""
        return await self.core.handle(self._as_scope(scope_id))

    # -- resources -----------------------------------------------------------------------

    def resource_uri(self, scope_id: str) -> str:
        """``scratchpad://thread/{id}``, the id percent-encoded (``a/b`` is ``a%2Fb``)."""
        return f"scratchpad://{self.kind}/{quote(scope_id, safe='')}"

    def resources(self) -> list[types.Resource]:
        return [
            types.Resource(
                name=f"scratchpad-{self.kind}-{self.default_id}",
                title=f"Scratchpad of {self.kind} {self.default_id!r}",
                uri=self.resource_uri(self.default_id),
                description="The stored scratchpad state, as JSON.",
                mime_type="application/json",
            )
        ]

    def resource_templates(self) -> list[types.ResourceTemplate]:
        """The template of every scope's resource; none when pinned (one resource)."""
        if self.pinned:
            return []
        return [
            types.ResourceTemplate(
                name=f"scratchpad-{self.kind}",
                title=f"Scratchpad of a {self.kind}",
                uri_template=f"scratchpad://{self.kind}/{{{self.kind}}}",
                description=f"The stored scratchpad state of one {self.kind}, as JSON.",
                mime_type="application/json",
            )
        ]

    async def read_resource(self, uri: str) -> types.ReadResourceResult:
        """The state of the scope ``uri`` names, as JSON; a protocol error for another URI."""
        prefix = f"scratchpad://{self.kind}/"
        scope_id = unquote(uri[len(prefix) :]) if uri.startswith(prefix) else ""
        try:
            check_scope_id(scope_id, self.kind)
            if self.pinned and scope_id != self.default_id:
                raise ValueError("not this server's scope")
        except ValueError:
            served = self.resource_uri(self.default_id) if self.pinned else f"{prefix}{{id}}"
            raise MCPError(
                types.INVALID_PARAMS,
                f"Resource not found: {uri}; this server's resources are {served}",
                {"uri": uri},
            ) from None
        try:
            state = (await self.open(scope_id)).state
        except StorageError as exc:
            logger.warning("reading %s failed on storage: %s", uri, exc)
            raise MCPError(types.INTERNAL_ERROR, unreadable_resource_text(), {"uri": uri}) from None
        text = json.dumps(state, indent=2, ensure_ascii=False)
        return types.ReadResourceResult(
            contents=[types.TextResourceContents(uri=uri, mime_type="application/json", text=text)]
        )

    # -- the server ----------------------------------------------------------------------

    def server(self, name: str = SERVER_NAME) -> Server[Any]:
        """A low-level ``mcp.server.Server`` answering with this object's tools and resources
        (the low-level one so the update tool's input schema is the layer's own)."""

        async def list_tools(
            ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
        ) -> types.ListToolsResult:
            return types.ListToolsResult(tools=self.tools())

        async def call_tool(
            ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
        ) -> types.CallToolResult:
            return await self.call_tool(params.name, params.arguments)

        async def list_resources(
            ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
        ) -> types.ListResourcesResult:
            return types.ListResourcesResult(resources=self.resources())

        async def list_templates(
            ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
        ) -> types.ListResourceTemplatesResult:
            return types.ListResourceTemplatesResult(resource_templates=self.resource_templates())

        async def read_resource(
            ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams
        ) -> types.ReadResourceResult:
            return await self.read_resource(params.uri)

        return Server(
            name,
            version=__version__,
            instructions=self.layer.texts.instructions_for(READ_TOOL, UPDATE_TOOL),
            on_list_tools=list_tools,
            on_call_tool=call_tool,
            on_list_resources=list_resources,
            on_list_resource_templates=list_templates,
            on_read_resource=read_resource,
        )


def tool_result(text: str, *, error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=error)


def create_server(
    layer: ScratchpadLayer | None,
    storage: StorageBackend,
    *,
    default_id: str = "default",
    allow_scope_argument: bool = False,
    events: EventBus | None = None,
    count_tokens: Tokenizer | None = None,
) -> Server[Any]:
    """An MCP server for ``layer`` (default ``scratchpad()``) on ``storage``, which stays the
    caller's to close. Run it with ``server.run(read, write, options)``, or test it with
    ``mcp.Client(server)``. ``default_id``: the one scope it serves, unless
    ``allow_scope_argument=True`` lets the model name any (see :class:`ScratchpadMCP`)."""
    tools = ScratchpadMCP(
        layer or scratchpad(),
        storage,
        default_id=default_id,
        allow_scope_argument=allow_scope_argument,
        events=events,
        count_tokens=count_tokens,
    )
    return tools.server()
