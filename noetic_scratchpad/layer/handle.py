"""``ctx.context["scratchpad"]``: one execution's view of a scope."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .. import _json
from ..context import ExecutionContext
from ..events import WriteSource
from ..render import contains_float
from ..storage import ScopedStorage
from .arguments import applied_text
from .config import ScratchpadState
from .pipeline import UpdatePipeline, copy_state
from .view import view_of
from .writer import Loaded, ScopeWriter, Written, load

__all__ = ("ScratchpadHandle", "copy_state")


class ScratchpadHandle:
    """What code sees as ``ctx.context["scratchpad"]``: ``.snapshot`` and ``await .update()``.

    Every write is a read-modify-write of the latest *stored* state, serialized per scope
    by the backend, so concurrent executions never lose each other's updates. The write
    itself is the :class:`~.writer.ScopeWriter`'s; the handle keeps the state this
    execution last saw, and what it knows about that state object (its JSON, whether it
    holds floats, whether it fits the schema) to spare work on the next turn.
    """

    def __init__(
        self,
        owner: object,
        pipeline: UpdatePipeline,
        storage: ScopedStorage | None,
        ctx: ExecutionContext,
        state: ScratchpadState,
        *,
        layer_id: str,
        scope_key: str,
        budget: int,
    ) -> None:
        self.layer = owner
        """The layer this handle belongs to."""
        self.storage = storage
        self.ctx = ctx
        self.scope_key = scope_key
        self.state: ScratchpadState = state
        """The latest state this handle knows of. Treat it as read-only; see ``snapshot``."""
        self._layer_id = layer_id
        self._budget = budget
        self._writer = ScopeWriter(pipeline, storage, ctx, layer_id=layer_id, scope_key=scope_key)
        # (state object, whether it holds floats): lets recall pick the fast renderer.
        self._floats: tuple[Any, bool] | None = None
        # (state object, its JSON) after a write: copies of it need no encoding.
        self._encoded: tuple[Any, bytes] | None = None
        # The last state this handle wrote or checked: a decoded copy of it that storage
        # hands back at the next write is not checked again.
        self._passed: Any = None

    @property
    def tool_name(self) -> str:
        """The update tool's name as the model sees it; the texts that tell the model what
        to fix name it. Set it when a provider or framework renames the tool."""
        return self._writer.tool_name

    @tool_name.setter
    def tool_name(self, name: str) -> None:
        self._writer.tool_name = name

    @property
    def snapshot(self) -> ScratchpadState:
        """A copy of the current state: changing it never changes the scratchpad."""
        encoded = self._encoded
        if encoded is not None and encoded[0] is self.state:
            copied: dict[str, Any] = _json.loads(encoded[1])  # its JSON is at hand
            return copied
        return copy_state(self.state)

    async def update(self, values: Mapping[str, Any]) -> None:
        """Merge ``values`` into the scratchpad and store it; ``snapshot`` shows the result.

        Like ``dict.update`` it returns ``None``: a copy of the state on every write would
        cost as much as the write itself on a large scratchpad.

        Raises ``ScratchpadValidationError`` (schema), ``ScratchpadReadOnlyError``,
        ``ScratchpadUpdateError`` (bad values, too large) or ``StorageError``; on any of
        them the stored state is unchanged.
        """
        await self.apply(values, source="api")

    async def call(
        self, name: str, args: str | Mapping[str, Any], *, call_id: str | None = None
    ) -> str:
        """Run the provided function ``name`` as the model's tool call; returns its output."""
        if name != "update":
            raise KeyError(f"the scratchpad provides no function {name!r}; it has 'update'")
        return applied_text(await self.apply(args, source="tool", call_id=call_id))

    async def apply(
        self,
        args: str | Mapping[str, Any],
        *,
        source: WriteSource,
        call_id: str | None = None,
    ) -> dict[str, Any]:
        """Apply one update through the serialized path, reporting it as an event.

        Returns the update as it was merged (parsed, checked, forbidden keys stripped);
        ``state`` holds the result, and shares the update's values: treat both as read-only.
        """
        update, self.state, written = await self._writer.write(
            args,
            source=source,
            call_id=call_id,
            current=self.state,
            passed=self._passed,
            floats=self._floats,
        )
        self._remember(written)
        return update

    def block(self, budget: int | None = None) -> str:
        """The ``<scratchpad>`` block of the current state, as ``recall`` gives it, in at
        most ``budget`` tokens (default, the layer's budget); ``""`` while the scratchpad is
        empty. Call :meth:`refresh` first to see what other executions wrote."""
        state = self.state
        if not state:
            return ""
        limit = self._budget if budget is None else budget
        view = view_of(
            state,
            limit,
            self.ctx,
            layer_id=self._layer_id,
            scope_key=self.scope_key,
            has_floats=self.floats_hint(state),
        )
        return view.text or ""

    async def refresh(self) -> ScratchpadState:
        """Re-read the stored state (another execution may have written it).

        Raises ``StorageError`` when storage does not answer within ``read_timeout``; the
        state is then left as it was.
        """
        if self.storage is not None:
            self.adopt(
                await load(self._writer.pipeline, self.storage, self.ctx, layer_id=self._layer_id)
            )
        return self.snapshot

    def adopt(self, loaded: Loaded) -> None:
        """Take ``loaded`` as the current state (after init or a refresh)."""
        self.state = loaded.state
        if loaded.checked and isinstance(loaded.state, dict):
            self._passed = loaded.state

    def floats_hint(self, state: Any) -> bool | None:
        """Whether ``state`` holds floats, if this handle knows that object; else ``None``."""
        known = self._floats
        if known is not None and known[0] is state:
            return known[1]
        if state is self.state and isinstance(state, dict):
            has_floats = contains_float(state)
            self._floats = (state, has_floats)
            return has_floats
        return None

    def _remember(self, written: Written | None) -> None:
        """Keep what the write that produced ``self.state`` learned about it, if it did."""
        if written is None or written.state is not self.state:
            self._floats = self._encoded = self._passed = None
            return
        has_floats = written.has_floats
        self._floats = None if has_floats is None else (written.state, has_floats)
        self._encoded = (written.state, written.encoded)
        self._passed = written.state

    def __repr__(self) -> str:
        return f"<ScratchpadHandle scope_key={self.scope_key!r}>"
