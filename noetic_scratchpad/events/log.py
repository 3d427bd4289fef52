"""How an event becomes a stdlib log record, and the package's ``NullHandler``.

Every diagnostic is logged under the logger ``noetic_scratchpad.events``; the package's
logger ``noetic_scratchpad`` has a ``NullHandler``, so nothing is printed unless the
application configures logging.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable, Mapping
from typing import Any

from .models import ScratchpadEvent

__all__ = ("event_fields", "handler_name", "handler_names", "log_event", "logger")

logger = logging.getLogger("noetic_scratchpad.events")

# A library prints nothing unless the application configures logging: with a handler on the
# package's logger, stdlib's last-resort handler (stderr, WARNING and up) stays silent too.
_package_logger = logging.getLogger("noetic_scratchpad")
if not any(isinstance(handler, logging.NullHandler) for handler in _package_logger.handlers):
    _package_logger.addHandler(logging.NullHandler())

_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}

_PLAIN = re.compile(r"[^\s\"'=\\]+")


def log_event(event: ScratchpadEvent) -> None:
    """Log ``event`` at its ``log_level`` (not at all when that is ``None``), its fields as
    ``key=value`` pairs in the message, as a dict of JSON values in ``record.scratchpad``
    (structlog's ``ExtraAdder`` and any JSON formatter take it as it is), and the event
    itself as ``record.scratchpad_event``."""
    if event.log_level is None:
        return
    level = _LEVELS[event.log_level]
    if logger.isEnabledFor(level):
        logger.log(
            level,
            "%s %s",
            event.kind,
            _event_fields(event),
            extra={"scratchpad_event": event, "scratchpad": event_fields(event)},
        )


def handler_name(handler: object) -> str:
    """A readable name for a handler: ``module.qualname`` when it has one."""
    qualname = getattr(handler, "__qualname__", None)
    module = getattr(handler, "__module__", None)
    if isinstance(qualname, str):
        return f"{module}.{qualname}" if isinstance(module, str) else qualname
    return repr(handler)


def handler_names(handlers: Iterable[object]) -> str:
    return ",".join(handler_name(handler) for handler in handlers)


def _log_value(value: Any) -> str:
    """One field's value as log text: bare when it is one plain word, else JSON-quoted
    (so a message never spans lines or fakes another field)."""
    if isinstance(value, str):
        return value if _PLAIN.fullmatch(value) else json.dumps(value, ensure_ascii=False)
    if isinstance(value, tuple | list):
        return _log_value(",".join(str(item) for item in value))
    return str(value)


def _error_summary(errors: Iterable[Mapping[str, Any]]) -> str:
    """``loc:type`` of each validation error; the offending values (``input``), which the
    model wrote and may hold anything, stay out of the log."""
    summary = []
    for error in errors:
        loc = ".".join(str(part) for part in error.get("loc", ()))
        kind = str(error.get("type", "error"))
        summary.append(f"{loc}:{kind}" if loc else kind)
    return _log_value(",".join(summary))


def event_fields(event: ScratchpadEvent) -> dict[str, Any]:
    """The event's fields as plain JSON values, for structured logging (the record's
    ``scratchpad`` attribute): what the message says as ``key=value`` pairs, with the
    validation errors' ``loc``, ``type`` and ``msg`` (their ``input``, which the model
    wrote, stays out as it does of the message)."""
    fields: dict[str, Any] = event.model_dump(mode="json", exclude={"at"}, exclude_none=True)
    if "errors" in fields:
        fields["errors"] = [
            {key: error[key] for key in ("loc", "type", "msg") if key in error}
            for error in fields["errors"]
        ]
    return fields


def _event_fields(event: ScratchpadEvent) -> str:
    """The event's fields as ``key=value`` pairs (``kind`` and ``at`` aside; the log record
    has its own time)."""
    fields = []
    for key in type(event).model_fields:
        if key in ("kind", "at"):
            continue
        value = getattr(event, key)
        if value is None or (key == "errors" and not value):
            continue
        text = _error_summary(value) if key == "errors" else _log_value(value)
        fields.append(f"{key}={text}")
    return " ".join(fields)
