"""``noetic-scratchpad``: run the demo and inspect or reset stored scratchpads.

Exit codes (``common.EXIT_CODES``, in ``--help`` too): 0 success; 1 the operation failed,
was refused or found nothing to act on (one line on stderr); 2 a usage error (the usage and
one line on stderr).

The modules: ``app`` (``main``: logging, exit codes), ``parser`` (the arguments),
``common`` (what every command shares: the exit codes, the one check of a storage URL,
``shown_url``: how a storage URL is shown, never with its secrets), ``schema`` (the one way
``--schema`` is loaded), ``stderr_filter`` (the secrets kept off stderr whoever writes
there), ``stored`` (helpers of the commands on stored data), ``scopes`` (``show``,
``list``, ``reset``), ``history`` (``history``, ``revert``), ``migrate``, ``demo``,
``serve`` and ``mcp``.
"""

from __future__ import annotations

from .app import main

__all__ = ("main",)
