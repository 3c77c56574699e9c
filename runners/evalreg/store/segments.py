"""The content-addressed response store: immutable, append-only segment files under DVC.

A response's key is the sha256 of the provider, base URL, sample index and the exact bytes
of the request body sent. Each run (or shard) appends to its own uniquely named segment;
each segment gets its own DVC pointer when the run ends, so branches and concurrent runs
never write the same file. Records are written to the OS as they arrive (a SIGKILL loses
only requests in flight) and fsync'ed in groups; a torn last line is dropped on reading.
"""

from __future__ import annotations

import bisect
import contextlib
import functools
import gc
import hashlib
import json
import os
import secrets
import time
from array import array
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from evalreg import dvcrepo
from evalreg.registry.tree import Tree, WorkspaceTree

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


@dataclass
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


@dataclass
class ResponseStore:
    """Read access to every stored response of one version of the repository."""

    index: dict[str, tuple[int, int, int]] = field(default_factory=dict)
    """key -> (segment number, start offset, end offset)."""
    segments: list[bytes] = field(default_factory=list)
    names: list[str] = field(default_factory=list)
    stats: StoreStats = field(default_factory=StoreStats)
    long_numbers: list[array[int]] = field(default_factory=list)
    """Per segment: ``long_numbers`` of its bytes (found once, not per record)."""

    @classmethod
    def load(cls, tree: Tree) -> ResponseStore:
        """Read every segment of ``tree``'s store: files on disk and DVC-tracked ones."""
        store = cls()
        with collection_paused():  # the index is 100,000s of acyclic tuples
            for name in segment_names(tree):
                store.add_segment(name, tree.read_data(f"{STORE_DIR}/{name}"))
        return store

    @classmethod
    def open(cls, root: Path) -> ResponseStore:
        return cls.load(WorkspaceTree(root))

    def add_segment(self, name: str, data: bytes) -> None:
        number = len(self.segments)
        self.segments.append(data)
        self.names.append(name)
        self.long_numbers.append(long_numbers(data))
        self.stats.segments += 1
        start = 0
        size = len(data)
        while start < size:
            end = data.find(b"\n", start)
            if end < 0:
                self.stats.torn += 1  # a torn last line: the writer was killed mid-write
                break
            if (
                data.startswith(_KEY_PREFIX, start)
                and data[start + 8 + _KEY_LEN : start + 9 + _KEY_LEN] == b'"'
            ):
                key = data[start + 8 : start + 8 + _KEY_LEN].decode("ascii")
                if key in self.index:
                    self.stats.duplicates += 1
                else:
                    self.index[key] = (number, start, end)
                    self.stats.records += 1
            else:
                self.stats.torn += 1
            start = end + 1

    def __contains__(self, key: object) -> bool:
        return key in self.index

    def __len__(self) -> int:
        return len(self.index)

    def get(self, key: str) -> dict[str, Any] | None:
        """The stored record for ``key``, or None (also if its line is damaged)."""
        where = self.index.get(key)
        if where is None:
            return None
        number, start, end = where
        runs = self.long_numbers[number]
        # Whether a run of 19 digits starts within the line (none crosses a newline).
        at = bisect.bisect_left(runs, start)
        short = at == len(runs) or runs[at] >= end
        try:
            record = load_json(self.segments[number][start:end], short_numbers=short)
        except ValueError:
            return None
        return record if isinstance(record, dict) else None

    def remember(self, key: str, line: bytes) -> None:
        """Make a record just written by this process readable without re-reading files."""
        number = len(self.segments)
        self.segments.append(line)
        self.names.append("")
        self.long_numbers.append(long_numbers(line))
        self.index[key] = (number, 0, len(line) - 1)

    def keys(self) -> Iterator[str]:
        return iter(self.index)


class SegmentKeys:
    """One segment's complete, keyed lines and the first 8 bytes of each one's key as a
    column of integers: a handful of keys are found among millions of lines in one
    vectorised pass instead of by indexing every line."""

    def __init__(self, data: bytes) -> None:
        import numpy as np

        raw = np.frombuffer(data, dtype=np.uint8)
        ends = np.flatnonzero(raw == ord("\n"))  # complete lines only: a torn tail has none
        starts = np.concatenate(([0], ends[:-1] + 1)).astype(np.int64)
        keyed = (ends - starts) > len(_KEY_PREFIX) + _KEY_LEN
        starts, ends = starts[keyed], ends[keyed]
        prefix = np.frombuffer(_KEY_PREFIX, dtype=np.uint8)
        head = raw[starts[:, None] + np.arange(len(_KEY_PREFIX))]
        quoted = raw[starts + len(_KEY_PREFIX) + _KEY_LEN] == ord('"')
        keyed = (head == prefix).all(axis=1) & quoted
        self.data = data
        self.starts, self.ends = starts[keyed], ends[keyed]
        first = self.starts[:, None] + np.arange(len(_KEY_PREFIX), len(_KEY_PREFIX) + 8)
        self.firsts = raw[first].copy().view("<u8").ravel()

    def find(self, wanted: set[str], out: dict[str, dict[str, Any] | None]) -> None:
        """Add to ``out`` the record of each key in ``wanted`` (not already in ``out``)
        whose line is here: the first such line wins; a damaged one answers None."""
        import numpy as np

        todo = [k for k in wanted if k not in out]
        if not todo:
            return
        targets = np.frombuffer(b"".join(k[:8].encode("ascii") for k in todo), dtype="<u8")
        data = self.data
        for row in np.flatnonzero(np.isin(self.firsts, targets)):
            start = int(self.starts[row]) + len(_KEY_PREFIX)
            key = data[start : start + _KEY_LEN].decode("ascii", errors="replace")
            if key not in wanted or key in out:
                continue
            try:
                record = load_json(data[int(self.starts[row]) : int(self.ends[row])])
            except ValueError:
                record = None
            out[key] = record if isinstance(record, dict) else None


def lookup(
    tree: Tree, keys: Iterable[str], scanned: Mapping[str, SegmentKeys] | None = None
) -> dict[str, dict[str, Any] | None]:
    """The stored records of ``keys`` in ``tree``'s store, as ``ResponseStore.get`` would
    answer them (the first segment in name order, and the first line in it, wins; a damaged
    line answers None), without indexing every line.

    For a handful of keys in a large store (a diff's snippets). ``scanned`` holds segments
    already scanned, by name (``prefetch`` makes them while the caller works on).
    """
    wanted = {k for k in keys if len(k) == _KEY_LEN and k.isascii()}
    out: dict[str, dict[str, Any] | None] = {}
    for name in segment_names(tree):
        if len(out) == len(wanted):
            break
        keys_of = (scanned or {}).get(name)
        if keys_of is None:
            keys_of = SegmentKeys(tree.read_data(f"{STORE_DIR}/{name}"))
        keys_of.find(wanted, out)
    return out


class StoredRecords(Protocol):
    """What reads a stored record by key: a ``ResponseStore`` or a ``KeyLookup``."""

    def get(self, key: str) -> dict[str, Any] | None: ...


class KeyLookup:
    """``ResponseStore.get`` for a handful of keys of ``tree``'s store (one item's
    responses and its judges'), by ``lookup``: each segment is read and scanned once, on
    the first ``get``, and no line is indexed."""

    def __init__(self, tree: Tree) -> None:
        self.tree = tree
        self._scanned: dict[str, SegmentKeys] | None = None

    def get(self, key: str) -> dict[str, Any] | None:
        if self._scanned is None:
            self._scanned = {
                name: SegmentKeys(self.tree.read_data(f"{STORE_DIR}/{name}"))
                for name in segment_names(self.tree)
            }
        return lookup(self.tree, [key], self._scanned).get(key)


class Prefetch:
    """The segments of some trees, read and scanned on a thread while the caller works on:
    ``result`` waits for the scans (per tree, by segment name) for ``lookup``; ``cancel``
    stops the thread after the segment in hand.

    Only pointers are read here, through the trees; the thread reads files alone (a
    ``GitTree`` is not shared across threads): verified DVC cache files, and segments
    on disk in a working tree. A segment two trees share is scanned once. Segments it
    could not read are left for ``lookup`` to read the usual way.
    """

    def __init__(self, trees: Sequence[Tree], root: Path) -> None:
        import threading

        self.sources: dict[str, Callable[[], bytes | None]] = {}
        self.names: list[dict[str, str]] = []
        for tree in trees:
            mine = {}
            for name in segment_names(tree):
                rel = f"{STORE_DIR}/{name}"
                if isinstance(tree, WorkspaceTree) and tree.is_file(rel):
                    source = f"file:{rel}"
                    self.sources[source] = functools.partial(tree.read, rel)
                elif not tree.is_file(rel) and tree.is_file(rel + ".dvc"):
                    md5 = dvcrepo.pointer_md5(tree.read(rel + ".dvc"))
                    if md5 is None:
                        continue
                    source = f"md5:{md5}"
                    self.sources[source] = functools.partial(dvcrepo.cached, root, md5)
                else:
                    continue
                mine[name] = source
            self.names.append(mine)
        self.scanned: dict[str, SegmentKeys] = {}
        self.stop = threading.Event()
        self.worker = threading.Thread(target=self._scan, name="evalreg-store-scan", daemon=True)
        self.worker.start()

    def _scan(self) -> None:
        for source, read in self.sources.items():
            if self.stop.is_set():
                return
            with contextlib.suppress(OSError):
                data = read()
                if data is not None:
                    self.scanned[source] = SegmentKeys(data)

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
    fields = [
        _ENCODE(name).encode()
        + b":"
        + (encoded[name] if name in encoded else _ENCODE(record[name]).encode())
        for name in sorted(record.keys() | encoded.keys())
    ]
    return b'{"key":"' + key.encode("ascii") + b'",' + b",".join(fields) + b"}\n"


class SegmentWriter:
    """Appends records to a new, uniquely named segment file in ``root``'s store."""

    def __init__(self, root: Path, *, label: str = "run") -> None:
        self.directory = root / STORE_DIR
        self.directory.mkdir(parents=True, exist_ok=True)
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        self.name = f"{stamp}-{label}-{secrets.token_hex(4)}{SEGMENT_SUFFIX}"
        self.path = self.directory / self.name
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o644)
        self._unsynced = 0
        self._synced_at = time.monotonic()
        self.written = 0
        self.size = 0

    def put(self, line: bytes) -> None:
        """Write one encoded record now (one write call: never interleaved or partial in
        the kernel unless the process dies mid-call); fsync in groups.

        A short write (the disk is full, or a file size limit is reached) is cut off
        again and raised as ``OSError``: every line before it stays whole."""
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
        if self._unsynced >= FSYNC_EVERY or time.monotonic() - self._synced_at > FSYNC_INTERVAL_S:
            self.sync()

    def sync(self) -> None:
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


def repair_torn_tail(path: Path) -> int:
    """Truncate a segment after its last complete line; return the bytes dropped."""
    data = path.read_bytes()
    keep = data.rfind(b"\n") + 1
    if keep == len(data):
        return 0
    with path.open("r+b") as f:
        f.truncate(keep)
    return len(data) - keep


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
