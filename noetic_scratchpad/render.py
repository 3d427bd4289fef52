"""The ``<scratchpad>`` block a model sees: JSON body, escaping, token estimate, budget cut.

Two escapes keep the body inside its block and on the lines it seems to be on:

- a closing tag ``</scratchpad`` (any letter case) is written ``<\\/scratchpad``, which
  JSON reads back as the same string, so the content can never close the block early;
- the characters U+2028 (line separator), U+2029 (paragraph separator) and U+0085 (next
  line, NEL), which some tokenizers, editors and JavaScript-based hosts treat as line
  breaks while others do not, are written as the six-character escapes ``\\u2028``,
  ``\\u2029`` and ``\\u0085``, as ``json.dumps`` with ``ensure_ascii=True`` writes them.
  In an object state they only occur inside strings, so the body stays JSON that reads
  back as the same state. A text state is shown the same way: the escape, not a newline,
  so the hidden character becomes visible, and the text keeps the lines it has.

A named block opens with ``<scratchpad name="profile">`` and closes as every block does, so
the same escape keeps its body inside it; the name is a letter, then letters, digits or
``_`` (checked here too), so it cannot carry a quote or a bracket into the tag.

Everything else in the body is ``json.dumps(state, indent=2, ensure_ascii=False)`` exactly,
or the text itself.
"""

from __future__ import annotations

import json
import math
import operator
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

import orjson

__all__ = (
    "CLOSE_TAG",
    "OPEN_TAG",
    "Cut",
    "RenderedView",
    "Tokenizer",
    "check_token_counter",
    "contains_float",
    "dumps_pretty",
    "estimate_tokens",
    "hidden_text",
    "may_be_cut",
    "open_tag",
    "render_block",
    "render_view",
    "shown_in_part",
)

OPEN_TAG = "<scratchpad>"
CLOSE_TAG = "</scratchpad>"

Tokenizer = Callable[[str], int]
"""A token counter: ``count_tokens(text)`` is the number of tokens ``text`` takes for the
model (tiktoken's ``lambda text: len(encoding.encode(text))``, or a provider's counter)."""

_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*")


def open_tag(name: str | None = None) -> str:
    """The tag that opens the block: ``<scratchpad>``, or for a named scratchpad
    ``<scratchpad name="profile">``; ``ValueError`` for a name that is not a letter, then
    letters, digits or ``_``."""
    if name is None:
        return OPEN_TAG
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ValueError(f"a block name is a letter, then letters, digits or '_', not {name!r}")
    return f'<scratchpad name="{name}">'


# Matches a closing tag in any letter case; "<\/" keeps the body valid JSON ("\/" is "/").
_CLOSING = re.compile(r"</(scratchpad)", re.IGNORECASE)

# Line breaks to some readers and not to others: shown as their JSON escapes.
_SEPARATORS = {0x2028: "\\u2028", 0x2029: "\\u2029", 0x85: "\\u0085"}


def estimate_tokens(text: str) -> int:
    """The default token estimate: about four characters a token.

    Close for English prose and JSON notes with OpenAI's tokenizers, but it under-counts
    text in scripts that take a token or more a character (Chinese, Japanese, Korean) by
    up to four times: docs/concepts.md gives the measured error. Pass ``count_tokens=``
    to a host for budgets in the model's own tokens.
    """
    return math.ceil(len(text) / 4)


def check_token_counter(count_tokens: object, name: str = "count_tokens") -> Tokenizer | None:
    """``count_tokens`` if it is ``None`` (the default estimate) or callable; else a
    ``ScratchpadConfigError`` at once, not at the first recall."""
    if count_tokens is None or callable(count_tokens):
        return count_tokens
    from .errors import ScratchpadConfigError  # errors imports nothing of ours; cheap

    raise ScratchpadConfigError(
        f"{name} must be a function of a text returning its number of tokens, such as "
        f"lambda text: len(encoding.encode(text)), not {count_tokens!r}"
    )


def _checked(tokenize: Tokenizer) -> Tokenizer:
    """``tokenize`` with each count checked: a whole number, 0 or more."""

    def count(text: str) -> int:
        counted = tokenize(text)
        try:
            tokens = operator.index(counted)  # int, or an integer type such as numpy's
        except TypeError:
            raise TypeError(
                f"the token counter {tokenize!r} returned {counted!r}, not a number of "
                "tokens; pass a function returning an int, such as "
                "lambda text: len(encoding.encode(text))"
            ) from None
        if tokens < 0:
            raise ValueError(f"the token counter {tokenize!r} returned {tokens} tokens")
        return tokens

    return count


def contains_float(value: Any) -> bool:
    """Whether ``value`` holds a float, or anything but plain JSON types, at any depth."""
    kind = type(value)
    if kind is dict:
        items = value.values()
    elif kind is list:
        items = value
    else:
        return not (kind is str or kind is int or kind is bool or value is None)
    for item in items:
        kind = type(item)
        if kind is str or kind is int or kind is bool or item is None:
            continue
        if contains_float(item):
            return True
    return False


def dumps_pretty(state: Mapping[str, Any], *, has_floats: bool | None = None) -> str:
    """``json.dumps(state, indent=2, ensure_ascii=False)``: the body the contract promises.

    orjson writes exactly the same text (every string and integer, verified over all code
    points) some 30x faster, except for floats, which it formats its own way (``1e-7`` and
    ``0.00001`` where ``json`` writes ``1e-07`` and ``1e-05``); states with a float, and
    integers past 64 bits, go to ``json``. ``has_floats`` is for a caller that already
    knows; ``None`` looks.
    """
    if has_floats is None:
        has_floats = contains_float(state)
    if not has_floats:
        try:
            return orjson.dumps(state, option=orjson.OPT_INDENT_2).decode()
        except TypeError:  # integers past 64 bits, or not JSON at all: json decides
            pass
    return json.dumps(state, indent=2, ensure_ascii=False)


def render_body(state: str | Mapping[str, Any], *, has_floats: bool | None = None) -> str:
    """The text between the tags, escaped so it can never close the block early and
    shows line and paragraph separators (U+2028, U+2029, U+0085) as ``\\u2028``-style
    escapes (see the module's docstring)."""
    body = state if isinstance(state, str) else dumps_pretty(state, has_floats=has_floats)
    # Each test is a memchr (or nothing, when the text cannot hold the character).
    if "\u2028" in body or "\u2029" in body or "\x85" in body:
        body = body.translate(_SEPARATORS)
    # "<" alone is a memchr; CPython searches "</" some 70x slower on a 7 KB body.
    return _CLOSING.sub(r"<\\/\1", body) if "<" in body else body


def render_block(state: str | Mapping[str, Any], *, name: str | None = None) -> str:
    """The whole block for ``state``, uncut (``name``: a named block's)."""
    return f"{open_tag(name)}\n{render_body(state)}\n{CLOSE_TAG}"


@dataclass(frozen=True, slots=True)
class Cut:
    """A list or a text that a view shows in part: the first ``head`` and the last ``tail``
    of its ``total`` items (a list) or characters (a text), the middle left out.

    ``path``: the object keys from the top of the state to it, as the edit tool takes a
    path; ``()`` is a text state itself.
    """

    path: tuple[str, ...]
    kind: Literal["list", "text"]
    total: int
    head: int
    tail: int

    @property
    def hidden(self) -> int:
        """How many items (or characters) the view leaves out."""
        return self.total - self.head - self.tail

    def describe(self) -> str:
        """What the view hides of it, in words: for the cut notice and refusals."""
        where = "the text" if not self.path else json.dumps(list(self.path), ensure_ascii=False)
        unit = "items" if self.kind == "list" else "characters"
        if not self.head and not self.tail:  # a view cut as text, not by its structure
            return f"{where}, of {self.total:,} {unit}, may be cut off"
        return (
            f"{where} shows {self.head + self.tail:,} of its {self.total:,} {unit} (the "
            f"first {self.head:,} and the last {self.tail:,})"
        )


class RenderedView(NamedTuple):
    """A block cut to fit a budget. ``text`` is ``None`` when not even a cut view fits.

    ``body`` is the whole text between the tags and ``shown`` how many of its characters
    the view keeps (all of them when nothing was cut), so ``body[shown:]`` is what the
    model does not see. A view shortened by its structure (``cuts``: the lists and texts
    it shows in part) shows its whole ``body``, the state with those parts left out.
    A named tuple, not a frozen dataclass: as immutable, and made on every recall at a
    third of the cost.
    """

    text: str | None
    tokens: int
    total_tokens: int
    omitted_tokens: int
    body: str = ""
    shown: int = 0
    cuts: tuple[Cut, ...] = ()

    @property
    def truncated(self) -> bool:
        return self.omitted_tokens > 0


def render_view(
    state: str | Mapping[str, Any],
    budget: int,
    tokenize: Tokenizer = estimate_tokens,
    *,
    has_floats: bool | None = None,
    advice: str = "",
    name: str | None = None,
) -> RenderedView:
    """Render ``state`` in at most ``budget`` tokens, as ``tokenize`` counts them
    (``name``: a named block's, opened by ``<scratchpad name="...">``).

    When the whole block is too big, its long lists and texts (those reached through
    object keys, see :class:`Cut`) are shortened first: a list keeps its first and its
    latest items, a text its beginning and its end, and a marker stands where the middle
    was, so the body is still JSON (or the text) a reader can follow. A last line inside
    the block says about how many tokens were left out, which parts are shown in part, and
    ``advice`` (what the model can do about it). When even the shortest such view does
    not fit, the body is cut as text (at a line end where possible) under a shorter
    notice. A counter of the application's own (any but the default estimate) is checked
    on every count, and need not grow with the text: a real tokenizer may count a longer
    prefix as fewer tokens, and the view still never exceeds the budget.
    """
    if tokenize is not estimate_tokens:
        tokenize = _checked(tokenize)
    opening = open_tag(name)
    body = render_body(state, has_floats=has_floats)
    full = f"{opening}\n{body}\n{CLOSE_TAG}"
    total = tokenize(full)
    if total <= budget:
        return RenderedView(full, total, total, 0, body, len(body))
    shortened = _Shortening(state, budget, tokenize, total, has_floats, advice, opening).run()
    if shortened is not None:
        return shortened
    return _cut_as_text(body, budget, tokenize, total, opening)


def shown_in_part(
    state: str | Mapping[str, Any],
    budget: int,
    tokenize: Tokenizer = estimate_tokens,
    *,
    has_floats: bool | None = None,
    advice: str = "",
) -> tuple[Cut, ...]:
    """The lists and texts the view of ``state`` in ``budget`` tokens shows in part;
    ``()`` when it shows everything (``advice``: the notice's, as the model's view has
    it). Looks at no more than it must: a state whose every list and text is short is
    never rendered."""
    parts = _parts(state)
    if not parts:
        return ()
    view = render_view(state, budget, tokenize, has_floats=has_floats, advice=advice)
    if view.cuts or not view.truncated:
        return view.cuts
    # Cut as text: which parts the prefix shows whole is not known, so every long list and
    # text counts as shown in part, none of it known to be seen (head and tail 0).
    return tuple(
        Cut(path, "list" if type(value) is list else "text", len(value), 0, 0)
        for path, value in parts
    )


#: A list is shortened only from this many items on, a text from this many characters.
_MIN_ITEMS = 4
_MIN_CHARS = 240
#: The fewest items (characters) a shortened list (text) keeps.
_KEEP_ITEMS = 2
_KEEP_CHARS = 120


def hidden_text(state: str | Mapping[str, Any], cuts: tuple[Cut, ...]) -> str:
    """What a view shortened by ``cuts`` does not show of ``state``, for a person (the
    inspector): each part's hidden items (characters), under a line naming them."""
    sections = []
    for cut in cuts:
        value: Any = state
        for key in cut.path:
            value = value[key]
        hidden = value[cut.head : cut.total - cut.tail]
        unit = "items" if cut.kind == "list" else "characters"
        where = json.dumps(list(cut.path), ensure_ascii=False) if cut.path else "the text"
        body = (
            hidden if isinstance(hidden, str) else json.dumps(hidden, indent=2, ensure_ascii=False)
        )
        sections.append(f"{where}, {unit} {cut.head} to {cut.total - cut.tail - 1}:\n{body}")
    return "\n\n".join(sections)


def may_be_cut(value: Any) -> bool:
    """Whether a view may show ``value`` in part: a list or text long enough to shorten."""
    kind = type(value)
    return (kind is list and len(value) >= _MIN_ITEMS) or (kind is str and len(value) >= _MIN_CHARS)


def _parts(state: str | Mapping[str, Any]) -> list[tuple[tuple[str, ...], Any]]:
    """The lists and texts of ``state`` long enough to shorten, by their paths of object
    keys (a list's items are never looked into)."""
    found: list[tuple[tuple[str, ...], Any]] = []

    def walk(value: Any, path: tuple[str, ...]) -> None:
        kind = type(value)
        if kind is dict:
            for key, item in value.items():
                walk(item, (*path, key))
        elif may_be_cut(value):
            found.append((path, value))

    walk(state, ())
    return found


def _split(kind: str, shown: int) -> tuple[int, int]:
    """How a list (text) shown in ``shown`` items (characters) splits into head and tail:
    a few first items and mostly the latest ones; a third of a text's start."""
    head = min(3, (shown + 2) // 4) if kind == "list" else shown // 3
    return head, shown - head


def _shorten(value: Any, cut: Cut) -> Any:
    if cut.kind == "list":
        marker = (
            f"[{cut.hidden:,} items not shown here: indexes {cut.head} to "
            f"{cut.total - cut.tail - 1}]"
        )
        return [*value[: cut.head], marker, *value[cut.total - cut.tail :]]
    return (
        f"{value[: cut.head]} [... {cut.hidden:,} characters not shown ...] "
        f"{value[cut.total - cut.tail :]}"
    )


def _apply_cuts(state: str | Mapping[str, Any], cuts: tuple[Cut, ...]) -> Any:
    """``state`` with each cut part shortened; copies only the objects on the way."""
    if isinstance(state, str):  # a text state: its one cut is the text itself
        return _shorten(state, cuts[0])
    root = dict(state)
    for cut in cuts:
        node = root
        for key in cut.path[:-1]:
            node[key] = dict(node[key])
            node = node[key]
        node[cut.path[-1]] = _shorten(node[cut.path[-1]], cut)
    return root


def _notice(omitted: int, total: int, cuts: tuple[Cut, ...], advice: str) -> str:
    parts = "; ".join(cut.describe() for cut in cuts)
    text = (
        f"[scratchpad view truncated: about {omitted} of {total} tokens left out; the full "
        f"state is kept. Shown in part: {parts}."
    )
    return f"{text} {advice}]" if advice else f"{text}]"


class _Shortening:
    """The search for a view that shortens long lists and texts until the block fits.

    Each part gets the same room (characters of its JSON) at most, as water fills
    vessels: the parts that take more are cut to it, the smaller ones are shown whole; a
    binary search finds the most room that fits, in some 17 renders whatever the state.
    The shortest view is tried first: if it does not fit, none does."""

    def __init__(
        self,
        state: str | Mapping[str, Any],
        budget: int,
        tokenize: Tokenizer,
        total: int,
        has_floats: bool | None,
        advice: str,
        opening: str,
    ) -> None:
        self.state = state
        self.opening = opening
        self.budget = budget
        self.tokenize = tokenize
        self.total = total
        self.has_floats = has_floats
        self.advice = advice
        self.parts = _parts(state)
        self.kinds: dict[tuple[str, ...], Literal["list", "text"]] = {
            path: "list" if type(value) is list else "text" for path, value in self.parts
        }
        self.lengths = {path: len(value) for path, value in self.parts}
        # The room each part takes, uncut (characters of its JSON).
        self.sizes = {path: max(1, len(_sized(value))) for path, value in self.parts}

    def run(self) -> RenderedView | None:
        if not self.parts:
            return None
        shortest = self._view(0)
        if shortest.tokens > self.budget:
            return None
        best, low, high = shortest, 0, max(self.sizes.values())  # high: shows all, too big
        while high - low > 1:
            middle = (low + high) // 2
            view = self._view(middle)
            if view.tokens <= self.budget:
                best, low = view, middle
            else:
                high = middle
        return best

    def _shown(self, path: tuple[str, ...], room: int) -> int:
        """How many items (characters) of the part at ``path`` fit in ``room``."""
        length = self.lengths[path]
        keep = _KEEP_ITEMS if self.kinds[path] == "list" else _KEEP_CHARS
        return min(length, max(keep, room * length // self.sizes[path]))

    def _view(self, room: int) -> RenderedView:
        cuts = []
        for path, length in self.lengths.items():
            count = self._shown(path, room)
            if count < length:
                cuts.append(Cut(path, self.kinds[path], length, *_split(self.kinds[path], count)))
        shown = tuple(cuts)
        body = render_body(_apply_cuts(self.state, shown), has_floats=self.has_floats)
        omitted = max(1, self.total - self.tokenize(f"{self.opening}\n{body}\n{CLOSE_TAG}"))
        notice = _notice(omitted, self.total, shown, self.advice)
        text = f"{self.opening}\n{body}\n{notice}\n{CLOSE_TAG}"
        return RenderedView(text, self.tokenize(text), self.total, omitted, body, len(body), shown)


def _sized(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _cut_as_text(
    body: str, budget: int, tokenize: Tokenizer, total: int, opening: str
) -> RenderedView:
    """The body cut as text, at a line end where possible, under a notice saying about how
    many tokens were left out: when no shortened view fits."""

    def cut_block(length: int, omitted: int) -> str:
        notice = (
            f"[scratchpad view truncated: about {omitted} of {total} tokens left out; "
            "the full state is kept]"
        )
        return f"{opening}\n{body[:length]}\n{notice}\n{CLOSE_TAG}"

    # Binary search for the longest prefix that fits; the notice is sized with ``total``,
    # which has at least as many digits as the final count.
    low, high = -1, len(body)
    while high - low > 1:
        middle = (low + high) // 2
        if tokenize(cut_block(middle, total)) <= budget:
            low = middle
        else:
            high = middle
    length = low
    while length >= 0:
        line_end = body.rfind("\n", 0, length)
        cut = line_end if line_end > 0 else length
        omitted = max(1, total - tokenize(f"{opening}\n{body[:cut]}\n{CLOSE_TAG}"))
        text = cut_block(cut, omitted)
        tokens = tokenize(text)
        if tokens <= budget:
            return RenderedView(text, tokens, total, omitted, body, cut)
        # A counter that does not grow with the text (a real tokenizer can count a longer
        # prefix as fewer tokens): step back to a shorter prefix until the block fits.
        length = cut if line_end > 0 else length - max(1, length // 8)
    return RenderedView(None, 0, total, total, body, 0)
