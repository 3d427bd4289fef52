"""What the provider adapters share: reading SDK objects and dicts alike."""

from __future__ import annotations

from typing import Any

__all__ = ("read_response",)


def read_response(value: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """A provider's response as a plain dict (SDK models, pydantic, and dicts alike) and
    its token usage (``{}`` when it has none)."""
    if isinstance(value, dict):
        data: dict[str, Any] = value
    else:
        dump = getattr(value, "model_dump", None)
        if dump is None:
            raise TypeError(
                f"expected a provider response object or a dict, not {type(value).__name__}"
            )
        data = dump(mode="json", exclude_none=False)
    usage = data.get("usage")
    return data, dict(usage) if isinstance(usage, dict) else {}
