"""``noetic-scratchpad``: run the demo and inspect or reset stored scratchpads.

Exit codes: 0 success, 1 a runtime error (one line on stderr), 2 a usage error.

The modules: ``app`` (``main``: logging, exit codes), ``parser`` (the arguments),
``common`` (what every command shares, ``shown_url`` among it: how a storage URL is shown,
never with its secrets), ``stderr_filter`` (the secrets kept off stderr whoever writes
there), ``stored`` (helpers of the commands on stored data), ``scopes`` (``show``,
``list``, ``reset``), ``history`` (``history``, ``revert``), ``migrate``, ``demo``,
``serve`` and ``mcp``.
"""

from __future__ import annotations

from .app import main

__all__ = ("main",)
