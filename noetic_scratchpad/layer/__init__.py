"""Context layers: the protocol every layer follows and the scratchpad layer."""

from .base import (
    Budget,
    ContextLayer,
    FunctionOutcome,
    InitResult,
    LayerData,
    LayerFunction,
    LayerHooks,
    RecallResult,
    Slot,
    SpawnResult,
    StoreResult,
)
from .scratchpad import (
    UPDATE_TOOL,
    ScratchpadConfig,
    ScratchpadHandle,
    ScratchpadLayer,
    ScratchpadState,
    parse_arguments,
    scratchpad,
)

__all__ = (
    "UPDATE_TOOL",
    "Budget",
    "ContextLayer",
    "FunctionOutcome",
    "InitResult",
    "LayerData",
    "LayerFunction",
    "LayerHooks",
    "RecallResult",
    "ScratchpadConfig",
    "ScratchpadHandle",
    "ScratchpadLayer",
    "ScratchpadState",
    "Slot",
    "SpawnResult",
    "StoreResult",
    "parse_arguments",
    "scratchpad",
)
