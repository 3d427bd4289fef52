"""What the model reads when storage fails under its call: one short, stable sentence for
every host, naming the tool as that host presents it.

The sentence says what became of the call (not saved, or not known to be saved) and what
to do. It never carries the error's own text: a path, a host name or a driver's message is
for the operator, who gets it in the logs and in the ``UpdateRejected`` event.
"""

from __future__ import annotations

from ..errors import StorageError, StorageOutcomeUnknownError

__all__ = ("storage_failure_text", "unreadable_text")


def storage_failure_text(exc: StorageError, tool: str) -> str:
    """The model's text for a write of ``tool`` that storage failed (``exc``)."""
    if isinstance(exc, StorageOutcomeUnknownError):
        return (
            "The scratchpad did not confirm this call, so it may or may not have been saved. "
            f"Check the scratchpad, and call {tool} again only if the change is missing."
        )
    return (
        "This call was not saved: the scratchpad's storage failed (the operator can see why "
        f"in the logs). Carry on with the task and call {tool} again later."
    )


def unreadable_text(tool: str) -> str:
    """The model's text for a read of ``tool`` that storage failed."""
    return (
        "The scratchpad could not be read right now: its storage failed (the operator can "
        f"see why in the logs). Carry on with the task and call {tool} again later."
    )
