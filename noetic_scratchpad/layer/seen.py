"""What the model saw: its update may not drop the part of a list or text its view hid.

When the state is over the block's token budget, the view shows its long lists and texts in
part (:class:`~noetic_scratchpad.render.Cut`): a list its first and latest items, a text
its start and end. A model that resends such a list with one more item, as models do,
would replace it by what it saw, and the hidden items would be gone. So a *model's*
update (the tool path, the store hook) that replaces a list (a text) its view showed in
part, by a list (a text) that does not hold the hidden items, is refused
(:class:`~noetic_scratchpad.errors.ScratchpadPartlySeenError`); nothing is written.

What the model saw is computed, not remembered: the view of the state the update is
applied to (the latest stored one, inside the atomic write), in the layer's budget and
the host's token counter, which is the view the model is shown on its next request, and
the one it was shown unless another writer changed the state since. No state is kept
between calls, so the rule holds the same in every host, including those that open a
handle per call (MCP, the framework integrations).

A view cut as text (when no view by structure fits) does not say which items it shows
whole: every long list and text then counts as cut with nothing known to be seen, so the
model's new value must hold the whole old one.

What still works: an append through the edit tool (it resends nothing); a rewrite that
keeps the hidden items (the model read them with the read tool first); a value of
another kind in place of the list or text (a summary string for a list: a deliberate
change, not a resend); and every write of code (``handle.update``, the HTTP API).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from ..errors import ScratchpadPartlySeenError
from ..render import Cut, Tokenizer, estimate_tokens, may_be_cut, shown_in_part

__all__ = ("ViewLimit", "check_seen")


@dataclass(frozen=True, slots=True)
class ViewLimit:
    """The view the model is shown: its ``budget`` in tokens, counted by ``tokenize``
    (``None``: the estimate), with ``advice`` in its cut notice (which takes room too);
    ``edit_tool``: whether the model can append instead."""

    budget: int
    tokenize: Tokenizer | None = None
    edit_tool: bool = False
    advice: str = ""


def check_seen(state: Any, update: Mapping[str, Any] | str, limit: ViewLimit) -> None:
    """Refuse ``update`` (an update to merge into ``state``, or the whole new text of a
    text state) when it replaces a list or text the view of ``state`` shows in part and
    drops what the view hid. Pure; renders the view only when the update replaces a list
    or text long enough to be cut."""
    replaced: list[tuple[tuple[str, ...], Any, Any]]
    if isinstance(update, str):
        replaced = [((), state, update)] if isinstance(state, str) else []
    elif isinstance(state, dict):
        replaced = list(_replaced(state, update, ()))
    else:
        return
    candidates = [
        (path, old, new)
        for path, old, new in replaced
        if may_be_cut(old) and type(new) is type(old)
    ]
    if not candidates:
        return
    cuts = {
        cut.path: cut
        for cut in shown_in_part(
            state, limit.budget, limit.tokenize or estimate_tokens, advice=limit.advice
        )
    }
    dropped = [
        cuts[path]
        for path, old, new in candidates
        if path in cuts and not _keeps_hidden(old, new, cuts[path])
    ]
    if dropped:
        raise _refusal(dropped, limit.edit_tool)


def _replaced(
    state: Mapping[str, Any], update: Mapping[str, Any], path: tuple[str, ...]
) -> Iterator[tuple[tuple[str, ...], Any, Any]]:
    """The (path, old value, new value) of every value the merge of ``update`` replaces
    (objects merge into objects; everything else replaces)."""
    for key, new in update.items():
        old = state.get(key)
        if type(new) is dict and type(old) is dict:
            yield from _replaced(old, new, (*path, key))
        else:
            yield (*path, key), old, new


def _keeps_hidden(old: Any, new: Any, cut: Cut) -> bool:
    """Whether ``new`` holds, in one run, the part of ``old`` the view hid."""
    hidden = old[cut.head : cut.total - cut.tail]
    if isinstance(old, str):
        return hidden in new
    if len(new) < len(hidden):
        return False
    # Items compared as JSON text, so 1 and true or 1 and 1.0 are not taken for each other.
    wanted = [_text(item) for item in hidden]
    items = [_text(item) for item in new]
    first = wanted[0]
    return any(
        items[start] == first and items[start : start + len(wanted)] == wanted
        for start in range(len(items) - len(wanted) + 1)
    )


def _text(value: Any) -> bytes:
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except TypeError:  # integers past 64 bits
        return repr(value).encode()


def _lost(cut: Cut) -> str:
    unit = "items" if cut.kind == "list" else "characters"
    if cut.head or cut.tail:
        return f"{cut.hidden:,} {unit} not shown"
    return f"{unit} past the cut"  # a view cut as text: how many is not known


def _refusal(cuts: list[Cut], edit_tool: bool) -> ScratchpadPartlySeenError:
    parts = "; ".join(cut.describe() for cut in cuts)
    lost = " and ".join(map(_lost, cuts))
    lists = any(cut.kind == "list" for cut in cuts)
    fixes = ["append", "read"] if edit_tool and lists else ["read"]
    return ScratchpadPartlySeenError(
        f"The update would replace what the scratchpad's view shows only in part ({parts}): "
        f"the {lost} would be lost, so nothing was written; the scratchpad is "
        "unchanged.",
        errors=[
            {
                "type": "shown_in_part",  # as validation errors are: loc, type, msg
                "loc": list(cut.path),
                "msg": cut.describe(),
                "kind": cut.kind,
                "total": cut.total,
                "shown": cut.head + cut.tail,
                "hidden": cut.hidden,
                "fixes": fixes,
            }
            for cut in cuts
        ],
    )
