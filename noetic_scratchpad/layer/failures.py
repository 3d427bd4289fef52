"""What the model reads when a call of the scratchpad's tools fails, for every host, naming
the tool as that host presents it: the one place these texts are written.

- :func:`refusal_text`: a refused update or edit (``ScratchpadUpdateError``): what
  happened (the error's ``message``, which speaks to no reader in particular) and what to
  do about it (a hint by ``reason``), naming the tool.
- :func:`empty_text`, :func:`unreadable_text`: a read of an empty scratchpad, and one
  that storage failed; :func:`unreadable_resource_text`: the same failure when a client
  reads the state as a resource (an MCP resource), outside any tool call.
- :func:`storage_failure_text`: storage failed under the call; one short, stable sentence
  that says what became of the call (not saved, or not known to be saved) and what to do.
  It never carries the error's own text: a path, a host name or a driver's message is for
  the operator, who gets it in the logs and in the ``UpdateRejected`` event.

The HTTP app (``server/problems.py``) and the CLI render the same errors for their readers.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ..edits import EDIT_REASONS
from ..errors import ScratchpadUpdateError, StorageError, StorageOutcomeUnknownError
from .texts import FREE_EXAMPLE

__all__ = (
    "FIX_HINTS",
    "empty_text",
    "refusal_text",
    "shown_in_part_hint",
    "sibling_tool",
    "storage_failure_text",
    "unreadable_resource_text",
    "unreadable_text",
)

#: What the model is told to do after each kind of refused update; ``{tool}`` is the name
#: of the tool it called, as the host presents it, ``{example}`` an update in the schema's
#: words, ``{block}`` the scratchpad called (``the scratchpad "profile"`` for a named one) and
#: ``{this}`` the same at the start of a sentence. An edit's own reasons are in
#: :data:`~noetic_scratchpad.edits.EDIT_REASONS`.
FIX_HINTS = {
    "malformed": "Call {tool} with a JSON object of the fields to change, for example {example}.",
    "schema": "Fix these fields and call {tool} again with only the fields to change.",
    "too_large": "Condense {block}: replace long lists or notes with a short summary "
    "(writing a key replaces its value) and try again.",
    "read_only": "{this} is read-only; do not try to update it.",
    "corrupt": "Do not call {tool} again: carry on with the task without it. The operator "
    "has been told, and must reset {block}.",
}


def refusal_text(
    exc: ScratchpadUpdateError,
    tool: str,
    example: str = FREE_EXAMPLE,
    block: str = "the scratchpad",
) -> str:
    """The model's text for its call of ``tool`` (as the host presents it) that ``exc``
    refused: what happened, then what to do, if there is a hint for its reason.
    ``example``: an update in the layer's schema's words (``layer.texts.example``);
    ``block``: the scratchpad called, as its texts name it (``layer.texts.block``)."""
    if exc.reason == "shown_in_part":
        return f"{exc.message} {shown_in_part_hint(exc.errors, tool)}"
    hints = EDIT_REASONS if exc.refused == "edit" and exc.reason in EDIT_REASONS else FIX_HINTS
    hint = hints.get(exc.reason)
    if not hint:
        return exc.message
    this = "This scratchpad" if block == "the scratchpad" else _capital(block)
    return f"{exc.message} {hint.format(tool=tool, example=example, block=block, this=this)}"


def shown_in_part_hint(parts: Sequence[Mapping[str, Any]], tool: str) -> str:
    """What to do after an update refused for dropping what the view hid (``parts``: the
    refusal's ``errors``), naming the edit and read tools after ``tool``, the update tool
    as the host presents it (``scratchpad_update``: ``scratchpad_edit``,
    ``scratchpad_read``)."""
    fixes = {fix for part in parts for fix in part.get("fixes", ())}
    read = sibling_tool(tool, "read")
    path = json.dumps(parts[0].get("loc", []), ensure_ascii=False) if parts else "[]"
    steps = []
    if "append" in fixes:
        steps.append(
            f"To add items to a list, call {sibling_tool(tool, 'edit')} with an append "
            f"operation at its path (such as {path}): it keeps the items you do not see"
        )
    steps.append(
        f"to rewrite it, first call {read} with its path to see the hidden part, then call "
        f"{tool} with the whole value, the hidden part included"
    )
    text = "; ".join(steps)
    return text[0].upper() + text[1:] + "."


def sibling_tool(tool: str, function: str) -> str:
    """The name of the layer's ``function`` tool beside ``tool``, its update tool as the
    host presents it: ``scratchpad/update`` -> ``scratchpad/read``; a name that does not
    end in ``update`` gives ``the scratchpad's read tool``."""
    if tool.endswith("update"):
        return tool[: -len("update")] + function
    return f"the scratchpad's {function} tool"


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


def storage_failure_text(exc: StorageError, tool: str, block: str = "the scratchpad") -> str:
    """The model's text for a write of ``tool`` that storage failed (``exc``); ``block``:
    the scratchpad called, as its texts name it."""
    if isinstance(exc, StorageOutcomeUnknownError):
        return (
            f"{_capital(block)} did not confirm this call, so it may or may not have been "
            f"saved. Check {block}, and call {tool} again only if the change is missing."
        )
    return (
        f"This call was not saved: {block}'s storage failed (the operator can see why "
        f"in the logs). Carry on with the task and call {tool} again later."
    )


def unreadable_text(tool: str, block: str = "the scratchpad") -> str:
    """The model's text for a read of ``tool`` that storage failed."""
    return (
        f"{_capital(block)} could not be read right now: its storage failed (the operator can "
        f"see why in the logs). Carry on with the task and call {tool} again later."
    )


def unreadable_resource_text() -> str:
    """The client's text for a read of the state as a resource that storage failed: no tool
    to call again, so it says to try later."""
    return "The scratchpad's storage failed; the server's log says why. Try again later."


def empty_text(kind: str, scope_id: str, update_tool: str, block: str = "the scratchpad") -> str:
    """The model's text for a read of a scratchpad nothing has been written to (``kind``:
    ``thread`` or ``resource``), naming the tool that writes it, as the host presents it."""
    return (
        f"{_capital(block)} of {kind} {scope_id!r} is empty. Call {update_tool} to write your "
        "notes."
    )
