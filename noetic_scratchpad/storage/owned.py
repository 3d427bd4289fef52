"""Storage given as a URL or as an opened backend, for the objects that take either.

``AgentHarness``, the integrations' scratchpads and the like accept ``storage=`` as a URL
(opened on first use, and closed by them) or as an opened backend (the caller's: used, never
closed). :class:`OwnedStorage` is that rule in one place.
"""

from __future__ import annotations

import functools
import logging

import anyio

from .._runtime import TaskOwner
from ..errors import ScratchpadConfigError
from .base import StorageBackend
from .redaction import redact_url

__all__ = ("OwnedStorage", "StorageTypeError")

logger = logging.getLogger("noetic_scratchpad.storage")


class StorageTypeError(ScratchpadConfigError, TypeError):
    """``storage=`` is neither a URL, an opened backend nor ``None``: a configuration
    error, and a ``TypeError`` as Python's own checks of an argument's type raise."""


class OwnedStorage:
    """A URL to open here, once and lazily, or an opened backend borrowed from the caller.

    ``storage``: a URL; ``None`` (``$NOETIC_SCRATCHPAD_STORAGE``, else ``memory://``, read
    now); or a :class:`StorageBackend`. Anything else is a :class:`StorageTypeError` (a
    ``ScratchpadConfigError`` and a ``TypeError``).
    :meth:`backend` opens the URL on its first call; concurrent first calls share one open.
    :meth:`aclose` closes what was opened here (waiting for an open under way) and may be
    called any number of times; a later :meth:`backend` opens the URL again. A borrowed
    backend is never closed here.
    """

    def __init__(self, storage: str | StorageBackend | None) -> None:
        from . import resolve_storage_url  # the package imports this module

        self._backend: StorageBackend | None = None
        self._url: str | None = None  # as given: it may hold a password
        self._defaulted = False  # no storage given anywhere: memory://, said once
        if isinstance(storage, StorageBackend):
            self._backend, shown = storage, storage.url
        elif storage is None or isinstance(storage, str):
            self._url = resolve_storage_url(storage)
            shown = redact_url(self._url)
            self._defaulted = not resolve_storage_url(storage, default="")  # none chosen
        else:
            raise StorageTypeError(
                "storage must be a URL such as 'sqlite:///notes.db', an opened backend "
                f"(await open_storage(url)) or None, not {storage!r}"
            )
        self.url = shown
        """The URL for messages and ``repr``: a password, the query's values and a fragment
        are ``***``."""
        self._lock = anyio.Lock()
        self.tasks = TaskOwner()
        """Where a close runs."""

    @property
    def owned(self) -> bool:
        """Whether the backend is opened (and closed) here: it was given as a URL."""
        return self._url is not None

    @property
    def opened(self) -> StorageBackend | None:
        """The backend if it is open now (a borrowed one always is); never opens it."""
        return self._backend

    async def backend(self) -> StorageBackend:
        """The backend, opened from the URL on the first call (the others wait for it)."""
        backend = self._backend
        if backend is not None:
            return backend
        from . import open_storage

        async with self._lock:
            if self._backend is None:
                self._backend = await open_storage(self._url)
                logger.info("scratchpad storage opened: %s", self.url)
                if self._defaulted:
                    _say_memory_is_the_default()
            return self._backend

    async def aclose(self) -> None:
        """Close the backend if it was opened here; a borrowed one stays open.

        The close runs in a task of its own (:attr:`tasks`), behind the lock
        :meth:`backend` opens under: a backend still being opened is closed once it is, and
        cancelling the caller (a timeout, ``task.cancel()``, an anyio cancel scope) only
        ends its wait, never leaves the backend open or half closed. A close that fails
        raises here (is logged when the caller no longer waits).
        """
        if not self.owned:
            return
        done = anyio.Event()
        failure: list[Exception] = []
        waiting = [True]  # whether the caller still waits for the outcome

        async def close() -> None:
            try:
                await self._close_now()
            except Exception as exc:
                failure.append(exc)
                if not waiting[0]:
                    logger.error("closing storage %s failed", self.url, exc_info=exc)
            finally:
                done.set()

        if not self.tasks.start_soon(close):  # no loop to start a task on (driven by hand)
            await close()
        try:
            await done.wait()
        except BaseException:
            waiting[0] = False
            if failure:  # it failed as the caller was cancelled: nobody else reports it
                logger.error("closing storage %s failed", self.url, exc_info=failure[0])
            raise
        if failure:
            raise failure[0]

    async def _close_now(self) -> None:
        """Once an open under way has finished, forget the backend and close it."""
        async with self._lock:
            backend, self._backend = self._backend, None
        if backend is not None:
            await backend.aclose()

    def __repr__(self) -> str:
        whose = "owned" if self.owned else "borrowed"
        state = "open" if self._backend is not None else "not open"
        return f"<OwnedStorage {self.url!r} {whose}, {state}>"


@functools.cache
def _say_memory_is_the_default() -> None:
    """Once a process: the notes of a host given no storage end with the process, and the
    CLI, which defaults to a SQLite file, will not find them."""
    from . import ENV_VAR

    logger.warning(
        "no storage given: the scratchpad keeps its notes in memory://, gone when this "
        "process ends (the CLI's `noetic-scratchpad list` will not see them). Pass "
        "storage='sqlite:///scratchpad.db' (the CLI's default file) or set $%s",
        ENV_VAR,
    )
