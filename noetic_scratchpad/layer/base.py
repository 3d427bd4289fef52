"""The context-layer protocol: slots, budgets, hook results and what a layer provides."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from enum import IntEnum
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from ..items import Item

if TYPE_CHECKING:
    from ..context import ExecutionContext
    from ..storage import ScopedStorage

__all__ = (
    "Budget",
    "ContextLayer",
    "FunctionOutcome",
    "InitResult",
    "JournaledHandle",
    "LayerData",
    "LayerFunction",
    "LayerHandle",
    "LayerHooks",
    "RecallResult",
    "Slot",
    "SpawnResult",
    "StoreResult",
)


class Slot(IntEnum):
    """Where a layer's recall goes in the prompt: lower slots come first."""

    REMINDER = 80
    STEERING = 90
    SCRATCHPAD = 100
    ENTITY = 150
    OBSERVATIONS = 200
    PROCEDURAL = 250
    EPISODIC = 300
    RAG = 350
    SEMANTIC_RECALL = 400


@dataclass(frozen=True, slots=True)
class Budget:
    """The tokens a layer's recall wants at least (``min``) and may use at most (``max``)."""

    min: int
    max: int

    def __post_init__(self) -> None:
        if not 0 <= self.min <= self.max:
            raise ValueError(f"a Budget needs 0 <= min <= max, got min={self.min}, max={self.max}")


@dataclass(frozen=True, slots=True)
class InitResult:
    state: Any


@dataclass(frozen=True, slots=True)
class RecallResult:
    items: list[Item]
    token_count: int


@dataclass(frozen=True, slots=True)
class StoreResult:
    state: Any


@dataclass(frozen=True, slots=True)
class SpawnResult:
    child_state: Any


@dataclass(frozen=True, slots=True)
class FunctionOutcome:
    """What a layer function returns: the text for the caller and the new state."""

    result: Any
    state: Any


@dataclass(frozen=True, slots=True)
class LayerData:
    """A read-only projection of a layer's state (``ctx.context[layer_id].<name>``)."""

    read: Callable[[Any], Any]
    description: str = ""


@dataclass(frozen=True, slots=True)
class LayerFunction:
    """A function a layer offers to code and, as the tool ``{layer_id}/{name}``, to the model.

    ``transition(args, state)`` is pure and synchronous, so the runtime can run it inside a
    backend's atomic read-modify-write (even in a database thread). ``execute`` is the
    coroutine form of the same thing. ``exposed=False`` keeps it away from the model;
    ``strict=True`` asks providers to force the arguments into ``parameters``.
    """

    description: str
    parameters: Mapping[str, Any]
    transition: Callable[[Mapping[str, Any], Any], FunctionOutcome]
    exposed: bool = True
    strict: bool = False

    async def execute(
        self, args: Mapping[str, Any], state: Any, ctx: ExecutionContext
    ) -> FunctionOutcome:
        """Return the outcome of applying ``args`` to ``state``; ``state`` is not touched."""
        return self.transition(args, state)


@dataclass(frozen=True, slots=True)
class LayerHooks:
    """The coroutines a runtime calls around each model step (all keyword-only)."""

    init: Callable[..., Awaitable[InitResult]]
    recall: Callable[..., Awaitable[RecallResult | None]]
    store: Callable[..., Awaitable[StoreResult | None]]
    on_spawn: Callable[..., Awaitable[SpawnResult | None]]


class LayerHandle(Protocol):
    """What a runtime needs of the handle a layer binds at ``ctx.context[layer.id]``."""

    @property
    def state(self) -> Any:
        """The state the execution last saw (read-only)."""
        ...

    @property
    def snapshot(self) -> Any:
        """A copy of ``state`` that the caller owns."""
        ...

    async def update(self, values: Mapping[str, Any]) -> None: ...

    async def call(
        self, name: str, args: str | Mapping[str, Any], *, call_id: str | None = None
    ) -> Any:
        """Run the provided function ``name`` as the model's tool call."""
        ...

    async def refresh(self) -> Any:
        """Re-read the stored state."""
        ...


@runtime_checkable
class JournaledHandle(Protocol):
    """A handle whose layer journals its writes (the scratchpad's): revisions, history,
    revert and conflict-checked updates."""

    revision: int

    async def update(
        self, values: Mapping[str, Any], *, expected_revision: int | None = None
    ) -> None: ...

    async def history(self, limit: int = 20) -> list[Any]: ...

    async def revert(self, revision: int) -> None: ...


class ContextLayer(Protocol):
    """What a runtime needs of a layer."""

    @property
    def id(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def slot(self) -> int: ...
    @property
    def scope(self) -> Literal["thread", "resource"]: ...
    @property
    def budget(self) -> Budget: ...
    @property
    def provides(self) -> Mapping[str, LayerData | LayerFunction]: ...
    @property
    def hooks(self) -> LayerHooks: ...

    def bind(self, storage: ScopedStorage | None, ctx: ExecutionContext, state: Any) -> LayerHandle:
        """Return the handle code reaches as ``ctx.context[layer.id]``."""
        ...
