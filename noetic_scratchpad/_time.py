"""The one way a time is written for people and for JSON: ISO 8601 in UTC, to the
millisecond, with its zone (``2026-12-03T17:40:12.345Z``). The HTTP API, the command line
and the docs all show times so."""

from __future__ import annotations

from datetime import UTC, datetime

__all__ = ("iso_time",)


def iso_time(timestamp: float) -> str:
    """Unix seconds as ISO 8601 in UTC, to the millisecond: ``2026-12-03T17:40:12.345Z``."""
    moment = datetime.fromtimestamp(timestamp, UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")
