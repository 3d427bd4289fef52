"""Context layers: the protocol every layer follows and the scratchpad layer."""

from .arguments import parse_arguments
from .base import (
    Budget,
    ContextLayer,
    FunctionOutcome,
    InitResult,
    LayerData,
    LayerFunction,
    LayerHandle,
    LayerHooks,
    RecallResult,
    Slot,
    SpawnResult,
    StoreResult,
)
from .config import UPDATE_TOOL, ScratchpadConfig, ScratchpadState
from .handle import ScratchpadHandle
from .scratchpad import ScratchpadLayer, scratchpad

__all__ = (
    "UPDATE_TOOL",
    "Budget",
    "ContextLayer",
    "FunctionOutcome",
    "InitResult",
    "LayerData",
    "LayerFunction",
    "LayerHandle",
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
