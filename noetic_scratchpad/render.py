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
from typing import Any

import orjson

__all__ = (
    "CLOSE_TAG",
    "OPEN_TAG",
    "RenderedView",
    "Tokenizer",
    "check_token_counter",
    "contains_float",
    "dumps_pretty",
    "estimate_tokens",
    "open_tag",
    "render_block",
    "render_view",
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
class RenderedView:
    """A block cut to fit a budget. ``text`` is ``None`` when not even a cut view fits.

    ``body`` is the whole text between the tags and ``shown`` how many of its characters
    the view keeps (all of them when nothing was cut), so ``body[shown:]`` is what the
    model does not see.
    """

    text: str | None
    tokens: int
    total_tokens: int
    omitted_tokens: int
    body: str = ""
    shown: int = 0

    @property
    def truncated(self) -> bool:
        return self.omitted_tokens > 0


def render_view(
    state: str | Mapping[str, Any],
    budget: int,
    tokenize: Tokenizer = estimate_tokens,
    *,
    has_floats: bool | None = None,
    name: str | None = None,
) -> RenderedView:
    """Render ``state`` in at most ``budget`` tokens, as ``tokenize`` counts them
    (``name``: a named block's, opened by ``<scratchpad name="...">``).

    When the whole block is too big, the body is cut (at a line end where possible) and a
    last line inside the block says about how many tokens were left out. A counter of
    the application's own (any but the default estimate) is checked on every count, and
    need not grow with the text: a real tokenizer may count a longer prefix as fewer
    tokens, and the cut still never exceeds the budget.
    """
    if tokenize is not estimate_tokens:
        tokenize = _checked(tokenize)
    opening = open_tag(name)
    body = render_body(state, has_floats=has_floats)
    full = f"{opening}\n{body}\n{CLOSE_TAG}"
    total = tokenize(full)
    if total <= budget:
        return RenderedView(full, total, total, 0, body, len(body))

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
