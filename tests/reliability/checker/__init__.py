"""A randomized, seeded concurrency checker: no acknowledged update is lost, no scope crossed.

``python -m tests.reliability.checker --backend sqlite --processes 4 --tasks 20 --seconds 60
--seed 7`` starts worker processes that write one scratchpad storage through every write
path (the model's tool call, ``harness.update_state``, a handle driven from an own loop),
with bad updates, cancellations and tiny write timeouts mixed in, while the parent resets
scopes through the CLI and SIGKILLs workers. Every operation is logged; at the end the
stored states are checked against the log.

Modules: :mod:`.scenario` (scopes, update ids, the random choice of an operation),
:mod:`.log` (the append-only JSON-lines log), :mod:`.ops` (performing one operation),
:mod:`.worker` (a worker process), :mod:`.check` (the verdict, a pure function of the log
and the final states) and :mod:`.run` (the parent).
"""
