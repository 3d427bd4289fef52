"""How a value crosses the wire: JSON text, both ways, for columns of type json or jsonb.

Values are encoded by the library's JSON encoder (see ``noetic_scratchpad._json``) and
sent in the binary wire format of the column's type: for json the JSON text itself, which
the server keeps as it is, so every number reads back as written; for jsonb (the tables of
earlier versions) a version byte and then the text. Reads decode the text the server sends
back with the same library.

jsonb refuses the character U+0000 in strings, so it is stored as the noncharacter
U+10FFFF followed by ``0``, and a U+10FFFF of the value is doubled; reads undo both. json
columns get the same text, so that a column converts to the other type as it is.
"""

from __future__ import annotations

import json
import re
from typing import Any

import asyncpg  # type: ignore[import-untyped, unused-ignore]

from ... import _json
from ...errors import StorageCorruptError

__all__ = (
    "decode_json",
    "decode_jsonb",
    "decode_text",
    "encode",
    "encode_json",
    "encode_jsonb",
    "escape",
    "register_json_codecs",
)

# A JSON string escape of U+0000 (after an even number of backslashes): jsonb refuses it.
_NUL_ESCAPE = re.compile(rb"(?<!\\)((?:\\\\)*)\\u0000")
_SENTINEL = "\U0010ffff".encode()  # a noncharacter: never meant to appear in real text
_SENTINEL_LEAD = _SENTINEL[:1]
_SENTINEL_TOKEN = re.compile(re.escape(_SENTINEL) + b"(" + re.escape(_SENTINEL) + b"|0)")
_DIGITS_TO_ZERO = bytes.maketrans(b"123456789", b"000000000")
_LONG_DIGITS = b"0" * 19  # an integer this long may not fit in 64 bits
_JSONB_VERSION = b"\x01"  # jsonb's binary wire format is this byte, then the JSON text


async def register_json_codecs(conn: asyncpg.Connection) -> None:
    """Make ``conn`` send and receive json with :func:`encode_json` and :func:`decode_json`,
    jsonb with :func:`encode_jsonb` and :func:`decode_jsonb` (the pool runs this on each
    new connection)."""
    await conn.set_type_codec(
        "json", schema="pg_catalog", encoder=encode_json, decoder=decode_json, format="binary"
    )
    await conn.set_type_codec(
        "jsonb", schema="pg_catalog", encoder=encode_jsonb, decoder=decode_jsonb, format="binary"
    )


def encode_json(value: Any) -> bytes:
    # Values already encoded by encode() arrive as bytes; JSON itself never holds bytes.
    return value if isinstance(value, bytes) else encode(value)


def encode_jsonb(value: Any) -> bytes:
    return _JSONB_VERSION + encode_json(value)


def decode_json(data: bytes) -> Any:
    """A json value as read; :class:`StorageCorruptError` for one that cannot be parsed
    (the column holds only JSON, but maybe deeper than the parser goes: a permanent fault
    of the row, not an outage)."""
    try:
        return decode_text(data)
    except (ValueError, RecursionError) as exc:
        raise StorageCorruptError.unreadable("a value stored in PostgreSQL", exc) from None


def decode_jsonb(data: bytes) -> Any:
    """A jsonb value as read (its version byte dropped), as :func:`decode_json` reads."""
    return decode_json(data[1:])


def decode_text(text: bytes) -> Any:
    """The value of a column's JSON text (as ``value::text`` gives it, encoded as UTF-8);
    ``ValueError`` when it is not JSON."""
    # Its first byte first: a search for one byte is a twentieth of one for four.
    if _SENTINEL_LEAD in text and _SENTINEL in text:
        text = _SENTINEL_TOKEN.sub(_unescape_token, text)
    if _LONG_DIGITS in text.translate(_DIGITS_TO_ZERO):
        # orjson reads integers past 64 bits as floats; the standard library keeps them.
        return json.loads(text)
    return _json.loads(text)


def encode(value: Any) -> bytes:
    """JSON text of ``value`` for a json or jsonb column; ``ValueError`` when it is not JSON.

    U+0000 and U+10FFFF are escaped as the module's docstring says.
    """
    return escape(_json.dumps(value))


def escape(data: bytes) -> bytes:
    """Compact JSON ``data`` with U+0000 and U+10FFFF escaped as :func:`encode` says."""
    if _SENTINEL_LEAD in data and _SENTINEL in data:
        data = data.replace(_SENTINEL, _SENTINEL + _SENTINEL)
    if b"\\u0000" in data:
        data = _NUL_ESCAPE.sub(_escape_nul, data)
    return data


def _escape_nul(match: re.Match[bytes]) -> bytes:
    return match[1] + _SENTINEL + b"0"


def _unescape_token(match: re.Match[bytes]) -> bytes:
    return _SENTINEL if match[1] == _SENTINEL else b"\\u0000"
