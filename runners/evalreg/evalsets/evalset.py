"""Eval sets: JSONL files of items, parsed with line numbers and validated item by item."""

from __future__ import annotations

import codecs
import dataclasses
import functools
import hashlib
import itertools
import json
import os
import re
import threading
import weakref
from array import array
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, overload

import orjson
from pydantic import ValidationError

from evalreg import forked
from evalreg.canonical import (
    NestedTooDeep,
    canonical_bytes,
    digest,
    loads_finite,
    nesting_beyond,
)
from evalreg.errors import RegistryError, UsageError
from evalreg.registry.diagnostics import Finding
from evalreg.registry.schema import ID_PATTERN, NO_META, Item, ItemLine
from evalreg.registry.tree import PathEscapes, Tree, WorkspaceTree, clean_relpath, decode_utf8
from evalreg.registry.validation import describe_errors
from evalreg.store.segments import collection_paused, has_long_number

MAX_LINE_FINDINGS = 50
MAX_DEPTH = 100
"""Deepest nesting of objects and lists an item may have: far below Python's recursion
limit, which the code that walks an item (validation, canonical JSON, graders) shares."""


@dataclass(frozen=True)
class SliceFacts:
    """What one slice's items are, as the report and ``evalset-stats`` state it."""

    items: int
    conversations: int
    """Items that are conversations (``messages``)."""
    units: int
    """Independent units: distinct clusters, each item that declares none counting as its
    own (items of one cluster may fail together)."""


@dataclass(frozen=True)
class ItemFacts:
    """What an eval set's items are, counted in one pass: per slice (``all`` first, then
    every tag in order) its items, conversations and units, and the distinct provenance
    (``meta.source``) values, in order."""

    slices: dict[str, SliceFacts]
    sources: tuple[str, ...]


class _Counting:
    """Counts items, one at a time, into their ``ItemFacts``: by tuple of tags first (items
    share a few), each slice then the sum of the tuples that hold its tag."""

    def __init__(self) -> None:
        self._groups: dict[tuple[str, ...], list[Any]] = {}
        """Per tuple of tags: items, conversations, items without a cluster, clusters."""
        self._sources: set[str] = set()

    def add(self, item: Item) -> None:
        group = self._groups.get(item.tags)
        if group is None:
            group = self._groups[item.tags] = [0, 0, 0, set()]
        group[0] += 1
        if item.messages is not None:
            group[1] += 1
        if item.cluster is None:
            group[2] += 1
        else:
            group[3].add(item.cluster)
        if item.meta:
            source = item.meta.get("source")
            if source:
                self._sources.add(str(source))

    def join(self, other: _Counting) -> None:
        """Add the items ``other`` counted."""
        for tags, (n, talks, alone, theirs) in other._groups.items():
            group = self._groups.get(tags)
            if group is None:
                group = self._groups[tags] = [0, 0, 0, set()]
            group[0] += n
            group[1] += talks
            group[2] += alone
            group[3] |= theirs
        self._sources |= other._sources

    def facts(self) -> ItemFacts:
        names = sorted({tag for tags in self._groups for tag in tags} - {"all"})
        slices: dict[str, SliceFacts] = {}
        for name in ("all", *names):
            items = conversations = unclustered = 0
            clusters: set[str] = set()
            for tags, (n, talks, alone, theirs) in self._groups.items():
                if name == "all" or name in tags:  # a tag named twice counts once
                    items += n
                    conversations += talks
                    unclustered += alone
                    clusters |= theirs
            slices[name] = SliceFacts(items, conversations, len(clusters) + unclustered)
        return ItemFacts(slices, tuple(sorted(self._sources)))


@dataclass(frozen=True)
class EvalSet:
    """A parsed eval set: its items in file order, where each one is, and its content hash.

    Read from a file on this machine, its items are not held: ``items`` reads them back
    from the file, a block of lines at a time (``FileItems``).
    """

    path: str
    md5: str
    items: Sequence[Item]
    lines: Mapping[str, int] = field(default_factory=dict)
    """Each item's line number, by id (``LineNumbers`` when the items are read back)."""
    order: array[int] | None = None
    """The items' positions in id order; None: the file is in id order."""
    counted: ItemFacts | None = field(default=None, compare=False, repr=False)
    """``facts``, when parsing counted them."""

    @functools.cached_property
    def facts(self) -> ItemFacts:
        """Per slice, its items, conversations and units; the sources named (one pass over
        the items, unless parsing counted them as it read them)."""
        if self.counted is not None:
            return self.counted
        counting = _Counting()
        for item in self.items:
            counting.add(item)
        return counting.facts()

    @functools.cached_property
    def slices(self) -> Counter[str]:
        """Item counts per tag (counted once: do not modify)."""
        # Counted by tuple of tags first: items share a few (``_SharedTags``).
        items = self.items
        by_tags = (
            items.tag_counts
            if isinstance(items, FileItems)
            else Counter(item.tags for item in items)
        )
        counts: Counter[str] = Counter()
        for tags, n in by_tags.items():
            for tag in set(tags):
                counts[tag] += n
        return counts

    @functools.cached_property
    def by_id(self) -> Sequence[Item]:
        """The items in id order (a view, when they are read from the file)."""
        items = self.items
        if isinstance(items, FileItems):
            return items if self.order is None else items.reordered(self.order)
        return sorted(items, key=lambda i: i.id)

    def identities(self) -> tuple[list[str], list[str], list[tuple[str, ...]]]:
        """Each item's id, cluster (its id when it declares none) and tags (sorted), in id
        order: read from what parsing kept, when the items are read back from the file."""
        items, lines = self.items, self.lines
        if isinstance(items, FileItems) and items.rows is None and isinstance(lines, LineNumbers):
            ids = list(lines)
            rows: Sequence[int] = range(len(ids)) if self.order is None else self.order
            kinds = items.kinds
            ordered = [tuple(sorted(tags)) for tags in kinds.tag_sets]
            tagged = kinds.tagged
            tags = [ordered[tagged[row]] for row in rows]
            of_row = kinds.clusters
            if of_row is None:
                return ids, list(ids), tags
            return ids, [of_row[row] or i for row, i in zip(rows, ids, strict=True)], tags
        shared: dict[tuple[str, ...], tuple[str, ...]] = {}  # one tuple a set of tags
        rows_ = sorted(
            (i.id, i.cluster or i.id, shared.setdefault(tags, tags))
            for i in items
            for tags in (tuple(sorted(i.tags)),)
        )
        return [r[0] for r in rows_], [r[1] for r in rows_], [r[2] for r in rows_]

    def may_lack(self, name: str) -> bool:
        """Whether an item with template fields (``input``) may lack the field ``name``:
        False when none does (read back from the file, their sets of fields are known)."""
        items = self.items
        if isinstance(items, FileItems):
            return any(name not in fields for fields in items.input_fields)
        return True

    @property
    def has_attachments(self) -> bool:
        """Whether an item attaches files."""
        items = self.items
        if isinstance(items, FileItems):
            return items.attached
        return any(item.attachments for item in items)


class _OpenFile:
    """An eval set's file, held open to read lines back (closed with the last user).

    Its size and modification time are checked at every read: a file changed in place
    after it was parsed would give items that were never validated, nor hashed."""

    def __init__(self, fd: int, path: str) -> None:
        self.fd, self.path = fd, path
        stat = os.fstat(fd)
        self.stamp = (stat.st_size, stat.st_mtime_ns)
        weakref.finalize(self, os.close, fd)

    def unchanged(self) -> bool:
        """Whether the file is as it was when opened (by its size and modification time)."""
        stat = os.fstat(self.fd)
        return (stat.st_size, stat.st_mtime_ns) == self.stamp

    def read(self, start: int, end: int) -> bytes:
        if not self.unchanged():
            raise UsageError(f"{self.path}: changed while evalreg read it; run the command again")
        return os.pread(self.fd, end - start, start)


class LineNumbers(Mapping[str, int]):
    """Line numbers by item id, the ids held as one string of bytes in id order (a few
    bytes an item where a dict takes over a hundred); a lookup is a binary search."""

    def __init__(self, ids: bytes, starts: array[int], numbers: array[int]) -> None:
        """``ids[starts[k]:starts[k + 1]]`` is the ``k``-th id in id order (ASCII, as
        ``ID_PATTERN`` has them), ``numbers[k]`` its line number."""
        self._ids, self._starts, self._numbers = ids, starts, numbers

    @classmethod
    def of(cls, lines: Mapping[str, int]) -> LineNumbers:
        """The line numbers of ``lines``."""
        ids = sorted(lines)
        return cls(
            "".join(ids).encode("ascii"),
            array("q", itertools.accumulate(map(len, ids), initial=0)),
            array("q", map(lines.__getitem__, ids)),
        )

    def _id(self, rank: int) -> bytes:
        return self._ids[self._starts[rank] : self._starts[rank + 1]]

    def __getitem__(self, key: str) -> int:
        if isinstance(key, str) and key.isascii():
            wanted = key.encode("ascii")
            lo, hi = 0, len(self._numbers)
            while lo < hi:
                mid = (lo + hi) // 2
                if self._id(mid) < wanted:
                    lo = mid + 1
                else:
                    hi = mid
            if lo < len(self._numbers) and self._id(lo) == wanted:
                return self._numbers[lo]
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        """The ids in id order."""
        for rank in range(len(self._numbers)):
            yield self._id(rank).decode("ascii")

    def __len__(self) -> int:
        return len(self._numbers)


_BLOCK = 1024
"""Items read from the file together (one read when their lines are consecutive)."""


class _Kinds:
    """Per line of an eval set's file, its item's tags (an index into the distinct tuples)
    and cluster: what sorting items into slices and clusters reads, without the items."""

    def __init__(self) -> None:
        self.tag_sets: list[tuple[str, ...]] = []
        self.tagged = array("I")
        self.clusters: list[str | None] | None = None
        """Per line, its cluster; None while no item declares one."""
        self._index: dict[tuple[str, ...], int] = {}

    def add(self, item: Item) -> None:
        index = self._index.get(item.tags)
        if index is None:
            index = self._index[item.tags] = len(self.tag_sets)
            self.tag_sets.append(item.tags)
        if item.cluster is not None and self.clusters is None:
            self.clusters = [None] * len(self.tagged)
        self.tagged.append(index)
        if self.clusters is not None:
            self.clusters.append(item.cluster)

    def join(self, other: _Kinds) -> None:
        """Add the lines ``other`` holds, which follow this one's."""
        index = []
        for tags in other.tag_sets:
            at = self._index.get(tags)
            if at is None:
                at = self._index[tags] = len(self.tag_sets)
                self.tag_sets.append(tags)
            index.append(at)
        if other.clusters is not None and self.clusters is None:
            self.clusters = [None] * len(self.tagged)
        if self.clusters is not None:
            self.clusters += other.clusters or [None] * len(other.tagged)
        self.tagged.extend(index[i] for i in other.tagged)


class FileItems(Sequence[Item]):
    """An eval set's items, read back from its file on access: ``starts[i]:ends[i]`` are
    the bytes of row ``i``'s line; ``rows`` (default: file order) picks and orders them.

    A block of items is read and parsed at a time, and the last two blocks are kept: an
    item asked for again while its block is kept is the same object.
    """

    def __init__(
        self,
        file: _OpenFile,
        starts: array[int],
        ends: array[int],
        tag_counts: Counter[tuple[str, ...]],
        plain: bytearray,
        input_fields: set[frozenset[str]],
        long_numbers: bool,
        attached: bool,
        kinds: _Kinds,
        rows: array[int] | None = None,
    ) -> None:
        self.file, self.starts, self.ends = file, starts, ends
        self.kinds = kinds
        """Per row (of the whole file), its tags and cluster."""
        self.plain = plain
        """Per row, whether its line has the common shape (``_plain_item`` read it)."""
        self.input_fields = input_fields
        """Each set of template fields an item has (items with ``messages`` have none)."""
        self.attached = attached
        """Whether an item attaches files (``EvalSet.has_attachments``)."""
        self.tag_counts = tag_counts
        """How many items carry each tuple of tags (of the whole file)."""
        self.long_numbers = long_numbers
        """Whether the file holds a run of 19 digits (lines holding one are read by json)."""
        self.rows = rows
        self._tags = _SharedTags()
        self._blocks: dict[int, list[Item]] = {}

    def reordered(self, rows: array[int] | None, file: _OpenFile | None = None) -> FileItems:
        """The items at ``rows`` (positions in the file; None: all), in that order, read
        from ``file`` (default: this one's, or another holding the same bytes)."""
        return FileItems(
            self.file if file is None else file,
            self.starts,
            self.ends,
            self.tag_counts,
            self.plain,
            self.input_fields,
            self.long_numbers,
            self.attached,
            self.kinds,
            rows,
        )

    def reading(self, file: _OpenFile) -> FileItems:
        """These items, read from ``file`` (which holds the same bytes)."""
        return self.reordered(self.rows, file)

    def __len__(self) -> int:
        return len(self.starts) if self.rows is None else len(self.rows)

    @overload
    def __getitem__(self, index: int) -> Item: ...

    @overload
    def __getitem__(self, index: slice) -> FileItems: ...

    def __getitem__(self, index: int | slice) -> Item | FileItems:
        if isinstance(index, slice):
            picked = range(len(self))[index]
            rows = self.rows
            return self.reordered(
                array("q", picked) if rows is None else array("q", (rows[i] for i in picked))
            )
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(index)
        return self._block(index // _BLOCK)[index % _BLOCK]

    def __iter__(self) -> Iterator[Item]:
        # Not through the kept blocks: each of several readers at once has its own place.
        for start in range(0, len(self), _BLOCK):
            yield from self._read(start, start + _BLOCK)

    def _block(self, block: int) -> list[Item]:
        items = self._blocks.get(block)
        if items is None:
            if len(self._blocks) >= 2:
                del self._blocks[next(iter(self._blocks))]
            items = self._blocks[block] = self._read(block * _BLOCK, (block + 1) * _BLOCK)
        return items

    def _read(self, start: int, stop: int) -> list[Item]:
        stop = min(stop, len(self))
        rows = range(start, stop) if self.rows is None else self.rows[start:stop]
        starts, ends = self.starts, self.ends
        first, last = rows[0], rows[-1]
        if last - first == len(rows) - 1 and all(b == a + 1 for a, b in itertools.pairwise(rows)):
            base = starts[first]
            data = self.file.read(base, ends[last])
            lines = [data[starts[r] - base : ends[r] - base] for r in rows]
        else:
            lines = [self.file.read(starts[r], ends[r]) for r in rows]
        return [self._item(r, line) for r, line in zip(rows, lines, strict=True)]

    def _item(self, row: int, data: bytes) -> Item:
        """The item on a line that parsing validated: read as parsing read it, without
        checking again what it checked."""
        line = data.decode("utf-8")
        raw = _loads(line, not self.long_numbers or _LONG_RUN.search(line) is None)
        if not self.plain[row]:
            return Item.validate(raw, self._tags)
        tags = raw.get("tags")
        return Item(
            raw["id"],
            raw["input"],
            None,
            raw.get("expected"),
            () if tags is None else self._tags(tags),
            raw.get("cluster"),
            raw.get("meta") or NO_META,
        )


def item_content(item: Item) -> str:
    """The hash that, with the id, identifies an item for pairing across revisions."""
    messages = item.messages
    content: dict[str, Any] = {
        "input": item.input,
        "messages": None
        if messages is None
        else [{"role": m.role, "content": m.content} for m in messages],
        "expected": item.expected,
    }
    if item.attachments:
        # Written only when there are some, so items without keep their identity.
        content["attachments"] = attachment_identity(item)
    try:
        # Items read from JSON hold JSON values, which are their own JSON form.
        data = canonical_bytes(content)
    except (TypeError, ValueError):  # NaN, bytes, dates...: pydantic's JSON form decides
        dumped = item.as_line().model_dump(mode="json", include={"input", "messages", "expected"})
        if item.attachments:
            dumped["attachments"] = attachment_identity(item)
        return digest(dumped)[:16]
    return hashlib.sha256(data).hexdigest()[:16]


def attachment_identity(item: Item) -> list[dict[str, str | None]]:
    """Each attachment's path and, once read, its content's sha256: a changed file is a
    changed item."""
    hashes = [f.sha256 for f in item.files]
    return [
        {"path": a.path, "sha256": hashes[i] if i < len(hashes) else None}
        for i, a in enumerate(item.attachments)
    ]


_RECENT: list[tuple[str, str, EvalSet]] = []
"""The last eval sets parsed, by path and md5 (``diff``, ``audit`` and ``reproduce`` load
several revisions, which mostly share their eval sets)."""
_RECENT_SIZE = 2


def parse_evalset(
    data: bytes | None, path: str, file: int | None = None
) -> tuple[EvalSet | None, list[Finding]]:
    """Parse JSONL ``data``; report every bad line (up to a cap) in one pass.

    ``file``: a descriptor of a file holding ``data``, open for reading, which the eval
    set then owns: its items are read back from the file when asked for, not held. With
    a ``file``, ``data`` may be None: the file is then read a block of lines at a time,
    and never held whole.
    The same bytes at the same path parse to an equal (immutable) ``EvalSet``: one seen
    among the last few is returned again rather than validated twice (its items read from
    the file given, or from the one it was read from while that is unchanged).
    """
    opened = None if file is None else _OpenFile(file, path)
    if data is not None:
        source = _Source([(0, data, True)], data)
    elif opened is not None:
        source = _Source(opened, None)
    else:
        raise TypeError("an eval set is parsed from its bytes or from a file")
    scan = source.scan(path)
    md5 = scan.md5
    for seen_path, seen_md5, seen in _RECENT:
        if seen_path == path and seen_md5 == md5:
            items = seen.items
            if not isinstance(items, FileItems):
                return seen, []
            # The same bytes are where they were in the file seen: read them from the one
            # given, as the one seen may have changed since (or be another repository's).
            if opened is not None:
                return dataclasses.replace(seen, items=items.reading(opened)), []
            if items.file.unchanged():
                return seen, []
            break
    # Items are acyclic: a collection while 100,000 of them are built frees nothing.
    with collection_paused():
        parsed, findings = _parse(source, scan, path, opened)
    if parsed is not None:
        _RECENT.insert(0, (path, md5, parsed))
        del _RECENT[_RECENT_SIZE:]
    return parsed, findings


def evalset_data(tree: Tree, rel: str) -> tuple[bytes | None, int | None]:
    """The bytes of the eval set at ``rel`` in ``tree`` or, when a file on this machine
    holds them (the working tree's, or DVC's cache copy), None and a descriptor of that
    file open for reading, for ``parse_evalset`` to read a block at a time and its items
    back from (the caller owns it until then)."""
    located = tree.data_path(rel)
    if located is None:  # a git blob, or data DVC would fetch
        return tree.read_data(rel), None
    return None, os.open(located, os.O_RDONLY | os.O_CLOEXEC)


def read_evalset(root: Path, path: Path, given: str) -> tuple[str, EvalSet]:
    """The eval set at ``path`` (absolute, named ``given`` by the user) inside the
    repository at ``root``, read from the workspace or DVC's cache, with its repository
    path; ``RegistryError`` with each finding when it is not a valid eval set."""
    try:
        rel = clean_relpath(path.resolve().relative_to(root).as_posix())
        data = WorkspaceTree(root).read_data(rel)
    except (ValueError, PathEscapes, FileNotFoundError):
        raise UsageError(f"{given}: no eval set in the repository {root}") from None
    evalset, findings = parse_evalset(data, rel)
    if evalset is None:
        raise RegistryError(findings)
    return rel, evalset


def _parse(
    source: _Source, scan: _Scan, path: str, file: _OpenFile | None = None, exact: bool = False
) -> tuple[EvalSet | None, list[Finding]]:
    """The eval set in ``source``, or every bad line. With a ``file`` to read items back
    from, each id is not looked up as it is read (``exact``: it is): ids in increasing
    order have no duplicate, and a file without, or with a bad line, is read again.

    A large file read back is read in two halves at once (on Linux, with two CPUs), the
    second by a forked worker; the halves are joined as one reading would have left them,
    and a file with any finding is read again whole, in this process.
    """
    md5 = scan.md5
    lookup = file is None or exact
    # Given whole, the bytes are read in one process (they are held already).
    split = None if lookup or source.file is None else _split(source.file)
    if split is None:
        reading = _Reading(path, scan, file, lookup)
        reading.read(source.lines())
    else:
        with forked.forked(lambda _: _read_part(path, scan, source, split, None), 2) as done:
            reading = _read_part(path, scan, source, 0, split)
            reading.join(done(1))
    findings = reading.findings
    if not reading.lines and not reading.numbers and not findings:
        findings.append(Finding(path, 1, 0, "eval set is empty: expected one JSON item a line"))
    if findings and not lookup:  # a duplicate id among them would be a finding too
        return _parse(source, scan, path, file, exact=True)
    if findings:
        return None, findings
    lines, ids, id_starts, numbers = reading.lines, reading.ids, reading.id_starts, reading.numbers
    if lookup:
        in_file_order = list(lines)
        order = _id_order(in_file_order)
        if file is None:
            items = tuple(reading.items)
            return EvalSet(path, md5, items, lines, order, reading.counting.facts()), []
        line_numbers = LineNumbers.of(lines)
    elif reading.in_order:
        order, line_numbers = None, LineNumbers(bytes(ids), id_starts, numbers)
    else:
        in_file_order = [ids[a:b].decode("ascii") for a, b in itertools.pairwise(id_starts)]
        order = _id_order(in_file_order)
        assert order is not None
        if any(in_file_order[a] == in_file_order[b] for a, b in itertools.pairwise(order)):
            return _parse(source, scan, path, file, exact=True)
        line_numbers = LineNumbers.of({in_file_order[k]: numbers[k] for k in order})
    assert file is not None  # else the ids were looked up
    read = FileItems(
        file,
        reading.starts,
        reading.ends,
        reading.tag_counts,
        reading.plains,
        reading.input_fields,
        scan.long_numbers,
        reading.attached,
        reading.kinds,
    )
    return EvalSet(path, md5, read, line_numbers, order, reading.counting.facts()), []


_PARALLEL_BYTES = 4 << 20
"""A file smaller than this is read in one process: a worker's fork and the transfer of
its half would cost more than it saves."""


def _split(file: _OpenFile) -> int | None:
    """Where the second half of a file read in two starts (just after a line break near its
    middle), or None to read it in one process."""
    size = file.stamp[0]
    # Not beside another thread (a store scanned in the background): a fork copies only
    # this one, and a lock another holds would stay held in the worker.
    if size < _PARALLEL_BYTES or forked.parts(2, 1) < 2 or threading.active_count() > 1:
        return None
    window = file.read(size // 2, min(size, size // 2 + _READ_BLOCK))
    found = window.find(b"\n")
    return None if found < 0 or size // 2 + found + 1 >= size else size // 2 + found + 1


def _read_part(path: str, scan: _Scan, source: _Source, start: int, stop: int | None) -> _Reading:
    """The lines of ``source`` from byte ``start`` (a line's first) to ``stop`` (just after a
    line break; None: the end), read as a reading of the whole file reads them, but for
    their line numbers, which count from the part's first line."""
    file = source.file
    assert file is not None
    reading = _Reading(path, scan, file, lookup=False)
    reading.read(source.lines(start, stop))
    return reading


class _Reading:
    """What reading an eval set's lines in order gathers: each bad line's findings, and of
    each item, either the item (``lookup``: its id looked up as it is read) or, for a file
    to read items back from, where its line is and what the slices count."""

    def __init__(self, path: str, scan: _Scan, file: _OpenFile | None, lookup: bool) -> None:
        self.path, self.scan, self.keep, self.lookup = path, scan, file is None, lookup
        self.findings: list[Finding] = []
        self.bad = 0
        self.items: list[Item] = []
        self.lines: dict[str, int] = {}
        self.shared_tags = _SharedTags()
        self.starts, self.ends = array("q"), array("q")
        self.plains = bytearray()
        self.tag_counts: Counter[tuple[str, ...]] = Counter()
        self.input_fields: set[frozenset[str]] = set()
        self.attached = False
        self.counting = _Counting()
        self.kinds = _Kinds()
        # Without a lookup of each id: the ids one after another, and their line numbers.
        self.ids, self.id_starts, self.numbers = bytearray(), array("q", [0]), array("q")
        self.first_id = self.last_id = ""
        self.in_order = True
        self.count = 0
        """Lines read (blank ones too): the number of the last."""

    def read(self, lines: Iterable[tuple[int, int, bytes]]) -> None:
        path, findings = self.path, self.findings
        # A file without a run of 19 digits is read by orjson throughout; in one with some,
        # each line is searched, and only the lines holding one are left to ``json``.
        fast_throughout = not self.scan.long_numbers
        surrogates = self.scan.surrogates
        shared_tags, lookup = self.shared_tags, self.lookup
        ids, id_starts, numbers, lines_of = self.ids, self.id_starts, self.numbers, self.lines
        for lineno, (start, end, text) in enumerate(lines, start=self.count + 1):
            self.count = lineno
            line = text.decode("utf-8")
            if not line.strip():
                continue
            if self.bad >= MAX_LINE_FINDINGS:
                findings.append(Finding(path, lineno, 0, "too many bad lines; stopped here"))
                break
            try:
                raw = _loads(line, fast_throughout or _LONG_RUN.search(line) is None)
                deep = nesting_beyond(line, MAX_DEPTH)
            except (NestedTooDeep, RecursionError):  # deeper than the readers go
                at = nesting_beyond(line, MAX_DEPTH)
                deep = -1 if at is None else at
            except json.JSONDecodeError as exc:
                self.bad += 1
                findings.append(Finding(path, lineno, exc.colno, f"invalid JSON: {exc.msg}"))
                continue
            except ValueError as exc:  # a number canonical JSON cannot hold
                self.bad += 1
                findings.append(
                    Finding(
                        path,
                        lineno,
                        0,
                        f"{exc}: results hold finite numbers only; write null, or the number "
                        "as a string",
                    )
                )
                continue
            if deep is not None:
                self.bad += 1
                findings.append(
                    Finding(
                        path,
                        lineno,
                        deep + 1,
                        f"objects and lists nested more than {MAX_DEPTH} levels deep: flatten "
                        "the item (or hold the deep part as a JSON string)",
                    )
                )
                continue
            if not isinstance(raw, dict):
                self.bad += 1
                findings.append(
                    Finding(path, lineno, 1, "expected a JSON object (one item a line)")
                )
                continue
            if surrogates:
                col = _lone_surrogate(line)
                if col is not None:
                    self.bad += 1
                    findings.append(
                        Finding(
                            path,
                            lineno,
                            col,
                            f"{line[col - 1 : col + 5]} is half of a UTF-16 surrogate pair, "
                            "not a character: no request holding it can be encoded; write the "
                            "character itself (or both halves of its pair)",
                        )
                    )
                    continue
            item = _plain_item(raw, shared_tags)
            plain = item is not None
            if item is None:
                try:
                    item = Item.validate(raw, shared_tags)
                except ValidationError as exc:
                    self.bad += 1
                    for message in describe_errors(ItemLine, raw, exc):
                        findings.append(Finding(path, lineno, 0, _item_message(raw, message)))
                    continue
            if not lookup:
                if not numbers:
                    self.first_id = item.id
                self.in_order = self.in_order and item.id > self.last_id
                self.last_id = item.id
                ids += item.id.encode("ascii")  # ``ID_PATTERN``: ASCII
                id_starts.append(len(ids))
                numbers.append(lineno)
            elif item.id in lines_of:
                self.bad += 1
                findings.append(
                    Finding(
                        path,
                        lineno,
                        0,
                        f"duplicate item id {item.id!r} (first at line {lines_of[item.id]})",
                    )
                )
                continue
            else:
                lines_of[item.id] = lineno
            self.counting.add(item)
            if self.keep:
                self.items.append(item)
            else:
                self.starts.append(start)
                self.ends.append(end)
                self.plains.append(plain)
                self.tag_counts[item.tags] += 1
                self.kinds.add(item)
                if item.input is not None:
                    self.input_fields.add(frozenset(item.input))
                self.attached = self.attached or bool(item.attachments)

    def join(self, other: _Reading) -> None:
        """Add ``other``, the reading of the lines that follow this one's (its line numbers
        counted from its own first line), as if one reading had read them all."""
        offset = self.count
        self.count += other.count
        self.findings += [dataclasses.replace(f, line=f.line + offset) for f in other.findings]
        self.bad += other.bad
        self.starts += other.starts
        self.ends += other.ends
        self.plains += other.plains
        self.tag_counts.update(other.tag_counts)
        self.input_fields |= other.input_fields
        self.attached = self.attached or other.attached
        self.counting.join(other.counting)
        self.kinds.join(other.kinds)
        if other.numbers:
            if not self.numbers:
                self.first_id = other.first_id
            self.in_order = (
                self.in_order
                and other.in_order
                and (not self.numbers or self.last_id < other.first_id)
            )
            self.last_id = other.last_id
            base = len(self.ids)
            self.ids += other.ids
            self.id_starts.extend(base + at for at in other.id_starts[1:])
            self.numbers.extend(number + offset for number in other.numbers)


def _id_order(ids: list[str]) -> array[int] | None:
    """The positions of ``ids`` in id order; None when they are in it already."""
    if all(a < b for a, b in itertools.pairwise(ids)):
        return None
    return array("q", sorted(range(len(ids)), key=ids.__getitem__))


@dataclass(frozen=True)
class _Scan:
    """What one pass over an eval set's bytes finds before any line is parsed."""

    md5: str
    long_numbers: bool
    """Whether a run of 19 digits is in it (``has_long_number``)."""
    surrogates: bool
    """Whether a surrogate escape may be in it (``_SURROGATE_HINT``)."""


_READ_BLOCK = 1 << 20
"""Bytes of a file read at once while parsing it (then up to its last line break)."""


class _Source:
    """An eval set's bytes, given whole or read from its file a block of lines at a time
    (each block ends at a line break, but the last)."""

    def __init__(self, blocks: Iterable[tuple[int, bytes, bool]] | _OpenFile, data: bytes | None):
        self._given, self._data = blocks, data
        self.file = blocks if isinstance(blocks, _OpenFile) else None
        """The file read, when the bytes are not given."""

    def blocks(self, start: int = 0, stop: int | None = None) -> Iterator[tuple[int, bytes, bool]]:
        """(offset, bytes, whether it is the last of the file) of each block from byte
        ``start`` to ``stop`` (the end, by default; else just after a line break), in order."""
        if self.file is None:
            assert start == 0 and stop is None, "given bytes are read whole"
            yield from self._given  # type: ignore[misc]
            return
        file, at, rest = self.file, start, b""
        while True:
            begin = at + len(rest)
            end = begin + _READ_BLOCK if stop is None else min(stop, begin + _READ_BLOCK)
            chunk = file.read(begin, end) if begin < end else b""
            if not chunk:
                yield at, rest, stop is None
                return
            rest += chunk
            cut = rest.rfind(b"\n") + 1
            if cut:
                yield at, rest[:cut], False
                at, rest = at + cut, rest[cut:]

    def whole(self) -> bytes:
        """All the bytes at once (to locate an error in them)."""
        if self._data is None:
            self._data = b"".join(block for _, block, _ in self.blocks())
        return self._data

    def scan(self, path: str) -> _Scan:
        """The md5 and the whole-text searches, in one pass; an eval set that is not UTF-8
        raises as ``decode_utf8`` does, before any line is read."""
        md5 = hashlib.md5(usedforsecurity=False)
        long_numbers = surrogates = False
        decoder = codecs.getincrementaldecoder("utf-8")()
        try:
            for _, block, last in self.blocks():
                md5.update(block)
                # Blocks end at line breaks: no run of digits, nor escape, spans two.
                long_numbers = long_numbers or has_long_number(block)
                surrogates = surrogates or _SURROGATE_HINT.search(block) is not None
                if not block.isascii():
                    view = memoryview(block)
                    for at in range(0, len(block), _DECODE_BLOCK):
                        decoder.decode(view[at : at + _DECODE_BLOCK])
                if last:
                    decoder.decode(b"", final=True)
        except UnicodeDecodeError:
            decode_utf8(self.whole(), path)  # the same bytes fail there, with their position
            raise
        return _Scan(md5.hexdigest(), long_numbers, surrogates)

    def lines(self, start: int = 0, stop: int | None = None) -> Iterator[tuple[int, int, bytes]]:
        """Where each piece of ``data.split(b"\\n")`` is (after a BOM), with its bytes, from
        byte ``start`` to ``stop`` (see ``blocks``): a million lines are not all held at
        once."""
        for base, block, last in self.blocks(start, stop):
            first = len(codecs.BOM_UTF8) if base == 0 and block.startswith(codecs.BOM_UTF8) else 0
            for start, end in _spans(block, first):
                if end == len(block) and not last:
                    break  # the empty piece after a block's last line break
                yield base + start, base + end, block[start:end]


def _spans(data: bytes, start: int) -> Iterator[tuple[int, int]]:
    """Where each piece of ``data[start:].split(b"\\n")`` is, one at a time: a million
    lines are not all held at once."""
    while (end := data.find(b"\n", start)) >= 0:
        yield start, end
        start = end + 1
    yield start, len(data)


_DECODE_BLOCK = 1 << 20


_PLAIN_KEYS = frozenset({"id", "input", "expected", "tags", "cluster", "meta"})
_ID = re.compile(ID_PATTERN.removeprefix("^").removesuffix("$"))
"""``ID_PATTERN`` for ``fullmatch``: its ``$`` would also match before a final newline."""


def _plain_item(raw: dict[str, Any], shared_tags: _SharedTags) -> Item | None:
    """``raw`` as an item when it has the common shape (an id, template fields, none of
    ``messages`` or ``attachments``) and its values are valid as they are; None when it is
    not sure, and ``Item.validate`` (with its exact error messages) decides.

    The same checks as ``ItemLine``'s, in a few type tests and one regex; the dicts orjson
    built become the item's own, where validation would copy them.
    """
    if not _PLAIN_KEYS.issuperset(raw):
        return None
    item_id = raw.get("id")
    fields = raw.get("input")
    cluster = raw.get("cluster")
    meta = raw.get("meta", NO_META)
    if (
        type(item_id) is not str
        or type(fields) is not dict
        or not (cluster is None or type(cluster) is str)
        or not (meta is NO_META or type(meta) is dict)
        or _ID.fullmatch(item_id) is None
    ):
        return None
    tags = shared_tags.valid(raw["tags"]) if "tags" in raw else ()
    if tags is None:
        return None
    return Item(item_id, fields, None, raw.get("expected"), tags, cluster, meta or NO_META)


class _SharedTags:
    """One tuple for each list of tags an eval set repeats: 100,000 items mostly carry a
    few tags, in a few combinations."""

    def __init__(self) -> None:
        self._seen: dict[tuple[str, ...], tuple[str, ...]] = {}

    def __call__(self, tags: list[str]) -> tuple[str, ...]:
        """The shared tuple of ``tags`` (validated already)."""
        key = tuple(tags)
        return self._seen.setdefault(key, key)

    def valid(self, tags: object) -> tuple[str, ...] | None:
        """The shared tuple of ``tags`` (a line's JSON value) when it is a list of valid
        tags, else None."""
        if type(tags) is not list:
            return None
        key = tuple(tags)
        shared = self._seen.get(key)
        if shared is None:
            if not all(type(tag) is str and _ID.fullmatch(tag) for tag in key):
                return None
            shared = self._seen[key] = key
        return shared


_LONG_RUN = re.compile("[0-9]{19}")
"""A run of 19 digits in a line: ``has_long_number``'s test, for one line of text."""


def _loads(line: str, fast: bool) -> Any:
    """``json.loads(line)``, refusing what canonical JSON cannot write back (NaN,
    infinities, integers too long to convert: an item holding one could not be hashed or
    sent); with ``fast``, by orjson where it reads the same.

    orjson declines NaN, infinities and lone surrogates (``json``'s value or error then
    stands), and reads an integer beyond 64 bits as a float: ``fast`` is for text without
    a run of 19 digits.
    """
    if fast:
        try:
            return orjson.loads(line)
        except orjson.JSONDecodeError:
            pass
    return loads_finite(line)


_SURROGATE_ESCAPE = re.compile(r"(\\+)u([dD][89a-fA-F][0-9a-fA-F]{2})")
_SURROGATE_HINT = re.compile(rb"\\u[dD][89a-fA-F]")
"""What every surrogate escape holds: a literal prefix, which the regex engine finds fast."""


def _lone_surrogate(text: str) -> int | None:
    """The 1-based column of a ``\\uXXXX`` escape, in JSON ``text``, of a surrogate that is
    not half of a pair (``json`` reads it into a string no encoder accepts), or None."""
    high_end = high_col = -1  # where the last unpaired high surrogate's escape ends
    for match in _SURROGATE_ESCAPE.finditer(text):
        if len(match.group(1)) % 2 == 0:
            continue  # an escaped backslash, then the letter u: text, not an escape
        start = match.end(1) - 1
        if int(match.group(2), 16) >= 0xDC00:
            if start != high_end:  # a low surrogate right after no high one
                return high_col if high_end >= 0 else start + 1
            high_end = -1
        elif high_end >= 0:
            return high_col  # a high surrogate that no low one follows
        else:
            high_end, high_col = match.end(), start + 1
    return high_col if high_end >= 0 else None


def _item_message(raw: dict[str, object], message: str) -> str:
    item_id = raw.get("id")
    prefix = f"item {item_id!r}: " if isinstance(item_id, str) else "item: "
    return prefix + message
