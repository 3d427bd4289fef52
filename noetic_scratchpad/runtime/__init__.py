"""The host runtime: a small agent harness that runs context layers around any model."""

from .budgets import split_budget
from .harness import AgentHarness, RunResult
from .model import Model, ModelRequest, ScriptedModel, ScriptExhaustedError, ToolSpec, Turn
from .tools import Agent, Tool, ToolExecute

__all__ = (
    "Agent",
    "AgentHarness",
    "Model",
    "ModelRequest",
    "RunResult",
    "ScriptExhaustedError",
    "ScriptedModel",
    "Tool",
    "ToolExecute",
    "ToolSpec",
    "Turn",
    "split_budget",
)
