"""The compare-and-set that ends every write: one Lua script, atomic on the server.

``KEYS``: the key's hash (fields ``value``, ``revision``, ``at``, ``token``), its journal
(a sorted set of rows scored by revision) and the index of keys. ``ARGV``: the revision
and presence the write read (``1``/``0``), its token, the new revision, value and time,
the key (the index's member), the channel its writes are announced on (``""``: none),
the number of notices and the notices (see :mod:`..notices`), then for each journaled
commit its revision, row and ``keep``.

The script writes only when the hash still holds the revision and presence that were read:
revisions never repeat (a delete keeps the hash's ``revision``), so an equal pair means no
write or delete came in between. It answers ``1`` for a write whose token is already
stored under its revision: the client's retry of a reply lost on the network then
reports the write that landed instead of running the commit's function a second time
(and announces nothing: the first run did). The notices are published by the script that
writes, so that a write is announced exactly when it lands, at no round trip of its own.
"""

from __future__ import annotations

__all__ = ("COMPARE_AND_SET",)

COMPARE_AND_SET = """
local stored = redis.call('HMGET', KEYS[1], 'revision', 'token')
local revision = stored[1] or '0'
if revision == ARGV[4] and stored[2] == ARGV[3] then
  return 1
end
if revision ~= ARGV[1] or redis.call('HEXISTS', KEYS[1], 'value') ~= tonumber(ARGV[2]) then
  return 0
end
redis.call('HSET', KEYS[1], 'value', ARGV[5], 'revision', ARGV[4], 'at', ARGV[6],
  'token', ARGV[3])
redis.call('ZADD', KEYS[3], 0, ARGV[7])
local rows = 10 + tonumber(ARGV[9])
for i = rows, #ARGV, 3 do
  redis.call('ZADD', KEYS[2], ARGV[i], ARGV[i + 1])
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', tonumber(ARGV[i]) - tonumber(ARGV[i + 2]))
end
for i = 10, rows - 1 do
  redis.call('PUBLISH', ARGV[8], ARGV[i])
end
return 1
"""
