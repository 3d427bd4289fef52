"""What every endpoint shares: the core (storage, bus, handles), the layers served per kind
of scope, the limits."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..core import RunScope, ScratchpadCore
from ..events import EventBus
from ..keys import SCOPES, Scope, check_scope_id
from ..layer import ScratchpadHandle, ScratchpadLayer, scratchpad
from ..render import Tokenizer
from ..storage import ScopedStorage, StorageBackend
from .callers import CallerStamp
from .problems import Problem
from .sessions import Sessions
from .stream import EventHub

__all__ = ("Limits", "ServerContext", "layers_by_kind")


@dataclass(frozen=True, slots=True)
class Limits:
    """The app's limits, each with a safe default (see ``create_app``)."""

    max_body_bytes: int = 1024 * 1024
    keepalive: float = 15.0
    recent_events: int = 200
    stream_buffer: int = 1000
    list_limit: int = 1000


def layers_by_kind(
    layers: ScratchpadLayer | Sequence[ScratchpadLayer] | None,
) -> dict[Scope, ScratchpadLayer]:
    """The layer that serves each kind of scope.

    Default: a plain scratchpad for threads and one for resources. A resource-scoped layer
    also serves thread scopes when no thread-scoped layer is given: runs without a
    resource id keep its state in their thread's scope.
    """
    if layers is None:
        layers = (scratchpad(), scratchpad(scope="resource"))
    elif isinstance(layers, ScratchpadLayer):
        layers = (layers,)
    by_kind: dict[Scope, ScratchpadLayer] = {}
    for layer in layers:
        if not isinstance(layer, ScratchpadLayer):
            raise TypeError(
                f"layers must be scratchpad layers (from scratchpad(...)), not {layer!r}"
            )
        if layer.scope in by_kind:
            raise ValueError(
                f"two layers serve {layer.scope} scopes; give at most one thread-scoped and "
                "one resource-scoped layer"
            )
        by_kind[layer.scope] = layer
    if not by_kind:
        raise ValueError("layers is empty; give at least one scratchpad layer, or None")
    if "thread" not in by_kind:
        by_kind["thread"] = by_kind["resource"]
    return {kind: by_kind[kind] for kind in SCOPES if kind in by_kind}


class ServerContext:
    """The state of one app: set up by ``create_app``, started and stopped by its lifespan.

    The storage and the bus are the app's :class:`ScratchpadCore`'s (``core``); the app
    only chooses the layer by the kind of scope in the path, and says 503 while the core's
    storage is not open.
    """

    def __init__(
        self,
        *,
        core: ScratchpadCore,
        layers: dict[Scope, ScratchpadLayer],
        limits: Limits,
        sessions: Sessions,
        token_required: bool = False,
    ) -> None:
        self.core = core
        """The app's storage (a URL opened by the lifespan, or a backend borrowed) and bus."""
        self.layers = layers
        self.limits = limits
        self.hub = EventHub(recent=limits.recent_events, buffer=limits.stream_buffer)
        self.sessions = sessions
        """The inspector's sessions (in memory: they end with the app)."""
        self.token_required = token_required
        """The app takes a token: a write's caller was authorized by it (or a session)."""

    @property
    def count_tokens(self) -> Tokenizer | None:
        """The model's token counter, the core's (``None``: the estimate)."""
        return self.core.tokenize

    @property
    def events(self) -> EventBus:
        """The app-wide bus (the core's: a new one at each start, when it is the app's own)."""
        return self.core.events

    def storage(self) -> StorageBackend:
        """The opened backend; a 503 problem until the app's lifespan has started."""
        backend = self.core.opened
        if backend is None:
            raise Problem(
                503,
                "The app has not started",
                "Its lifespan has not run, so storage is not open. A mounted app needs its "
                "host to run it: FastAPI(lifespan=pad.lifespan), or `async with "
                "pad.lifespan(app):` inside the host's own lifespan.",
                kind="not-started",
            )
        return backend

    def layer(self, kind: str) -> ScratchpadLayer:
        """The layer serving ``kind``; a 404 problem for a kind this app does not serve."""
        for served, layer in self.layers.items():
            if served == kind:
                return layer
        raise Problem(
            404,
            "No such kind of scope",
            f"{kind!r} is not a kind of scope this app serves; it serves "
            f"{' and '.join(self.layers)}.",
            kind="not-found",
        )

    def read_timeout(self, kind: str | None = None) -> float | None:
        """How long a read may take: the ``read_timeout`` of ``kind``'s layer (the longest
        of them for ``None``)."""
        layers = [self.layer(kind)] if kind is not None else list(self.layers.values())
        timeouts = [layer.config.read_timeout for layer in layers]
        return None if None in timeouts else max(t for t in timeouts if t is not None)

    def check_id(self, kind: str, scope_id: str) -> str:
        """``scope_id`` when the key layout accepts it; a 400 problem saying why not."""
        try:
            return check_scope_id(scope_id, kind)
        except ValueError as exc:
            raise Problem(400, "Invalid scope id", f"{exc}.", kind="invalid-scope-id") from None

    async def handle(
        self, kind: Scope, scope_id: str, caller: dict[str, Any] | None = None
    ) -> ScratchpadHandle:
        """The core's handle on one scope, reporting to the app's bus: the tool's write path.
        ``caller``: who sent the request, kept in the journal entry of each write.

        Bound without reading the scope first, as ``harness.update_state`` binds: a write
        merges into the *stored* state whatever the handle saw, so a read before it would
        only cost a storage round trip (a quarter of the throughput under load). A 503
        problem before the lifespan has opened storage (the core would open a URL itself).
        """
        layer = self.layer(kind)
        self.storage()  # not started: a 503, never a lazy open
        scope = RunScope(scope_id, scope_id if kind == "resource" else None)
        if caller is None:
            return await self.core.handle(scope, layer=layer, read=False)
        # As the core binds (its context: its bus, its token counter), over a view of its
        # backend that stamps each journal entry with the caller.
        ctx = self.core.context(scope)
        stamped = CallerStamp(self.storage(), caller)
        return layer.bind(ScopedStorage.for_layer(stamped, layer, ctx), ctx, layer.initial_state())
