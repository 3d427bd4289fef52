"""``ctx.context["scratchpad"]``: one execution's view of a scope."""

from __future__ import annotations

from collections.abc import Coroutine, Mapping, Sequence
from typing import Any

from .. import _json, tracing
from ..context import ExecutionContext
from ..edits import edited_keys
from ..events import WriteSource
from ..keys import Scope
from ..merge import MAX_DEPTH
from ..render import RenderedView
from ..storage import ScopedStorage
from ..storage.base import MAX_JOURNAL_LIMIT, CommitFn, Revision
from .arguments import applied_text, edited_text
from .config import ScratchpadState
from .journal import HistoryEntry, Revert, history_of
from .load import load, load_with_journal
from .pipeline import Rewrite, UpdatePipeline, copy_state
from .reading import read_part
from .snapshot import Snapshot
from .view import view_of
from .writer import Prepare, ScopeWriter, Written

__all__ = ("ScratchpadHandle", "copy_state")

# Bound once: None without opentelemetry; what tells whether a write opens a span (see
# tracing.untraced, whose test apply makes inline).
_TRACER, _HOLDER, _ENVIRON, _PROVIDER_KEY = (
    tracing.TRACER,
    tracing.HOLDER,
    tracing.ENVIRON,
    tracing.PROVIDER_KEY,
)
_global_provider, _UNSET = tracing.global_provider, tracing.UNSET


class ScratchpadHandle:
    """What code sees as ``ctx.context["scratchpad"]``: ``.snapshot`` and ``await .update()``.

    Every write is a read-modify-write of the latest *stored* state, serialized per scope
    by the backend, so concurrent executions never lose each other's updates. The write
    itself is the :class:`~.writer.ScopeWriter`'s; the handle keeps the state this
    execution last saw as ``current``, a :class:`~.snapshot.Snapshot` that also says
    what is known about it (its JSON, whether it holds floats, whether it fits the
    schema) to spare work on the next turn.
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
        scope: Scope = "thread",
    ) -> None:
        self.layer = owner
        """The layer this handle belongs to."""
        self.storage = storage
        self.ctx = ctx
        self.scope_key = scope_key
        self.current = Snapshot(state)
        """The latest state this handle knows of, with its revision and what is known
        about it; a new value after every write, refresh or load."""
        self._layer_id = layer_id
        self._budget = budget
        self._edits = pipeline.config.edit_tool
        self._reads = bool(getattr(owner, "read_tool", False))
        self._advice = str(getattr(owner, "cut_advice", ""))
        self._name = pipeline.config.name
        self.scope = scope
        """The kind of scope ``scope_key`` names: ``"thread"`` or ``"resource"``."""
        self._writer = ScopeWriter(
            pipeline,
            storage,
            ctx,
            layer_id=layer_id,
            scope_key=scope_key,
            scope=scope,
            view_budget=budget,
        )
        self._writer.view_advice = self._advice

    @property
    def state(self) -> ScratchpadState:
        """The latest state this handle knows of. Treat it as read-only; see ``snapshot``."""
        return self.current.state

    @property
    def revision(self) -> int:
        """The stored revision of ``state``: how many writes made it (0: none yet)."""
        return self.current.revision

    def _prepare_edit(self, args: Any) -> Rewrite:
        """The writer's preparation of an edit call."""
        return self._writer.pipeline.prepare_edit(args)

    def _prepare_plain_edit(self, args: Any) -> Rewrite:
        return self._writer.pipeline.prepare_edit(args, plain=True)

    @property
    def snapshot(self) -> ScratchpadState:
        """A copy of the current state: changing it never changes the scratchpad."""
        return self.current.copy_state()

    async def update(
        self, values: Mapping[str, Any], *, expected_revision: int | None = None
    ) -> None:
        """Merge ``values`` into the scratchpad and store it; ``snapshot`` shows the result
        and ``revision`` its revision.

        Like ``dict.update`` it returns ``None``: a copy of the state on every write would
        cost as much as the write itself on a large scratchpad.

        ``expected_revision``: write only if the stored revision is still this one (an
        editor, an HTTP ``If-Match``), else raise ``ScratchpadConflictError``.

        Raises ``ScratchpadValidationError`` (schema), ``ScratchpadReadOnlyError``,
        ``ScratchpadConflictError``, ``ScratchpadUpdateError`` (bad values, too large) or
        ``StorageError``; on any of them the stored state is unchanged.
        """
        await self.apply(values, source="api", expected_revision=expected_revision)

    async def call(
        self, name: str, args: str | Mapping[str, Any], *, call_id: str | None = None
    ) -> str:
        """Run the provided function ``name`` (``update``, or ``edit`` when the layer offers
        it) as the model's tool call; returns its output."""
        offered = tuple(
            function
            for function in ("update", "edit", "read")
            if function == "update"
            or (function == "edit" and self._edits)
            or (function == "read" and self._reads)
        )
        if name not in offered:
            names = " and ".join(repr(function) for function in offered)
            raise KeyError(f"the scratchpad provides no function {name!r}; it has {names}")
        return await self.apply_call(f"{self._layer_id}/{name}", args, "tool", call_id)

    async def apply_call(
        self, tool: str, args: str | Mapping[str, Any], source: WriteSource, call_id: str | None
    ) -> str:
        """Apply the model's call of ``tool`` (``scratchpad/update``, or ``scratchpad/edit``
        when the layer offers it); returns the tool output.

        A repeat of a call applied before (the same ``call_id`` and arguments) is a retry:
        it writes nothing and returns the first call's output; the same ``call_id`` with
        other arguments is a new call (see :mod:`.calls`)."""
        return (await self.run_call(tool, args, source, call_id))[0]

    async def run_call(
        self, tool: str, args: str | Mapping[str, Any], source: WriteSource, call_id: str | None
    ) -> tuple[str, bool]:
        """:meth:`apply_call`, and whether the call wrote (``False``: a retry)."""
        if tool == f"{self._layer_id}/update":
            written = await self.apply(args, source=source, call_id=call_id)
            return applied_text(written.applied), written.wrote
        if tool == f"{self._layer_id}/edit" and self._edits:
            written = await self.apply(
                args, source=source, call_id=call_id, prepare=self._prepare_edit
            )
            return edited_text(edited_keys(written.applied["operations"])), written.wrote
        if tool == f"{self._layer_id}/read" and self._reads:
            return await self.read(args), False
        raise KeyError(f"the scratchpad offers no tool {tool!r}")

    async def read(self, args: str | Mapping[str, Any]) -> str:
        """The read tool's output for ``args`` (``{"path": [...], "start": ..., "end":
        ...}``, or its JSON text): the part of the stored state they name, re-read first,
        within the budget of the model's view."""
        if isinstance(args, str):
            try:
                args = _json.loads_arguments(args)
            except _json.ArgumentsError as exc:
                return _json.arguments_problem(exc, max_depth=MAX_DEPTH)
        if self.storage is not None:
            await self.refresh()
        return read_part(
            self.state, args, self._writer.view_budget or self._budget, self.ctx.tokenize
        )

    @property
    def cut_advice(self) -> str:
        """What a cut view's notice tells the model to do (its layer's ``cut_advice``)."""
        return self._advice

    def viewed(self, budget: int) -> None:
        """The model was shown the block in ``budget`` tokens: its writes are checked
        against that view (see :mod:`.seen`)."""
        self._writer.viewed(budget)

    async def edit(self, operations: Sequence[Mapping[str, Any]]) -> None:
        """Apply edit ``operations`` (see :func:`~noetic_scratchpad.edits.apply_edits`) in
        order, all or none, as the ``scratchpad/edit`` tool does; from code, so events say
        ``api``. Raises the errors of :meth:`update`."""
        await self.apply(
            {"operations": list(operations)}, source="api", prepare=self._prepare_plain_edit
        )

    async def apply(
        self,
        args: Any,
        *,
        source: WriteSource,
        call_id: str | None = None,
        expected_revision: int | None = None,
        prepare: Prepare | None = None,
        writer: ScopeWriter | None = None,
    ) -> Written:
        """Apply one change through the serialized path, reporting it as an event.

        ``prepare(args)`` makes the change (default: ``args`` is an update to merge).
        Returns what the writer did: the change as applied (an update parsed, checked,
        forbidden keys stripped), the new snapshot, and whether it wrote: a repeat of the
        applied call ``call_id`` is a retry (see :mod:`.calls`), and an update with no key
        writes nothing either. ``current`` then holds the result, whose state shares the
        update's values: treat both as read-only. ``writer``: another writer of this scope
        (a revert's).
        """
        write = (writer or self._writer).write(
            args,
            self.current,
            source=source,
            call_id=call_id,
            expected_revision=expected_revision,
            prepare=prepare,
        )
        if (
            _TRACER is None
            or (
                _HOLDER is not None
                and _HOLDER._TRACER_PROVIDER is None  # noqa: SLF001 - as tracing.untraced
                and _PROVIDER_KEY not in _ENVIRON
            )
            or isinstance(_global_provider(), _UNSET)
        ):
            written = await write  # no opentelemetry, or no provider: no span
        else:
            written = await self._traced(write, source, prepare)
        if written.wrote:
            self.current = written.snapshot
        return written

    async def _traced(
        self, write: Coroutine[Any, Any, Written], source: WriteSource, prepare: Prepare | None
    ) -> Written:
        """``write`` in a span of its own, a child of the current one (see
        :mod:`~noetic_scratchpad.tracing`); a span that records nothing (sampled out)
        costs no further call into the package."""
        assert _TRACER is not None
        operation = "revert" if source == "revert" else "edit" if prepare else "update"
        with _TRACER.start_as_current_span(
            tracing.OPERATIONS[operation], record_exception=False, set_status_on_exception=False
        ) as span:
            if not span.is_recording():
                return await write
            key = self.scope_key
            tracing.start(
                span,
                operation,
                layer_id=self._layer_id,
                scope_key=key,
                scope=self.scope,
                source=source,
            )
            try:
                written = await write
            except Exception as exc:
                tracing.failed(span, exc)
                raise
            now = written.snapshot
            tracing.written(
                span, revision=now.revision, wrote=written.wrote, state=now.state, scope_key=key
            )
            return written

    async def history(self, limit: int = 20) -> list[HistoryEntry]:
        """The scope's ``limit`` newest journaled writes, newest first, each with what it
        changed. Reads the stored state too, at the same instant as the journal, and
        makes it this handle's state.

        ``limit``: an int from 0 to ``2**63 - 1``; anything else is refused
        (``TypeError``, ``ValueError``) before storage is read."""
        storage = self._require_storage("history")
        _check_history_limit(limit)
        loaded, view = await load_with_journal(
            self._writer.pipeline, storage, self.ctx, layer_id=self._layer_id, limit=limit
        )
        self.adopt(loaded)
        stored = None if view.current is None else view.current.value
        rows = ((row.revision, row.written_at, row.entry) for row in view.rows)
        return history_of(stored, loaded.revision, rows)

    async def revert(self, revision: int, *, expected_revision: int | None = None) -> None:
        """Make the state as it was right after ``revision`` the scope's new revision,
        journaled with source ``revert`` and checked by the schema gate.

        The state is rebuilt inside the revert's own write, from the state and journal
        stored at that moment, so writes that land meanwhile never break it: they are
        undone with the rest. ``expected_revision``: revert only if the stored revision is
        still this one, else raise ``ScratchpadConflictError``. Raises
        ``ScratchpadHistoryError`` when the journal does not reach back to ``revision``,
        and the errors of :meth:`update`; the stored state is then unchanged.
        """
        storage = self._require_storage("revert")
        change = Revert(revision, self._writer.pipeline.initial_state)
        writer = ScopeWriter(
            self._writer.pipeline,
            _RebuildingStorage(storage, change),
            self.ctx,
            layer_id=self._layer_id,
            scope_key=self.scope_key,
            scope=self.scope,
        )
        await self.apply(
            change,
            source="revert",
            expected_revision=expected_revision,
            prepare=_as_is,
            writer=writer,
        )

    def block(self, budget: int | None = None) -> str:
        """The ``<scratchpad>`` block (a named one's ``<scratchpad name="...">``) of the
        current state, as ``recall`` gives it, in at most ``budget`` tokens (default, the
        layer's budget); ``""`` while the scratchpad is empty. Call :meth:`refresh` first
        to see what other executions wrote."""
        if not self.state:
            return ""
        limit = self._budget if budget is None else budget
        self.viewed(limit)
        return self.view(limit).text or ""

    def view(self, budget: int | None = None, *, report: bool = True) -> RenderedView:
        """The view :meth:`block` shows, with what it cut (default budget, the layer's).
        ``report=False``: a preview (the inspector's), whose cut is no event and which
        the model's writes are not checked against."""
        state = self.state
        return view_of(
            state,
            self._budget if budget is None else budget,
            self.ctx,
            layer_id=self._layer_id,
            scope_key=self.scope_key,
            scope=self.scope,
            has_floats=self.floats_hint(state),
            report=report,
            advice=self._advice,
            name=self._name,
        )

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

    def adopt(self, loaded: Snapshot) -> None:
        """Take ``loaded`` as the current state (after init or a refresh)."""
        self.current = loaded

    def floats_hint(self, state: Any) -> bool | None:
        """Whether ``state`` holds floats, when it is this handle's current state (the
        one a runtime hands its recall); else ``None``, and the renderer looks."""
        current = self.current
        if state is not current.state or not isinstance(state, dict):
            return None
        if current.has_floats is None:  # looked up once per state
            current = self.current = current.with_floats()
        return current.has_floats

    def _require_storage(self, action: str) -> ScopedStorage:
        if self.storage is None:
            raise RuntimeError(
                f"this handle has no storage (the store hook ran without init), so it has "
                f"no {action}; open the scratchpad with layer.open(...) or run init first"
            )
        return self.storage

    def __repr__(self) -> str:
        return f"<ScratchpadHandle scope_key={self.scope_key!r} revision={self.revision}>"


def _as_is(change: Rewrite) -> Rewrite:
    """The preparation of a change made by the handle itself: it is ready as it is."""
    return change


class _RebuildingStorage(ScopedStorage):
    """The scope's storage as a revert's writer sees it: its commit is a
    ``commit_with_journal``, which hands the revert what it rebuilds its target from."""

    def __init__(self, storage: ScopedStorage, revert: Revert) -> None:
        super().__init__(storage.backend, storage.layer_id, storage.scope_key, storage.scope)
        self.revert = revert

    def commit(self, key: str, fn: CommitFn, *, keep: int) -> Coroutine[Any, Any, Revision]:
        revert = self.revert
        return self.commit_with_journal(
            key, revert.reading_journal(fn), keep=keep, after=revert.after
        )


def _check_history_limit(limit: object) -> None:
    """Refuse a ``history`` limit no backend can read: not an int, or out of range."""
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise TypeError(f"the history limit must be an int, not {limit!r}")
    if not 0 <= limit <= MAX_JOURNAL_LIMIT:
        bound = "at least 0" if limit < 0 else f"at most {MAX_JOURNAL_LIMIT} (2**63 - 1)"
        raise ValueError(
            f"the history limit {limit} is out of range: {bound}. Ask for the number of "
            "entries to list, such as 20"
        )
