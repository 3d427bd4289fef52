"""Edit operations, the pure core of the opt-in ``scratchpad/edit`` tool.

An edit call carries a list of operations applied in order, all or none: ``append`` items
to a list, ``remove`` items from a list (every item equal to a value, or the one at an
index), ``delete`` a key, ``set`` a value. A path is a list of object keys from the top of
the state; an edit never addresses list items by position except ``remove``'s ``index``.

Operations come in two forms. The *operation form*, what :func:`apply_edits` takes and code
writes, holds the values themselves: ``{"op": "append", "path": ["steps"], "values": [...]}``,
``{"op": "remove", "path": [...], "value": ...}`` or ``..., "index": -1}``, ``{"op":
"delete", "path": [...]}``, ``{"op": "set", "path": [...], "value": ...}``. The *tool
form*, the model's arguments (:data:`EDIT_PARAMETERS`, read by
:func:`parse_edit_arguments`), carries every value as JSON text in ``value_json`` and
``values_json``. OpenAI's strict mode must accept the schema, and it cannot say "any JSON
value": every schema needs a type and every object closed properties, so an object value
of unknown keys cannot be described at all. JSON text is what every model writes well; a
provider that is not strict may send the value itself instead, which is taken as it is.
Strict mode also makes every field required, so unused ones are ``null``.

Choices: ``set`` creates missing objects on its path, as an update does; ``append``,
``remove`` and ``delete`` refuse a path that does not exist (``set`` the list first).
``remove`` of a value no item equals is an error, not a no-op: the model believes the item
is there, and silence would hide the mismatch (another spelling, a stale belief).

Refusals are :class:`~noetic_scratchpad.errors.ScratchpadUpdateError` whose message names
the operation (1-based), its op and path, and says nothing was applied; their ``refused``
is ``"edit"``. What the model is told to do (:data:`EDIT_REASONS`, naming the edit tool as
the host presents it) is added by ``layer.refusal_text``. Reasons: ``malformed`` (the
call's shape, JSON text, a value that cannot be stored), ``edit_path`` (a key on the path
is missing, or the path goes through something that is not an object), ``edit_type``
(append or remove on something that is not a list), ``edit_item`` (remove: no item
equals the value, or the index is out of range).
"""

from __future__ import annotations

from .apply import apply_edits, edited_keys
from .read import parse_edit_arguments
from .schema import (
    EDIT_DESCRIPTION,
    EDIT_PARAMETERS,
    EDIT_REASONS,
    EDIT_TOOL,
    OPERATIONS,
    edit_description,
)

__all__ = (
    "EDIT_DESCRIPTION",
    "EDIT_PARAMETERS",
    "EDIT_REASONS",
    "EDIT_TOOL",
    "OPERATIONS",
    "apply_edits",
    "edit_description",
    "edited_keys",
    "parse_edit_arguments",
)
