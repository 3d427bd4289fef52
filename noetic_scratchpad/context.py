"""The execution context that hooks, tools and code receive."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from .events import EventBus
from .keys import Scope
from .render import Tokenizer, estimate_tokens

__all__ = ("ExecutionContext", "Scope")


@dataclass(eq=False)
class ExecutionContext:
    """One execution of an agent on a thread (and, optionally, for a resource such as a user).

    Hosts that drive the hooks from their own loop need only ``ExecutionContext(thread_id=...)``;
    everything else has a default. ``context`` holds each layer's handle by layer id once the
    layer's ``init`` has run: ``ctx.context["scratchpad"].snapshot``.
    """

    thread_id: str
    resource_id: str | None = None
    execution_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    events: EventBus = field(default_factory=EventBus)
    tokenize: Tokenizer | None = None
    context: dict[str, Any] = field(default_factory=dict)
    #: Ids of the calls in the response at hand that the runtime's tool path runs itself;
    #: the store hook leaves them to it. (A call repeated under its id is told apart from
    #: a new call by the layer itself: see ``noetic_scratchpad.layer.writer``.)
    handled_call_ids: set[str] = field(default_factory=set)
    parent: ExecutionContext | None = None

    def __post_init__(self) -> None:
        if not self.thread_id:
            raise ValueError("ExecutionContext needs a non-empty thread_id")

    def scope_key(self, scope: Scope) -> str:
        """The id of the scope a layer of ``scope`` keeps its state in for this execution."""
        return self.scope_of(scope)[1]

    def scope_of(self, scope: Scope) -> tuple[Scope, str]:
        """The scope a layer of ``scope`` uses: ``("resource", resource_id)``, else (no
        resource id, or a thread layer) ``("thread", thread_id)``."""
        if scope == "resource" and self.resource_id:
            return "resource", self.resource_id
        return "thread", self.thread_id

    def count_tokens(self, text: str) -> int:
        """Tokens in ``text`` by ``tokenize``, else the default estimate."""
        return (self.tokenize or estimate_tokens)(text)

    def child(self, **changes: Any) -> ExecutionContext:
        """A context for a spawned child execution: same bus, thread and resource by default."""
        values: dict[str, Any] = {
            "thread_id": self.thread_id,
            "resource_id": self.resource_id,
            "events": self.events,
            "tokenize": self.tokenize,
            "parent": self,
        }
        values.update(changes)
        return ExecutionContext(**values)
