"""The update pipeline: everything a write does to a state, pure and synchronous.

One update goes through these steps, in this order:

1. :meth:`UpdatePipeline.prepare`: refuse a read-only scratchpad, parse the arguments (a
   model's JSON text, or a mapping from code), clean them into plain JSON values. Nothing
   here looks at any state, so a bad call is refused before storage is touched.
2. :meth:`UpdatePipeline.transition`, against the *stored* state, inside the backend's
   atomic read-modify-write (possibly in a database thread, possibly more than once):
   recover (a stored state that no longer fits the schema starts over from the initial
   state), merge, gate (the schema), encode, size check.

Every refusal is a :class:`~noetic_scratchpad.errors.ScratchpadUpdateError` that carries
what happened as data (``reason``, ``errors``, ``limit``, what was ``refused``) and a
message for no reader in particular; each host renders it for its own reader (the model's
text: :func:`.failures.refusal_text`). No tool name enters here. This module imports
nothing asynchronous; :mod:`.writer` runs it against storage.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, cast

from pydantic import PydanticUserError

from .. import _json
from ..edits import apply_edits, edited_keys, parse_edit_arguments
from ..errors import (
    ScratchpadConfigError,
    ScratchpadReadOnlyError,
    ScratchpadUpdateError,
    ScratchpadValidationError,
)
from ..merge import MAX_DEPTH, InvalidValueError, merge_noting, merge_state, to_json_value
from ..render import contains_float
from ..schema import SchemaGate
from .arguments import describe_errors, json_kind, parse_arguments, reject_constant
from .config import TEXT_FIELD, ScratchpadConfig, ScratchpadState
from .seen import ViewLimit, check_seen
from .snapshot import Snapshot

__all__ = ("Rewrite", "Transition", "UpdatePipeline", "copy_state")

#: Why a stored state cannot be used, and the validation errors behind it.
Problem = tuple[str, list[dict[str, Any]]]


class UpdatePipeline:
    """The pure steps of a scratchpad write for one configuration."""

    def __init__(self, config: ScratchpadConfig) -> None:
        self.config = config
        self._text_notes = config.text_notes  # a property of the config: asked every update
        try:
            self.gate = None if config.schema is None else SchemaGate(config.schema)
        except (TypeError, ValueError, PydanticUserError) as exc:  # types pydantic cannot handle
            raise ScratchpadConfigError(f"unusable scratchpad schema: {exc}") from exc
        self._initial: ScratchpadState = self._check_template(config.template)

    def initial_state(self) -> ScratchpadState:
        """The state of a scope nothing has been written to: the template, else empty."""
        return copy_state(self._initial)

    # -- step 1: the arguments --------------------------------------------------------

    def prepare(self, args: str | Mapping[str, Any]) -> dict[str, Any] | Rewrite:
        """The update ``args`` ask for, checked before it meets any state: an update to
        merge, or for text notes the rewrite to the new text."""
        if self.config.read_only:
            raise _read_only("update")
        # A plain dict is copied by to_json_value anyway; anything else is parsed first.
        values = args if type(args) is dict else parse_arguments(args)
        if self._text_notes:
            return _text_rewrite(values)
        try:
            cleaned: dict[str, Any] = to_json_value(values)
        except InvalidValueError as exc:
            raise ScratchpadUpdateError(
                f"The update cannot be stored as JSON: {exc}. Only objects, lists, strings, "
                "finite numbers, booleans and null can be.",
                reason="malformed",
            ) from None
        return cleaned

    def prepare_edit(self, args: str | Mapping[str, Any], *, plain: bool = False) -> Rewrite:
        """The edit ``args`` ask for: a ``scratchpad/edit`` call (values as JSON text), or
        with ``plain`` operations from code (values as they are), see :mod:`..edits`.
        A call is checked before it meets any state."""
        if self.config.read_only:
            raise _read_only("edit")
        if plain:
            operations = list(args["operations"]) if isinstance(args, Mapping) else []
        else:
            operations = parse_edit_arguments(args)

        def edit(state: ScratchpadState) -> tuple[dict[str, Any], tuple[str, ...]]:
            edited = apply_edits(state, operations)  # checks plain operations
            return edited, tuple(edited_keys(operations))

        return Rewrite(edit, {"operations": operations}, "edit")

    # -- step 2: against the stored state -----------------------------------------------

    def transition(
        self,
        stored: Any,
        update: Mapping[str, Any] | Rewrite,
        *,
        known: Snapshot | None = None,
        revision: int = 0,
        cleaned: bool = False,
        seen: ViewLimit | None = None,
        journal: bool = False,
    ) -> Transition:
        """The state after ``update``, from what storage holds (``None``: nothing), as a
        :class:`~.snapshot.Snapshot` at ``revision`` (the revision it is to be stored at).

        ``update`` is merged into the state, or a :class:`Rewrite` (an edit, a revert)
        computes the new state from it, which the whole schema then checks.

        ``known``: what the caller knows about ``stored`` (a snapshot of the same state):
        validated, it is not checked again; its ``has_floats`` carries over to the new
        state when the update adds none. ``cleaned``: ``update`` came from
        :meth:`prepare` and is the caller's alone, so the new state may hold its values
        instead of copies. ``journal``: the write is journaled, so a cleaned update merged
        into the stored object state notes its undo as it merges (``Transition.undo``).
        Raises ``ScratchpadUpdateError``; pure otherwise.
        """
        if stored is None:  # the initial state, checked when the layer was built
            state, checked = self.initial_state(), True
        else:
            state, checked = stored, known is not None and known.validated
        if not checked and self.problem(state) is not None:
            # Checked before merging: an update that happens to fix the bad field must not
            # bring back the rest of a state that init reported as discarded.
            state, stored = self.initial_state(), None
        if seen is not None:
            _check_seen(state, update, seen)
        refused = "update"
        undo = None
        if isinstance(update, Rewrite):
            refused = update.kind
            merged, keys = update.apply(state)
            errors = [] if self.gate is None else self.gate.errors(merged)
            if self.gate is not None and isinstance(state, dict) and isinstance(merged, dict):
                errors += self.gate.removed_required(state, merged)
        else:
            if journal and cleaned and type(state) is dict and state is stored:
                # The merge notes the journal's undo as it goes: one walk, not two.
                restore: list[list[Any]] = []
                remove: list[list[str]] = []
                merged = merge_noting(state, update, MAX_DEPTH, [], restore, remove)
                undo = {"restore": restore, "remove": remove} if remove else {"restore": restore}
            else:
                merged = merge_state(state, update, cleaned=cleaned)
            keys = tuple(update)
            # The prior state fits, so only the fields the update writes can fail.
            errors = [] if self.gate is None else self.gate.errors_after_update(merged, keys)
        if errors:
            raise ScratchpadValidationError(
                f"The {refused} does not fit the scratchpad's schema: {describe_errors(errors)}.",
                errors=errors,
                refused=refused,
            )
        encoded = _json.dumps(merged)
        limit = self.config.max_state_bytes
        if len(encoded) > limit:
            raise ScratchpadUpdateError(
                f"The scratchpad would grow to {len(encoded):,} bytes, over its limit of "
                f"{limit:,}.",
                reason="too_large",
                refused=refused,
                limit=limit,
                size=len(encoded),
            )
        # Whether the new state holds floats follows from the stored state's, known
        # without looking at the whole state, when the update brings none.
        has_floats = None
        if (
            known is not None
            and known.has_floats is not None
            and stored is not None
            and not isinstance(update, Rewrite)
            and not contains_float(update)
        ):
            has_floats = known.has_floats
        return Transition(Snapshot(merged, revision, encoded, True, has_floats), state, keys, undo)

    # -- loading ----------------------------------------------------------------------------

    def problem(self, state: Any) -> Problem | None:
        """Why a stored state cannot be used, or ``None`` when it can."""
        if self.gate is None:
            if isinstance(state, str | dict):
                return None
            return f"stored state is a JSON {json_kind(state)}, not text or an object", []
        if not isinstance(state, dict):
            return f"stored state is a JSON {json_kind(state)}, not an object", []
        errors = self.gate.errors(state)
        if errors:
            return f"stored state does not fit the schema: {describe_errors(errors)}", errors
        return None

    def _check_template(self, template: str | None) -> ScratchpadState:
        if self.gate is None:
            return template or ""
        if not template:
            return {}
        try:
            parsed = json.loads(template, parse_constant=reject_constant)
            if isinstance(parsed, dict):
                parsed = to_json_value(parsed)  # strips forbidden keys; refuses 1e400 (inf)
        except (ValueError, RecursionError) as exc:
            raise ScratchpadConfigError(
                f"with a schema, the template must be a JSON object; it is not JSON: {exc}"
            ) from None
        if not isinstance(parsed, dict):
            raise ScratchpadConfigError(
                f"with a schema, the template must be a JSON object, not a {json_kind(parsed)}"
            )
        errors = self.gate.errors(parsed)
        if errors:
            raise ScratchpadConfigError(
                f"the template does not fit the schema: {describe_errors(errors)}"
            )
        return parsed


class Rewrite:
    """A change that computes the whole new state from the current one (an edit, a
    revert), rather than an update merged into it.

    ``apply(state)`` is pure and returns the new state and the top-level keys it wrote;
    ``applied`` is what the change was, as the journal records it; ``kind``, what it is
    (``"edit"``, ``"revert"``), which its refusals say they refused.
    """

    __slots__ = ("applied", "apply", "kind")

    def __init__(
        self,
        apply: Callable[[ScratchpadState], tuple[Any, tuple[str, ...]]],
        applied: Any,
        kind: str = "edit",
    ) -> None:
        self.apply = apply
        self.applied = applied
        self.kind = kind


class Transition:
    """What a transition produced: the new state's ``snapshot`` (validated, encoded), the
    state it was made from (``base``: the stored one, or the initial state that replaced
    it), the top-level keys it wrote, and the journal's ``undo`` of it when the merge
    noted it (see :meth:`UpdatePipeline.transition`'s ``journal``), else ``None``."""

    __slots__ = ("base", "keys", "snapshot", "undo")

    def __init__(
        self,
        snapshot: Snapshot,
        base: ScratchpadState,
        keys: tuple[str, ...],
        undo: dict[str, Any] | None = None,
    ) -> None:
        self.snapshot = snapshot
        self.base = base
        self.keys = keys
        self.undo = undo

    @property
    def state(self) -> dict[str, Any]:
        """The new state: an object, but where a rewrite restores a text state."""
        return cast("dict[str, Any]", self.snapshot.state)


def _text_rewrite(values: Mapping[str, Any]) -> dict[str, Any] | Rewrite:
    """The rewrite of text notes that ``values`` (``{"notes": "the new text"}``) ask for."""
    if not values:
        return {}  # an empty update: nothing to write, as for object notes
    text = values.get(TEXT_FIELD)
    if set(values) != {TEXT_FIELD} or not isinstance(text, str):
        sent = ", ".join(repr(key) for key in values) or "no key"
        raise ScratchpadUpdateError(
            f"The scratchpad holds text, so an update is the whole new text under "
            f"{TEXT_FIELD!r} (a string), and nothing else; this one held {sent}"
            + (
                ""
                if isinstance(text, str) or text is None
                else f" ({TEXT_FIELD!r} as a JSON {json_kind(text)})"
            )
            + ". Nothing was written.",
            reason="malformed",
        )

    def rewrite(state: ScratchpadState) -> tuple[str, tuple[str, ...]]:
        return text, ()

    return Rewrite(rewrite, {TEXT_FIELD: text}, "update")


def _check_seen(
    state: ScratchpadState, update: Mapping[str, Any] | Rewrite, seen: ViewLimit
) -> None:
    """The model's update (an update to merge, or the rewrite of text notes) checked
    against its view of ``state``; an edit or a revert says what it changes, and is not."""
    if not state:  # an empty state (a new scope's) hides nothing from any view
        return
    if not isinstance(update, Rewrite):
        check_seen(state, update, seen)
    elif update.kind == "update" and isinstance(update.applied, dict):
        text = update.applied.get(TEXT_FIELD)
        if isinstance(text, str):
            check_seen(state, text, seen)


def _read_only(refused: str) -> ScratchpadReadOnlyError:
    return ScratchpadReadOnlyError(
        f"This scratchpad is read-only, so the {refused} was refused; nothing was written.",
        refused=refused,
    )


def copy_state(state: ScratchpadState) -> ScratchpadState:
    """A deep copy, by JSON round trip: several times faster than ``copy.deepcopy``."""
    if isinstance(state, str):
        return state
    copied: dict[str, Any] = _json.loads(_json.dumps(state))
    return copied
