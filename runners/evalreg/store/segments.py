"""The content-addressed response store: immutable, append-only segment files under DVC.

A response's key is the sha256 of the provider, base URL, sample index and the exact bytes
of the request body sent. Each run (or shard) appends to its own uniquely named segment;
each segment gets its own DVC pointer when the run ends, so branches and concurrent runs
never write the same file. Records are written to the OS as they arrive (a SIGKILL loses
only requests in flight) and fsync'ed in groups; a torn last line is dropped on reading.
Reading indexes every segment's lines in a few fixed-size columns and leaves the records
in their files, read one by one when asked for: memory holds the index, not the store.
"""

from __future__ import annotations

import bisect
import contextlib
import copy
import functools
import gc
import hashlib
import io
import json
import os
import secrets
import threading
import time
import weakref
from array import array
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NamedTuple, Protocol

from evalreg import dvcrepo
from evalreg.errors import DataMissingError
from evalreg.registry.tree import Tree, WorkspaceTree
from evalreg.store.hashes import refuse_altered
from evalreg.store.keycolumn import KEY_BYTES, KeyColumn

STORE_DIR = "reports/store"
SEGMENT_SUFFIX = ".jsonl"
_KEY_PREFIX = b'{"key":"'
_KEY_LEN = 64
FSYNC_EVERY = 64
FSYNC_INTERVAL_S = 0.5


def request_key(provider: str, base_url: str, body: bytes, sample: int) -> str:
    """The store key of one request: what was sent, to whom, and which sample it is."""
    h = hashlib.sha256()
    h.update(f"{provider}\n{base_url}\n{sample}\n".encode())
    h.update(body)
    return h.hexdigest()


_DIGITS_AS_ZERO = bytes.maketrans(b"123456789", b"000000000")
_LONG_NUMBER = b"0" * 19
_fast_loads: Callable[[bytes], Any] | None
try:  # orjson parses a stored record several times faster; json stays the reference
    from orjson import loads as _fast_loads
except ImportError:  # pragma: no cover - orjson comes with DVC
    _fast_loads = None


def has_long_number(data: bytes) -> bool:
    """Whether ``data`` holds a run of 19 or more digits (a number orjson may not read as
    ``json`` does: it reads an integer beyond 64 bits as a float)."""
    return _LONG_NUMBER in data.translate(_DIGITS_AS_ZERO)


def long_numbers(data: bytes) -> array[int]:
    """Where ``data`` holds runs of 19 or more digits: an offset inside each (ascending).

    A line without one is read by the fast parser. A store key is 64 hex digits, so most
    segments hold such runs somewhere; checked line by line, only the few lines that do
    are left to ``json``.
    """
    zeros = data.translate(_DIGITS_AS_ZERO)
    found = array("q")
    at = zeros.find(_LONG_NUMBER)
    while at >= 0:
        found.append(at)
        at = zeros.find(_LONG_NUMBER, at + len(_LONG_NUMBER))
    return found


def load_json(data: bytes, *, short_numbers: bool | None = None) -> Any:
    """``json.loads(data)``, faster: the same value for every input ``json`` accepts.

    orjson reads what is plain JSON; whatever it declines (NaN, lone surrogates, ...) goes to
    ``json``, whose answer or error stands. So does any text with a run of 19 or more
    digits: orjson reads an integer beyond 64 bits as a float, where ``json`` keeps it exact.
    ``short_numbers`` says there is no such run, when the caller knows (checked here if not).
    """
    if short_numbers is None:
        short_numbers = not has_long_number(data)
    if _fast_loads is not None and short_numbers:
        try:
            return _fast_loads(data)
        except ValueError:  # orjson.JSONDecodeError
            pass
    return json.loads(data)


@contextlib.contextmanager
def collection_paused() -> Iterator[None]:
    """No cyclic garbage collection inside the block (restored after it).

    For bulk reads of stored JSON: parsing builds only acyclic trees, so a collection
    while they are built frees nothing and re-walks the whole, growing heap; with
    100,000 records that walking is most of the time spent.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def utc_now() -> str:
    """Now, as ``2026-01-31T12:00:00.000000Z``."""
    return datetime.now(UTC).isoformat(timespec="microseconds")[:-6] + "Z"


@dataclass(frozen=True)
class StoreStats:
    segments: int = 0
    records: int = 0
    duplicates: int = 0
    torn: int = 0
    """Lines dropped because a run was killed while writing them (or they were damaged)."""


def segment_names(tree: Tree) -> list[str]:
    """The store's segments in ``tree``, sorted: files on disk and DVC-tracked ones."""
    names = set()
    for name in tree.list_dir(STORE_DIR):
        if name.endswith(SEGMENT_SUFFIX):
            names.add(name)
        elif name.endswith(SEGMENT_SUFFIX + ".dvc"):
            names.add(name[: -len(".dvc")])
    return sorted(names)


Source = bytes | Path
"""Where a segment's lines are read from: its bytes, held, or a file read as needed."""


def segment_source(tree: Tree, name: str) -> Source:
    """Segment ``name`` of ``tree``'s store: the file that holds it when there is one on
    this machine (the working tree's, or a verified DVC cache copy), else its bytes."""
    rel = f"{STORE_DIR}/{name}"
    return tree.data_path(rel) or tree.read_data(rel)


_KEY_AT = len(_KEY_PREFIX)
_KEY_END = _KEY_AT + _KEY_LEN
_NIBBLES = bytes(
    b - 48 if 48 <= b <= 57 else b - 87 if 97 <= b <= 102 else b - 55 if 65 <= b <= 70 else b & 15
    for b in range(256)
)
"""A key character's 4 bits: its value as a hex digit, else its low 4 bits."""
_LOWER_HEX = bytes(int(chr(b) in "0123456789abcdef") for b in range(256))
_SEARCH_BATCH = 1 << 16
"""Keys searched in the index together: the search's arrays take some 200 bytes a key."""
_SCAN_BLOCK = 1 << 20
"""Bytes of a segment scanned at a time: what scanning holds, however large the segment."""


def _batches(count: int) -> Iterator[tuple[int, int]]:
    """The (start, stop) of consecutive runs of ``_SEARCH_BATCH`` of ``count`` keys."""
    for start in range(0, count, _SEARCH_BATCH):
        yield start, min(count, start + _SEARCH_BATCH)


def _digests(keys: Sequence[str], start: int, stop: int) -> tuple[Any, Any] | None:
    """Keys ``start`` to ``stop`` (at least one) as the 32 bytes each spells, an (n, 32)
    array, and whether each is spelled as ``request_key`` spells keys; None when they are
    not all 64 ASCII characters. A ``KeyColumn`` holds its keys' digests: they are read
    as they are, not spelled and decoded again."""
    import numpy as np

    if isinstance(keys, KeyColumn):
        wanted = np.frombuffer(keys.digests(start, stop), dtype=np.uint8).reshape(-1, KEY_BYTES)
        return wanted, np.ones(len(wanted), dtype=np.bool_)
    # Keys spelled as request_key spells them are 64 lowercase hex digits: decoded
    # together, each to its 32 bytes, as the scan decodes the lines' keys.
    part = keys[start:stop]
    joined = "".join(part)
    if not (min(map(len, part)) == max(map(len, part)) == _KEY_LEN and joined.isascii()):
        return None
    chars = np.frombuffer(joined.encode("ascii"), dtype=np.uint8).reshape(-1, _KEY_LEN)
    canonical = np.frombuffer(_LOWER_HEX, dtype=np.bool_)[chars].all(axis=1)
    digits = np.frombuffer(_NIBBLES, dtype=np.uint8)[chars]
    return (digits[:, 0::2] << 4) | digits[:, 1::2], canonical


def _binary(key: str) -> bytes | None:
    """The 32 bytes that ``key`` spells when it is 64 lowercase hex digits (as
    ``request_key`` writes them: one spelling a key), else None."""
    try:
        binary = bytes.fromhex(key)
    except ValueError:
        return None
    # 32 bytes from 64 characters: hex digits throughout (no whitespace), lowercase ones.
    canonical = len(binary) == _KEY_LEN // 2 and (key.islower() or key.isdigit())
    return binary if canonical else None


def _head(key: str) -> int:
    """The index's first column for ``key`` (ASCII): its first 16 characters as hex digits,
    a 64-bit integer that sorts as they do; any other character counts as its low 4 bits.
    """
    binary = _binary(key)
    if binary is not None:
        return int.from_bytes(binary[:8], "big")
    head = 0
    for char in key[:16].encode("ascii"):
        head = head << 4 | _NIBBLES[char]
    return head


def _storable(key: object) -> bool:
    """Whether ``key`` could be a stored line's key: 64 ASCII characters."""
    return isinstance(key, str) and len(key) == _KEY_LEN and key.isascii()


def _line_blocks(source: Source) -> Iterator[tuple[int, bytes]]:
    """``source``'s complete lines, in blocks of about ``_SCAN_BLOCK`` bytes, each with
    its offset; last, whatever follows the last newline (a torn line, or b"")."""
    with io.BytesIO(source) if isinstance(source, bytes) else source.open("rb") as f:
        base, carry = 0, b""
        while block := f.read(_SCAN_BLOCK):
            if carry:
                block = carry + block
            cut = block.rfind(b"\n") + 1
            if cut:
                yield base, block[:cut]
                base += cut
            carry = block[cut:]
        yield base, carry


class SegmentKeys:
    """One segment's keyed lines as columns, found in one vectorised pass per block, in
    the segment's order: each line's start and end (its newline) offsets, and its key as
    ``_head`` (8 bytes, a number) and ``tails`` (the other 24 bytes the hex digits spell)
    with a flag saying whether the key is spelled as ``request_key`` spells keys.

    A line is keyed when it starts ``{"key":"``, then 64 characters and a quote; any other
    complete line, and a last line without its newline, is torn. The columns take 49
    bytes a line; the lines stay in ``source``, read when asked for.
    """

    def __init__(self, source: Source) -> None:
        import numpy as np

        self.source = source
        self.torn = 0
        self.long_numbers = array("q")
        """Where the segment holds runs of 19 or more digits (see ``long_numbers``)."""
        columns: list[tuple[Any, ...]] = []
        prefix = np.frombuffer(_KEY_PREFIX, dtype=np.uint8)
        nibbles = np.frombuffer(_NIBBLES, dtype=np.uint8)
        lower_hex = np.frombuffer(_LOWER_HEX, dtype=np.bool_)
        for base, block in _line_blocks(source):
            if not block.endswith(b"\n"):
                self.torn += bool(block)
                break
            self.long_numbers.extend(base + at for at in long_numbers(block))
            raw = np.frombuffer(block, dtype=np.uint8)
            end = np.flatnonzero(raw == ord("\n"))
            start = np.concatenate(([0], end[:-1] + 1))
            wide = (end - start) > _KEY_END
            start, end = start[wide], end[wide]
            keyed = (raw[start[:, None] + np.arange(_KEY_AT)] == prefix).all(axis=1)
            keyed &= raw[start + _KEY_END] == ord('"')
            start, end = start[keyed], end[keyed]
            self.torn += len(wide) - len(start)
            chars = raw[start[:, None] + np.arange(_KEY_AT, _KEY_END)]
            digits = nibbles[chars]
            binary = (digits[:, 0::2] << 4) | digits[:, 1::2]
            head = np.ascontiguousarray(binary[:, :8]).view(">u8").ravel().astype(np.uint64)
            tail = np.ascontiguousarray(binary[:, 8:]).ravel()
            columns.append((head, tail, lower_hex[chars].all(axis=1), start + base, end + base))
        empty = (np.uint64, np.uint8, np.bool_, np.int64, np.int64)
        self.heads, self.tails, self.canonical, self.starts, self.ends = (
            np.concatenate([c[i] for c in columns]) if columns else np.zeros(0, dtype=t)
            for i, t in enumerate(empty)
        )

    def keyed_lines(self) -> Iterator[tuple[str, int, int]]:
        """Each keyed line's key, start and end (its newline), in the segment's order."""
        with _reader(self.source) as read:
            for start, end in zip(self.starts.tolist(), self.ends.tolist(), strict=True):
                key = read(start + _KEY_AT, start + _KEY_END)
                yield key.decode("ascii", errors="replace"), start, end

    def find(self, wanted: set[str], out: dict[str, dict[str, Any] | None]) -> None:
        """Add to ``out`` the record of each key in ``wanted`` (not already in ``out``)
        whose line is here: the first such line wins; a damaged one answers None."""
        import numpy as np

        todo = [k for k in wanted if k not in out and _storable(k)]
        if not todo:
            return
        targets = np.array([_head(k) for k in todo], dtype=np.uint64)
        rows = np.flatnonzero(np.isin(self.heads, targets))
        if not len(rows):
            return
        with _reader(self.source) as read:
            for row in rows.tolist():
                start, end = int(self.starts[row]), int(self.ends[row])
                line = read(start, end)
                key = line[_KEY_AT:_KEY_END].decode("ascii", errors="replace")
                if key not in wanted or key in out:
                    continue
                out[key] = _record(line, self.long_numbers, start)


def _record(line: bytes, runs: array[int], start: int) -> dict[str, Any] | None:
    """The record of a stored line that starts at ``start`` in a segment whose runs of 19
    or more digits are at ``runs`` (``long_numbers``); None if the line is damaged."""
    # Whether a run starts within the line (none crosses a newline).
    at = bisect.bisect_left(runs, start)
    short = at == len(runs) or runs[at] >= start + len(line)
    try:
        record = load_json(line, short_numbers=short)
    except ValueError:
        return None
    return record if isinstance(record, dict) else None


@contextlib.contextmanager
def _reader(source: Source) -> Iterator[Callable[[int, int], bytes]]:
    """``read(start, end)``: those bytes of ``source`` (a file stays open in the block)."""
    if isinstance(source, bytes):
        yield lambda start, end: source[start:end]
        return
    fd = os.open(source, os.O_RDONLY)
    try:
        yield lambda start, end: os.pread(fd, end - start, start)
    finally:
        os.close(fd)


class _OpenFiles:
    """Descriptors of a store's segment files, by segment number: each opened on its first
    read and kept for the next (at most ``_MAX_OPEN`` at once: the one opened first is
    closed to make room)."""

    def __init__(self) -> None:
        self.fds: dict[int, int] = {}
        weakref.finalize(self, _close_all, self.fds)

    def open(self, number: int, path: Path) -> int:
        if len(self.fds) >= _MAX_OPEN:
            os.close(self.fds.pop(next(iter(self.fds))))
        fd = self.fds[number] = os.open(path, os.O_RDONLY)
        return fd


_MAX_OPEN = 64
_BUCKET_SHIFT = 48
_BUCKETS = 1 << (64 - _BUCKET_SHIFT)
"""Heads are found by their top 16 bits first (a table of 512 KiB), then by bisection
among the few that share them."""


def _no_index() -> tuple[memoryview, ...]:
    """``ResponseStore._index`` of a store without segments, built without numpy: a first
    run in a registry sends its first request sooner for not importing it."""
    nothing = memoryview(b"")
    buckets = memoryview(bytes(8 * (_BUCKETS + 1))).cast("q")
    return (
        nothing.cast("Q"),
        buckets,
        nothing,
        nothing.cast("I"),
        nothing.cast("q"),
        nothing.cast("q"),
    )


def _close_all(fds: dict[int, int]) -> None:
    for fd in fds.values():
        with contextlib.suppress(OSError):
            os.close(fd)
    fds.clear()


class Location(NamedTuple):
    """Where a stored record's line is: its segment ("" for one this process wrote), and
    its start and end (the newline's) offsets in it."""

    segment: str
    start: int
    end: int


class ResponseStore:
    """Read access to every stored response of one version of the repository.

    The index holds, per record, its key in binary (32 bytes), its segment and the start
    and end of its line (20 bytes) and whether its key is spelled as ``request_key``
    spells keys (1 byte), sorted by key; the records stay in their segments,
    read from the file (or held bytes) when asked for. The first segment added (``load``
    adds them in name order) and the first line in it win; later lines with a key
    already indexed are duplicates.
    """

    def __init__(self) -> None:
        self.names: list[str] = []
        """The segments, in the order they were added."""
        self._sources: list[Source] = []
        self._runs: list[array[int]] = []
        self._scanned: list[SegmentKeys] = []
        """Segments added since the index was last built."""
        self._columns: tuple[Any, ...] = ()
        self._views: tuple[memoryview, ...] | None = None
        """The index's columns as ``_index`` gives them (None: to be built)."""
        self._unsure: frozenset[int] = frozenset()
        """Rows whose key is not spelled as ``request_key`` spells keys: read to compare."""
        self._duplicates = 0
        self._torn = 0
        self._recent: dict[str, bytes] = {}
        """Records this process wrote (``remember``): they answer first."""
        self._files = _OpenFiles()

    @classmethod
    def load(cls, tree: Tree, *, unreadable: list[str] | None = None) -> ResponseStore:
        """Index every segment of ``tree``'s store: files on disk and DVC-tracked ones.

        With ``unreadable``, a tracked segment no copy can be read of (``DataMissingError``)
        is named there and left out, instead of stopping the load: its responses are
        missing (``runner.rebuy`` asks the remote whether it holds them)."""
        store = cls()
        for name in segment_names(tree):
            try:
                source = segment_source(tree, name)
            except DataMissingError:
                if unreadable is None:
                    raise
                unreadable.append(name)
                continue
            store.add_segment(name, source)
        return store

    @classmethod
    def open(cls, root: Path) -> ResponseStore:
        """The working tree's store, once every tracked segment on disk is known to be the
        version its pointer names (``hashes.refuse_altered``)."""
        tree = WorkspaceTree(root)
        refuse_altered(tree.root, [f"{STORE_DIR}/{name}" for name in segment_names(tree)])
        return cls.load(tree)

    def add_segment(self, name: str, source: Source) -> None:
        """Index segment ``name``: its lines are read from ``source`` when asked for (a
        file is kept open for that; held bytes are kept)."""
        scanned = SegmentKeys(source)
        self.names.append(name)
        self._sources.append(source)
        self._runs.append(scanned.long_numbers)
        self._scanned.append(scanned)
        self._torn += scanned.torn
        self._views = None

    def _index(self) -> tuple[memoryview, ...]:
        """The index's columns: heads (sorted), where each bucket of heads begins in them,
        tails (24 bytes a row), and each line's segment, start and end (built again after
        ``add_segment``)."""
        if self._views is not None:
            return self._views
        if not self.names:
            self._views = _no_index()
            return self._views
        import numpy as np

        scanned, self._scanned = self._scanned, []
        first = len(self.names) - len(scanned)
        old = self._columns or (
            np.zeros(0, np.uint64),
            np.zeros(0, np.uint8),
            np.zeros(0, np.bool_),
            np.zeros(0, np.uint32),
            np.zeros(0, np.int64),
            np.zeros(0, np.int64),
        )
        numbers = [np.full(len(s.heads), first + i, np.uint32) for i, s in enumerate(scanned)]
        parts = [
            list(column)
            for column in zip(
                old,
                *(
                    (s.heads, s.tails, s.canonical, n, s.starts, s.ends)
                    for s, n in zip(scanned, numbers, strict=True)
                ),
                strict=True,
            )
        ]
        self._columns = ()
        del scanned, old, numbers
        # Column by column, each array given up as soon as its successor exists: building
        # holds little more than the index itself.
        columns = []
        for i in range(len(parts)):
            columns.append(np.concatenate(parts[i]))
            parts[i] = []
        # Stable: among lines of one head, earlier segments' and earlier lines come first.
        order = np.argsort(columns[0], kind="stable")
        columns[1] = columns[1].reshape(-1, 24)
        for i in range(len(columns)):
            columns[i] = columns[i][order]
        del order
        heads = columns[0]
        shared = np.flatnonzero(heads[1:] == heads[:-1])
        if len(shared):
            drop = self._repeated(np.union1d(shared, shared + 1).tolist(), *columns)
            if drop:
                keep = np.ones(len(heads), dtype=bool)
                keep[drop] = False
                for i in range(len(columns)):
                    columns[i] = columns[i][keep]
                self._duplicates += len(drop)
        heads, tails, canonical, segments, starts, ends = columns
        self._columns = (heads, tails.ravel(), canonical, segments, starts, ends)
        self._unsure = frozenset(np.flatnonzero(~canonical).tolist())
        buckets = np.searchsorted(heads, np.arange(_BUCKETS + 1, dtype=np.uint64) << _BUCKET_SHIFT)
        buckets[-1] = len(heads)
        # Read a row at a time through memoryviews: their items are Python ints, cheaper
        # to get and compare than numpy's scalars.
        views = tuple(c.data for c in (heads, buckets, tails.ravel(), segments, starts, ends))
        self._views = views
        return views

    def _repeated(
        self,
        rows: list[int],
        heads: Any,
        tails: Any,
        canonical: Any,
        segments: Any,
        starts: Any,
        _ends: Any,
    ) -> list[int]:
        """Of ``rows`` (ascending, each sharing its head with a neighbour), those whose
        whole key an earlier row of the same head holds: the duplicates."""
        repeated: list[int] = []
        seen: set[bytes] = set()
        current = None
        for row in rows:
            head = int(heads[row])
            if head != current:
                current, seen = head, set()
            if canonical[row]:
                key = tails[row].tobytes()  # 24 bytes: never equal to a key's 64 characters
            else:
                start = int(starts[row])
                key = self._read(int(segments[row]), start + _KEY_AT, start + _KEY_END)
            if key in seen:
                repeated.append(row)
            else:
                seen.add(key)
        return repeated

    def _read(self, number: int, start: int, end: int) -> bytes:
        source = self._sources[number]
        if isinstance(source, bytes):
            return source[start:end]
        fd = self._files.fds.get(number)
        if fd is None:
            fd = self._files.open(number, source)
        return os.pread(fd, end - start, start)

    def _find(self, key: str, *, whole: bool) -> tuple[int, bytes] | None:
        """The index row of ``key``'s line, and the line when ``whole`` (else b"")."""
        heads, buckets, tails, segments, starts, ends = self._views or self._index()
        binary = _binary(key)
        if binary is None:
            return self._find_spelled(key, whole=whole)
        head = int.from_bytes(binary[:8], "big")
        tail = binary[8:]
        bucket = head >> _BUCKET_SHIFT
        last = buckets[bucket + 1]
        row = bisect.bisect_left(heads, head, buckets[bucket], last)
        while row < last and heads[row] == head:
            # The whole key is in memory (but for rows in ``_unsure``): a line is read only
            # when it is asked for, and then its key is checked again.
            if tails[row * 24 : row * 24 + 24] == tail and row not in self._unsure:
                if not whole:
                    return row, b""
                line = self._read(segments[row], starts[row], ends[row])
                return (row, line) if line[_KEY_AT:_KEY_END] == key.encode() else None
            row += 1
        return None

    def _find_spelled(self, key: str, *, whole: bool) -> tuple[int, bytes] | None:
        """``_find`` for a key not spelled as ``request_key`` spells keys: only lines whose
        key is spelled so too can hold it (they are read to compare)."""
        if not _storable(key) or not self._unsure:
            return None
        heads, buckets, _tails, segments, starts, ends = self._views or self._index()
        head, text = _head(key), key.encode("ascii")
        last = buckets[(head >> _BUCKET_SHIFT) + 1]
        row = bisect.bisect_left(heads, head, buckets[head >> _BUCKET_SHIFT], last)
        while row < last and heads[row] == head:
            number, start, end = segments[row], starts[row], ends[row]
            if (
                row in self._unsure
                and self._read(number, start + _KEY_AT, start + _KEY_END) == text
            ):
                return row, self._read(number, start, end) if whole else b""
            row += 1
        return None

    @property
    def stats(self) -> StoreStats:
        heads = self._index()[0]
        return StoreStats(len(self.names), len(heads), self._duplicates, self._torn)

    def __contains__(self, key: object) -> bool:
        if key in self._recent:
            return True
        return isinstance(key, str) and self._find(key, whole=False) is not None

    def __len__(self) -> int:
        added = sum(1 for key in self._recent if self._find(key, whole=False) is None)
        return len(self._index()[0]) + added

    def get(self, key: str) -> dict[str, Any] | None:
        """The stored record for ``key``, or None (also if its line is damaged)."""
        recent = self._recent.get(key)
        if recent is not None:
            return _record(recent[:-1], long_numbers(recent), 0)
        found = self._find(key, whole=True)
        if found is None:
            return None
        row, line = found
        _heads, _buckets, _tails, segments, starts, _ends = self._index()
        return _record(line, self._runs[segments[row]], starts[row])

    def get_many(self, keys: Sequence[str]) -> list[dict[str, Any] | None]:
        """``get`` of each of ``keys``, the index searched for all of them at once: a
        cell's records are read a batch at a time."""
        rows = self._rows(keys)
        _heads, _buckets, _tails, segments, starts, ends = self._index()
        recent, runs = self._recent, self._runs
        out: list[dict[str, Any] | None] = []
        for first, stop in _batches(len(keys)):
            found = [-1] * (stop - first) if rows is None else rows[first:stop].tolist()
            for key, row in zip(keys[first:stop], found, strict=True):
                written = recent.get(key)
                if written is not None:
                    out.append(_record(written[:-1], long_numbers(written), 0))
                elif row < 0:
                    out.append(None)
                else:
                    number, start = segments[row], starts[row]
                    line = self._read(number, start, ends[row])
                    # The line's own key is checked again, as ``get`` checks it.
                    same = line[_KEY_AT:_KEY_END] == key.encode()
                    out.append(_record(line, runs[number], start) if same else None)
        return out

    def line(self, key: str) -> bytes | None:
        """The stored line of ``key`` (without its newline), or None."""
        recent = self._recent.get(key)
        if recent is not None:
            return recent[:-1]
        found = self._find(key, whole=True)
        return None if found is None else found[1]

    def locate(self, key: str) -> Location | None:
        """Where ``key``'s line is, or None when it is not stored."""
        recent = self._recent.get(key)
        if recent is not None:
            return Location("", 0, len(recent) - 1)
        found = self._find(key, whole=False)
        return None if found is None else self._location(found[0])

    def _location(self, row: int) -> Location:
        _heads, _buckets, _tails, segments, starts, ends = self._index()
        return Location(self.names[segments[row]], starts[row], ends[row])

    def _rows(self, keys: Sequence[str]) -> Any | None:
        """The index row of each of ``keys`` (-1: not indexed), an array, in one vectorised
        search a batch of keys; keys spelled otherwise than ``request_key`` spells them,
        and heads that several rows share, are searched one at a time. None: nothing is
        indexed (answered without numpy)."""
        self._index()
        if not keys or not self._columns or not len(self._columns[0]):
            return None
        import numpy as np

        out = np.empty(len(keys), dtype=np.int64)
        for start, stop in _batches(len(keys)):
            out[start:stop] = self._batch_rows(keys, start, stop)
        return out

    def _batch_rows(self, keys: Sequence[str], start: int, stop: int) -> Any:
        import numpy as np

        heads, tails, _canonical, _segments, _starts, _ends = self._columns
        decoded = _digests(keys, start, stop)
        if decoded is None:
            return np.array([self._row(key) for key in keys[start:stop]], dtype=np.int64)
        wanted, canonical = decoded
        wanted_heads = np.ascontiguousarray(wanted[:, :8]).view(">u8").ravel().astype(np.uint64)
        rows = np.minimum(np.searchsorted(heads, wanted_heads), len(heads) - 1)
        same_head = heads[rows] == wanted_heads
        found = canonical & same_head & (tails.reshape(-1, 24)[rows] == wanted[:, 8:]).all(axis=1)
        if self._unsure:
            found &= ~np.isin(rows, np.fromiter(self._unsure, dtype=np.int64))
        out = np.where(found, rows, -1)
        # The first row of a head was compared: keys that need more are searched alone.
        for i in np.flatnonzero(~found & same_head).tolist():
            out[i] = self._row(keys[start + i])
        return out

    def _row(self, key: str) -> int:
        found = self._find(key, whole=False)
        return -1 if found is None else found[0]

    def _written(self, keys: Sequence[str], start: int, stop: int) -> list[int]:
        """The positions (from ``start``) of keys ``start`` to ``stop`` that this process
        wrote (``remember``)."""
        recent = self._recent
        if not recent:
            return []
        return [i for i, key in enumerate(keys[start:stop]) if key in recent]

    def contains_all(self, keys: Sequence[str]) -> list[bool]:
        """``key in store`` for each of ``keys``, in one vectorised search (for every key
        of a cell: a key at a time costs a microsecond or two each)."""
        held = [False] * len(keys) if (rows := self._rows(keys)) is None else (rows >= 0).tolist()
        for start, stop in _batches(len(keys)):
            for i in self._written(keys, start, stop):
                held[start + i] = True
        return held

    def absent(self, keys: Sequence[str]) -> Sequence[int]:
        """The positions of ``keys`` not stored (``key not in store``), ascending, in one
        vectorised search: a cell's keys are looked at as a column, and only those the
        store lacks are walked one by one (none, when a run replays stored responses)."""
        rows = self._rows(keys)
        if rows is None and not self._recent:
            return range(len(keys))
        out: list[int] = []
        for start, stop in _batches(len(keys)):
            if rows is None:
                lacking: Iterable[int] = range(stop - start)
            else:
                import numpy as np

                lacking = np.flatnonzero(rows[start:stop] < 0).tolist()
            written = set(self._written(keys, start, stop))
            out.extend(start + i for i in lacking if i not in written)
        return out

    def segments_of(self, keys: Sequence[str]) -> set[str]:
        """The names of the segments that hold ``keys``' records ("" for a record this
        process wrote), in one vectorised search."""
        rows = self._rows(keys)
        numbers: set[int] = set()
        written = False
        for start, stop in _batches(len(keys)):
            mine = self._written(keys, start, stop)
            # A record this process wrote answers first, as in ``locate``.
            written = written or bool(mine)
            if rows is None:
                continue
            part = rows[start:stop].copy()
            part[mine] = -1
            numbers.update(self._columns[3][part[part >= 0]].tolist())
        names = {self.names[number] for number in numbers}
        return names | {""} if written else names

    def locate_all(self, keys: Sequence[str]) -> list[Location | None]:
        """``locate`` of each of ``keys``, in one vectorised search."""
        rows = self._rows(keys)
        _heads, _buckets, _tails, segments, starts, ends = self._index()
        names, recent = self.names, self._recent
        out: list[Location | None] = []
        for first, stop in _batches(len(keys)):
            found = [-1] * (stop - first) if rows is None else rows[first:stop].tolist()
            for key, row in zip(keys[first:stop], found, strict=True):
                line = recent.get(key)
                if line is not None:
                    out.append(Location("", 0, len(line) - 1))
                elif row < 0:
                    out.append(None)
                else:
                    out.append(Location(names[segments[row]], starts[row], ends[row]))
        return out

    def remember(self, key: str, line: bytes) -> None:
        """Make a record just written by this process readable without re-reading files."""
        self._recent[key] = line

    def keys(self) -> Iterator[str]:
        """Every stored key: the indexed ones in key order (by their first 16 digits),
        then the ones this process wrote that no segment holds."""
        heads, _buckets, tails, segments, starts, _ends = self._index()
        for row, head in enumerate(heads):
            if row in self._unsure:
                start = starts[row]
                key = self._read(segments[row], start + _KEY_AT, start + _KEY_END)
                yield key.decode("ascii", errors="replace")
            else:
                yield (head.to_bytes(8, "big") + tails[row * 24 : row * 24 + 24]).hex()
        yield from (key for key in self._recent if self._find(key, whole=False) is None)

    def segments(self) -> Iterator[tuple[str, bytes]]:
        """Each segment's name and bytes, read one at a time (for rewriting it)."""
        for name, source in zip(self.names, self._sources, strict=True):
            yield name, source if isinstance(source, bytes) else source.read_bytes()

    def overlay(self) -> ResponseStore:
        """A store that reads what this one holds (the index and files are shared) and
        remembers records on its own, apart from this one."""
        self._index()
        other = copy.copy(self)
        other.names, other._sources = list(self.names), list(self._sources)
        other._runs = list(self._runs)
        other._recent = dict(self._recent)
        return other


def lookup(
    tree: Tree, keys: Iterable[str], scanned: Mapping[str, SegmentKeys] | None = None
) -> dict[str, dict[str, Any] | None]:
    """The stored records of ``keys`` in ``tree``'s store, as ``ResponseStore.get`` would
    answer them (the first segment in name order, and the first line in it, wins; a damaged
    line answers None), without indexing every line.

    For a handful of keys in a large store (a diff's snippets). ``scanned`` holds segments
    already scanned, by name (``prefetch`` makes them while the caller works on).
    """
    wanted = {k for k in keys if _storable(k)}
    out: dict[str, dict[str, Any] | None] = {}
    for name in segment_names(tree):
        if len(out) == len(wanted):
            break
        keys_of = (scanned or {}).get(name)
        if keys_of is None:
            keys_of = SegmentKeys(segment_source(tree, name))
        keys_of.find(wanted, out)
    return out


class StoredRecords(Protocol):
    """What reads a stored record by key: a ``ResponseStore`` or a ``KeyLookup``."""

    def get(self, key: str) -> dict[str, Any] | None: ...


class KeyLookup:
    """``ResponseStore.get`` for a handful of keys of ``tree``'s store (one item's
    responses and its judges'), by ``lookup``: each segment is scanned once, on the first
    ``get``, and no index is sorted."""

    def __init__(self, tree: Tree) -> None:
        self.tree = tree
        self._scanned: dict[str, SegmentKeys] | None = None

    def get(self, key: str) -> dict[str, Any] | None:
        if self._scanned is None:
            self._scanned = {
                name: SegmentKeys(segment_source(self.tree, name))
                for name in segment_names(self.tree)
            }
        return lookup(self.tree, [key], self._scanned).get(key)


class Prefetch:
    """The segments of some trees, scanned on a thread while the caller works on:
    ``result`` waits for the scans (per tree, by segment name) for ``lookup``; ``cancel``
    stops the thread after the segment in hand.

    Only pointers are read here, through the trees; the thread reads files alone (a
    ``GitTree`` is not shared across threads): verified DVC cache files, and segments
    on disk in a working tree. A segment two trees share is scanned once. Segments it
    could not find are left for ``lookup`` to read the usual way.
    """

    def __init__(self, trees: Sequence[Tree], root: Path) -> None:

        self.sources: dict[str, Callable[[], Path | None]] = {}
        self.names: list[dict[str, str]] = []
        for tree in trees:
            mine = {}
            for name in segment_names(tree):
                rel = f"{STORE_DIR}/{name}"
                if isinstance(tree, WorkspaceTree) and tree.is_file(rel):
                    source = f"file:{rel}"
                    self.sources[source] = functools.partial(tree.data_path, rel)
                elif not tree.is_file(rel) and tree.is_file(rel + ".dvc"):
                    md5 = dvcrepo.pointer_md5(tree.read(rel + ".dvc"))
                    if md5 is None:
                        continue
                    source = f"md5:{md5}"
                    self.sources[source] = functools.partial(dvcrepo.local_copy, root, md5)
                else:
                    continue
                mine[name] = source
            self.names.append(mine)
        self.scanned: dict[str, SegmentKeys] = {}
        self.stop = threading.Event()
        self.worker = threading.Thread(target=self._scan, name="evalreg-store-scan", daemon=True)
        self.worker.start()

    def _scan(self) -> None:
        for source, find in self.sources.items():
            if self.stop.is_set():
                return
            with contextlib.suppress(OSError):
                path = find()
                if path is not None:
                    self.scanned[source] = SegmentKeys(path)

    def result(self) -> list[dict[str, SegmentKeys]]:
        self.worker.join()
        return [
            {name: self.scanned[src] for name, src in mine.items() if src in self.scanned}
            for mine in self.names
        ]

    def cancel(self) -> None:
        self.stop.set()
        self.worker.join()


_ENCODE = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode


def encode_record(
    key: str, record: dict[str, Any], *, encoded: Mapping[str, bytes] | None = None
) -> bytes:
    """One store line: the key first (so indexing reads 72 bytes), then sorted fields.

    ``encoded`` holds fields already serialised the same way (sorted keys, no whitespace,
    UTF-8), such as the request body's exact bytes: they are spliced in, not re-encoded,
    and the line is the same as if their values were in ``record``.
    """
    if not encoded:
        return b'{"key":"' + key.encode("ascii") + b'",' + _ENCODE(record)[1:].encode() + b"\n"
    # The fields between two spliced ones are encoded together, as one object less its
    # braces: what encoding each on its own and joining them gives, in one call.
    fields: list[bytes] = []
    between: dict[str, Any] = {}
    for name in sorted(record.keys() | encoded.keys()):
        if name not in encoded:
            between[name] = record[name]
            continue
        if between:
            fields.append(_ENCODE(between)[1:-1].encode())
            between = {}
        fields.append(_ENCODE(name).encode() + b":" + encoded[name])
    if between:
        fields.append(_ENCODE(between)[1:-1].encode())
    return b'{"key":"' + key.encode("ascii") + b'",' + b",".join(fields) + b"}\n"


def segment_name(label: str = "run") -> str:
    """A new segment's file name: when it was begun, by what, and a random tail."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    return f"{stamp}-{label}-{secrets.token_hex(4)}{SEGMENT_SUFFIX}"


class SegmentWriter:
    """Appends records to a new, uniquely named segment file in ``root``'s store
    (``name``: one chosen beforehand with ``segment_name``)."""

    def __init__(self, root: Path, *, label: str = "run", name: str | None = None) -> None:
        self.directory = root / STORE_DIR
        self.directory.mkdir(parents=True, exist_ok=True)
        self.name = name or segment_name(label)
        self.path = self.directory / self.name
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o644)
        self._unsynced = 0
        self._synced_at = time.monotonic()
        self._syncing: threading.Thread | None = None
        self._sync_error: OSError | None = None
        self.written = 0
        self.size = 0

    def put(self, line: bytes) -> None:
        """Write one encoded record now (one write call: never interleaved or partial in
        the kernel unless the process dies mid-call); fsync in groups, on a thread of its
        own: a run's event loop does not stop a millisecond for each (``sync`` waits).

        A short write (the disk is full, or a file size limit is reached) is cut off
        again and raised as ``OSError``: every line before it stays whole."""
        self._raise_sync_error()
        try:
            done = os.write(self._fd, line)
            while done < len(line):  # short: the next call says why, or finishes the line
                done += os.write(self._fd, line[done:])
        except OSError as exc:
            os.ftruncate(self._fd, self.size)
            raise OSError(exc.errno, exc.strerror, str(self.path)) from None
        self.size += done
        self.written += 1
        self._unsynced += 1
        due = self._unsynced >= FSYNC_EVERY or time.monotonic() - self._synced_at > FSYNC_INTERVAL_S
        if due and (self._syncing is None or not self._syncing.is_alive()):
            # The lines written so far reach the disk while more are written.
            self._syncing = threading.Thread(target=self._fsync, name="segment fsync", daemon=True)
            self._syncing.start()
            self._unsynced = 0
            self._synced_at = time.monotonic()

    def _fsync(self) -> None:
        try:
            os.fsync(self._fd)
        except OSError as exc:
            self._sync_error = exc

    def _raise_sync_error(self) -> None:
        if self._sync_error is not None:
            exc, self._sync_error = self._sync_error, None
            raise OSError(exc.errno, exc.strerror, str(self.path)) from None

    def sync(self) -> None:
        """Every line written so far is on disk when this returns."""
        if self._syncing is not None:
            self._syncing.join()
            self._syncing = None
        self._raise_sync_error()
        if self._unsynced:
            os.fsync(self._fd)
            self._unsynced = 0
        self._synced_at = time.monotonic()

    def close(self) -> None:
        """Sync and close; an empty segment is removed."""
        if self._fd < 0:
            return
        self.sync()
        os.close(self._fd)
        self._fd = -1
        if self.written == 0:
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()

    def __enter__(self) -> SegmentWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_TAIL_READ = 1 << 16
"""Bytes read at a time, backwards from a segment's end, to find its last newline."""


def repair_torn_tail(path: Path) -> int:
    """Truncate a segment after its last complete line; return the bytes dropped.

    Only its end is read: a whole segment ends in a newline, found in its last byte."""
    with path.open("rb") as f:
        size = end = f.seek(0, os.SEEK_END)
        keep = 0
        while end > 0:
            start = max(0, end - _TAIL_READ)
            f.seek(start)
            newline = f.read(end - start).rfind(b"\n")
            if newline >= 0:
                keep = start + newline + 1
                break
            end = start
    if keep == size:
        return 0
    with path.open("r+b") as f:
        f.truncate(keep)
    return size - keep


def keepable(root: Path, rels: Iterable[str]) -> list[str]:
    """Of these segments (repository-relative), the ones worth tracking: a torn last line
    (the writer was killed mid-write) is cut off, an empty segment is removed, and one
    already tracked (DVC may have replaced the file) stays."""
    keep = []
    for rel in rels:
        path = root / rel
        if not path.is_file():
            if (root / f"{rel}.dvc").is_file():
                keep.append(rel)
            continue
        repair_torn_tail(path)
        if path.stat().st_size == 0:
            path.unlink()
            continue
        keep.append(rel)
    return keep
