"""Storage URLs safe to show: their secrets replaced by ``***`` in messages, logs and ``repr``.

A storage URL may carry secrets: the password of ``user:password@``, query parameters
(``?password=``, a registered scheme's token) and, in libpq's keyword form
(``host=db password=...``), keyword values. A caller that knows which parameters of its
scheme are secrets names them (:func:`secret_params_of` knows PostgreSQL's: ``password``
and ``sslpassword``), and the others stay readable; any other caller gets every query value
hidden. A fragment (``#...``) is always hidden: no backend reads one.

The text is cut by hand, not by ``urllib.parse.urlsplit``: it raises on some texts (``[::1``
without its ``]``), which must still be shown, its ``urlunsplit`` rewrites others
(``sqlite:///notes.db`` to ``sqlite:/notes.db``), and it would end a password at an
unencoded ``#`` or ``?``, showing the rest of it.

Standard library only: the CLI, :class:`~.owned.OwnedStorage` and the PostgreSQL backend
(whose package imports asyncpg) all use it.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable
from urllib.parse import unquote, unquote_plus

__all__ = (
    "REDACTED",
    "SECRET_PARAMS",
    "hide_secrets",
    "redact_url",
    "secret_params_of",
    "url_secrets",
)

REDACTED = "***"
_SHORTEST_SECRET = 4  # shorter ones are not searched for in error texts: too many false hits
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:")
# libpq's keyword form: ``keyword = value``, the value single-quoted (with \ escapes) or a
# run of non-blanks; keywords start the text or follow a blank.
_KEYWORD = re.compile(r"(?:^|(?<=\s))([A-Za-z_]\w*)(\s*=\s*)('(?:[^'\\]|\\.)*'?|\S*)")
_POSTGRES_SECRETS = frozenset({"password", "sslpassword"})
#: The query parameters that hold a secret, by scheme, where the scheme's parameters are
#: known (libpq's other parameters name hosts, files and modes).
SECRET_PARAMS: dict[str, frozenset[str]] = {
    "postgresql": _POSTGRES_SECRETS,
    "postgres": _POSTGRES_SECRETS,
    # redis-py reads a password from the query too; its other parameters are not secrets.
    "redis": frozenset({"password"}),
    "rediss": frozenset({"password"}),
}


def secret_params_of(url: str) -> frozenset[str] | None:
    """The secret query parameters of ``url``'s scheme (see :data:`SECRET_PARAMS`), or
    ``None`` for a scheme whose parameters are not known: every value is then a secret."""
    scheme = _SCHEME.match(url)
    return SECRET_PARAMS.get(scheme.group()[:-1].lower()) if scheme else None


def redact_url(url: str, secret_params: Collection[str] | None = None) -> str:
    """``url`` with its secrets replaced by ``***``; never raises.

    Hidden: the password of ``user:password@``, a fragment, and the values of the query
    parameters (or of a keyword-form text's keywords) named in ``secret_params`` (compared
    decoded and case-insensitively), or of every one when it is ``None``. A user name,
    host, path and the other parameters are kept as written.
    """
    return _redact(url, secret_params)[0]


def hide_secrets(text: str, secrets: Iterable[str]) -> str:
    """``text`` with each of ``secrets`` replaced by ``***``; give them longest first, so
    that a secret inside another goes with it."""
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, REDACTED)
    return text


def url_secrets(url: str, secret_params: Collection[str] | None = None) -> tuple[str, ...]:
    """What :func:`redact_url` hides in ``url``, as written and decoded, longest first
    (those of 4 characters or more: to scrub from a driver's error texts)."""
    found = set(_redact(url, secret_params)[1])
    return tuple(sorted((s for s in found if len(s) >= _SHORTEST_SECRET), key=len, reverse=True))


def _redact(url: str, secret_params: Collection[str] | None) -> tuple[str, list[str]]:
    """``url`` redacted, and the secrets taken out of it (as written and decoded)."""
    names = None if secret_params is None else frozenset(n.lower() for n in secret_params)
    secrets: list[str] = []
    scheme = _SCHEME.match(url)
    head = url[: scheme.end()] if scheme else ""
    rest = url[len(head) :]
    if not head and not rest.startswith("//") and _KEYWORD.search(rest):
        return _redact_keywords(rest, names, secrets), secrets
    if rest.startswith("//"):
        head, rest = _redact_userinfo(head, rest, secrets)
    rest, hash_, fragment = rest.partition("#")
    if fragment:
        secrets.extend((fragment, unquote(fragment)))
        fragment = REDACTED
    rest, question, query = rest.partition("?")
    if question:
        query = "&".join(_redact_segment(s, names, secrets) for s in query.split("&"))
    return f"{head}{rest}{question}{query}{hash_}{fragment}", secrets


def _redact_userinfo(head: str, rest: str, secrets: list[str]) -> tuple[str, str]:
    """``head`` and ``//user:password@host...`` as ``head//user:***@`` and ``host...``.

    The password ends at the last ``@`` before the path's ``/``, even past a ``?`` or
    ``#`` (which ``urlsplit`` would take for the query's or fragment's start): a password
    with one of them left unencoded is still hidden whole. Where that part holds ``user:``
    and no ``@``, the password ends at the next ``@`` before any ``?``: one with an
    unencoded ``/`` (base64 has them) is misread by drivers, but it is a password still.
    """
    authority = rest[2:].partition("/")[0]
    userinfo, at, _ = authority.rpartition("@")
    if not at and ":" in authority:
        userinfo, at, _ = rest[2:].partition("?")[0].partition("@")
    if not at or ":" not in userinfo:
        return head, rest
    user, _, password = userinfo.partition(":")
    secrets.extend((password, unquote(password)))
    return f"{head}//{user}:{REDACTED}@", rest[2 + len(userinfo) + 1 :]


def _redact_segment(segment: str, names: frozenset[str] | None, secrets: list[str]) -> str:
    """One ``name=value`` of a query: the value hidden if the name is a secret's (any name
    when ``names`` is ``None``, where a bare ``value`` is hidden too)."""
    name, eq, value = segment.partition("=")
    if names is None:
        if not segment:
            return segment
        hidden = value if eq else segment
        secrets.extend((hidden, unquote_plus(hidden)))
        return f"{name}={REDACTED}" if eq else REDACTED
    if unquote_plus(name).strip().lower() not in names:
        return segment
    secrets.extend((value, unquote_plus(value)))
    return f"{name}={REDACTED}"


def _redact_keywords(text: str, names: frozenset[str] | None, secrets: list[str]) -> str:
    """libpq's ``host=db password=secret``, with the secret keywords' values hidden."""

    def hide(match: re.Match[str]) -> str:
        keyword, equals, value = match.groups()
        if names is not None and keyword.lower() not in names:
            return match.group(0)
        secrets.extend((value, value.strip("'").replace("\\'", "'").replace("\\\\", "\\")))
        return f"{keyword}{equals}{REDACTED}"

    return _KEYWORD.sub(hide, text)
