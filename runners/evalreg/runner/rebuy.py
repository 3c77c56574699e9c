"""Evidence no copy holds: the cells a run buys again because their responses or per-item
records are in DVC objects that neither this machine nor the remote has (results merged
from a fork that ran with ``--no-push``, say), instead of stopping on them."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

from evalreg import dvcrepo
from evalreg.errors import DataMissingError
from evalreg.registry.tree import WorkspaceTree
from evalreg.results.freshness import CellStatus
from evalreg.results.records import read_records
from evalreg.store.hashes import refuse_altered
from evalreg.store.rebought_log import LostObject
from evalreg.store.segments import STORE_DIR, ResponseStore, segment_names, segment_source


@dataclass
class LostEvidence:
    """The store's segments and the cells' records that no copy holds, and the fresh
    cells whose results rest on them (to be run again)."""

    segments: list[LostObject] = field(default_factory=list)
    cells: dict[str, list[LostObject]] = field(default_factory=dict)
    """By cell id, the lost objects its results rest on."""

    def note(self) -> str | None:
        """What the run says of them, or None when nothing is lost."""
        if not self.cells and not self.segments:
            return None
        objects = sorted({o for lost in self.cells.values() for o in lost} | set(self.segments))
        named = ", ".join(f"{o.path} (md5 {o.md5})" for o in objects)
        if not self.cells:
            return (
                f"DVC objects on no remote and not in the local cache: {named}; their "
                "responses are missing here and are bought again when a cell needs them"
            )
        return (
            f"{', '.join(sorted(self.cells))}: results rest on DVC objects that are on no "
            f"remote and not in the local cache ({named}), so they cannot be reproduced; "
            "their responses are bought again and the results replaced. Run `evalreg report` "
            "and commit them with reports/rebought.jsonl, which records the re-buy"
        )


def open_store(root: Path) -> tuple[ResponseStore, list[LostObject]]:
    """The working tree's response store, without the segments no copy holds (named
    second), once its tracked segments are known to be what their pointers name. A
    segment that cannot be read for another reason (the remote cannot be reached, or
    holds it but would not give it) stops the run as before."""
    tree = WorkspaceTree(root)
    refuse_altered(tree.root, [f"{STORE_DIR}/{name}" for name in segment_names(tree)])
    unreadable: list[str] = []
    store = ResponseStore.load(tree, unreadable=unreadable)
    if not unreadable:
        return store, []
    objects = []
    for name in unreadable:
        pointer = f"{STORE_DIR}/{name}.dvc"
        md5 = dvcrepo.pointer_md5(tree.read(pointer)) if tree.is_file(pointer) else None
        if md5 is None:
            segment_source(tree, name)  # raises the error that says why
            continue
        objects.append(LostObject(pointer, md5))
    absent = set(dvcrepo.missing_on_remote(root, [o.md5 for o in objects]))
    for name, lost in zip(unreadable, objects, strict=True):
        if lost.md5 not in absent:
            segment_source(tree, name)  # the remote has it: say why it was not read
    return store, objects


def lost_evidence(
    root: Path, statuses: list[CellStatus], store: ResponseStore, segments: list[LostObject]
) -> LostEvidence:
    """Which fresh cells of ``statuses`` rest on objects no copy holds: their per-item
    records (the file absent here, not in the cache and not on the remote), or responses
    in one of the lost ``segments``. A remote that cannot be read loses nothing."""
    lost = LostEvidence(segments)
    tree = WorkspaceTree(root)
    fresh = [st for st in statuses if st.state == "fresh"]
    unsure: dict[str, LostObject] = {}
    for st in fresh:
        rel = st.cell.items_path
        pointer = rel + ".dvc"
        if not tree.is_file(pointer):
            continue
        md5 = dvcrepo.pointer_md5(tree.read(pointer))
        # The cache answers for nearly every cell without reading anything; the working
        # tree's file may be another version (a merge changes the pointer, not the file).
        if md5 is None or dvcrepo.in_cache(root, md5) or dvcrepo.holds(root / rel, md5):
            continue
        if dvcrepo.local_copy(root, md5) is None:
            unsure[st.cell.id] = LostObject(pointer, md5)
    if unsure:
        try:
            absent = set(dvcrepo.missing_on_remote(root, sorted({o.md5 for o in unsure.values()})))
        except DataMissingError:
            absent = set()
        lost.cells = {cell: [o] for cell, o in unsure.items() if o.md5 in absent}
    if segments:
        for st in fresh:
            if st.cell.id in lost.cells or st.cell.id in unsure:
                continue
            keys = [r["key"] for r in read_records(tree, st.cell) if r["key"] is not None]
            if keys and store.absent(keys):
                lost.cells[st.cell.id] = list(segments)
    return lost


def rerun(st: CellStatus, lost: LostEvidence) -> CellStatus:
    """``st`` made stale when its results rest on lost objects, saying so."""
    objects = lost.cells.get(st.cell.id)
    if objects is None:
        return st
    named = ", ".join(f"{o.path} (md5 {o.md5})" for o in objects)
    return dataclasses.replace(
        st, state="stale", reasons=[*st.reasons, f"its evidence is on no DVC remote: {named}"]
    )
