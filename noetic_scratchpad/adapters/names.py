"""Tool names both ways between ours (``scratchpad/update``) and what providers accept.

OpenAI and Anthropic accept only ``^[a-zA-Z0-9_-]{1,64}$``. A name that already fits is
sent as it is. Otherwise ``/`` becomes ``__`` and any other character ``_``; a name that
would still be too long, or would collide with another tool's, is cut and given a short
hash of the original. The map is built from the whole tool list, so it is collision-free
and decodes every name it produced.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping

from ..errors import ScratchpadConfigError

__all__ = ("PROVIDER_NAME", "ToolNameMap", "check_tool_names")

PROVIDER_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_MAX = 64
_INVALID = re.compile(r"[^a-zA-Z0-9_-]")


def check_tool_names(tool_name: str, edit_tool_name: str) -> None:
    """Refuse a framework integration's tool names that a provider would not take, or
    one name for both of the scratchpad's tools (``ScratchpadConfigError``)."""
    for option, name in (("tool_name", tool_name), ("edit_tool_name", edit_tool_name)):
        if not isinstance(name, str) or not PROVIDER_NAME.match(name):
            raise ScratchpadConfigError(
                f"{option} {name!r} is not a name providers accept: use 1 to 64 "
                "letters, digits, '_' or '-'"
            )
    if tool_name == edit_tool_name:
        raise ScratchpadConfigError(
            f"edit_tool_name {edit_tool_name!r} is also the update tool's name; give the "
            "edit tool another name"
        )


def _sanitize(name: str) -> str:
    return _INVALID.sub("_", name.replace("/", "__"))


def _hashed(name: str, base: str, length: int) -> str:
    digest = hashlib.sha256(name.encode()).hexdigest()[:length]
    return f"{base[: _MAX - length - 1]}_{digest}"


class ToolNameMap:
    """A reversible mapping for one set of tool names.

    ``to_provider("scratchpad/update") == "scratchpad__update"`` and back with
    ``to_internal``. The result does not depend on the order of ``names``.
    """

    def __init__(self, names: Iterable[str]) -> None:
        unique = sorted(set(names))
        self._out: dict[str, str] = {}
        # Names that already fit keep themselves, so they are reserved first.
        for name in unique:
            if PROVIDER_NAME.match(name):
                self._out[name] = name
        taken = set(self._out.values())
        for name in unique:
            if name in self._out:
                continue
            base = _sanitize(name) or "tool"
            candidate = base
            length = 8
            while len(candidate) > _MAX or candidate in taken:
                candidate = _hashed(name, base, length)
                length += 4  # a 32-bit clash between two tool names: lengthen the hash
            self._out[name] = candidate
            taken.add(candidate)
        self._in: dict[str, str] = {sent: name for name, sent in self._out.items()}

    @property
    def mapping(self) -> Mapping[str, str]:
        """Our name -> the provider's name."""
        return dict(self._out)

    def to_provider(self, name: str) -> str:
        """The name to send for our tool ``name``; ``KeyError`` for a tool not in the map."""
        try:
            return self._out[name]
        except KeyError:
            raise KeyError(f"tool {name!r} is not among the tools this map was built for") from None

    def to_internal(self, provider_name: str) -> str:
        """Our name for a name the provider sent back. A name we never sent (a model's
        invention) comes back unchanged, so the runtime can answer "no such tool"."""
        return self._in.get(provider_name, provider_name)

    def __len__(self) -> int:
        return len(self._out)

    def __repr__(self) -> str:
        return f"ToolNameMap({self._out!r})"
