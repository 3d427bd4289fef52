"""Storage given as a URL or as an opened backend, for the objects that take either.

``AgentHarness``, the integrations' scratchpads and the like accept ``storage=`` as a URL
(opened on first use, and closed by them) or as an opened backend (the caller's: used, never
closed). :class:`OwnedStorage` is that rule in one place.
"""

from __future__ import annotations

from urllib.parse import urlsplit

import anyio

from ..errors import ScratchpadConfigError
from .base import StorageBackend

__all__ = ("OwnedStorage",)

_HIDDEN = "***"


class OwnedStorage:
    """A URL to open here, once and lazily, or an opened backend borrowed from the caller.

    ``storage``: a URL; ``None`` (``$NOETIC_SCRATCHPAD_STORAGE``, else ``memory://``, read
    now); or a :class:`StorageBackend`. Anything else is a :class:`ScratchpadConfigError`.
    :meth:`backend` opens the URL on its first call; concurrent first calls share one open.
    :meth:`aclose` closes what was opened here (waiting for an open under way) and may be
    called any number of times; a later :meth:`backend` opens the URL again. A borrowed
    backend is never closed here.
    """

    def __init__(self, storage: str | StorageBackend | None) -> None:
        from . import resolve_storage_url  # the package imports this module

        self._backend: StorageBackend | None = None
        self._url: str | None = None  # as given: it may hold a password
        if isinstance(storage, StorageBackend):
            self._backend, shown = storage, storage.url
        elif storage is None or isinstance(storage, str):
            self._url = resolve_storage_url(storage)
            shown = _display_url(self._url)
        else:
            raise ScratchpadConfigError(
                "storage must be a URL such as 'sqlite:///notes.db', an opened backend "
                f"(await open_storage(url)) or None, not {storage!r}"
            )
        self.url = shown
        """The URL for messages and ``repr``: a password and the query's values are ``***``."""
        self._lock = anyio.Lock()

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
            return self._backend

    async def aclose(self) -> None:
        """Close the backend if it was opened here; a borrowed one stays open.

        Takes the lock :meth:`backend` opens under, so a backend still being opened is
        closed once it is, never left open behind this call.
        """
        if not self.owned:
            return
        async with self._lock:
            backend, self._backend = self._backend, None
        if backend is not None:
            await backend.aclose()

    def __repr__(self) -> str:
        whose = "owned" if self.owned else "borrowed"
        state = "open" if self._backend is not None else "not open"
        return f"<OwnedStorage {self.url!r} {whose}, {state}>"


def _display_url(url: str) -> str:
    """``url`` safe to show: a password (``user:password@``) and every query value, which
    may be a secret (``?password=...``, a registered scheme's token), become ``***``."""
    parts = urlsplit(url)
    user, at, host = parts.netloc.rpartition("@")
    if at and ":" in user:
        hidden = f"//{user.partition(':')[0]}:{_HIDDEN}@{host}"
        url = url.replace(f"//{parts.netloc}", hidden, 1)
    if parts.query:
        names = (pair.partition("=")[0] for pair in parts.query.split("&"))
        hidden = "&".join(f"{name}={_HIDDEN}" for name in names)
        url = url.replace(f"?{parts.query}", f"?{hidden}", 1)
    return url
