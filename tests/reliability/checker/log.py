"""The operation log: JSON lines appended with one unbuffered ``write`` each.

A record is written with a single ``os.write`` on an ``O_APPEND`` descriptor, so a process
killed with SIGKILL leaves every earlier line whole and at most its last line cut short;
:func:`read_records` ignores an unparsable last line. Several processes may append to one
file (each line lands whole), though the checker gives each process its own.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

Record = dict[str, Any]


class LogWriter:
    """Appends records to ``path``; no buffering, so nothing waits in memory at a kill."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def write(self, record: Mapping[str, Any]) -> None:
        data = (json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n").encode()
        written = os.write(self._fd, data)
        if written != len(data):  # a regular file takes it all; fail loudly if not
            raise OSError(f"short write to {self.path}: {written} of {len(data)} bytes")

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def read_records(path: Path) -> Iterator[Record]:
    """The records of ``path``; a torn last line (a kill mid-write) is skipped, a torn line
    anywhere else is an error."""
    lines = path.read_bytes().split(b"\n")
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            if number == len(lines):  # no newline after it: the write was cut short
                continue
            raise ValueError(
                f"{path}:{number}: a log line that is not JSON: {line[:200]!r}"
            ) from None
        if isinstance(record, dict):
            yield record
