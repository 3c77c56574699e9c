"""The response store's index: which line answers a key, what is counted as a duplicate or
torn, keys that share their first digits, long numbers, and records read from the segment
files (or DVC's cache) when asked for, not held."""

from __future__ import annotations

import hashlib
import json
import tracemalloc
from pathlib import Path

import pytest

from evalreg import dvcrepo
from evalreg.registry.tree import GitTree, WorkspaceTree
from evalreg.store import segments
from evalreg.store.keycolumn import KeyColumn
from evalreg.store.segments import STORE_DIR, Location, ResponseStore, encode_record, lookup

from conftest import Repo


def key(i: int) -> str:
    return hashlib.sha256(str(i).encode()).hexdigest()


def sharing_head(i: int) -> str:
    """Keys whose first 16 digits (the index's sorted column) are all the same."""
    return "0123456789abcdef" + key(i)[16:]


def segment(root: Path, name: str, *lines: bytes) -> Path:
    path = root / STORE_DIR / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(lines))
    return path


def line(k: str, text: str, **fields: object) -> bytes:
    return encode_record(k, {"response": {"text": text}, **fields})


def text_of(store: ResponseStore, k: str) -> str | None:
    record = store.get(k)
    return None if record is None else record["response"]["text"]


def test_the_first_segment_by_name_and_the_first_line_in_it_win(tmp_path: Path) -> None:
    segment(tmp_path, "b.jsonl", line(key(1), "b1"), line(key(2), "b2"), line(key(1), "b1 again"))
    segment(tmp_path, "a.jsonl", line(key(2), "a2"), line(key(3), "a3"), line(key(3), "a3 again"))
    store = ResponseStore.open(tmp_path)
    assert [text_of(store, key(i)) for i in (1, 2, 3)] == ["b1", "a2", "a3"]
    assert store.stats == segments.StoreStats(segments=2, records=3, duplicates=3, torn=0)
    assert len(store) == 3
    assert sorted(store.keys()) == sorted(key(i) for i in (1, 2, 3))
    assert store.locate(key(2)) == Location("a.jsonl", 0, len(line(key(2), "a2")) - 1)
    assert store.locate(key(1)) == Location("b.jsonl", 0, len(line(key(1), "b1")) - 1)


def test_torn_and_damaged_lines_are_counted_and_answer_nothing(tmp_path: Path) -> None:
    good = line(key(1), "ok")
    segment(
        tmp_path,
        "a.jsonl",
        good,
        b"\n",  # an empty line
        b"not a record at all\n",
        b'{"key":"' + key(2).encode() + b'",broken\n',  # keyed, but not JSON
        b'{"key":"' + key(3)[:40].encode() + b'"}\n',  # a key too short to be one
        line(key(4), "torn")[:50],  # the writer was killed mid-line
    )
    store = ResponseStore.open(tmp_path)
    assert store.stats == segments.StoreStats(segments=1, records=2, duplicates=0, torn=4)
    assert text_of(store, key(1)) == "ok"
    assert key(2) in store and store.get(key(2)) is None  # stored, but damaged
    assert key(3) not in store and key(4) not in store
    assert lookup(WorkspaceTree(tmp_path), [key(i) for i in range(1, 5)]) == {
        key(1): store.get(key(1)),
        key(2): None,
    }


def test_keys_that_share_their_first_digits_are_told_apart_by_the_whole_key(
    tmp_path: Path,
) -> None:
    segment(tmp_path, "a.jsonl", *(line(sharing_head(i), f"a{i}") for i in range(5)))
    segment(
        tmp_path,
        "b.jsonl",
        line(sharing_head(3), "b3"),  # a duplicate among lines of one head
        line(sharing_head(9), "b9"),
        line(key(1), "plain"),
    )
    store = ResponseStore.open(tmp_path)
    assert [text_of(store, sharing_head(i)) for i in (0, 1, 2, 3, 4, 9)] == [
        "a0",
        "a1",
        "a2",
        "a3",
        "a4",
        "b9",
    ]
    assert sharing_head(7) not in store and store.get(sharing_head(7)) is None
    assert store.stats.records == 7 and store.stats.duplicates == 1
    wanted = [sharing_head(i) for i in range(10)] + [key(1), key(2)]
    assert store.locate_all(wanted) == [store.locate(k) for k in wanted]
    assert store.contains_all(wanted) == [k in store for k in wanted] != [True] * len(wanted)
    assert lookup(WorkspaceTree(tmp_path), wanted) == {
        k: store.get(k) for k in wanted if k in store
    }


def test_a_key_is_answered_only_as_it_is_spelled(tmp_path: Path) -> None:
    """Keys are lowercase hex; a line with another spelling is still indexed, and answers
    for that spelling alone."""
    upper, odd = key(1).upper(), "z" * 16 + key(2)[16:]
    segment(tmp_path, "a.jsonl", line(upper, "upper"), line(odd, "odd"), line(key(3), "plain"))
    store = ResponseStore.open(tmp_path)
    assert text_of(store, upper) == "upper" and text_of(store, odd) == "odd"
    assert key(1) not in store and store.get(key(1)) is None
    assert sorted(store.keys()) == sorted([upper, odd, key(3)])
    assert store.locate_all([upper, key(1), odd]) == [
        store.locate(upper),
        None,
        store.locate(odd),
    ]
    assert store.locate(key(1)) is None
    # Keys of other lengths are not read as parts of one another.
    assert store.contains_all([key(3)[:63], key(3)[63:] + key(3)]) == [False, False]
    assert store.contains_all([upper, key(1), odd, key(3), "short"]) == [
        True,
        False,
        True,
        True,
        False,
    ]


def test_numbers_beyond_64_bits_read_as_json_reads_them(tmp_path: Path) -> None:
    big = {"response": {"text": "ok", "usage": {"input_tokens": 2**70}}, "latency_ms": -(10**25)}
    small = {"response": {"text": "ok", "usage": {"input_tokens": 3}}, "latency_ms": 1.5}
    lines = [encode_record(key(i), big if i % 3 == 0 else small) for i in range(30)]
    segment(tmp_path, "a.jsonl", *lines)
    store = ResponseStore.open(tmp_path)
    for i, raw in enumerate(lines):
        assert json.dumps(store.get(key(i)), sort_keys=True) == json.dumps(
            json.loads(raw), sort_keys=True
        )


def test_a_segment_scanned_in_blocks_smaller_than_its_lines_indexes_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    big = {"usage": {"input_tokens": 2**70}}
    lines = [line(key(i), "x" * (i * 37 % 300), **(big if i % 4 == 0 else {})) for i in range(200)]
    segment(tmp_path, "a.jsonl", *lines, line(key(1), "duplicate"), b"torn tail")
    whole = ResponseStore.open(tmp_path)
    monkeypatch.setattr(segments, "_SCAN_BLOCK", 100)  # shorter than any line
    blocks = ResponseStore.open(tmp_path)
    assert blocks.stats == whole.stats == segments.StoreStats(1, 200, 1, 1)
    for i in range(200):
        assert blocks.locate(key(i)) == whole.locate(key(i))
        assert json.dumps(blocks.get(key(i))) == json.dumps(json.loads(lines[i]))


def test_opening_a_store_holds_its_index_not_its_records(tmp_path: Path) -> None:
    padding = "p" * 2000
    segment(tmp_path, "a.jsonl", *(line(key(i), padding) for i in range(5000)))
    size = (tmp_path / STORE_DIR / "a.jsonl").stat().st_size
    tracemalloc.start()
    try:
        store = ResponseStore.open(tmp_path)
        assert store.stats.records == 5000
        held, _peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert held < size / 10
    assert text_of(store, key(4321)) == padding


def test_records_remembered_by_this_process_answer_first(tmp_path: Path) -> None:
    segment(tmp_path, "a.jsonl", line(key(1), "stored"))
    store = ResponseStore.open(tmp_path)
    fresh = line(key(2), "fresh")
    store.remember(key(2), fresh)
    overlay = store.overlay()
    overlay.remember(key(3), line(key(3), "judged"))
    assert (len(store), len(overlay)) == (2, 3)
    assert text_of(store, key(2)) == "fresh" and key(3) not in store
    assert text_of(overlay, key(1)) == "stored" and text_of(overlay, key(3)) == "judged"
    assert store.locate(key(2)) == Location("", 0, len(fresh) - 1)
    assert store.locate_all([key(1), key(2), key(3)]) == [
        store.locate(key(1)),
        store.locate(key(2)),
        None,
    ]
    assert store.contains_all([key(1), key(2), key(3)]) == [True, True, False]


def test_a_tracked_segment_is_read_from_the_verified_dvc_cache(repo: Repo) -> None:
    dvcrepo.init(repo.root, None)
    path = segment(repo.root, "a.jsonl", *(line(key(i), f"r{i}") for i in range(20)))
    rel = f"{STORE_DIR}/a.jsonl"
    dvcrepo.track(repo.root, [rel], push=False)
    rev = repo.commit("a tracked segment")
    path.unlink()  # only the cache holds it now
    tree = WorkspaceTree(repo.root)
    cached = tree.data_path(rel)
    assert cached is not None and cached.is_relative_to(repo.root / ".dvc" / "cache")
    assert GitTree(repo.root, rev).data_path(rel) == cached
    for store in (ResponseStore.load(tree), ResponseStore.load(GitTree(repo.root, rev))):
        assert [text_of(store, key(i)) for i in range(20)] == [f"r{i}" for i in range(20)]
    # A damaged cache copy is not taken for the segment: reading it fails as it would.
    cached.chmod(0o644)
    cached.write_bytes(cached.read_bytes().replace(b"r1", b"r9"))
    assert tree.data_path(rel) is None


def test_the_segments_of_keys_are_those_locate_names() -> None:
    store = ResponseStore()
    first = [encode_record(f"{i:064x}", {"n": i}) for i in range(0, 6)]
    second = [encode_record(f"{i:064x}", {"n": i}) for i in range(4, 10)]
    store.add_segment("a.jsonl", b"".join(first))
    store.add_segment("b.jsonl", b"".join(second))
    store.remember(f"{20:064x}", encode_record(f"{20:064x}", {"n": 20}))
    for keys in ([1, 2], [5, 7], [8, 9], [9, 20], [20], [30], []):
        asked = [f"{i:064x}" for i in keys]
        named = {where.segment for where in map(store.locate, asked) if where is not None}
        assert store.segments_of(asked) == named
        assert store.get_many(asked) == [store.get(key) for key in asked]


def test_a_store_without_segments_answers_without_importing_numpy(tmp_path: Path) -> None:
    """A registry's first run asks an empty store about every key before its first
    request: the answer needs no index, so it costs no numpy import."""
    import subprocess
    import sys

    probe = """\
import sys
from pathlib import Path
from evalreg.store.segments import ResponseStore, encode_record
store = ResponseStore.open(Path(sys.argv[1]))
k, other = "a" * 64, "b" * 64
assert store.contains_all([k, other]) == [False, False]
assert list(store.absent([k, other])) == [0, 1]
assert (k in store, store.get(k), store.locate(k)) == (False, None, None)
assert store.get_many([k]) == [None]
assert (store.segments_of([k]), store.locate_all([k]), len(store)) == (set(), [None], 0)
store.remember(k, encode_record(k, {"response": {"text": "yes"}}))
assert store.contains_all([k, other]) == [True, False] and store.segments_of([k]) == {""}
assert list(store.absent([k, other])) == [1]
assert store.get(k)["response"]["text"] == "yes" and len(store) == 1
print("numpy" in sys.modules)
"""
    done = subprocess.run(
        [sys.executable, "-c", probe, str(tmp_path)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False"]
    # Once a segment is there, the same questions are answered from its index.
    segment(tmp_path, "20260101T000000Z-run-00000001.jsonl", line(key(1), "one"))
    store = ResponseStore.open(tmp_path)
    assert store.contains_all([key(1), key(2)]) == [True, False]
    assert store.get(key(1))["response"]["text"] == "one"


@pytest.mark.parametrize(
    ("data", "kept"),
    [
        (b"", b""),
        (b"torn", b""),
        (b"a\n", b"a\n"),
        (b"a\nb\n", b"a\nb\n"),
        (b"a\n" + b"torn beyond one read", b"a\n"),
        (b"a whole line longer than a read\n" + b"torn", b"a whole line longer than a read\n"),
        (b"x" * 40, b""),
    ],
)
def test_a_torn_tail_is_cut_after_the_last_whole_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, data: bytes, kept: bytes
) -> None:
    monkeypatch.setattr(segments, "_TAIL_READ", 8)  # the end is read a few bytes at a time
    path = segment(tmp_path, "20260101T000000Z-run-00000001.jsonl", data)
    assert segments.repair_torn_tail(path) == len(data) - len(kept)
    assert path.read_bytes() == kept


def test_keys_searched_in_several_batches_answer_as_in_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    segment(tmp_path, "a.jsonl", *(line(key(i), f"a{i}") for i in range(0, 12)))
    segment(tmp_path, "b.jsonl", *(line(sharing_head(i), f"b{i}") for i in range(8, 16)))
    store = ResponseStore.open(tmp_path)
    store.remember(key(40), line(key(40), "fresh"))
    asked = [key(i) for i in (3, 40, 99, 11, 0)] + [sharing_head(i) for i in (9, 15, 77)]
    asked = asked * 2
    whole = (
        store.contains_all(asked),
        store.locate_all(asked),
        store.get_many(asked),
        store.segments_of(asked),
    )
    monkeypatch.setattr(segments, "_SEARCH_BATCH", 3)
    for keys in (asked, KeyColumn(asked)):
        assert store.contains_all(keys) == whole[0] == [k in store for k in asked]
        assert store.locate_all(keys) == whole[1] == [store.locate(k) for k in asked]
        assert store.get_many(keys) == whole[2] == [store.get(k) for k in asked]
        assert store.segments_of(keys) == whole[3] == {"", "a.jsonl", "b.jsonl"}
        assert store.absent(keys) == [i for i, k in enumerate(asked) if k not in store]
    assert store.segments_of(asked[2:4]) == {"a.jsonl"}
