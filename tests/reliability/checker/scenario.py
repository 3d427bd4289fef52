"""What the checker writes: scopes with tricky ids, one unique key per update, random ops."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Kind = Literal["thread", "resource"]
Via = Literal["tool", "api", "handle"]
Cancel = Literal["none", "timeout", "cancel", "move_on"]
Outcome = Literal["acked", "refused", "unknown"]


@dataclass(frozen=True, slots=True, order=True)
class Scope:
    """One scratchpad: a kind of scope and an id."""

    kind: Kind
    id: str

    def __str__(self) -> str:
        return f"{self.kind}:{self.id}"


#: Overlapping ids on purpose: ``u1`` and ``a`` exist as both kinds, ``a`` is a prefix of
#: ``a/b``, and ``x%2Fy`` is what a naive percent-encoding of ``x/y`` would produce.
SCOPES: tuple[Scope, ...] = (
    Scope("thread", "u1"),
    Scope("thread", "a"),
    Scope("thread", "a/b"),
    Scope("thread", "x%2Fy"),
    Scope("resource", "u1"),
    Scope("resource", "a"),
)


def parse_scopes(text: str) -> tuple[Scope, ...]:
    """``"thread:a,resource:u1"`` as scopes (ids may hold ``/`` and ``:``, not ``,``)."""
    scopes = []
    for item in text.split(","):
        kind, _, scope_id = item.strip().partition(":")
        if kind not in ("thread", "resource") or not scope_id:
            raise ValueError(f"{item!r} is not a scope; write thread:ID or resource:ID")
        scopes.append(Scope("thread" if kind == "thread" else "resource", scope_id))
    return tuple(dict.fromkeys(scopes))


def format_scopes(scopes: tuple[Scope, ...]) -> str:
    return ",".join(str(scope) for scope in scopes)


class Notes(BaseModel):
    """The schema of every checker scratchpad: acknowledged keys are ints, nothing else."""

    model_config = ConfigDict(extra="forbid")

    acks: dict[str, int] = Field(default_factory=dict)
    note: str = ""


def make_uid(worker: str, task: int, seq: int, scope: Scope) -> str:
    """A key no other update writes, naming the scope it is sent to: ``w0.3.17@thread:a/b``."""
    return f"{worker}.{task}.{seq}@{scope.kind}:{scope.id}"


def uid_scope(uid: str) -> Scope | None:
    """The scope a uid was sent to, or ``None`` when ``uid`` is not one of ours."""
    _, at, rest = uid.partition("@")
    kind, colon, scope_id = rest.partition(":")
    if not at or not colon or kind not in ("thread", "resource") or not scope_id:
        return None
    return Scope("thread" if kind == "thread" else "resource", scope_id)


def derive_seed(master: int, name: str) -> int:
    """A seed for ``name`` (a worker, a task) that depends only on the master seed."""
    return random.Random(f"{master}:{name}").getrandbits(32)


@dataclass(frozen=True, slots=True)
class OpSpec:
    """One operation a task performs, chosen at random."""

    uid: str
    scope: Scope
    via: Via
    bad: bool
    malformed: bool  # a bad tool call whose arguments are not a JSON object (else: schema)
    cancel: Cancel
    delay: float  # when the cancellation strikes, in seconds
    tiny: bool  # through a layer whose write_timeout is tiny
    other_id: str  # the context's other id: its thread (resource op) or resource (thread op)


def choose_op(
    rng: random.Random, worker: str, task: int, seq: int, scopes: tuple[Scope, ...] = SCOPES
) -> OpSpec:
    scope = rng.choice(scopes)
    via: Via = rng.choices(("tool", "api", "handle"), weights=(4, 3, 3))[0]
    bad = rng.random() < 0.1
    cancel: Cancel = rng.choices(("none", "timeout", "cancel", "move_on"), weights=(7, 1, 1, 1))[0]
    return OpSpec(
        uid=make_uid(worker, task, seq, scope),
        scope=scope,
        via=via,
        bad=bad,
        malformed=bad and via == "tool" and rng.random() < 0.5,
        cancel=cancel,
        delay=rng.choice((0.0, rng.uniform(0.0, 0.003), rng.uniform(0.0, 0.03))),
        tiny=rng.random() < 0.1,
        other_id=rng.choice(("u1", "a", "a/b", "")),
    )
