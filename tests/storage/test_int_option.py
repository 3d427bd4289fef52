"""One rule for the integer options of every storage URL (``int_option``), and both SQL
backends reading their integer options by it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from noetic_scratchpad.errors import StorageConfigError
from noetic_scratchpad.storage._options import int_option
from noetic_scratchpad.storage.sqlite import SqliteStorage, parse_sqlite_url


@pytest.mark.parametrize(
    ("value", "minimum", "expected"),
    [
        (5, 0, 5),
        (0, 0, 0),
        (1, 1, 1),
        (10**20, 1, 10**20),
        ("5", 0, 5),
        ("0", 0, 0),
        (" 42 ", 0, 42),
        ("\t7\n", 1, 7),
        ("+3", 1, 3),
        ("-0", 0, 0),
        ("007", 0, 7),
        ("-5", -10, -5),
    ],
)
def test_ints_and_decimal_strings_are_read(value: Any, minimum: int, expected: int) -> None:
    """An int, or a string of decimal digits (a sign and surrounding whitespace allowed),
    at least the minimum, is read as that integer."""
    result = int_option("opt", value, minimum=minimum)
    assert result == expected
    assert type(result) is int


@pytest.mark.parametrize(
    ("value", "minimum"),
    [
        (True, 0),
        (False, 0),
        (1.5, 0),
        (2.0, 0),
        ("1.5", 0),
        ("2.0", 0),
        ("1e3", 0),
        ("", 0),
        ("   ", 0),
        ("1_000", 0),
        ("\u0663", 0),  # ARABIC-INDIC DIGIT THREE: int() reads it, a URL should not
        ("0x10", 0),
        ("ten", 0),
        ("5 5", 0),
        ("- 1", 0),
        (None, 0),
        ([1], 0),
        (-1, 0),
        ("-1", 0),
        (0, 1),
        ("0", 1),
        (" 2 ", 3),
    ],
)
def test_anything_else_is_refused_naming_option_value_and_minimum(value: Any, minimum: int) -> None:
    """Bools, floats, float-like or empty strings, other digits and values below the
    minimum are a StorageConfigError (a ValueError) that names the option, the value as
    given and the minimum."""
    with pytest.raises(StorageConfigError) as caught:
        int_option("busy_timeout", value, minimum=minimum)
    assert str(caught.value) == (f"busy_timeout={value!r} must be an integer of at least {minimum}")
    assert isinstance(caught.value, ValueError)


@pytest.mark.parametrize(
    ("value", "accepted"),
    [("8", 8), (" 8 ", 8), ("+8", 8), ("008", 8), (8, 8)]
    + [(bad, None) for bad in ("8.0", "8e0", "", True, 8.0, "0")],
)
def test_both_backends_read_integer_options_by_the_same_rule(value: Any, accepted: int) -> None:
    """The same value is read the same way, or refused with the same message, by the
    SQLite URL parser (max_batch) and the PostgreSQL one (pool_size)."""
    pg = pytest.importorskip("noetic_scratchpad.storage.postgres")
    parse_postgres = pg.parse_postgres_url
    if accepted is None:
        with pytest.raises(StorageConfigError) as sqlite_error:
            parse_sqlite_url("sqlite:///x.db", max_batch=value)
        with pytest.raises(StorageConfigError) as postgres_error:
            parse_postgres("postgresql://u@h/db", pool_size=value)
        assert str(sqlite_error.value) == f"max_batch={value!r} must be an integer of at least 1"
        assert str(postgres_error.value) == f"pool_size={value!r} must be an integer of at least 1"
        return
    assert parse_sqlite_url("sqlite:///x.db", max_batch=value).max_batch == accepted
    assert parse_postgres("postgresql://u@h/db", pool_size=value).max_size == accepted


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("busy_timeout=1.5", "busy_timeout='1.5' must be an integer of at least 0"),
        ("busy_retries=1e3", "busy_retries='1e3' must be an integer of at least 0"),
        ("max_batch=", "max_batch='' must be an integer of at least 1"),
    ],
)
def test_sqlite_url_integers_are_checked(query: str, message: str) -> None:
    """The query string's integers of a sqlite:// URL go through the same rule."""
    with pytest.raises(StorageConfigError, match=message):
        parse_sqlite_url(f"sqlite:///x.db?{query}")


@pytest.mark.asyncio
async def test_sqlite_open_takes_integer_strings(tmp_path: Path) -> None:
    """Integer options given as strings (with whitespace) are read, for keyword arguments
    as for the query string."""
    url = f"sqlite:///{tmp_path / 'o.db'}?busy_timeout=%20250%20"
    async with await SqliteStorage.open(url, max_batch="7") as storage:
        assert (storage.options.busy_timeout, storage.options.max_batch) == (250, 7)


@pytest.mark.asyncio
async def test_postgres_max_batch_is_checked_before_connecting() -> None:
    """PostgresStorage.open reads max_batch by the same rule, before any connection is
    tried (the port is closed)."""
    pg = pytest.importorskip("noetic_scratchpad.storage.postgres")
    with pytest.raises(StorageConfigError, match=r"max_batch=0 must be an integer of at least 1"):
        await pg.PostgresStorage.open("postgresql://postgres@127.0.0.1:1/test", max_batch=0)
