"""Context layers: the protocol every layer follows and the scratchpad layer."""

from .arguments import parse_arguments
from .base import (
    Budget,
    ContextLayer,
    FunctionOutcome,
    InitResult,
    JournaledHandle,
    LayerData,
    LayerFunction,
    LayerHandle,
    LayerHooks,
    RecallResult,
    RenamableHandle,
    Slot,
    SpawnResult,
    StoreResult,
)
from .config import UPDATE_TOOL, ScratchpadConfig, ScratchpadState
from .handle import ScratchpadHandle
from .journal import HistoryEntry
from .scratchpad import ScratchpadLayer, scratchpad

__all__ = (
    "UPDATE_TOOL",
    "Budget",
    "ContextLayer",
    "FunctionOutcome",
    "HistoryEntry",
    "InitResult",
    "JournaledHandle",
    "LayerData",
    "LayerFunction",
    "LayerHandle",
    "LayerHooks",
    "RecallResult",
    "RenamableHandle",
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
