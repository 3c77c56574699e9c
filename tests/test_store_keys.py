"""A plan's store keys as one column of digests: what is put in reads back, in 32 bytes a key."""

from __future__ import annotations

import hashlib
import tracemalloc

import pytest

from evalreg.store.keycolumn import KeyColumn


def key(i: int) -> str:
    return hashlib.sha256(str(i).encode()).hexdigest()


def test_keys_read_back_as_they_were_put_in() -> None:
    keys = [key(i) for i in range(10)]
    column = KeyColumn(keys[:3])
    column.extend(keys[3:9])
    column.extend(keys[9:])
    assert len(column) == 10
    assert list(column) == keys
    assert [column[i] for i in range(-10, 10)] == keys * 2
    assert column[2:7] == keys[2:7] and column[::3] == keys[::3] and column[8:2] == []
    assert column == keys and column == KeyColumn(keys) and column != keys[:9]
    with pytest.raises(IndexError):
        column[10]
    with pytest.raises(IndexError):
        column[-11]


def test_digests_round_trip_in_order() -> None:
    keys = [key(i) for i in range(5)]
    column = KeyColumn(keys)
    assert column.digests() == b"".join(bytes.fromhex(k) for k in keys)
    assert column.digests(1, 3) == bytes.fromhex(keys[1] + keys[2])
    copy = KeyColumn()
    copy.extend_digests(column.digests(0, 2))
    copy.extend_digests(column.digests(2))
    assert copy == column
    with pytest.raises(ValueError):
        copy.extend_digests(b"\0" * 31)


@pytest.mark.parametrize(
    "bad",
    [
        [key(1).upper()],
        [key(1)[:63]],
        [key(1) + "0"],
        ["g" * 64],
        [key(1)[:-1] + "\u0660"],
        [""],
        [key(1)[:63], key(2) + "0"],
    ],
)
def test_only_keys_spelled_as_request_key_spells_them_are_held(bad: list[str]) -> None:
    column = KeyColumn([key(0)])
    with pytest.raises(ValueError, match="64 lowercase hex digits"):
        column.extend(bad)
    assert list(column) == [key(0)]  # nothing added


def test_iterating_sees_keys_added_meanwhile() -> None:
    column = KeyColumn([key(0), key(1)])
    seen = []
    for k in column:
        seen.append(k)
        if len(column) < 4:
            column.extend([key(len(column))])
    assert seen == [key(i) for i in range(4)]


def test_a_key_takes_its_32_bytes() -> None:
    keys = [key(i) for i in range(50_000)]
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        column = KeyColumn()
        for start in range(0, len(keys), 10):
            column.extend(keys[start : start + 10])
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # A bytearray grows by an eighth, at most: 32 bytes a key and its slack.
    assert (held - before) / len(keys) < 40
    assert column[49_999] == keys[49_999]


def test_a_column_is_searched_and_cut_by_its_digests() -> None:
    keys = [key(i) for i in range(10)]
    column = KeyColumn(keys)
    assert column.part(2, 7) == keys[2:7] and column.part(7, 2) == []
    assert column.among({key(3), key(9), key(42)}) == [3, 9]
    assert column.among(set()) == []
    grown = KeyColumn(keys[:4])
    grown.extend_column(column.part(4, 10))
    assert grown == column
