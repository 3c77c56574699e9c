"""Eval-set operations that change the repository: validating and tracking with DVC."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from evalreg import dvcrepo
from evalreg.errors import RegistryError, UsageError
from evalreg.evalsets.evalset import EvalSet, item_content, parse_evalset
from evalreg.registry.diagnostics import Finding
from evalreg.registry.tree import PathEscapes, WorkspaceTree, clean_relpath, decode_utf8

SHOWN_IDS = 5
"""How many ids of each kind of change a message lists."""


@dataclass(frozen=True)
class ItemChanges:
    """How an eval set's items differ from the version its pointer records, by id; an item
    whose id stayed but whose content hash did not is changed (it no longer pairs)."""

    added: tuple[str, ...]
    removed: tuple[str, ...]
    changed: tuple[str, ...]

    def lines(self) -> list[str]:
        """One line a kind of change: its count and the first few ids, in file order."""
        out = []
        for what, ids in (
            ("added", self.added),
            ("removed", self.removed),
            ("changed (same id, other content)", self.changed),
        ):
            if ids:
                shown = ", ".join(repr(i) for i in ids[:SHOWN_IDS])
                more = f" and {len(ids) - SHOWN_IDS} more" if len(ids) > SHOWN_IDS else ""
                out.append(f"{what}: {len(ids)} ({shown}{more})")
        return out


@dataclass(frozen=True)
class AddedEvalSet:
    path: str
    items: int
    md5: str
    remote: str
    changes: ItemChanges | None = None
    """What changed against the version the pointer recorded (None: newly tracked, the
    same content, or replaced without reading the old version)."""
    attachments: tuple[str, ...] = ()
    """The attached files tracked (or tracked again, changed) with the eval set."""
    to_commit: tuple[str, ...] = ()
    """The files that record this version in git: pointers, ``.gitignore`` files and the
    objects pushed to an in-repository remote (staged)."""
    objects: dvcrepo.StagedObjects = field(default_factory=dvcrepo.StagedObjects)
    """The objects pushed to an in-repository remote, staged for commit."""


def item_changes(old: EvalSet, old_data: bytes, new: EvalSet, new_data: bytes) -> ItemChanges:
    """Items added, removed and changed from ``old`` to ``new`` (ids in each file's order),
    given the bytes each was parsed from."""
    # An item whose line is unchanged has unchanged content: only the other lines are
    # hashed, which keeps a large set with a few edits cheap.
    old_lines = decode_utf8(old_data, old.path).split("\n")
    new_lines = decode_utf8(new_data, new.path).split("\n")
    before = {item.id: item for item in old.items}
    changed = []
    added = []
    for item in new.items:
        was = before.get(item.id)
        if was is None:
            added.append(item.id)
        elif old_lines[old.lines[was.id] - 1] != new_lines[new.lines[item.id] - 1] and (
            item_content(was) != item_content(item)
        ):
            changed.append(item.id)
    removed = [item.id for item in old.items if item.id not in new.lines]
    return ItemChanges(tuple(added), tuple(removed), tuple(changed))


def add_evalset(
    root: Path, file: Path, *, push: bool = True, replace: bool = False
) -> AddedEvalSet:
    """Validate ``file`` as an eval set, then ``dvc add`` (and push) it.

    Nothing is written unless every line is a valid item and, when DVC already tracks the
    file, the new content keeps every item of the recorded version; ``replace`` allows
    dropping items, and replacing a recorded version that cannot be read here to compare.
    """
    root = root.resolve()
    path = (Path.cwd() / file).resolve() if not file.is_absolute() else file.resolve()
    try:
        rel = clean_relpath(path.relative_to(root).as_posix())
    except (ValueError, PathEscapes):
        raise UsageError(f"{file} is not inside the repository {root}") from None
    if not path.is_file():
        raise UsageError(f"{file}: no such file")
    if not (root / ".dvc").is_dir():
        raise UsageError(f"{root} has no DVC repository: run `dvc init` (or `evalreg init`)")
    data = path.read_bytes()
    evalset, findings = parse_evalset(data, rel)
    if evalset is None:
        raise RegistryError(findings or [Finding(rel, 0, 0, "not a valid eval set")])
    changes = _changes_from_recorded(root, rel, evalset, data, replace=replace)
    attachments = _attachments_to_track(root, evalset, data)
    if attachments:
        dvcrepo.track_files(root, list(attachments), push=push)
    md5 = dvcrepo.add_and_push(root, rel, push=push)
    tracked = [*attachments, rel]
    objects = dvcrepo.stage_objects(root, tracked) if push else dvcrepo.StagedObjects()
    return AddedEvalSet(
        rel,
        len(evalset.items),
        md5,
        dvcrepo.remote_description(root),
        changes,
        attachments,
        tuple(dvcrepo.to_commit(root, [rel, *attachments], objects.staged)),
        objects,
    )


def _attachments_to_track(root: Path, evalset: EvalSet, data: bytes) -> tuple[str, ...]:
    """The files ``evalset``'s items attach that DVC does not track as they are now (each
    by its own pointer, so any revision reads it as it reads the eval set); raises
    ``RegistryError`` when one is missing, of an unknown type or too large."""
    import hashlib

    from evalreg.evalsets.attachments import resolve_attachments

    resolved, findings, _ = resolve_attachments(WorkspaceTree(root), evalset, data)
    if findings:
        raise RegistryError(findings)
    out: list[str] = []
    for item in resolved.items:
        for file in item.files:
            if file.path in out or not (root / file.path).is_file():
                continue  # only in DVC's cache: tracked already, as it is
            pointer = root / f"{file.path}.dvc"
            md5 = dvcrepo.pointer_md5(pointer.read_bytes()) if pointer.is_file() else None
            if md5 != hashlib.md5(file.data, usedforsecurity=False).hexdigest():
                out.append(file.path)
    return tuple(out)


def _changes_from_recorded(
    root: Path, rel: str, evalset: EvalSet, new_data: bytes, *, replace: bool
) -> ItemChanges | None:
    """The changes from the version ``rel.dvc`` records; raises ``UsageError`` when the new
    content drops items, or the recorded version cannot be read, unless ``replace``."""
    pointer = root / f"{rel}.dvc"
    if not pointer.is_file():
        return None
    old_md5 = dvcrepo.pointer_md5(pointer.read_bytes())
    if old_md5 == evalset.md5:
        return None
    # Only the local cache: ``dvc pull`` would overwrite the new file with the old one.
    old_data = None if old_md5 is None else dvcrepo.cached(root, old_md5)
    old = None if old_data is None else parse_evalset(old_data, rel)[0]
    again = f"`evalreg evalset add {rel} --replace`"
    if old is None or old_data is None:
        if replace:
            return None
        if old_data is not None:
            raise UsageError(
                f"{rel}: the version DVC tracks (md5 {old_md5}) is not a valid eval set here, "
                f"so what the new content changes cannot be shown; replace it with {again}"
            )
        recorded = f"md5 {old_md5}" if old_md5 else "no readable md5"
        raise UsageError(
            f"{rel}: DVC already tracks a version of this file ({pointer.name} records "
            f"{recorded}), which is not in the local DVC cache, so what the new content "
            f"removes or changes cannot be shown. Run `dvc fetch {rel}.dvc` (it fills the cache "
            f"and leaves your file alone) and add it again to see, or replace the recorded "
            f"version unseen with {again}"
        )
    changes = item_changes(old, old_data, evalset, new_data)
    if changes.removed and not replace:
        raise UsageError(
            "\n  ".join(
                [
                    f"{rel}: the new content drops {len(changes.removed)} of the "
                    f"{len(old.items)} items of the recorded version (md5 {old_md5}):",
                    *changes.lines(),
                ]
            )
            + f"\nResults on the dropped items stop counting. If that is intended, run {again}"
        )
    return changes
