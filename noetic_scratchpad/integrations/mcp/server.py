"""``ScratchpadMCP``: the scratchpad's MCP tools and resources, and the low-level
``mcp.server.Server`` that answers with them."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote, unquote

from mcp import types
from mcp.server import Server, ServerRequestContext
from mcp.shared.exceptions import MCPError

from ... import __version__
from ..._json import json_kind
from ...core import RunScope, ScratchpadCore
from ...errors import ScratchpadConfigError, StorageError
from ...events import EventBus
from ...keys import check_scope_id
from ...layer import (
    READ_PARAMETERS,
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

#: The tools of a scratchpad without a name; a named one's are ``{name}_read``, ...
READ_TOOL = "scratchpad_read"
UPDATE_TOOL = "scratchpad_update"
EDIT_TOOL = "scratchpad_edit"
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

    The tools are named after the layer: ``scratchpad_read``, ``scratchpad_update`` and
    ``scratchpad_edit``, or for ``scratchpad(name="profile")`` ``profile_read``, ... (at
    :attr:`names`); a server with several layers (:func:`create_server`) has one of these
    per layer.
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
        self.names = layer.tool_names()
        """The tools' names by function: ``read``, ``update``, ``edit``."""
        self._read, self._update, self._edit = (self.names[f] for f in ("read", "update", "edit"))
        # The model's tools by name: update, and edit with edit_tool=True; none read-only.
        # The read tool is the server's own (the block, or a part by path), always offered.
        self._writers: dict[str, HostTool] = {
            tool.name: tool
            for tool in self.core.tools(self.names)
            if tool.exposed and tool.function != "read"
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
        description = f"Read {self.layer.texts.yours}: your notes for this task, as last saved."
        properties: dict[str, Any] = {} if scope_param is None else {kind: scope_param}
        if self.layer.read_tool:  # the state may outgrow the block: its parts, by path
            description += (
                " With `path`, read one part its view shows only in part: the value at path "
                '(object keys from the top, such as ["steps"]), and of a list the items '
                "from `start` to `end` (indexes from 0, end not included), of a text the "
                "characters."
            )
            parts = READ_PARAMETERS["properties"]
            properties.update({name: dict(parts[name]) for name in ("path", "start", "end")})
        read = types.Tool(
            name=self._read,
            description=description,
            input_schema={
                "type": "object",
                "properties": properties,
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
            if name == self._read:
                scope = self._scope(args, self._read)
                part = {key: value for key, value in args.items() if value is not None}
                if part and self.layer.read_tool:  # a part, by path (null: not given)
                    part.setdefault("path", [])
                    result = await self.core.call(scope, "read", part, tool=self._read)
                else:
                    result = await self.core.read(scope, tool=self._read, update_tool=self._update)
            elif name == self._update and name in self._writers:
                scope, update = self._scope(args, self._update), self._update_of(args)
                # A read-modify-write of the latest stored state, serialized by the backend.
                result = await self.core.call(scope, "update", update, tool=self._update)
            elif name == self._edit and name in self._writers:
                scope = self._scope(args, self._edit)
                result = await self.core.call(scope, "edit", args, tool=self._edit)
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
        return (await self.core.read(scope, tool=self._read, update_tool=self._update)).text

    def _update_of(self, args: dict[str, Any]) -> Any:
        """Pop ``update``, the fields to change, from the update tool's arguments; a
        ``ToolArgumentError`` saying what to send when the shape is not this tool's."""
        example = f'{{"update": {self.layer.texts.example}}}'
        tool = self._update
        if "update" not in args:
            stray = f" You sent {', '.join(map(repr, args))} at the top level." if args else ""
            raise ToolArgumentError(
                f"{tool} needs `update`, the object of fields to change, for example "
                f"{example}.{stray} Call {tool} again with the fields under `update`."
            )
        update = args.pop("update")
        if args:
            takes = "`update`" if self.pinned else f"`update` and `{self.kind}`"
            raise ToolArgumentError(
                f"{tool} takes only {takes}, not "
                f"{', '.join(map(repr, args))}. Call {tool} again with every field to "
                f"change under `update`, for example {example}."
            )
        if not isinstance(update, Mapping | str):  # a string is the object as JSON text
            raise ToolArgumentError(
                f"`update` must be an object of the fields to change, not a JSON "
                f"{json_kind(update)}. Call {tool} again, for example {example}."
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

    @property
    def resource_prefix(self) -> str:
        """``scratchpad://thread/``, a named scratchpad's ``scratchpad://profile/thread/``."""
        named = f"{self.layer.id}/" if self.layer.config.name is not None else ""
        return f"scratchpad://{named}{self.kind}/"

    @property
    def _label(self) -> str:
        return "scratchpad" if self.layer.config.name is None else f"scratchpad-{self.layer.id}"

    @property
    def _title(self) -> str:
        name = self.layer.config.name
        return "Scratchpad" if name is None else f"Scratchpad {name!r}"

    def serves(self, uri: str) -> bool:
        """Whether ``uri`` names a scope of this layer (an id is percent-encoded: no ``/``)."""
        prefix = self.resource_prefix
        return uri.startswith(prefix) and "/" not in uri[len(prefix) :]

    def resource_uri(self, scope_id: str) -> str:
        """``scratchpad://thread/{id}`` (a named scratchpad's ``scratchpad://profile/thread/
        {id}``), the id percent-encoded (``a/b`` is ``a%2Fb``)."""
        return f"{self.resource_prefix}{quote(scope_id, safe='')}"

    def resources(self) -> list[types.Resource]:
        return [
            types.Resource(
                name=f"{self._label}-{self.kind}-{self.default_id}",
                title=f"{self._title} of {self.kind} {self.default_id!r}",
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
                name=f"{self._label}-{self.kind}",
                title=f"{self._title} of a {self.kind}",
                uri_template=f"{self.resource_prefix}{{{self.kind}}}",
                description=f"The stored scratchpad state of one {self.kind}, as JSON.",
                mime_type="application/json",
            )
        ]

    async def read_resource(self, uri: str) -> types.ReadResourceResult:
        """The state of the scope ``uri`` names, as JSON; a protocol error for another URI."""
        prefix = self.resource_prefix
        scope_id = unquote(uri[len(prefix) :]) if self.serves(uri) else ""
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
        return serve([self], name)


def serve(pads: Sequence[ScratchpadMCP], name: str = SERVER_NAME) -> Server[Any]:
    """A low-level ``mcp.server.Server`` answering with the tools and resources of every
    scratchpad in ``pads``, each call sent to the one whose tool (or resource) it names;
    its instructions are theirs, one paragraph each. ``ScratchpadConfigError`` when two
    would offer a tool of one name (two layers with one name)."""
    _check_distinct(pads)
    by_tool = {tool.name: pad for pad in pads for tool in pad.tools()}

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[tool for pad in pads for tool in pad.tools()])

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        pad = by_tool.get(params.name)
        if pad is None and len(pads) > 1:
            names = ", ".join(by_tool)
            return tool_result(
                f"There is no tool {params.name!r} here; the tools are {names}.", error=True
            )
        return await (pad or pads[0]).call_tool(params.name, params.arguments)

    async def list_resources(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        return types.ListResourcesResult(
            resources=[resource for pad in pads for resource in pad.resources()]
        )

    async def list_templates(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(
            resource_templates=[template for pad in pads for template in pad.resource_templates()]
        )

    async def read_resource(
        ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        pad = next((pad for pad in pads if pad.serves(params.uri)), pads[0])
        return await pad.read_resource(params.uri)

    return Server(
        name,
        version=__version__,
        instructions="\n\n".join(
            pad.layer.texts.instructions_for(pad.names["read"], pad.names["update"]) for pad in pads
        ),
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_list_resource_templates=list_templates,
        on_read_resource=read_resource,
    )


def _check_distinct(pads: Sequence[ScratchpadMCP]) -> None:
    ids = [pad.layer.id for pad in pads]
    repeated = sorted({layer_id for layer_id in ids if ids.count(layer_id) > 1})
    if repeated:
        raise ScratchpadConfigError(
            f"several scratchpads are named {repeated[0]!r} on one server, and their tools "
            f"({repeated[0]}_read, {repeated[0]}_update) would collide; give each a name of "
            'its own: scratchpad(name="task"), scratchpad(name="profile")'
        )


def tool_result(text: str, *, error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=error)


def create_server(
    layer: ScratchpadLayer | Sequence[ScratchpadLayer] | None,
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
    ``allow_scope_argument=True`` lets the model name any (see :class:`ScratchpadMCP`).

    Several layers, each with a name of its own (``[scratchpad(name="task"),
    scratchpad(name="profile", scope="resource")]``), make one server with the tools of
    each (``task_read``, ``task_update``, ``profile_read``, ...), on one bus; two with one
    name are refused (``ScratchpadConfigError``)."""
    if layer is None:
        layers: Sequence[ScratchpadLayer] = (scratchpad(),)
    elif isinstance(layer, ScratchpadLayer):
        layers = (layer,)
    else:
        layers = tuple(layer)
        if not layers:
            raise ScratchpadConfigError("layers is empty; give at least one scratchpad layer")
    bus = events if events is not None or len(layers) == 1 else EventBus()
    pads = [
        ScratchpadMCP(
            each,
            storage,
            default_id=default_id,
            allow_scope_argument=allow_scope_argument,
            events=bus,
            count_tokens=count_tokens,
        )
        for each in layers
    ]
    return serve(pads)
