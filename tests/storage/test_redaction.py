"""``storage.redaction``: one way to show a storage URL without its secrets, used by
``OwnedStorage``, the PostgreSQL backend and the CLI."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest

from noetic_scratchpad.storage.redaction import redact_url, secret_params_of, url_secrets

POSTGRES = ("password", "sslpassword")  # what the PostgreSQL backend names


def test_the_password_is_hidden_and_the_user_host_and_path_kept() -> None:
    url = "postgresql://app:s3cr%40t@db.internal:5432/notes"

    assert redact_url(url) == "postgresql://app:***@db.internal:5432/notes"
    assert redact_url("redis://:hunter2@cache/0") == "redis://:***@cache/0"
    assert url_secrets(url) == ("s3cr%40t", "s3cr@t")  # as written and decoded


def test_every_query_value_is_hidden_unless_the_secret_names_are_given() -> None:
    url = "custom://host/db?token=abc123&Region=eu&flag&&PassWord=hunter2"

    assert redact_url(url) == "custom://host/db?token=***&Region=***&***&&PassWord=***"
    assert set(url_secrets(url)) == {"abc123", "flag", "hunter2"}  # "eu" is too short
    # Named: those names only, whatever their case or percent-encoding.
    named = "postgresql://u@h/db?sslmode=require&PassWord=hunter2&pass%77ord=x&sslpassword="
    assert redact_url(named, POSTGRES) == (
        "postgresql://u@h/db?sslmode=require&PassWord=***&pass%77ord=***&sslpassword=***"
    )
    assert url_secrets(named, POSTGRES) == ("hunter2",)


@pytest.mark.parametrize(
    "url",
    [
        "memory://",
        "postgresql://app@db.internal:5432/notes",
        "postgresql:///notes",
        "sqlite:///var/lib/notes.db",
        "sqlite:////abs/path/notes.db",
        "sqlite:///C:/Users/me/notes.db",
        "sqlite:///with%20space/and@at.db",
        "notes.db",
        "",
    ],
)
def test_a_url_without_secrets_is_unchanged(url: str) -> None:
    assert redact_url(url) == url
    assert redact_url(url, POSTGRES) == url
    assert url_secrets(url) == ()


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://app:hunter2@[::1/db?password=hunter3",  # "Invalid IPv6 URL"
        "postgresql://app:hunter2@db\uff03x/db?password=hunter3",  # not NFKC-safe
    ],
)
def test_a_url_urlsplit_refuses_is_shown_without_its_secrets(url: str) -> None:
    with pytest.raises(ValueError, match=r"IPv6|NFKC"):
        urlsplit(url)

    for shown in (redact_url(url), redact_url(url, POSTGRES)):
        assert "hunter" not in shown
        assert shown.startswith("postgresql://app:***@")


def test_a_password_with_an_unencoded_hash_or_question_mark_is_hidden_whole() -> None:
    """urlsplit would end the netloc at ``#`` or ``?`` and show the password's start."""
    assert redact_url("postgresql://app:pa#ss?wd@db/notes") == "postgresql://app:***@db/notes"
    assert url_secrets("postgresql://app:pa#ss?wd@db/notes") == ("pa#ss?wd",)


def test_a_fragment_is_hidden() -> None:
    assert redact_url("custom://host/db#tok3n") == "custom://host/db#***"
    assert redact_url("postgresql://h/db?sslmode=require#tok3n", POSTGRES) == (
        "postgresql://h/db?sslmode=require#***"
    )


def test_libpq_keyword_form_has_its_password_hidden() -> None:
    dsn = "host=db user=app password='s3 cr\\'et' sslmode=require"

    assert redact_url(dsn, POSTGRES) == "host=db user=app password=*** sslmode=require"
    assert redact_url(dsn) == "host=*** user=*** password=*** sslmode=***"
    assert "s3 cr'et" in url_secrets(dsn, POSTGRES)


def test_secrets_are_longest_first_so_a_scrub_replaces_the_whole_of_each() -> None:
    url = "postgresql://app:hunter2@db/notes?password=hunter2hunter2"

    assert url_secrets(url, POSTGRES) == ("hunter2hunter2", "hunter2")


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://app:SECRET@db/notes", "postgresql://app:***@db/notes"),
        ("postgresql://app:SEC%52ET%2F%40@db/notes", "postgresql://app:***@db/notes"),
        ("postgresql://app@db/notes?password=SECRET", "postgresql://app@db/notes?password=***"),
        (
            "postgres://app@db/notes?sslpassword=SEC%52ET&table=t1",
            "postgres://app@db/notes?sslpassword=***&table=t1",
        ),
        ("POSTGRESQL://app@db/notes?PassWord=SECRET", "POSTGRESQL://app@db/notes?PassWord=***"),
        # A slash (base64 has them) unencoded: drivers misread it, but it is the password.
        ("postgresql://app:SEC/RET@db/notes", "postgresql://app:***@db/notes"),
        ("postgresql://app:SEC/R#ET@db/notes?x=1", "postgresql://app:***@db/notes?x=1"),
    ],
)
def test_a_postgres_urls_password_is_hidden_and_its_other_parameters_kept(
    url: str, shown: str
) -> None:
    """How the CLI shows a URL: with the secret parameters of its scheme."""
    assert redact_url(url, secret_params_of(url)) == shown
    assert all("SEC" in secret for secret in url_secrets(url, secret_params_of(url)))
    assert redact_url(url) == redact_url(url, None)  # every other caller: all values hidden


def test_secret_params_are_known_for_postgres_only() -> None:
    assert secret_params_of("postgresql://h/db") == frozenset(POSTGRES)
    assert secret_params_of("Postgres://h/db") == frozenset(POSTGRES)
    for url in ("sqlite:///x.db", "custom://h/x", "memory://", "host=db password=x", ""):
        assert secret_params_of(url) is None


def test_a_path_with_an_at_sign_is_not_taken_for_a_password() -> None:
    for url in (
        "sqlite:///with:colon/and@at.db",
        "postgresql://db:5432/notes",
        "postgresql://db:5432/notes?application_name=me@host",
        "postgresql://[::1]:5432/notes",
    ):
        assert redact_url(url, secret_params_of(url)) == url
