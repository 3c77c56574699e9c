"""Compaction: every segment of the working tree's store merged into one, verified first."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from pathlib import Path

from evalreg import dvcrepo
from evalreg.store.segments import STORE_DIR, ResponseStore, SegmentWriter


@dataclass(frozen=True)
class Compaction:
    before: int
    """Segments before compaction."""
    records: int
    dropped: int
    """Duplicate or torn lines not carried over."""
    segment: str | None
    to_commit: tuple[str, ...] = ()
    """The pointers added and removed, and the objects staged with them."""
    objects: dvcrepo.StagedObjects = field(default_factory=dvcrepo.StagedObjects)
    """The new segment's object, pushed to an in-repository remote and staged."""

    @property
    def compacted(self) -> bool:
        """Whether a new segment replaced several, or dropped lines from one."""
        return self.segment is not None and (self.before > 1 or self.dropped > 0)


def compact(root: Path, *, push: bool = True) -> Compaction:
    """Merge every segment of the working tree's store into one new segment.

    The new segment is written (records in key order), synced and verified before any old
    segment is removed; old segments stay in the DVC cache and remote, so older revisions
    that point at them still reproduce.
    """
    store = ResponseStore.open(root)
    directory = root / STORE_DIR
    old = sorted(n for n in store.names if n)
    dropped = store.stats.duplicates + store.stats.torn
    if len(old) <= 1 and not dropped:
        return Compaction(len(old), len(store), 0, old[0] if old else None)
    writer = SegmentWriter(root, label="compact")
    with writer:
        for key in sorted(store.keys()):
            line = store.line(key)
            assert line is not None, "a key the store lists has a line"
            writer.put(line + b"\n")
    merged = ResponseStore()
    merged.add_segment(writer.name, writer.path)
    if set(merged.keys()) != set(store.keys()) or merged.stats.torn:
        writer.path.unlink()
        raise RuntimeError("compaction verification failed; the store is unchanged")
    pointers = [f"{STORE_DIR}/{n}.dvc" for n in old if (directory / f"{n}.dvc").exists()]
    if pointers:
        dvcrepo.untrack(root, pointers)
    for name in old:
        with contextlib.suppress(FileNotFoundError):
            (directory / name).unlink()
    new = f"{STORE_DIR}/{writer.name}"
    dvcrepo.track(root, [new], push=False)
    objects = dvcrepo.StagedObjects()
    if push and dvcrepo.push(root, [new]) is None:
        objects = dvcrepo.stage_objects(root, [new])
    to_commit = dvcrepo.to_commit(root, [new], [*pointers, *objects.staged])
    return Compaction(len(old), len(store), dropped, writer.name, tuple(to_commit), objects)
