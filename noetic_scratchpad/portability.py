"""Export, import and erase everything stored for one data subject.

A data subject is a resource id (a user, say) and the thread ids the application lists
for it: the scratchpad never learns which threads belong to which user, so the caller
names them. For each, every layer's scope of that id is reached: its keys' values, their
journals and, for an erasure, the revisions the backend keeps of deleted keys (see
:mod:`.storage.purge`). Everything goes through the storage contract (``describe``,
``journal_view``, ``commit_with_journal``, ``delete``), so it works on any backend.

The export document (``FORMAT``, version 1) is plain JSON::

    {"format": "noetic-scratchpad/export", "version": 1, "exported_at": "...Z",
     "subject": {"resource": "alice", "threads": ["t1"]},
     "scopes": [{"layer": "scratchpad", "kind": "resource", "id": "alice",
                 "keys": {"state": {"revision": 3, "updated_at": "...Z", "value": ...,
                                    "journal": [{"revision": 3, "written_at": "...Z",
                                                 "entry": {...}}, ...]}}}]}

An import writes each key back with its journal, rebuilding the state after each
journaled write (the entries hold what undoes them), so ``history`` and ``revert`` work
on the imported scope as they did; revision numbers and times are the target's own. It
refuses, before writing anything, when a key it would write is stored with another
value (``replace=True`` replaces such keys, their journals with them).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

from .errors import ScratchpadError
from .keys import ROOT, SCOPES, Scope, check_scope_id, scope_prefix
from .layer.journal import undo
from .storage.base import (
    MAX_JOURNAL_LIMIT,
    Commit,
    JournalCommitFn,
    JournalRow,
    Revision,
    StorageBackend,
    encode_json,
)
from .storage.purge import purge_deleted

__all__ = (
    "FORMAT",
    "VERSION",
    "ErasureReport",
    "ExportFormatError",
    "ImportConflictError",
    "ImportReport",
    "Subject",
    "erase_subject",
    "export_subject",
    "import_subject",
    "read_document",
    "stored_layers",
)

logger = logging.getLogger("noetic_scratchpad.portability")

FORMAT = "noetic-scratchpad/export"
VERSION = 1


@dataclass(frozen=True, slots=True)
class Subject:
    """Whose data: a resource id and the thread ids the application lists for it (at
    least one of the two). Ids are checked as the layer checks them (``ValueError``)."""

    resource: str | None = None
    threads: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "threads", tuple(dict.fromkeys(self.threads)))
        if self.resource is None and not self.threads:
            raise ValueError("name a resource id, a thread id, or both")
        if self.resource is not None:
            check_scope_id(self.resource, "resource")
        for thread in self.threads:
            check_scope_id(thread, "thread")

    def scopes(self) -> list[tuple[Scope, str]]:
        """The (kind, id) pairs: the resource first, then the threads in the order given."""
        resource: list[tuple[Scope, str]] = (
            [] if self.resource is None else [("resource", self.resource)]
        )
        return resource + [("thread", thread) for thread in self.threads]

    def as_json(self) -> dict[str, Any]:
        return {"resource": self.resource, "threads": list(self.threads)}


class ExportFormatError(ScratchpadError, ValueError):
    """An import document that is not an export of this format; nothing was written."""


class ImportConflictError(ScratchpadError):
    """Keys an import would write are stored with other values; nothing was written.
    ``conflicts``: one ``{"layer", "kind", "id", "key", "revision"}`` per key."""

    def __init__(self, conflicts: list[dict[str, Any]]) -> None:
        self.conflicts = conflicts
        named = ", ".join(
            f"{c['layer']} {c['kind']} {c['id']!r} ({c['key']} at revision {c['revision']})"
            for c in conflicts[:5]
        )
        more = f" and {len(conflicts) - 5} more" if len(conflicts) > 5 else ""
        super().__init__(
            f"{len(conflicts)} key(s) are stored with other values: {named}{more}; nothing "
            "was imported. Erase or reset them first, or import with replace (which drops "
            "their stored values and journals)"
        )


@dataclass(slots=True)
class ImportReport:
    """What an import did, one ``{"layer", "kind", "id", "key", "revision"}`` per key:
    written where nothing was stored, replaced (``replace=True``), or left as it was
    (stored with the same value)."""

    imported: list[dict[str, Any]] = field(default_factory=list)
    replaced: list[dict[str, Any]] = field(default_factory=list)
    unchanged: list[dict[str, Any]] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {"imported": self.imported, "replaced": self.replaced, "unchanged": self.unchanged}


@dataclass(slots=True)
class ErasureReport:
    """What an erasure removed: each scope with the keys it held, and how many records
    of deleted keys the backend forgot (``None``: the backend cannot, and some may stay;
    see :mod:`.storage.purge`)."""

    subject: Subject
    scopes: list[dict[str, Any]] = field(default_factory=list)
    deleted_records: int | None = 0

    @property
    def keys_deleted(self) -> int:
        return sum(len(scope["keys"]) for scope in self.scopes)

    def as_json(self) -> dict[str, Any]:
        return {
            "subject": self.subject.as_json(),
            "scopes": self.scopes,
            "keys_deleted": self.keys_deleted,
            "deleted_records_forgotten": self.deleted_records,
            "complete": self.deleted_records is not None,
        }


# -- which layers ----------------------------------------------------------------------------


async def stored_layers(backend: StorageBackend) -> list[str]:
    """The ids of the layers that have a stored key. This lists every key under
    ``scopes/``: pass ``layers=`` to the functions below to spare that walk."""
    found: dict[str, None] = {}
    for key in await backend.list(ROOT):
        found.setdefault(_layer_of(key), None)
    return list(found)


def _layer_of(key: str) -> str:
    return unquote(key[len(ROOT) :].split("/", 1)[0])


async def _layers(backend: StorageBackend, layers: Iterable[str] | None) -> list[str]:
    if layers is not None:
        return list(dict.fromkeys(layers))
    return await stored_layers(backend)


def _iso(timestamp: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(timestamp))


# -- export ----------------------------------------------------------------------------------


async def export_subject(
    backend: StorageBackend, subject: Subject, *, layers: Iterable[str] | None = None
) -> dict[str, Any]:
    """The export document of ``subject``: every key of each of its scopes in each layer
    (``layers``: these only; default: every layer with a stored key), with its value,
    revision and whole journal. Each key is read at one instant (``journal_view``)."""
    scopes: list[dict[str, Any]] = []
    for layer_id in await _layers(backend, layers):
        for kind, scope_id in subject.scopes():
            prefix = scope_prefix(layer_id, kind, scope_id)
            keys: dict[str, Any] = {}
            for info in await backend.describe(prefix):
                view = await backend.journal_view(info.key, limit=MAX_JOURNAL_LIMIT)
                if view.current is None:  # deleted since it was listed
                    continue
                keys[info.key[len(prefix) :]] = {
                    "revision": view.current.revision,
                    "updated_at": _iso(info.updated_at),
                    "value": view.current.value,
                    "journal": [
                        {"revision": r.revision, "written_at": _iso(r.written_at), "entry": r.entry}
                        for r in view.rows
                    ],
                }
            if keys:
                scopes.append({"layer": layer_id, "kind": kind, "id": scope_id, "keys": keys})
    return {
        "format": FORMAT,
        "version": VERSION,
        "exported_at": _iso(time.time()),
        "subject": subject.as_json(),
        "scopes": scopes,
    }


# -- import ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _KeyImport:
    layer: str
    kind: Scope
    scope_id: str
    name: str
    key: str
    value: Any
    journal: list[tuple[int, Any]]  # (revision, entry), newest first

    def row(self, revision: int) -> dict[str, Any]:
        return {
            "layer": self.layer,
            "kind": self.kind,
            "id": self.scope_id,
            "key": self.name,
            "revision": revision,
        }


def read_document(document: Any) -> list[_KeyImport]:
    """The keys of an export document; :class:`ExportFormatError` saying what is wrong
    with one that is not. Its ``subject`` is a record of what was asked for: the keys
    imported are those of its ``scopes``, whatever ids they name."""
    if not isinstance(document, Mapping) or document.get("format") != FORMAT:
        raise ExportFormatError(f"not a {FORMAT} document (its 'format' must say so)")
    version = document.get("version")
    if isinstance(version, bool) or version != VERSION:  # 1.0 is 1, as JSON has it
        raise ExportFormatError(
            f"version {version!r} of the export format is not known here; "
            f"this version reads version {VERSION}"
        )
    scopes = document.get("scopes")
    if not isinstance(scopes, list):
        raise ExportFormatError("an export needs a 'scopes' list")
    try:
        # A key named twice (a hand-edited document): the last one is what is imported.
        keys = {key.key: key for scope in scopes for key in _scope_keys(scope)}
        return list(keys.values())
    except (ValueError, TypeError, KeyError) as exc:
        raise ExportFormatError(f"the export cannot be imported: {exc}") from None


def _scope_keys(scope: Any) -> list[_KeyImport]:
    if not isinstance(scope, Mapping) or not isinstance(scope.get("keys"), Mapping):
        raise ValueError("each scope needs 'layer', 'kind', 'id' and a 'keys' object")
    layer, kind, scope_id = scope.get("layer"), scope.get("kind"), scope.get("id")
    if not isinstance(layer, str) or not layer or kind not in SCOPES:
        raise ValueError(f"a scope's layer and kind ({layer!r}, {kind!r}) are not valid")
    if not isinstance(scope_id, str):
        raise ValueError(f"the id of a {kind} scope must be a string, not {scope_id!r}")
    checked_kind: Scope = "thread" if kind == "thread" else "resource"
    prefix = scope_prefix(layer, checked_kind, scope_id)  # ValueError for a bad id
    found: list[_KeyImport] = []
    for name, stored in scope["keys"].items():
        if not name or not isinstance(stored, Mapping) or "value" not in stored:
            raise ValueError(f"the key {name!r} of {kind} {scope_id!r} has no 'value'")
        rows = stored.get("journal") or []
        if not isinstance(rows, list):
            raise ValueError(f"the journal of {kind} {scope_id!r} must be a list")
        journal = sorted(
            ((_revision(row), row["entry"]) for row in rows),
            key=lambda row: row[0],
            reverse=True,
        )
        encode_json(stored["value"])  # ValueError for what JSON cannot hold
        found.append(
            _KeyImport(layer, checked_kind, scope_id, name, prefix + name, stored["value"], journal)
        )
    return found


def _revision(row: Any) -> int:
    revision = row["revision"]
    whole = isinstance(revision, int | float) and not isinstance(revision, bool)
    if not whole or not float(revision).is_integer() or revision < 0:  # 7.0 is 7, as in JSON
        raise ValueError(f"a journal row's revision must be a whole number, not {revision!r}")
    return int(revision)


async def import_subject(
    backend: StorageBackend, document: Any, *, replace: bool = False
) -> ImportReport:
    """Write an :func:`export_subject` document's keys back, each with its journal.

    A key stored with the document's value is left as it is. A key stored with another
    value is a conflict: :class:`ImportConflictError` lists them all before anything is
    written, unless ``replace`` (the stored key, journal included, is deleted first).
    Each write checks that the key is still as it was when checked, so a write landing
    in between is a conflict too. :class:`ExportFormatError` for a bad document."""
    keys = read_document(document)
    stored = {key.key: await backend.get_revision(key.key) for key in keys}
    report = ImportReport()
    conflicts = [
        key.row(found.revision)
        for key in keys
        if (found := stored[key.key]) is not None and found.value != key.value
    ]
    if conflicts and not replace:
        raise ImportConflictError(conflicts)
    for key in keys:
        found = stored[key.key]
        if found is not None and found.value == key.value:
            report.unchanged.append(key.row(found.revision))
            continue
        if found is not None:
            await backend.delete(key.key)
        revision = await _write_with_journal(backend, key)
        (report.replaced if found is not None else report.imported).append(key.row(revision))
    logger.info(
        "imported %d key(s), replaced %d, left %d as they were",
        len(report.imported),
        len(report.replaced),
        len(report.unchanged),
        extra={
            "scratchpad": {
                "operation": "import",
                "imported": len(report.imported),
                "replaced": len(report.replaced),
                "unchanged": len(report.unchanged),
            }
        },
    )
    return report


def _states(key: _KeyImport) -> list[tuple[Any, Any]]:
    """(state, entry) pairs to commit, oldest first: the state before the oldest journaled
    write (without an entry) unless it was nothing, then the state after each journaled
    write, rebuilt by undoing the newer entries from the value. A journal that cannot be
    undone (a gap in its revisions, an entry of another shape) is left out, with a log."""
    states: list[tuple[Any, Any]] = []
    state, expected = key.value, None
    try:
        for revision, entry in key.journal:
            if expected is not None and revision != expected:
                raise ValueError(f"revision {expected} is missing from the journal")
            states.append((state, entry))
            state, expected = undo(state, entry), revision - 1
    except Exception as exc:  # an entry of another shape: whatever undoing it raised
        logger.warning(
            "imported %s without its journal, which cannot be replayed (%s)",
            key.key,
            exc,
            extra={"scratchpad": {"operation": "import", "key": key.key}},
        )
        return [(key.value, None)]
    if not states:
        return [(key.value, None)]
    if state is not None:
        states.append((state, None))
    return list(reversed(states))


async def _write_with_journal(backend: StorageBackend, key: _KeyImport) -> int:
    """Commit ``key``'s states in order, each journaling its entry: the first only onto
    a missing key, each next one onto the revision the one before made (an
    :class:`ImportConflictError` if another write came in between)."""
    keep = max(len(key.journal), 1)
    revision = 0
    for state, entry in _states(key):
        written = await backend.commit_with_journal(
            key.key, _onto(key, revision, state, entry), keep=keep, after=MAX_JOURNAL_LIMIT
        )
        revision = written.revision
    return revision


def _onto(key: _KeyImport, expected: int, state: Any, entry: Any) -> JournalCommitFn:
    """A commit of ``state`` (journaling ``entry``) onto revision ``expected`` only
    (0: onto a missing key, which the contract hands over as revision 0)."""

    def commit(current: Revision, _rows: list[JournalRow]) -> Commit:
        if current.revision != expected:
            raise ImportConflictError([key.row(current.revision)])
        return Commit(state, entry)

    return commit


# -- erasure ---------------------------------------------------------------------------------


async def erase_subject(
    backend: StorageBackend, subject: Subject, *, layers: Iterable[str] | None = None
) -> ErasureReport:
    """Delete every key of each of ``subject``'s scopes in each layer (``layers``: these
    only; default: every layer with a stored key, and ``scratchpad``), journals with
    them, then have the backend forget the revisions it keeps of deleted keys under those
    scopes (also those a ``reset`` deleted earlier). Written again, such a key starts
    over at revision 1. Safe to run again: a second run finds nothing."""
    layer_ids = await _layers(backend, layers)
    if layers is None and "scratchpad" not in layer_ids:
        layer_ids.append("scratchpad")  # a reset scope leaves only its retired revision
    report = ErasureReport(subject)
    forgotten: int | None = 0
    for layer_id in layer_ids:
        for kind, scope_id in subject.scopes():
            prefix = scope_prefix(layer_id, kind, scope_id)
            keys = await backend.list(prefix)
            for key in keys:
                await backend.delete(key)
            purged = await purge_deleted(backend, prefix)
            forgotten = None if purged is None or forgotten is None else forgotten + purged
            if keys:
                report.scopes.append(
                    {
                        "layer": layer_id,
                        "kind": kind,
                        "id": scope_id,
                        "keys": [key[len(prefix) :] for key in keys],
                    }
                )
    report.deleted_records = forgotten
    logger.info(
        "erased %d key(s) in %d scope(s) of a data subject",
        report.keys_deleted,
        len(report.scopes),
        extra={
            "scratchpad": {
                "operation": "erase",
                "keys_deleted": report.keys_deleted,
                "scopes": len(report.scopes),
                "complete": forgotten is not None,
            }
        },
    )
    if forgotten is None:
        logger.warning(
            "the storage %s cannot forget the revisions it keeps of deleted keys; records "
            "naming the erased scopes may remain in it",
            type(backend).__name__,
        )
    return report
