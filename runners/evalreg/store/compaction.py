"""Compaction: every segment of the working tree's store merged into one, verified first."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager as ContextManager
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path

from evalreg import dvcrepo
from evalreg.store.rewrite import Rewrite
from evalreg.store.segments import STORE_DIR, ResponseStore


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


def compact(
    root: Path, *, push: bool = True, guard: Callable[[], ContextManager[object]] = nullcontext
) -> Compaction:
    """Merge every segment of the working tree's store into one new segment.

    The new segment is written (records in key order), synced and verified before any old
    segment is removed; old segments stay in the DVC cache and remote, so older revisions
    that point at them still reproduce. The rewrite is journalled (``store.rewrite``):
    stopped before the new segment is complete, it is undone by the next command; after,
    it is finished. ``guard`` wraps the replacing step (``interrupts.deferred``).
    """
    store = ResponseStore.open(root)
    old = sorted(n for n in store.names if n)
    dropped = store.stats.duplicates + store.stats.torn
    if len(old) <= 1 and not dropped:
        return Compaction(len(old), len(store), 0, old[0] if old else None)
    rewrite = Rewrite.begin(root, "compact", push=push, request={})
    try:
        writer = rewrite.writer("compact")
        with writer:
            for key in sorted(store.keys()):
                line = store.line(key)
                assert line is not None, "a key the store lists has a line"
                writer.put(line + b"\n")
        merged = ResponseStore()
        merged.add_segment(writer.name, writer.path)
        if set(merged.keys()) != set(store.keys()) or merged.stats.torn:
            raise RuntimeError("compaction verification failed; the store is unchanged")
    except BaseException:
        rewrite.discard()
        raise
    with guard():
        done = rewrite.replace(old, written=True)
    new = f"{STORE_DIR}/{writer.name}"
    to_commit = dvcrepo.to_commit(root, [new], [*done.pointers, *done.stage.staged])
    return Compaction(len(old), len(store), dropped, writer.name, tuple(to_commit), done.stage)
