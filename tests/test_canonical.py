"""Canonical JSON is ``json.dumps``'s bytes, whichever encoder writes them."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from evalreg.canonical import canonical_bytes


def reference(obj: Any) -> bytes:
    return json.dumps(
        obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")


def random_text(rng: random.Random) -> str:
    points = [rng.randrange(0, 0x80), rng.randrange(0x80, 0xD800), rng.randrange(0xE000, 0x110000)]
    return "".join(chr(rng.choice(points)) for _ in range(rng.randrange(4)))


def random_value(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.randrange(8 if depth < 3 else 5)
    if kind == 0:
        return rng.choice([None, True, False, 0, -1, 2**63, -(2**63) - 1, 2**64, 10**30])
    if kind == 1:
        return rng.random() * 10 ** rng.randint(-20, 20) * rng.choice([1, -1])
    if kind == 2:
        return round(rng.random(), 6)
    if kind in (3, 4):
        return random_text(rng)
    if kind == 5:
        return [random_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    if kind == 6:
        return tuple(random_value(rng, depth + 1) for _ in range(rng.randrange(3)))
    return {random_text(rng): random_value(rng, depth + 1) for _ in range(rng.randrange(5))}


def test_canonical_bytes_are_json_dumps_bytes_for_varied_values() -> None:
    rng = random.Random(11)
    for _ in range(20_000):
        value = random_value(rng)
        assert canonical_bytes(value) == reference(value), value


@pytest.mark.parametrize(
    "value",
    [
        {"small": 5e-05, "tiny": 1e-06, "big": 1e16, "zero": -0.0, "edge": 1e-4},
        {10: "integer keys sort as numbers", 9: "nine"},
        {"deep": [[[[[[[[[[]]]]]]]]]]},
    ],
)
def test_canonical_bytes_are_json_dumps_bytes_at_the_edges(value: Any) -> None:
    assert canonical_bytes(value) == reference(value)


@pytest.mark.parametrize("value", [float("nan"), {"a": float("inf")}, "\ud800"])
def test_canonical_bytes_refuse_what_json_refuses(value: Any) -> None:
    with pytest.raises(ValueError):
        reference(value)
    with pytest.raises(ValueError):
        canonical_bytes(value)
