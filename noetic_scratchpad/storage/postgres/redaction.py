"""Keeping the URL's passwords out of messages, logs and ``repr``.

A storage URL carries the database password (``user:password@``, or the query parameters
``password`` and ``sslpassword``). Every message this backend writes shows the URL with
those secrets replaced by ``***``, and the texts of driver errors, which may quote the DSN
or a password, are scrubbed before they are repeated. asyncpg itself still gets the URL
as written.
"""

from __future__ import annotations

from urllib.parse import unquote, unquote_plus, urlsplit, urlunsplit

__all__ = ("REDACTED", "redact_url", "url_secrets")

REDACTED = "***"
# Query parameters whose value is a secret (libpq's and asyncpg's names; passfile is a path).
_SECRET_PARAMS = frozenset({"password", "sslpassword"})
_SHORTEST_SECRET = 4  # shorter ones are not searched for in error texts: too many false hits


def redact_url(url: str) -> str:
    """``url`` with its secrets replaced by ``***``: the password of ``user:password@``
    and the values of the query parameters ``password`` and ``sslpassword``."""
    parts = urlsplit(url)
    userinfo, at, hostinfo = parts.netloc.rpartition("@")
    if at and ":" in userinfo:
        user = userinfo.split(":", 1)[0]
        parts = parts._replace(netloc=f"{user}:{REDACTED}@{hostinfo}")
    if parts.query:
        segments = [
            f"{segment.split('=', 1)[0]}={REDACTED}" if _is_secret(segment) else segment
            for segment in parts.query.split("&")
        ]
        parts = parts._replace(query="&".join(segments))
    return urlunsplit(parts)


def url_secrets(url: str) -> tuple[str, ...]:
    """The passwords in ``url``, as written and decoded, longest first."""
    parts = urlsplit(url)
    found: set[str] = set()
    userinfo, at, _ = parts.netloc.rpartition("@")
    if at and ":" in userinfo:
        password = userinfo.split(":", 1)[1]
        found.update((password, unquote(password)))
    for segment in parts.query.split("&"):
        if _is_secret(segment):
            value = segment.partition("=")[2]
            found.update((value, unquote_plus(value)))
    return tuple(sorted((s for s in found if len(s) >= _SHORTEST_SECRET), key=len, reverse=True))


def _is_secret(segment: str) -> bool:
    """Whether the query segment ``name=value`` gives a password (the name decoded)."""
    return unquote_plus(segment.split("=", 1)[0]).strip().lower() in _SECRET_PARAMS
