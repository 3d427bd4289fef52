"""A process killed with SIGKILL while it streams updates into SQLite loses nothing it
acknowledged and leaves nothing torn.

Each iteration starts ``writer_proc.py`` (four concurrent writers over two threads, group
commit), waits for a random number of acknowledgements (or a random moment during start-up),
and kills it with SIGKILL. Then the database must pass ``PRAGMA integrity_check``, open with
the backend, and hold, for every writer, exactly the updates ``0..last`` with the exact
payloads, where ``last`` is the writer's last acknowledged update or the one after it (the
one in flight at the kill may or may not have committed).

``NOETIC_KILL_ITERATIONS`` sets the number of iterations (default 5; run 20 or more before a
release) and ``NOETIC_KILL_SEED`` replays a failing run's random choices.
"""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from noetic_scratchpad.storage import open_storage

from .writer_proc import payload

WRITER = Path(__file__).with_name("writer_proc.py")
TASKS, SCOPES, UPDATES = 4, 2, 3000
ITERATIONS = int(os.environ.get("NOETIC_KILL_ITERATIONS", "5"))
SEED = int(os.environ.get("NOETIC_KILL_SEED", str(random.randrange(2**32))))


def start_writer(url: str, updates: int, first: int = 0) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(WRITER), url, str(TASKS), str(SCOPES), str(updates), str(first)],
        stdout=subprocess.PIPE,
        text=True,
    )


def read_rest(process: subprocess.Popen[str]) -> str:
    """What the killed process printed that was not read yet, up to EOF.

    Read through the same buffered stream as ``readline``: ``communicate`` reads the raw
    pipe and would skip lines that stream has already buffered.
    """
    assert process.stdout is not None
    with process.stdout as stream:
        rest = stream.read()
    process.wait(timeout=30)
    return rest


def last_acks(lines: list[str], first: int = 0) -> dict[int, int]:
    """Each writer's last acknowledged update (-1: none) from the lines a writer printed."""
    last = dict.fromkeys(range(first, first + TASKS), -1)
    for line in lines:
        if line.startswith("ack "):
            _, writer, n = line.split()
            last[int(writer)] = max(last[int(writer)], int(n))
    return last


def kill_writer(url: str, rng: random.Random) -> tuple[dict[int, int], str]:
    """Run the writer, SIGKILL it at a random moment; return each writer's last ack and
    where the kill happened."""
    process = start_writer(url, UPDATES)
    assert process.stdout is not None
    lines: list[str] = []
    try:
        if rng.random() < 0.2:  # during start-up: opening, creating the table, first writes
            time.sleep(rng.uniform(0.0, 0.8))
            moment = "during start-up"
        else:
            target = rng.randrange(0, 1500)
            acks = 0
            while acks < target:
                line = process.stdout.readline()
                assert line, f"the writer exited before {target} acks (rc={process.poll()})"
                lines.append(line)
                acks += line.startswith("ack ")
            time.sleep(rng.uniform(0.0, 0.003))
            moment = f"after {target} acks"
        process.send_signal(signal.SIGKILL)
        rest = read_rest(process)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == -signal.SIGKILL, f"the writer was not killed ({moment})"
    assert "done" not in rest, "the writer finished before the kill: raise UPDATES"
    # Everything the writer printed before it died is still in the pipe: read it all.
    lines.extend(rest.splitlines())
    return last_acks(lines), moment


def check_writer_state(stored: dict[str, Any] | None, writer: int, acked: int, why: str) -> None:
    """The writer's updates ``0..last`` are all there with exact payloads, ``last`` is the
    last ack or the one in flight after it, and nothing else is."""
    entry = (stored or {}).get(f"w{writer}")
    if entry is None:
        assert acked == -1, f"writer {writer}: {acked + 1} acked update(s) lost ({why})"
        return
    last = entry["last"]
    assert acked <= last <= acked + 1, f"writer {writer}: stored last={last}, acked={acked} ({why})"
    expected = {"last": last, **{f"u{n}": payload(writer, n) for n in range(last + 1)}}
    assert entry == expected, f"writer {writer}: torn or missing updates ({why})"


@pytest.mark.slow
@pytest.mark.asyncio
@pytest.mark.parametrize("iteration", range(ITERATIONS))
async def test_sigkill_while_streaming_loses_no_acknowledged_update(
    iteration: int, tmp_path: Path
) -> None:
    """After a SIGKILL at a random moment of a stream of committed updates, the SQLite file
    passes ``PRAGMA integrity_check``, opens again, holds every acknowledged update with its
    exact payload and no torn or partial one, and accepts new writes."""
    rng = random.Random(SEED + iteration)
    path = tmp_path / "killed.db"
    url = f"sqlite:///{path}"
    last, moment = await anyio.to_thread.run_sync(kill_writer, url, rng)
    why = f"seed {SEED + iteration}, killed {moment}, acks {last}"

    if path.exists():
        with sqlite3.connect(path) as raw:
            assert raw.execute("PRAGMA integrity_check").fetchall() == [("ok",)], why

    async with await open_storage(url) as storage:
        for scope in range(SCOPES):
            stored = await storage.get(f"scopes/scratchpad/thread/t{scope}/state")
            for writer in range(scope, TASKS, SCOPES):
                check_writer_state(stored, writer, last[writer], why)
        await storage.update(
            "scopes/scratchpad/thread/t0/state", lambda s: {**(s or {}), "after": 1}
        )
        reopened = await storage.get("scopes/scratchpad/thread/t0/state")
        assert reopened is not None
        assert reopened["after"] == 1


def kill_one_of_two(url: str, rng: random.Random) -> tuple[dict[int, int], list[str]]:
    """Two processes write into the same scopes of one file; one is killed at a random
    moment (possibly while it holds the write lock), the other must run to its end.
    Returns the killed writers' last acks and the survivor's output."""
    survivor = start_writer(url, SURVIVOR_UPDATES, first=TASKS)
    victim = start_writer(url, UPDATES)
    try:
        assert victim.stdout is not None
        lines: list[str] = []
        target = rng.randrange(1, 1000)
        while sum(line.startswith("ack ") for line in lines) < target:
            line = victim.stdout.readline()
            assert line, f"the victim exited before {target} acks (rc={victim.poll()})"
            lines.append(line)
        time.sleep(rng.uniform(0.0, 0.003))
        victim.send_signal(signal.SIGKILL)
        rest = read_rest(victim)
        lines.extend(rest.splitlines())
        output, _ = survivor.communicate(timeout=120)
    finally:
        for process in (victim, survivor):
            if process.poll() is None:
                process.kill()
                process.wait()
    assert victim.returncode == -signal.SIGKILL
    assert survivor.returncode == 0, f"the survivor failed (rc={survivor.returncode})"
    return last_acks(lines), output.splitlines()


SURVIVOR_UPDATES = 250


@pytest.mark.slow
@pytest.mark.asyncio
@pytest.mark.parametrize("iteration", range(max(1, ITERATIONS // 2)))
async def test_sigkill_of_one_writer_process_never_blocks_or_corrupts_another(
    iteration: int, tmp_path: Path
) -> None:
    """Two processes stream updates into the same scopes of one SQLite file and one is
    killed at a random moment, perhaps holding the write lock. The other runs to its end
    without an error (SQLite frees a dead process's lock), every update it made and every
    update the killed one acknowledged is stored exactly, and the file passes
    ``PRAGMA integrity_check``."""
    rng = random.Random(SEED + 1000 + iteration)
    path = tmp_path / "shared.db"
    url = f"sqlite:///{path}"
    # Create the file first, so neither process races the other to create the table.
    async with await open_storage(url):
        pass
    killed, survivor_lines = await anyio.to_thread.run_sync(kill_one_of_two, url, rng)
    why = f"seed {SEED + 1000 + iteration}, victim acks {killed}"

    assert survivor_lines[-1] == "done", why
    survived = last_acks(survivor_lines, first=TASKS)
    assert survived == dict.fromkeys(range(TASKS, 2 * TASKS), SURVIVOR_UPDATES - 1), why
    with sqlite3.connect(path) as raw:
        assert raw.execute("PRAGMA integrity_check").fetchall() == [("ok",)], why
    async with await open_storage(url) as storage:
        for scope in range(SCOPES):
            stored = await storage.get(f"scopes/scratchpad/thread/t{scope}/state")
            for writer in range(scope, 2 * TASKS, SCOPES):
                acked = killed[writer] if writer < TASKS else survived[writer]
                check_writer_state(stored, writer, acked, why)
