"""``python -m noetic_scratchpad``: the same as the ``noetic-scratchpad`` command."""

from .cli import main

raise SystemExit(main())
