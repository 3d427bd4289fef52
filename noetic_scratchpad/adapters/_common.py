"""What the provider adapters share: reading SDK objects and dicts alike."""

from __future__ import annotations

from typing import Any

__all__ = ("as_dict", "usage_dict")


def as_dict(value: Any) -> dict[str, Any]:
    """A provider object as a plain dict: SDK models (pydantic) and dicts alike."""
    if isinstance(value, dict):
        return value
    dump = getattr(value, "model_dump", None)
    if dump is None:
        raise TypeError(
            f"expected a provider response object or a dict, not {type(value).__name__}"
        )
    dumped: dict[str, Any] = dump(mode="json", exclude_none=False)
    return dumped


def usage_dict(data: dict[str, Any]) -> dict[str, Any]:
    usage = data.get("usage")
    return dict(usage) if isinstance(usage, dict) else {}
