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
    Slot,
    SpawnResult,
    StoreResult,
)
from .config import UPDATE_TOOL, ScratchpadConfig, ScratchpadState
from .failures import (
    empty_text,
    refusal_text,
    storage_failure_text,
    unreadable_resource_text,
    unreadable_text,
)
from .handle import ScratchpadHandle
from .journal import HistoryEntry
from .reading import READ_PARAMETERS, read_tool_name
from .scratchpad import HostTool, ScratchpadLayer, scratchpad

__all__ = (
    "READ_PARAMETERS",
    "UPDATE_TOOL",
    "Budget",
    "ContextLayer",
    "FunctionOutcome",
    "HistoryEntry",
    "HostTool",
    "InitResult",
    "JournaledHandle",
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
    "empty_text",
    "parse_arguments",
    "read_tool_name",
    "refusal_text",
    "scratchpad",
    "storage_failure_text",
    "unreadable_resource_text",
    "unreadable_text",
)
