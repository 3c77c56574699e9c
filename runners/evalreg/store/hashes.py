"""Whether the working tree's DVC-tracked run output is what its pointers name, with each
file's md5 remembered by its ``stat`` so that asking again reads nothing.

A store segment or per-item records file edited after DVC tracked it (or left behind when
its pointer changed) would be read, graded and reported as if it were the committed
evidence. Hashing every such file on every command would cost a read of the whole store,
so, as DVC does, a file's md5 is kept with its inode, size, modification and change times
(``hashes.json`` in the repository's state directory) and trusted while they are
unchanged; the change time, which no tool can set back, is kept too, so restoring the
modification time does not hide an edit. A file this clone has not hashed yet is asked of
DVC's own state database when there is much of it (``dvcrepo.state_md5s``: what
``dvc pull`` or ``dvc add`` hashed is known there), else hashed here.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from evalreg import dvcrepo
from evalreg.errors import RegistryError
from evalreg.registry.diagnostics import Finding
from evalreg.store.lock import state_dir

HASHES = "hashes.json"
_VERSION = 1
ASK_DVC_ABOVE = 256 << 20
"""Bytes of files not hashed yet above which DVC's state database is asked first: starting
DVC costs some 0.6 s, about what hashing 250 MB costs."""

Stamp = tuple[int, int, int, int]
"""A file's inode, size, modification and change times (ns)."""
Known = dict[str, tuple[Stamp, str]]
"""By file: its stamp when it was hashed, and its md5."""


@dataclass(frozen=True)
class Altered:
    """A tracked file whose content is not the md5 its pointer names."""

    path: str
    recorded: str
    """The md5 its pointer ``path.dvc`` names."""
    holds: str
    """The md5 of the file in the working tree."""
    cached: bool
    """Whether the DVC cache holds that content too (then nothing is lost by replacing it)."""

    def describe(self) -> str:
        """What is wrong with it and how to restore it, never losing its content: it may
        hold responses no other copy has."""
        pointer = f"{self.path}.dvc"
        fix = (
            f"`dvc checkout --force {pointer}` restores the committed content (the DVC cache "
            "keeps this version too)"
            if self.cached
            else "move it out of the repository (no other copy holds this version), then "
            f"`dvc checkout {pointer}` restores the committed content"
        )
        return (
            f"not the version DVC tracks ({pointer} names md5 {self.recorded}, the file "
            f"holds {self.holds}): it was changed after DVC tracked it, or its pointer changed "
            "and it was not checked out, so what is graded from it is not the committed "
            f"evidence. {fix}"
        )


def altered(root: Path, rels: Iterable[str]) -> list[Altered]:
    """Of ``rels`` (relative to ``root``), the files with a DVC pointer beside them whose
    content is not the md5 the pointer names, in the order given. A file or pointer that
    is not there, or a pointer with no md5, is left to the commands that read it."""
    recorded: dict[str, str] = {}
    for rel in rels:
        try:
            md5 = dvcrepo.pointer_md5((root / f"{rel}.dvc").read_bytes())
        except OSError:
            continue
        if md5 is not None:
            recorded[rel] = md5
    held = file_md5s(root, recorded)
    return [
        Altered(rel, md5, held[rel], dvcrepo.in_cache(root, held[rel]))
        for rel, md5 in recorded.items()
        if rel in held and held[rel] != md5
    ]


def refuse_altered(root: Path, rels: Iterable[str]) -> None:
    """Raise ``RegistryError`` naming each of ``rels`` that is not the version its pointer
    names: a command that would grade from it, or write it into new evidence, stops."""
    found = altered(root, rels)
    if found:
        raise RegistryError([Finding(a.path, 0, 0, a.describe()) for a in found])


def file_md5s(root: Path, rels: Iterable[str]) -> dict[str, str]:
    """The md5 of each of ``rels`` that is a file in the working tree at ``root``: from
    what was remembered of it while its ``stat`` is the same, else hashed (and then
    remembered)."""
    known = _load(root)
    stamps: dict[str, Stamp] = {}
    out: dict[str, str] = {}
    for rel in rels:
        try:
            st = (root / rel).stat()
        except OSError:
            continue
        stamps[rel] = (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        entry = known.get(rel)
        if entry is not None and entry[0] == stamps[rel]:
            out[rel] = entry[1]
    todo = [rel for rel in stamps if rel not in out]
    if not todo:
        return out
    if sum(stamps[rel][1] for rel in todo) > ASK_DVC_ABOVE:
        out |= dvcrepo.state_md5s(root, todo)
    for rel in todo:
        if rel not in out:
            with contextlib.suppress(OSError), (root / rel).open("rb") as f:
                out[rel] = hashlib.file_digest(
                    f, lambda: hashlib.md5(usedforsecurity=False)
                ).hexdigest()
    for rel in todo:
        if rel in out and _unchanged(root / rel, stamps[rel]):
            known[rel] = (stamps[rel], out[rel])
    _save(root, known)
    return out


def _unchanged(path: Path, stamp: Stamp) -> bool:
    """Whether ``path`` still has ``stamp``: a file written while it was hashed is not
    remembered (its md5 may be of neither version)."""
    try:
        st = path.stat()
    except OSError:
        return False
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns) == stamp


def _load(root: Path) -> Known:
    try:
        doc = json.loads((state_dir(root) / HASHES).read_bytes())
    except (OSError, ValueError):
        return {}
    files = doc.get("files") if isinstance(doc, dict) and doc.get("version") == _VERSION else None
    if not isinstance(files, dict):
        return {}
    return {
        rel: ((entry[0], entry[1], entry[2], entry[3]), entry[4])
        for rel, entry in files.items()
        if isinstance(entry, list)
        and len(entry) == 5
        and all(type(v) is int for v in entry[:4])
        and isinstance(entry[4], str)
    }


def _save(root: Path, known: Known) -> None:
    """Write what is known, dropping files that are gone (replaced whole, so a reader never
    sees half of it; a write that fails only means hashing again next time)."""
    directory = state_dir(root)
    kept = {rel: [*known[rel][0], known[rel][1]] for rel in sorted(known) if (root / rel).exists()}
    data = json.dumps({"version": _VERSION, "files": kept}, sort_keys=True).encode()
    with contextlib.suppress(OSError):
        directory.mkdir(parents=True, exist_ok=True)
        tmp = directory / f"{HASHES}.{secrets.token_hex(4)}.tmp"
        try:
            tmp.write_bytes(data)
            tmp.replace(directory / HASHES)
        finally:
            tmp.unlink(missing_ok=True)
