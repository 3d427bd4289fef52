"""Pydantic models built from values the library itself made and checked, unvalidated.

On the per-turn path (the event of every write, the message of every recall) validating
values the library just checked again costs more than everything else the object does.
:func:`unvalidated` makes the very object validation would: the same ``__dict__``, fields
set, extra and private attributes, as frozen. ``model_construct`` does the same with
generic work (defaults, aliases) that costs more than validating.
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel

__all__ = ("unvalidated",)

M = TypeVar("M", bound=BaseModel)

_new = object.__new__
_set = object.__setattr__  # past a frozen model's own __setattr__, as pydantic does


def unvalidated(model: type[M], fields: dict[str, Any], given: frozenset[str]) -> M:
    """A ``model`` holding ``fields``: every field, defaults included, in the model's order;
    ``given``, the fields the caller names (``model_fields_set``). Its tests compare it
    with the validated object."""
    built: M = _new(model)
    _set(built, "__dict__", fields)
    _set(built, "__pydantic_fields_set__", set(given))
    _set(built, "__pydantic_extra__", None)
    _set(built, "__pydantic_private__", None)
    return built
