"""The files eval items attach: read at the loaded revision (the working tree, or a commit
through git and DVC, as eval sets are), typed by their magic bytes and hashed."""

from __future__ import annotations

import dataclasses
import hashlib
import json

from evalreg.errors import DataMissingError
from evalreg.evalsets.evalset import EvalSet
from evalreg.providers.attachments import EXTENSIONS, MAX_BYTES, NAMES, sniff
from evalreg.registry.diagnostics import Finding, Severity
from evalreg.registry.schema import AttachedFile, Item
from evalreg.registry.tree import PathEscapes, Tree, clean_relpath

ROOT = "evalsets/"
"""Where attached files live: eval data, tracked by DVC with the eval sets."""


def attachment_column(data: bytes, evalset: EvalSet, item: Item, path: str) -> tuple[int, int]:
    """The line and 1-based column of ``path``, as written in ``item``'s line of ``data``."""
    line = evalset.lines.get(item.id, 0)
    if line <= 0:
        return line, 0
    text = data.split(b"\n")[line - 1].decode("utf-8", errors="replace")
    col = text.find(json.dumps(path, ensure_ascii=False))
    return line, col + 1 if col >= 0 else 0


def resolve_attachments(
    tree: Tree, evalset: EvalSet, data: bytes, *, allow_missing_data: bool = False
) -> tuple[EvalSet, list[Finding], list[str]]:
    """``evalset`` with each item's attached files read from ``tree``, the findings about
    them (a path outside ``evalsets/``, a missing file, an unknown type, a name whose
    extension says another type, a file too large for any provider) and the paths of
    attachments whose DVC data is not here (warnings with ``allow_missing_data``)."""
    if not evalset.has_attachments:
        return evalset, [], []
    findings: list[Finding] = []
    missing: list[str] = []
    read: dict[str, AttachedFile | str] = {}
    items: list[Item] = []
    for item in evalset.items:
        files: list[AttachedFile] = []
        for attachment in item.attachments:
            got = read.get(attachment.path)
            if got is None:
                got = read[attachment.path] = _read(tree, attachment.path)
            if isinstance(got, AttachedFile):
                files.append(got)
                continue
            line, col = attachment_column(data, evalset, item, attachment.path)
            missing_data = got.startswith("not checked here")
            if missing_data:
                missing.append(attachment.path)
            severity = Severity.WARNING if missing_data and allow_missing_data else Severity.ERROR
            findings.append(Finding(evalset.path, line, col, f"item {item.id!r}: {got}", severity))
        items.append(item._replace(files=tuple(files)) if item.attachments else item)
    return dataclasses.replace(evalset, items=tuple(items)), findings, missing


def attachments_digest(evalset: EvalSet) -> str | None:
    """A hash of every file ``evalset``'s items attach (path and content), or None when
    they attach none: part of a cell's fingerprint, so a changed file makes it stale."""
    if not evalset.has_attachments:
        return None
    files = sorted({(f.path, f.sha256) for item in evalset.items for f in item.files})
    if not files:
        return None
    return hashlib.sha256("\n".join(f"{p}\0{h}" for p, h in files).encode()).hexdigest()


def _read(tree: Tree, rel: str) -> AttachedFile | str:
    """The file at ``rel``, or why it cannot be attached."""
    try:
        path = clean_relpath(rel)
    except PathEscapes as exc:
        return f"attachment: {exc}"
    if not path.startswith(ROOT):
        return f"attachment {rel!r} is not under {ROOT}: attached files are eval data"
    try:
        data = tree.read_data(path)
    except FileNotFoundError:
        return f"attachment {path!r} does not exist in the {tree.label}"
    except PathEscapes as exc:
        return f"attachment: {exc}"
    except DataMissingError as exc:
        return f"not checked here: attachment {path!r}: {exc}"
    media_type = sniff(data)
    if media_type is None:
        return (
            f"attachment {path!r} is not a PNG, JPEG or PDF file (it begins {data[:8]!r}): "
            "attach one of those"
        )
    suffix = "." + path.rpartition(".")[2].lower() if "." in path else ""
    named = EXTENSIONS.get(suffix)
    if named is not None and named != media_type:
        return (
            f"attachment {path!r} is named {suffix} but holds a {NAMES[media_type]} file: rename it"
        )
    if len(data) > MAX_BYTES:
        return (
            f"attachment {path!r} is {len(data):,} bytes; no provider takes a file over "
            f"{MAX_BYTES:,}"
        )
    return AttachedFile(path, media_type, hashlib.sha256(data).hexdigest(), data)
