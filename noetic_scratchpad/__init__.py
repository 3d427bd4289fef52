"""noetic-scratchpad: an agent's working memory as a context layer.

The model sees the state as a ``<scratchpad>`` block and updates it with the tool
``scratchpad/update``; updates are deep-merged, optionally validated against a pydantic
schema, persisted per thread or per resource, and never lost under concurrent writers.
"""

from .context import ExecutionContext
from .core import RunScope, ScratchpadCore, ToolResult
from .errors import (
    MaxStepsExceededError,
    ScratchpadConfigError,
    ScratchpadConflictError,
    ScratchpadCorruptStateError,
    ScratchpadError,
    ScratchpadHistoryError,
    ScratchpadReadOnlyError,
    ScratchpadUpdateError,
    ScratchpadValidationError,
    ScriptExhaustedError,
    StorageBusyError,
    StorageConfigError,
    StorageCorruptError,
    StorageError,
    StorageOutcomeUnknownError,
)
from .events import (
    EventBus,
    ScratchpadEvent,
    StateDiscarded,
    UpdateApplied,
    UpdateRejected,
    UpdateRetried,
    ViewTruncated,
)
from .layer import (
    Budget,
    ContextLayer,
    FunctionOutcome,
    InitResult,
    LayerData,
    LayerFunction,
    LayerHooks,
    RecallResult,
    ScratchpadConfig,
    ScratchpadHandle,
    ScratchpadLayer,
    ScratchpadState,
    Slot,
    SpawnResult,
    StoreResult,
    scratchpad,
)
from .runtime import Agent, AgentHarness, ModelRequest, RunResult, ScriptedModel, Tool, ToolSpec
from .storage import ScopedStorage, StorageBackend, open_storage

__version__ = "0.1.0"

__all__ = (
    "Agent",
    "AgentHarness",
    "Budget",
    "ContextLayer",
    "EventBus",
    "ExecutionContext",
    "FunctionOutcome",
    "InitResult",
    "LayerData",
    "LayerFunction",
    "LayerHooks",
    "MaxStepsExceededError",
    "ModelRequest",
    "RecallResult",
    "RunResult",
    "RunScope",
    "ScopedStorage",
    "ScratchpadConfig",
    "ScratchpadConfigError",
    "ScratchpadConflictError",
    "ScratchpadCore",
    "ScratchpadCorruptStateError",
    "ScratchpadError",
    "ScratchpadEvent",
    "ScratchpadHandle",
    "ScratchpadHistoryError",
    "ScratchpadLayer",
    "ScratchpadReadOnlyError",
    "ScratchpadState",
    "ScratchpadUpdateError",
    "ScratchpadValidationError",
    "ScriptExhaustedError",
    "ScriptedModel",
    "Slot",
    "SpawnResult",
    "StateDiscarded",
    "StorageBackend",
    "StorageBusyError",
    "StorageConfigError",
    "StorageCorruptError",
    "StorageError",
    "StorageOutcomeUnknownError",
    "StoreResult",
    "Tool",
    "ToolResult",
    "ToolSpec",
    "UpdateApplied",
    "UpdateRejected",
    "UpdateRetried",
    "ViewTruncated",
    "__version__",
    "open_storage",
    "scratchpad",
)
