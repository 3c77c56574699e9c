"""Eval-set items as the registry keeps them: read by the common-shape check or by full
validation, alike; small, shared where they repeat, immutable."""

from __future__ import annotations

import json
import os
import pickle
import tracemalloc
from pathlib import Path

import pytest
from pydantic import ValidationError

from evalreg.errors import RegistryError, UsageError
from evalreg.evalsets import evalset as evalset_module
from evalreg.evalsets.evalset import (
    EvalSet,
    FileItems,
    LineNumbers,
    SliceFacts,
    item_content,
    parse_evalset,
)
from evalreg.evalsets.privacy import redact_fields
from evalreg.registry.schema import NO_META, Item, ItemLine
from evalreg.registry.validation import describe_errors

PLAIN = [
    {"id": "a", "input": {"text": "hello"}},
    {"id": "b-1.x_y", "input": {}, "expected": None, "tags": []},
    {"id": "c", "input": {"q": "é ✓", "n": [1, 2.5, None]}, "expected": {"echo": "x"}},
    {"id": "d", "input": {"t": "x"}, "tags": ["common", "long"], "cluster": "doc-7"},
    {"id": "e", "input": {"t": "x"}, "cluster": None, "meta": {"source": "log", "line": 3}},
    {"id": "f", "input": {"t": "x"}, "expected": [1, "two", {"3": False}], "meta": {}},
    {"id": "Z" * 128, "input": {"t": "x"}, "expected": "yes", "tags": ["Edge.case-1_x"]},
]
OTHER_SHAPES = [
    {"id": "m", "messages": [{"role": "user", "content": "hi"}], "tags": ["chat"]},
    {"id": "p", "input": {"t": "x"}, "attachments": [{"path": "evalsets/files/a.png"}]},
    {"id": "q", "input": {"t": "x"}, "messages": None},
]
NEAR_MISSES = [
    {"id": "a\n", "input": {}},
    {"id": "", "input": {}},
    {"id": "é", "input": {}},
    {"id": "-a", "input": {}},
    {"id": "Z" * 129, "input": {}},
    {"id": 5, "input": {}},
    {"id": True, "input": {}},
    {"input": {}},
    {"id": "a"},
    {"id": "a", "input": None},
    {"id": "a", "input": []},
    {"id": "a", "input": "text"},
    {"id": "a", "input": {}, "messages": [{"role": "user", "content": "hi"}]},
    {"id": "a", "input": {}, "inputs": {}},
    {"id": "a", "input": {}, "tags": "common"},
    {"id": "a", "input": {}, "tags": None},
    {"id": "a", "input": {}, "tags": [1]},
    {"id": "a", "input": {}, "tags": ["two words"]},
    {"id": "a", "input": {}, "tags": ["ok", "x\n"]},
    {"id": "a", "input": {}, "cluster": 3},
    {"id": "a", "input": {}, "cluster": ["c"]},
    {"id": "a", "input": {}, "meta": None},
    {"id": "a", "input": {}, "meta": []},
]


def _jsonl(rows: list[dict[str, object]]) -> bytes:
    return ("\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n").encode()


@pytest.mark.parametrize("row", PLAIN + OTHER_SHAPES, ids=lambda r: str(r.get("id"))[:12])
def test_an_item_reads_as_its_full_validation_reads_it(row):
    evalset, findings = parse_evalset(_jsonl([row]), "evalsets/e.jsonl")
    assert findings == []
    assert evalset is not None
    (item,) = evalset.items
    validated = ItemLine.model_validate(row)
    assert item == Item.validate(row)
    assert type(item.tags) is tuple
    assert item.as_line().model_dump(mode="json") == validated.model_dump(mode="json")
    assert redact_fields(item, []) == validated.model_dump(mode="json", exclude_none=True)


@pytest.mark.parametrize("row", NEAR_MISSES, ids=repr)
def test_a_line_near_the_common_shape_is_refused_with_full_validations_words(row):
    with pytest.raises(ValidationError) as caught:
        ItemLine.model_validate(row)
    messages = describe_errors(ItemLine, row, caught.value)
    prefix = f"item {row['id']!r}: " if isinstance(row.get("id"), str) else "item: "
    evalset, findings = parse_evalset(_jsonl([PLAIN[0], row]), "evalsets/e.jsonl")
    assert evalset is None
    assert [(f.line, f.message) for f in findings] == [(2, prefix + m) for m in messages]


def test_a_bad_tag_is_refused_in_the_words_of_the_schema():
    row = {"id": "a", "input": {}, "tags": ["common", "two words"]}
    _, findings = parse_evalset(_jsonl([row]), "evalsets/e.jsonl")
    assert [f.message for f in findings] == [
        "item 'a': tags.1: String should match pattern '^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$' (got "
        "'two words')"
    ]


def test_a_bad_tag_is_refused_even_after_the_same_tags_were_read_valid():
    rows = [
        {"id": "a", "input": {}, "tags": ["common"]},
        {"id": "b", "messages": [{"role": "user", "content": "hi"}], "tags": ["x y"]},
        {"id": "c", "input": {}, "tags": ["x y"]},
    ]
    _, findings = parse_evalset(_jsonl(rows), "evalsets/e.jsonl")
    assert [f.line for f in findings] == [2, 3]


def test_items_with_the_same_tags_share_one_tuple_and_items_without_meta_one_mapping():
    rows = [
        {"id": f"i-{n}", "input": {"t": str(n)}, "tags": ["common", "long"] if n % 2 else []}
        for n in range(6)
    ]
    rows.append({"id": "m", "messages": [{"role": "user", "content": "hi"}], "tags": ["long"]})
    rows.append({"id": "n", "input": {}, "tags": ["long"]})
    evalset, _ = parse_evalset(_jsonl(rows), "evalsets/shared.jsonl")
    assert evalset is not None
    items = evalset.items
    assert items[1].tags == ("common", "long")
    assert all(i.tags is items[1].tags for i in items[1:6:2])
    assert items[6].tags is items[7].tags  # validated fully or not, one tuple
    assert all(i.meta is NO_META for i in items)


def test_an_item_cannot_be_changed():
    evalset, _ = parse_evalset(_jsonl(PLAIN), "evalsets/e.jsonl")
    assert evalset is not None
    item = evalset.items[0]
    with pytest.raises(AttributeError):
        item.id = "other"  # type: ignore[misc]
    with pytest.raises(TypeError):
        item.meta["source"] = "x"  # type: ignore[index]


def test_items_survive_pickling_with_their_content():
    evalset, _ = parse_evalset(_jsonl(PLAIN + OTHER_SHAPES), "evalsets/pickled.jsonl")
    assert evalset is not None
    copies = pickle.loads(pickle.dumps(evalset.items))
    assert copies == evalset.items
    assert [item_content(i) for i in copies] == [item_content(i) for i in evalset.items]


def test_item_content_is_the_content_of_the_validated_line():
    # The hash pairing items across revisions: kept as it was when items were models.
    row = {"id": "a", "input": {"text": "hello"}, "expected": {"echo": "hello"}, "tags": ["t"]}
    evalset, _ = parse_evalset(_jsonl([row]), "evalsets/e.jsonl")
    assert evalset is not None
    assert item_content(evalset.items[0]) == "187ff9412f5198ee"


def test_lines_are_numbered_as_the_file_has_them_blank_ones_and_a_last_without_newline():
    data = b'\n{"id": "a", "input": {}}\r\n\n  \n{"id": "b", "input": {}}\n{"id": "a", "input": {}}'
    evalset, findings = parse_evalset(data, "evalsets/e.jsonl")
    assert evalset is None
    assert [(f.line, f.message) for f in findings] == [
        (6, "duplicate item id 'a' (first at line 2)")
    ]
    evalset, _ = parse_evalset(data.rpartition(b"\n")[0], "evalsets/e.jsonl")
    assert evalset is not None
    assert evalset.lines == {"a": 2, "b": 5}


def _file_evalset(tmp_path: Path, data: bytes, name: str = "e.jsonl") -> EvalSet:
    path = tmp_path / name
    path.write_bytes(data)
    evalset, findings = parse_evalset(data, f"evalsets/{name}", os.open(path, os.O_RDONLY))
    assert findings == [] and evalset is not None
    return evalset


def _jsonl(rows: list[dict[str, object]]) -> bytes:
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows).encode()


@pytest.mark.parametrize(
    "data",
    [
        _jsonl(PLAIN + OTHER_SHAPES[::2]),
        b"\xef\xbb\xbf" + _jsonl(PLAIN[::-1]).replace(b"\n", b"\r\n", 3) + b"\n\n  \n",
        _jsonl(PLAIN[:3]).rstrip(b"\n"),  # the last line without its newline
        # A run of 19 digits: lines holding one are read by json, others by orjson.
        _jsonl([{"id": "big", "input": {"n": 12345678901234567890123}}, *PLAIN[3:]]),
    ],
)
def test_items_read_back_from_the_file_are_the_items_parsed_whole(
    tmp_path: Path, data: bytes
) -> None:
    whole, _ = parse_evalset(data, "evalsets/w.jsonl")
    read = _file_evalset(tmp_path, data)
    assert whole is not None and isinstance(read.items, FileItems)
    assert len(read.items) == len(whole.items)
    assert list(read.items) == list(whole.items)
    assert [read.items[i] for i in range(-len(whole.items), len(whole.items))] == [
        *whole.items,
        *whole.items,
    ]
    assert list(read.items[1:-1:2]) == list(whole.items[1:-1:2])
    assert list(read.by_id) == list(whole.by_id) == sorted(whole.items, key=lambda i: i.id)
    assert list(read.by_id[2:]) == list(whole.by_id)[2:]
    assert read.lines == whole.lines and read.slices == whole.slices
    assert [item_content(i) for i in read.items] == [item_content(i) for i in whole.items]


@pytest.mark.parametrize("order", [1, -1])
def test_what_parsing_counts_is_what_the_items_hold(tmp_path: Path, order: int) -> None:
    """Slice counts, sources and each item's id, cluster and tags, as counted while parsing
    (read back from the file, or kept whole), are those of the items themselves."""
    rows = [
        *PLAIN,
        *OTHER_SHAPES,
        {"id": "g", "input": {"t": "x"}, "tags": ["long", "all", "long"], "cluster": "doc-7"},
        {
            "id": "h",
            "input": {"t": "x"},
            "tags": ["common"],
            "cluster": "doc-9",
            "meta": {"source": 7},
        },
        {"id": "i", "messages": [{"role": "user", "content": "hi"}], "cluster": "doc-8"},
    ][::order]
    data = _jsonl(rows)
    whole, _ = parse_evalset(data, "evalsets/w.jsonl")
    read = _file_evalset(tmp_path, data)
    assert whole is not None and isinstance(read.items, FileItems)
    counted = EvalSet("evalsets/w.jsonl", whole.md5, tuple(whole.items))  # counted on asking
    assert counted.counted is None and whole.counted is not None and read.counted is not None
    assert read.facts == whole.facts == counted.facts
    facts = read.facts
    assert list(facts.slices) == ["all", "Edge.case-1_x", "chat", "common", "long"]
    assert facts.slices["all"] == SliceFacts(items=13, conversations=2, units=12)
    assert facts.slices["long"] == SliceFacts(items=2, conversations=0, units=1)
    assert facts.sources == ("7", "log")
    expected = sorted((i.id, i.cluster or i.id, tuple(sorted(i.tags))) for i in whole.items)
    for evalset in (read, whole, counted):
        ids, clusters, tags = evalset.identities()
        assert list(zip(ids, clusters, tags, strict=True)) == expected


def test_items_read_back_span_several_blocks_in_any_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(evalset_module, "_BLOCK", 7)
    rows = [
        {"id": f"i{(i * 37) % 100:03d}", "input": {"t": "é" * (i % 5)}, "tags": [f"t{i % 3}"]}
        for i in range(100)
    ]
    data = _jsonl(rows)
    whole, _ = parse_evalset(data, "evalsets/w.jsonl")
    read = _file_evalset(tmp_path, data)
    assert whole is not None and read.order is not None
    assert list(read.by_id) == list(whole.by_id)
    assert [read.by_id[i].id for i in range(99, -1, -1)] == [f"i{i:03d}" for i in range(99, -1, -1)]
    # An item asked for again while its block is kept is the same object.
    assert read.items[8] is read.items[8] and read.by_id[13] is read.by_id[13]


def test_an_eval_set_read_from_its_file_holds_few_bytes_an_item(tmp_path: Path) -> None:
    n = 20_000
    rows = [
        {"id": f"i-{i:06d}", "input": {"text": f"message {i} " * 8}, "tags": ["common"]}
        for i in range(n)
    ]
    data = _jsonl(rows)
    path = tmp_path / "big.jsonl"
    path.write_bytes(data)
    held = {}
    for name, file in (("whole", None), ("read back", os.open(path, os.O_RDONLY))):
        tracemalloc.start()
        try:
            evalset, _ = parse_evalset(data, f"evalsets/{name}.jsonl", file)
            held[name] = tracemalloc.get_traced_memory()[0]
        finally:
            tracemalloc.stop()
        assert evalset is not None and len(evalset.items) == n
        del evalset
    # What stays is where each line is, its tags, and each id with its line number: some
    # 44 bytes.
    assert held["read back"] / n < 48
    assert held["read back"] < held["whole"] / 10


def test_line_numbers_by_id_answer_as_the_dict_they_were_made_from() -> None:
    lines = {f"i{(i * 7919) % 1000:04d}": i + 1 for i in range(1000)} | {"A": 2000, "z.z": 3}
    numbers = LineNumbers.of(lines)
    assert numbers == lines and len(numbers) == len(lines)
    assert list(numbers) == sorted(lines)
    assert all(numbers[k] == v for k, v in lines.items())
    for absent in ("", "i", "i00000", "i1000", "zz", "é", "0"):
        assert absent not in numbers and numbers.get(absent, 0) == 0
    with pytest.raises(KeyError):
        numbers["B"]
    assert 5 not in numbers  # type: ignore[comparison-overlap]
    assert LineNumbers.of({}) == {} and "a" not in LineNumbers.of({})


def test_an_eval_set_file_changed_after_parsing_is_not_read(tmp_path: Path) -> None:
    data = _jsonl(PLAIN)
    read = _file_evalset(tmp_path, data)
    (tmp_path / "e.jsonl").write_bytes(data.replace(b"hello", b"HELLO"))
    with pytest.raises(UsageError, match="changed while evalreg read it"):
        list(read.items)


@pytest.mark.parametrize(
    "rows",
    [
        ['{"id": "a", "input": {}}', '{"id": "b", "input": {}}', '{"id": "a", "input": {}}'],
        ['{"id": "b", "input": {}}', '{"id": "a", "input": {}}', '{"id": "b", "input": {}}'],
        ['{"id": "a", "input": {}}', "{oops", '{"id": "a", "input": {}}', '{"id": 5}'],
        ['{"id": "c", "input": {}}'] + ['{"id": "c", "input": {}}'] * 60,
        ["", " "],
    ],
)
def test_a_bad_file_read_back_is_refused_in_the_words_of_one_parsed_whole(
    tmp_path: Path, rows: list[str]
) -> None:
    data = "\n".join(rows).encode()
    path = tmp_path / "bad.jsonl"
    path.write_bytes(data)
    whole = parse_evalset(data, "evalsets/x.jsonl")
    evalset_module._RECENT.clear()
    read = parse_evalset(data, "evalsets/x.jsonl", os.open(path, os.O_RDONLY))
    assert whole[0] is None and read[0] is None
    assert read[1] == whole[1] != []


def test_the_same_bytes_parsed_again_are_read_from_the_file_given(tmp_path: Path) -> None:
    data = _jsonl(PLAIN)
    first = _file_evalset(tmp_path, data, "one.jsonl")
    (tmp_path / "a").mkdir()
    (tmp_path / "one.jsonl").write_bytes(data.replace(b"hello", b"HELLO"))  # in place
    again = _file_evalset(tmp_path / "a", data, "one.jsonl")
    assert list(again.items) == list(parse_evalset(data, "evalsets/other.jsonl")[0].items)
    with pytest.raises(UsageError):
        list(first.items)
    # Given only the bytes, a set whose file changed since is parsed again.
    evalset_module._RECENT.insert(0, ("evalsets/one.jsonl", first.md5, first))
    whole, _ = parse_evalset(data, "evalsets/one.jsonl")
    assert whole is not None and list(whole.items) == list(again.items)


@pytest.mark.parametrize("block", [1, 2, 3, 7, 1 << 20])
def test_items_counted_a_block_at_a_time_are_counted_as_the_whole_text_counts_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, block: int
) -> None:
    from evalreg.audit import changes

    monkeypatch.setattr(changes, "_BLOCK", block)
    for data in (
        b'{"id": "a"}\n\n  \r\n{"id": "b"}\r\n{"id": "c"}\r{"id": "d"}',
        b"\n\r\n\r\r\n \t\n",
        b'{"id": "a"}\r\n{"id": "b"}\n',
        b"",
    ):
        path = tmp_path / "e.jsonl"
        path.write_bytes(data)
        assert changes.count_items_in(path) == changes.count_items(data)
        assert changes.count_items(data) == sum(1 for x in data.splitlines() if x.strip())


@pytest.mark.parametrize("halves", [False, True])
@pytest.mark.parametrize("block", [1, 5, 64, 1 << 20])
@pytest.mark.parametrize(
    "data",
    [
        b"\xef\xbb\xbf" + _jsonl(PLAIN[::-1]).replace(b"\n", b"\r\n", 3) + b"\n\n  \n",
        _jsonl(PLAIN[:3]).rstrip(b"\n"),  # the last line without its newline
        _jsonl([*PLAIN[3:], {"id": "big", "input": {"n": 12345678901234567890123}}]),
        _jsonl([*PLAIN, {"id": "s", "input": {"t": "\\ud83d\\ude00 and \\ud83d"}}]),
        _jsonl([*PLAIN[:2], PLAIN[0], *PLAIN[2:]]),  # a duplicate id
        # Each half in id order (the second starts at the 8th line), the second's ids
        # before the first's.
        _jsonl([{"id": i, "input": {"t": 1}} for i in [*(f"m{k}" for k in range(6)), "n0"]])
        + _jsonl([{"id": f"a{k}", "input": {"t": 1}} for k in range(6)]),
        _jsonl(PLAIN[:2]) + b"{not json\n" + _jsonl(PLAIN[2:]),
        _jsonl(PLAIN[:2]) + "é".encode() + b"\xff\n" + _jsonl(PLAIN[2:]),  # not UTF-8
        b"",
        b"\n\n",
    ],
)
def test_a_file_parsed_a_block_at_a_time_parses_as_its_bytes_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, data: bytes, block: int, halves: bool
) -> None:
    """Read from its file in blocks of lines, never whole, and in two halves at once (the
    second by a forked worker), an eval set gives the items, line numbers, md5 and findings
    (or error) its bytes parsed at once give."""
    from evalreg import forked

    monkeypatch.setattr(evalset_module, "_READ_BLOCK", block)
    if halves:
        if forked.parts(2, 1) < 2:
            pytest.skip("reading in halves forks on Linux, with two CPUs")
        monkeypatch.setattr(evalset_module, "_PARALLEL_BYTES", 0)
    monkeypatch.setattr(evalset_module, "_RECENT", [])
    path = tmp_path / "e.jsonl"
    path.write_bytes(data)

    def parsed(given: bytes | None, file: int | None) -> object:
        evalset_module._RECENT.clear()
        try:
            evalset, findings = parse_evalset(given, "evalsets/e.jsonl", file)
        except RegistryError as exc:
            return ("error", exc.findings)
        if evalset is None:
            return ("findings", findings)
        items = list(evalset.items)
        return (evalset.md5, items, dict(evalset.lines), evalset.facts, evalset.identities())

    whole = parsed(data, None)
    assert parsed(None, os.open(path, os.O_RDONLY)) == whole
    assert parsed(data, os.open(path, os.O_RDONLY)) == whole
