"""``export``, ``import`` and ``erase``: a data subject's scratchpads, out, in and gone.

A subject is ``--resource ID`` and the ``--thread ID`` s the application lists for it;
every layer's scope of each id is reached (``--layer`` to name the layers instead of
finding every layer stored). See :mod:`noetic_scratchpad.portability`.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..portability import (
    ExportFormatError,
    ImportConflictError,
    Subject,
    erase_subject,
    export_subject,
    import_subject,
    read_document,
)
from ..storage import open_storage
from .common import PROG, CliError, UsageError, shown_url
from .stored import confirm, nothing_stored, sqlite_file_missing, stored_url

__all__ = ("add_portability",)

AddParser = Callable[..., argparse.ArgumentParser]


def add_portability(add_parser: AddParser, storage: argparse.ArgumentParser) -> None:
    """Register ``export``, ``import`` and ``erase``."""
    export = add_parser(
        "export",
        parents=[storage],
        help="write everything stored for a resource and its threads as JSON",
        description="Write the state and the journal of every layer's scope of a resource "
        "id and of the thread ids you list, as one JSON document (a data subject's "
        "access request). `import` loads it back.",
    )
    add_subject(export)
    export.add_argument(
        "-o", "--output", metavar="FILE", help="write the document to FILE (default: stdout)"
    )
    export.set_defaults(handler=cmd_export)

    loading = add_parser(
        "import",
        parents=[storage],
        help="load a document written by export",
        description="Write back the scopes of an `export` document, each key with its "
        "journal (history and revert work on them). A key stored with another value is "
        "a conflict: nothing is written, unless --replace.",
    )
    loading.add_argument("file", metavar="FILE", help="the export document ('-': stdin)")
    loading.add_argument(
        "--replace",
        action="store_true",
        help="replace keys stored with other values (their stored journals go too)",
    )
    loading.add_argument("--json", action="store_true", help="print what was done as JSON")
    loading.set_defaults(handler=cmd_import)

    erase = add_parser(
        "erase",
        parents=[storage],
        help="delete everything stored for a resource and its threads",
        description="Delete the state and the journal of every layer's scope of a resource "
        "id and of the thread ids you list, and the revisions the storage keeps of their "
        "deleted keys (a data subject's erasure request). Asks first; without a terminal "
        "it refuses unless --yes.",
    )
    add_subject(erase)
    erase.add_argument("-y", "--yes", action="store_true", help="do not ask for confirmation")
    erase.add_argument("--json", action="store_true", help="print what was erased as JSON")
    erase.set_defaults(handler=cmd_erase)


def add_subject(parser: argparse.ArgumentParser) -> None:
    """``--resource ID`` and ``--thread ID`` (repeatable): at least one; ``--layer``."""
    parser.add_argument("--resource", metavar="ID", help="a resource id, such as a user")
    parser.add_argument(
        "--thread",
        metavar="ID",
        action="append",
        default=[],
        help="a thread id of the subject (repeat it for each thread)",
    )
    parser.add_argument(
        "--layer",
        metavar="ID",
        action="append",
        help="only this layer (repeatable; default: every layer stored)",
    )


def subject_of(args: argparse.Namespace) -> Subject:
    if args.resource is None and not args.thread:
        raise UsageError("name the subject: --resource ID, --thread ID, or both")
    try:
        return Subject(args.resource, tuple(args.thread))
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def described(subject: Subject) -> str:
    """``resource 'alice' and 2 thread(s)``."""
    parts = [] if subject.resource is None else [f"resource {subject.resource!r}"]
    if subject.threads:
        parts.append(
            f"thread {subject.threads[0]!r}"
            if len(subject.threads) == 1
            else f"{len(subject.threads)} threads"
        )
    return " and ".join(parts)


# -- export ----------------------------------------------------------------------------------


async def cmd_export(args: argparse.Namespace) -> int:
    url = stored_url(args)
    subject = subject_of(args)
    if sqlite_file_missing(url) is not None:
        raise CliError("; ".join(nothing_stored(url, "scratchpad")))
    async with await open_storage(url) as backend:
        document = await export_subject(backend, subject, layers=args.layer)
    text = json.dumps(document, indent=2, ensure_ascii=False) + "\n"
    if args.output is None:
        sys.stdout.write(text)
        return 0
    write_file(args.output, text)
    keys = sum(len(scope["keys"]) for scope in document["scopes"])
    print(
        f"Exported {len(document['scopes'])} scope(s) ({keys} key(s)) of "
        f"{described(subject)} to {args.output}."
    )
    return 0


def write_file(name: str, text: str) -> None:
    try:
        Path(name).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise CliError(f"cannot write {name}: {exc.strerror or exc}") from None


# -- import ----------------------------------------------------------------------------------


async def cmd_import(args: argparse.Namespace) -> int:
    url = stored_url(args)
    document = read_document_file(args.file)
    try:
        read_document(document)  # before the storage is opened: a new file is not created
        async with await open_storage(url) as backend:
            report = await import_subject(backend, document, replace=args.replace)
    except ImportConflictError as exc:
        raise CliError(str(exc).replace("import with replace", "pass --replace")) from None
    except ExportFormatError as exc:
        raise CliError(f"{args.file}: {exc}") from None
    if args.json:
        print(json.dumps(report.as_json(), indent=2, ensure_ascii=False))
    else:
        print(
            f"Imported {len(report.imported)} key(s), replaced {len(report.replaced)}, "
            f"left {len(report.unchanged)} as they were, into {shown_url(url)}."
        )
    return 0


def read_document_file(name: str) -> Any:
    try:
        text = sys.stdin.read() if name == "-" else Path(name).read_text(encoding="utf-8")
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise CliError(
            f"{name} is not JSON ({exc}); give a file written by `{PROG} export`"
        ) from None
    except OSError as exc:
        raise CliError(f"cannot read {name}: {exc.strerror or exc}") from None


# -- erase -----------------------------------------------------------------------------------


async def cmd_erase(args: argparse.Namespace) -> int:
    url = stored_url(args)
    shown = shown_url(url)
    subject = subject_of(args)
    if sqlite_file_missing(url) is not None:
        print(f"Nothing to erase: {shown} holds nothing yet.")
        return 0
    layers = "every layer" if args.layer is None else "layers " + ", ".join(args.layer)
    async with await open_storage(url) as backend:
        if not args.yes:
            confirm(
                f"erase everything stored for {described(subject)} in {shown} ({layers}), "
                "journals and the revisions kept of deleted keys included",
                change="erased",
            )
        report = await erase_subject(backend, subject, layers=args.layer)
    if args.json:
        print(json.dumps({**report.as_json(), "storage": shown}, indent=2, ensure_ascii=False))
        return 0
    print(
        f"Erased {described(subject)}: {report.keys_deleted} key(s) in "
        f"{len(report.scopes)} scope(s) of {shown}."
    )
    if report.deleted_records is None:
        print(
            "This storage cannot forget the revisions it keeps of deleted keys: records "
            "naming these ids may remain in it."
        )
    return 0
