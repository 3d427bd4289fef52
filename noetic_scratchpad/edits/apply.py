"""Applying checked operations to a state, all or none, copying only what they change."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..merge import merge_state
from .read import read_all
from .refusals import Refusal, Where, kind_of, no_key, show, show_path
from .schema import MISSING, PLAIN_NAMES

__all__ = ("apply_edits", "edited_keys")


def apply_edits(state: str | Mapping[str, Any], operations: Sequence[Any]) -> dict[str, Any]:
    """The state after ``operations`` (operation form), applied in order, all or none.

    ``state`` is never changed; the result shares its untouched parts. A text state becomes
    an object first, as an update makes it. Raises ``ScratchpadUpdateError`` naming the
    failing operation and its path (``refused``: ``"edit"``).
    """
    checked = read_all(operations, PLAIN_NAMES)
    editor = _Editor(state)
    for number, op in enumerate(checked, 1):
        try:
            editor.apply(op)
        except Refusal as refusal:
            where = Where(number, len(checked), PLAIN_NAMES, op["op"], op["path"])
            raise where.refuse(refusal.detail, refusal.reason) from None
    return editor.root


def edited_keys(operations: Sequence[Mapping[str, Any]]) -> list[str]:
    """The top-level keys checked operations write or delete, once each, in order."""
    return list(dict.fromkeys(op["path"][0] for op in operations))


class _Editor:
    """Applies checked operations to a copy of a state, copying only what they change.

    Containers the editor copied are its own and change in place; the caller's are never
    touched, so a refusal half way leaves nothing to undo.
    """

    def __init__(self, state: str | Mapping[str, Any]) -> None:
        self.root: dict[str, Any] = merge_state(state, {})  # a shallow copy, or text made one
        self._own: dict[int, Any] = {id(self.root): self.root}  # holds them: ids stay unique

    def apply(self, op: Mapping[str, Any]) -> None:
        kind, path = op["op"], op["path"]
        parent = self._parent(path, create=kind == "set")
        key = path[-1]
        if kind == "set":
            parent[key] = op["value"]
            return
        current = parent.get(key, MISSING)
        if current is MISSING:
            also = "; use set to create it" if kind == "append" else ""
            raise Refusal("edit_path", no_key(path[:-1], parent, key) + also)
        if kind == "delete":
            del parent[key]
            return
        if not isinstance(current, list):
            raise Refusal("edit_type", f"{show_path(path)} is {kind_of(current)}, not a list")
        if kind == "append":
            parent[key] = self._owned(current)
            parent[key].extend(op["values"])
        elif "index" in op:
            parent[key] = self._owned(current)
            del parent[key][_position(op["index"], len(current))]
        else:
            kept = [item for item in current if not _same(item, op["value"])]
            if len(kept) == len(current):
                raise Refusal(
                    "edit_item",
                    f"the list has no item equal to {show(op['value'])} "
                    f"(it has {len(current)} items)",
                )
            self._own[id(kept)] = parent[key] = kept

    def _parent(self, path: Sequence[str], *, create: bool) -> dict[str, Any]:
        """The object (the editor's own) holding ``path[-1]``; ``create``: make missing ones."""
        node = self.root
        for depth, key in enumerate(path[:-1]):
            child = node.get(key, MISSING)
            if child is MISSING and create:
                child = {}
            elif child is MISSING:
                raise Refusal("edit_path", no_key(path[:depth], node, key))
            elif not isinstance(child, dict):
                raise Refusal(
                    "edit_path",
                    f"{show_path(path[: depth + 1])} is {kind_of(child)}, not an object, so "
                    "the path cannot go through it",
                )
            node[key] = node = self._owned(child)
        return node

    def _owned(self, container: Any) -> Any:
        if id(container) in self._own:
            return container
        copied = dict(container) if isinstance(container, dict) else list(container)
        self._own[id(copied)] = copied
        return copied


def _position(index: int, length: int) -> int:
    position = index + length if index < 0 else index
    if not 0 <= position < length:
        valid = f"0 to {length - 1}, or -1 to -{length}" if length else "none: it is empty"
        raise Refusal("edit_item", f"index {index} is out of range; valid indexes: {valid}")
    return position


def _same(a: Any, b: Any) -> bool:
    """JSON equality: ``true`` is not ``1``, ``1`` is ``1.0``, key order does not count."""
    if type(a) is bool or type(b) is bool:
        return a is b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[key], b[key]) for key in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and bool(a == b)
