"""An items file's line is the json encoder's bytes for every record, of the shape grading
builds or not."""

from __future__ import annotations

import copy
import enum
import json
from typing import Any, cast

import pytest

from evalreg.results.records import ItemRecord, item_line


class Tag(enum.StrEnum):
    EDGE = "edge"


def reference(record: Any) -> bytes:
    return json.dumps(record, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def graded() -> dict[str, Any]:
    """A record as ``CellGrader.record`` builds one."""
    return {
        "item": "i-1",
        "content": "0123456789abcdef",
        "sample": 0,
        "tags": ["common", "long"],
        "cluster": None,
        "key": "ab" * 32,
        "error": None,
        "criteria": {
            "a": {"passed": True, "score": 1.0, "detail": "valid"},
            "b": {"passed": False, "score": 0.333333, "detail": "expected 'x', got 'y'"},
        },
        "level": "acceptable",
        "score": 0.666667,
        "latency_ms": 300,
        "tokens": {"input": 20, "output": 9, "reasoning": 0},
        "cost_micro_usd": 8,
    }


EDGES: list[Any] = [
    1e-05,  # json writes 1e-05, orjson 0.00001
    -3e-7,
    1e16,
    1.5e300,
    float("nan"),  # the json encoder writes NaN
    2**64,  # beyond what orjson writes
    -(2**63) - 1,
    True,
    "",
    Tag.EDGE,
    (1, 2.5e-6),
    [1e-9],
    {"nested": 1e-12},
    None,
]

PLACES: list[tuple[str, ...]] = [
    ("score",),
    ("sample",),
    ("latency_ms",),
    ("cost_micro_usd",),
    ("cluster",),
    ("error",),
    ("level",),
    ("tags", "0"),
    ("tokens", "input"),
    ("criteria", "a", "score"),
    ("criteria", "b", "passed"),
    ("criteria", "b", "detail"),
    ("criteria", "b", "extra"),
    ("judge_cost_micro_usd",),
]


def with_value(place: tuple[str, ...], value: Any) -> dict[str, Any]:
    record = graded()
    holder: Any = record
    for part in place[:-1]:
        holder = holder[part]
    if isinstance(holder, list):
        holder[int(place[-1])] = value
    else:
        holder[place[-1]] = value
    return record


def test_a_graded_record_is_the_json_encoders_line() -> None:
    record = graded()
    assert item_line(cast(ItemRecord, record)) == reference(record)


@pytest.mark.parametrize("place", PLACES, ids=".".join)
def test_any_value_anywhere_gives_the_json_encoders_line(place: tuple[str, ...]) -> None:
    for value in EDGES:
        record = with_value(place, value)
        before = copy.deepcopy(record)
        assert item_line(cast(ItemRecord, record)) == reference(record), (place, value)
        assert repr(record) == repr(before)  # nan != nan: compared by repr


def test_a_record_without_a_field_gives_the_json_encoders_line() -> None:
    for field in graded():
        record = graded()
        del record[field]
        record["other"] = 1e-5  # as many fields as a graded record has
        assert item_line(cast(ItemRecord, record)) == reference(record), field
