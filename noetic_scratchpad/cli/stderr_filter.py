"""The last line of defence: nothing the command line writes to stderr holds a secret of
a storage URL.

Every message names a URL through :func:`~.common.shown_url`. But a driver's error or a
log record may quote a URL as it was given, and argparse's usage errors quote the
argument they refuse (a URL typed in the wrong place). So :func:`~.app.main` writes stderr
through a :class:`SecretFilter` holding the secrets of every URL of the invocation.
"""

from __future__ import annotations

import io
import os
from collections.abc import Sequence
from typing import TextIO

from ..storage import ENV_VAR
from ..storage.redaction import hide_secrets, secret_params_of, url_secrets

__all__ = ("SecretFilter", "invocation_secrets")


def invocation_secrets(argv: Sequence[str]) -> tuple[str, ...]:
    """The secrets (as written and decoded, longest first) of each URL the invocation may
    name: any argument (a misplaced one too) and ``$NOETIC_SCRATCHPAD_STORAGE``."""
    texts = [*argv, os.environ.get(ENV_VAR, "")]
    found = {secret for text in texts for secret in url_secrets(text, secret_params_of(text))}
    return tuple(sorted(found, key=len, reverse=True))


class SecretFilter(io.TextIOBase):
    """A text stream writing to ``stream`` with each of ``secrets`` replaced by ``***``.

    Each write is filtered on its own: a message, a log record and a usage error are each
    one write.
    """

    def __init__(self, stream: TextIO, secrets: Sequence[str]) -> None:
        super().__init__()
        self._stream = stream
        self._secrets = tuple(secrets)

    def write(self, text: str) -> int:
        self._stream.write(hide_secrets(text, self._secrets))  # longest first
        return len(text)

    def flush(self) -> None:
        self._stream.flush()

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return self._stream.isatty()

    def fileno(self) -> int:
        return self._stream.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return self._stream.encoding
