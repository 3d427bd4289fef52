"""The ``<scratchpad>`` block of a state within a token budget, reporting a cut as an event."""

from __future__ import annotations

from ..context import ExecutionContext
from ..events import ViewTruncated
from ..keys import Scope
from ..render import RenderedView, estimate_tokens, render_view
from .config import ScratchpadState

__all__ = ("view_of",)


def view_of(
    state: ScratchpadState,
    limit: int,
    ctx: ExecutionContext,
    *,
    layer_id: str,
    scope: Scope,
    scope_key: str | None = None,
    has_floats: bool | None = None,
    report: bool = True,
    advice: str = "",
    name: str | None = None,
) -> RenderedView:
    """The block for ``state`` in at most ``limit`` tokens, counted by ``ctx.tokenize``
    (the host's ``count_tokens``), else estimated; a cut block emits ``ViewTruncated``.

    ``scope_key``: the key of the scope ``state`` is from; by default the one ``ctx`` gives
    a layer of kind ``scope``, looked up only when a cut is reported (a recall every turn).
    ``report=False``: a preview (the inspector's), whose cut is no event: the model saw
    nothing. ``advice``: what the cut notice tells the model to do (the layer's
    ``cut_advice``). ``name``: a named scratchpad's, whose block is
    ``<scratchpad name="...">``.
    """
    view = render_view(
        state,
        limit,
        ctx.tokenize or estimate_tokens,
        has_floats=has_floats,
        advice=advice,
        name=name,
    )
    if view.truncated and report:
        if scope_key is None:
            scope, scope_key = ctx.scope_of(scope)
        ctx.events.emit(
            ViewTruncated(
                layer_id=layer_id,
                scope_key=scope_key,
                scope=scope,
                execution_id=ctx.execution_id,
                budget=limit,
                total_tokens=view.total_tokens,
                omitted_tokens=view.omitted_tokens,
            )
        )
    return view
