"""``GET api/scopes/{kind}/{id}/view``: the block the model reads for a scope, as its host
renders it, with its tokens against the budget and the cut marked.

The state is loaded as a host loads it (the template, or the initial state, where the
stored one no longer fits the schema), and rendered by the layer's own view in the app's
``count_tokens`` (default, the estimate). A preview: a cut here is no ``ViewTruncated``
event, since no model saw it.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from ..core import RunScope
from ..events import EventBus
from ..layer import ScratchpadHandle
from ..render import hidden_text
from .context import ServerContext
from .inputs import int_param, json_response
from .problems import storage_errors
from .revisions import Revisions, not_stored
from .target import Target

__all__ = ("MAX_BUDGET", "ModelViews")

#: The largest ``budget`` a view may be asked for: more than any model's context.
MAX_BUDGET = 10_000_000


class ModelViews:
    """The model's view of a scope."""

    def __init__(self, ctx: ServerContext) -> None:
        self.ctx = ctx
        self.revisions = Revisions(ctx)

    async def view(self, request: Request, target: Target) -> Response:
        """The block, its tokens, the budget, and what the cut leaves out; 404 when
        nothing is stored."""
        layer = self.ctx.layer(target.kind)
        budget = int_param(request, "budget", layer.budget.max, 0, MAX_BUDGET)
        scope = RunScope(target.id, target.id if target.kind == "resource" else None)
        # Read first, as every endpoint does: nothing stored is a 404, and a stored value
        # that cannot be read a 409 (a host would discard it and show the initial state).
        # Before the lifespan, a 503: never a lazy open.
        if await self.revisions.stored(target) is None:
            raise not_stored(target)
        with storage_errors():
            # The core's handle in its context (its token counter), on a bus of its own: a
            # state the schema no longer takes is reported when a host loads it, not each
            # time someone looks.
            ctx = self.ctx.core.context(scope)
            ctx.events = EventBus()
            handle = await self.ctx.core.bind(layer, ctx, read=True)
        assert isinstance(handle, ScratchpadHandle)  # a scratchpad layer binds its own
        if handle.revision == 0:
            raise not_stored(target)
        body: dict[str, Any] = {
            "kind": target.kind,
            "id": target.id,
            "layer": target.layer_id,
            "revision": handle.revision,
            "budget": budget,
            "counter": "estimate" if self.ctx.count_tokens is None else "count_tokens",
        }
        state = handle.state
        if not state:  # an empty scratchpad adds no block at all
            return json_response({**body, **_nothing(empty=True)})
        view = handle.view(budget, report=False)
        cut = None
        if view.truncated:
            notice = view.text.split("\n")[-2] if view.text is not None else None
            hidden = hidden_text(state, view.cuts) if view.cuts else view.body[view.shown :]
            parts = [
                {
                    "path": list(part.path),
                    "kind": part.kind,
                    "total": part.total,
                    "shown": part.head + part.tail,
                }
                for part in view.cuts
            ]
            cut = {"notice": notice, "shown_chars": view.shown, "hidden": hidden, "parts": parts}
        return json_response(
            {
                **body,
                "empty": False,
                "text": view.text,
                "tokens": view.tokens,
                "total_tokens": view.total_tokens,
                "omitted_tokens": view.omitted_tokens,
                "cut": cut,
            }
        )


def _nothing(*, empty: bool) -> dict[str, Any]:
    return {
        "empty": empty,
        "text": None,
        "tokens": 0,
        "total_tokens": 0,
        "omitted_tokens": 0,
        "cut": None,
    }
