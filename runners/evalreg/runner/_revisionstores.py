"""The response stores of several revisions of one repository, sharing their segments.

Reproducing a range of revisions reads the store of each, and consecutive revisions hold
mostly the same segments: each segment (by name and content) is read and indexed once
here, and a revision's store is its list of segments, in ``segment_names`` order, over
one key -> segment map. A key's record is the one ``ResponseStore.load`` of that revision
would return: the first segment holding the key wins, and within it the first line.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from evalreg.registry.tree import Tree, committed_data
from evalreg.store.segments import STORE_DIR, ResponseStore, collection_paused


class Segment:
    """One store segment, read and indexed once (as a store of its own)."""

    __slots__ = ("name", "owners", "store")

    def __init__(self, name: str, data: bytes) -> None:
        self.name = name
        self.store = ResponseStore()
        with collection_paused():  # the index is 10,000s of acyclic tuples
            self.store.add_segment(name, data)
        self.owners: dict[str, Segment] = dict.fromkeys(self.store.keys(), self)
        """Every key this segment holds -> this segment (merged per revision)."""


class RevisionStore:
    """One revision's response store, made of shared ``Segment``s."""

    def __init__(self, segments: Sequence[Segment]) -> None:
        self.segments = list(segments)
        owner: dict[str, Segment] = {}
        for segment in reversed(self.segments):  # the earliest segment holding a key wins
            owner.update(segment.owners)
        self._owner = owner

    @property
    def names(self) -> list[str]:
        return [s.name for s in self.segments]

    def get(self, key: str) -> dict[str, Any] | None:
        """The stored record for ``key``, or None (also if its line is damaged)."""
        segment = self._owner.get(key)
        return None if segment is None else segment.store.get(key)

    def __contains__(self, key: object) -> bool:
        return key in self._owner

    def __len__(self) -> int:
        return len(self._owner)

    def locate(self, keys: Sequence[str]) -> tuple[Segment | None, ...]:
        """The segment each key's record is read from (None: not stored). A segment is
        one name and content, so the same segments mean the same bytes for every key."""
        return tuple(map(self._owner.get, keys))


class SegmentCache:
    """Segments read so far, by name and content: the DVC pointer of one read through it
    (same pointer, same md5, same bytes), else the md5 of the bytes the tree holds."""

    def __init__(self) -> None:
        self._segments: dict[tuple[str, bytes], Segment] = {}

    def segment(self, tree: Tree, name: str) -> Segment:
        """Segment ``name`` of ``tree``'s store (``DataMissingError`` when its data cannot
        be read here)."""
        rel = f"{STORE_DIR}/{name}"
        data: bytes | None = None
        if not tree.is_file(rel) and tree.is_file(rel + ".dvc"):  # as ``read_data`` reads it
            identity = tree.read(rel + ".dvc")
        else:
            data = tree.read_data(rel)
            identity = hashlib.md5(data, usedforsecurity=False).digest()
        found = self._segments.get((name, identity))
        if found is None:
            found = Segment(name, data if data is not None else committed_data(tree, rel))
            self._segments[(name, identity)] = found
        return found
