"""The parent: storage, worker processes, resets through the CLI, kills, reads, the check.

For ``sqlite``, ``postgres`` and ``redis`` the parent starts the workers; while they run it resets
random scopes with ``noetic-scratchpad reset`` (a process each time), reads every scope
again and again through harnesses of its own, and SIGKILLs one or two workers at random
moments (starting replacements); at the end it reads every scope once more and checks the
logs. ``memory://`` lives inside one process, so there one ``--solo`` worker does the
resets and the reads itself and the parent only checks its log.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from noetic_scratchpad import open_storage

from .check import Violation, check
from .journal import check_journals
from .log import LogWriter, Record, read_records
from .ops import Reader, read_loop
from .scenario import SCOPES, Scope, derive_seed, format_scopes

ROOT = Path(__file__).resolve().parents[3]  # the repository: workers run `-m tests....`
POSTGRES_URL = os.environ.get(
    "NOETIC_SCRATCHPAD_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)
REDIS_URL = os.environ.get("NOETIC_SCRATCHPAD_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
WORKER_POOL_SIZE = 3  # connections per backend of a worker (four backends each)
STARTUP_TIMEOUT = 60.0
RESETTERS = 2  # CLI resets running side by side (each is a process that starts slowly)
Progress = Callable[[str], None]


@dataclass(frozen=True, slots=True)
class Config:
    backend: str  # "memory", "sqlite", "postgres" or "redis"
    processes: int = 4
    tasks: int = 20
    seconds: float = 60.0
    seed: int = 7
    url: str | None = None  # an empty store to use instead of a fresh one
    kills: int | None = None  # default: 2 with several processes, 1 with one, 0 for memory
    replace: bool = True  # start a new worker for each killed one
    resets: bool = True
    scopes: tuple[Scope, ...] = SCOPES
    log_dir: Path | None = None  # keep the logs there (default: a temporary directory)
    min_ops: int = 0  # each worker goes on past `seconds` until it has done this many


@dataclass(slots=True)
class Worker:
    name: str
    seed: int
    process: asyncio.subprocess.Process
    log: Path
    stderr: Path
    killed: bool = False


@dataclass(slots=True)
class Parent:
    """The state of one run of the parent."""

    config: Config
    url: str
    worker_url: str
    directory: Path
    progress: Progress
    log: LogWriter
    rng: random.Random
    workers: list[Worker] = field(default_factory=list)
    extra: list[Violation] = field(default_factory=list)

    @property
    def solo(self) -> bool:
        return self.config.backend == "memory"

    async def spawn(self, seconds: float) -> Worker:
        name = f"w{len(self.workers)}"
        seed = derive_seed(self.config.seed, name)
        log, stderr = self.directory / f"{name}.jsonl", self.directory / f"{name}.stderr"
        with stderr.open("wb") as errors:
            process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "tests.reliability.checker.worker",
                *("--url", self.worker_url, "--worker", name, "--seed", str(seed)),
                *("--tasks", str(self.config.tasks), "--seconds", f"{seconds:.3f}"),
                *("--log", str(log), "--scopes", format_scopes(self.config.scopes)),
                *(["--solo"] if self.solo else []),
                *([] if self.config.resets else ["--no-resets"]),
                *("--min-ops", str(self.config.min_ops)),
                cwd=ROOT,
                env=_child_env(),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=errors,
            )
        worker = Worker(name, seed, process, log, stderr)
        self.workers.append(worker)
        return worker

    async def wait_ready(self, workers: list[Worker]) -> None:
        deadline = time.monotonic() + STARTUP_TIMEOUT
        pending = list(workers)
        while pending and time.monotonic() < deadline:
            pending = [w for w in pending if w.process.returncode is None and not _ready(w)]
            await asyncio.sleep(0.05)

    async def reset_loop(self, stop: asyncio.Event, number: int) -> None:
        """Reset a random scope through the CLI, again and again, until ``stop``."""
        rng = random.Random(derive_seed(self.config.seed, f"resets{number}"))
        while not stop.is_set():
            await _sleep_unless(stop, rng.uniform(0.05, 0.4))
            scope = rng.choice(self.config.scopes)
            start = time.monotonic()
            process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "noetic_scratchpad",
                *("reset", f"--{scope.kind}", scope.id, "--yes", "--storage", self.url),
                cwd=ROOT,
                env=_child_env(),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
            out, err = await process.communicate()
            end = time.monotonic()
            self.log.write(
                {
                    "t": "reset",
                    "kind": scope.kind,
                    "scope": scope.id,
                    "start": start,
                    "end": end,
                    "ok": process.returncode == 0,
                    "detail": (out or err).decode(errors="replace").strip()[-300:],
                }
            )

    async def kill_loop(self, started: float) -> None:
        """SIGKILL a random live worker at random moments; start a replacement each time."""
        seconds = self.config.seconds
        moments = sorted(self.rng.uniform(0.15, 0.75) * seconds for _ in range(self._kills()))
        for moment in moments:
            await asyncio.sleep(max(0.0, started + moment - time.monotonic()))
            alive = [w for w in self.workers if w.process.returncode is None and not w.killed]
            if not alive:
                return
            victim = self.rng.choice(alive)
            victim.killed = True
            victim.process.send_signal(signal.SIGKILL)
            self.log.write({"t": "kill", "w": victim.name, "at": time.monotonic()})
            self.progress(f"killed {victim.name} (SIGKILL) at {time.monotonic() - started:.1f} s")
            remaining = started + seconds - time.monotonic()
            if self.config.replace and remaining > 0.5:
                replacement = await self.spawn(remaining)
                self.progress(f"started {replacement.name} for the remaining {remaining:.1f} s")

    async def reads(self, stop: asyncio.Event) -> None:
        rng = random.Random(derive_seed(self.config.seed, "reads"))
        async with Reader(self.url, self.config.scopes) as reader:
            failed = await read_loop(reader, self.log, rng, stop.is_set)
        if failed:
            self.progress(f"{failed} round(s) of reads failed (storage errors) and were skipped")

    def _kills(self) -> int:
        if self.solo:
            return 0
        if self.config.kills is not None:
            return self.config.kills
        return 2 if self.config.processes > 1 else 1

    async def report_progress(self, started: float) -> None:
        counted: dict[Path, tuple[int, int]] = {}
        every = 5.0 if self.config.seconds >= 20 else 1.0
        while True:
            await asyncio.sleep(every)
            total = 0
            for worker in list(self.workers):
                offset, count = counted.get(worker.log, (0, 0))
                try:
                    with worker.log.open("rb") as stream:
                        stream.seek(offset)
                        data = stream.read()
                except FileNotFoundError:
                    data = b""
                cut = data.rfind(b"\n") + 1
                count += data[:cut].count(b'"t":"op"')
                counted[worker.log] = (offset + cut, count)
                total += count
            resets = sum(
                _count_lines(path, b'"t":"reset"') for path in self.directory.glob("*.jsonl")
            )
            alive = sum(1 for w in self.workers if w.process.returncode is None)
            self.progress(
                f"{time.monotonic() - started:5.1f} s: {total} operations, {resets} resets, "
                f"{alive} worker(s) running"
            )

    async def drive(self) -> None:
        """Start the workers, reset and kill while they run, wait for them to end."""
        config = self.config
        first = [
            await self.spawn(config.seconds) for _ in range(1 if self.solo else config.processes)
        ]
        await self.wait_ready(first)
        started = time.monotonic()
        stop = asyncio.Event()
        progress = asyncio.create_task(self.report_progress(started))
        resetters = [
            asyncio.create_task(self.reset_loop(stop, number))
            for number in range(RESETTERS if config.resets and not self.solo else 0)
        ]
        if not self.solo:
            resetters.append(asyncio.create_task(self.reads(stop)))
        try:
            await self.kill_loop(started)
            with contextlib.suppress(TimeoutError):  # stop_all() ends a hung worker
                async with asyncio.timeout(4 * config.seconds + 2 * STARTUP_TIMEOUT):
                    for worker in list(self.workers):
                        await worker.process.wait()
        finally:
            stop.set()
            await asyncio.gather(*resetters, return_exceptions=True)
            progress.cancel()

    async def stop_all(self) -> None:
        for worker in self.workers:
            if worker.process.returncode is None:
                self.progress(f"{worker.name} is still running: killing it")
                worker.process.kill()
                await worker.process.wait()

    def check_exits(self) -> None:
        for worker in self.workers:
            if worker.killed:
                continue
            done = (
                any(
                    r.get("t") == "worker" and r.get("status") == "done"
                    for r in read_records(worker.log)
                )
                if worker.log.exists()
                else False
            )
            if worker.process.returncode != 0 or not done:
                tail = worker.stderr.read_text(errors="replace").strip()[-2000:]
                self.extra.append(
                    Violation(
                        "worker_failed",
                        "-",
                        None,
                        f"{worker.name} exited with {worker.process.returncode}: {tail}",
                    )
                )


async def run(config: Config, progress: Progress) -> dict[str, Any]:
    """Run the checker; the summary (``ok``, figures, violations) as a JSON-ready dict."""
    with tempfile.TemporaryDirectory(prefix="scratchpad-checker-") as tmp:
        directory = Path(tmp)
        if config.log_dir is not None:
            directory = config.log_dir
            directory.mkdir(parents=True, exist_ok=True)
            for old in [*directory.glob("*.jsonl"), *directory.glob("checker.db*")]:
                old.unlink()
        url, worker_url, cleanup = prepare_url(config, directory)
        try:
            return await _run(config, url, worker_url, directory, progress)
        finally:
            await cleanup()


async def _run(
    config: Config, url: str, worker_url: str, directory: Path, progress: Progress
) -> dict[str, Any]:
    parent = Parent(
        config,
        url,
        worker_url,
        directory,
        progress,
        LogWriter(directory / "parent.jsonl"),
        random.Random(config.seed),
    )
    progress(
        f"{config.backend}: {1 if parent.solo else config.processes} process(es) x "
        f"{config.tasks} tasks, {config.seconds:g} s, seed {config.seed}, {url}"
    )
    try:
        await parent.drive()
    finally:
        await parent.stop_all()  # also when interrupted: no worker outlives the parent
    parent.check_exits()
    if not parent.solo:
        progress("reading the final states")
        async with Reader(url, config.scopes) as reader:
            for record in await reader.read_all(final=True):
                parent.log.write(record)
    if config.backend != "memory":  # a memory store ends with its worker
        progress("checking each scope's journal against its state")
        parent.extra.extend(await check_journals(url, config.scopes))
    parent.log.close()
    report = check(collect_records(directory))
    violations = parent.extra + report.violations
    return {
        "ok": not violations,
        "backend": config.backend,
        "url": url,
        "seed": config.seed,
        "worker_seeds": {worker.name: worker.seed for worker in parent.workers},
        "processes": 1 if parent.solo else config.processes,
        "tasks": config.tasks,
        "seconds": config.seconds,
        "scopes": format_scopes(config.scopes),
        "logs": str(directory) if config.log_dir is not None else None,
        **report.stats,
        "violation_counts": dict(Counter(violation.kind for violation in violations)),
        "violations_total": len(violations),
        "violations": [v.as_dict() for v in _sample(violations, 60)],
    }


def prepare_url(config: Config, directory: Path) -> tuple[str, str, Callable[[], Awaitable[None]]]:
    """The storage URL, the URL the workers use (a smaller pool on PostgreSQL and Redis),
    and what removes the storage afterwards (a fresh PostgreSQL table is dropped, a fresh
    Redis prefix's keys deleted)."""

    async def nothing() -> None:
        return None

    if config.url is not None:
        return config.url, config.url, nothing
    if config.backend == "memory":
        return "memory://", "memory://", nothing
    if config.backend == "sqlite":
        url = f"sqlite:///{directory / 'checker.db'}"
        return url, url, nothing
    # A server store: a table (PostgreSQL) or key prefix (Redis) of its own, removed after.
    servers = {
        "postgres": (POSTGRES_URL, "table=checker_"),
        "redis": (REDIS_URL, "prefix=checker-"),
    }
    if config.backend not in servers:
        raise ValueError(f"unknown backend {config.backend!r}: memory, sqlite, postgres or redis")
    server, option = servers[config.backend]
    separator = "&" if "?" in server else "?"
    url = f"{server}{separator}{option}{uuid.uuid4().hex[:12]}"
    url += ":" if config.backend == "redis" else ""

    async def drop() -> None:
        async with await open_storage(url) as storage:
            remove = getattr(storage, "drop_table", None) or storage.drop_keys  # type: ignore[attr-defined]
            await remove()

    return url, f"{url}&pool_size={WORKER_POOL_SIZE}", drop


def collect_records(directory: Path) -> list[Record]:
    """Every record of every log of a run (the parent's and each worker's)."""
    records: list[Record] = []
    for path in sorted(directory.glob("*.jsonl")):
        records.extend(read_records(path))
    return records


def _sample(violations: list[Violation], limit: int) -> list[Violation]:
    """At most ``limit`` violations, every kind represented."""
    by_kind: dict[str, list[Violation]] = {}
    for violation in violations:
        by_kind.setdefault(violation.kind, []).append(violation)
    chosen: list[Violation] = []
    share = max(1, limit // max(1, len(by_kind)))
    for kind_violations in by_kind.values():
        chosen.extend(kind_violations[:share])
    return chosen[:limit]


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("NOETIC_SCRATCHPAD_STORAGE", None)  # every command is given its URL
    return env


def _ready(worker: Worker) -> bool:
    try:
        return b'"status":"ready"' in worker.log.read_bytes()
    except FileNotFoundError:
        return False


def _count_lines(path: Path, marker: bytes) -> int:
    try:
        return path.read_bytes().count(marker)
    except FileNotFoundError:
        return 0


async def _sleep_unless(stop: asyncio.Event, seconds: float) -> None:
    try:
        async with asyncio.timeout(seconds):
            await stop.wait()
    except TimeoutError:
        pass
