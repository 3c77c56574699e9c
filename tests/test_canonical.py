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


# --- reading: loads_finite is the standard library's reading, whichever reader reads it


def reference_loads(text: str) -> Any:
    """What ``loads_finite`` answers, read by ``json`` alone: a value, or the error's type."""
    from evalreg import canonical

    try:
        return ("value", repr(canonical._FINITE_DECODE(text)))
    except (ValueError, RecursionError) as exc:
        return ("error", type(exc).__name__)


def read(text: str) -> Any:
    from evalreg.canonical import loads_finite

    try:
        # repr: 0.0 and -0.0, 1 and 1.0, True and 1 are told apart.
        return ("value", repr(loads_finite(text)))
    except (ValueError, RecursionError) as exc:
        return ("error", type(exc).__name__)


NUMBERS = [
    *("0", "-0", "-0.0", "0.0", "1", "-1", "1E5", "1e+5", "1e-5", "2.5E-05", "01", "1.", ".5"),
    *("9223372036854775807", "-9223372036854775808", "18446744073709551615"),
    *("18446744073709551616", "123456789012345678901234", "1" * 400, "1" * 5000),
    *("1e308", "1.7976931348623157e308", "1.7976931348623159e308", "1e309", "-1e400"),
    *("1e-400", "5e-324", "2.4703282292062328e-324", "4.9406564584124654e-324"),
    *("0.1", "0.30000000000000004", "1.0000000000000002", "9007199254740993"),
    *("9007199254740993.0", "0.12345678901234567890", "123456789.123456789e-3"),
    *("NaN", "-NaN", "Infinity", "-Infinity", "+1", "0x10", "1_000", "١٢٣"),
]
TEXTS = [
    *("{}", "[]", '""', "null", "true", "false", " \t\n{ } \r\n", "", " ", "{", "[1,]"),
    *('{"a":1,"a":2}', '{"a":1,"b":{"a":[1,2,{"c":null}]}}', '"\\ud800"', '"\\udc00\\ud800"'),
    *('"\\ud83d\\ude00"', '"\\u0000"', '"\x01"', '"\x7f"', '"\\/"', '"a\\qb"', "\ufeff{}"),
    *('{"a":1}x', '{"a":1} {"b":2}', "[" * 512 + "]" * 512, "[" * 200 + "]" * 200),
    *("{1:2}", "{'a':1}", '{"a" 1}', "[1 2]", '"\ud800"', '{"\\u00e9":"é"}'),
]


@pytest.mark.parametrize("text", [*NUMBERS, *TEXTS, *(f"[{n}]" for n in NUMBERS)])
def test_loads_finite_reads_what_json_reads_at_the_edges(text: str) -> None:
    assert read(text) == reference_loads(text)


def test_loads_finite_reads_what_json_reads_for_varied_documents() -> None:
    rng = random.Random(7)
    for _ in range(3000):
        value = random_value(rng)
        try:
            text = json.dumps(value, ensure_ascii=rng.random() < 0.5, allow_nan=False)
        except ValueError:
            continue
        # Floats written every way: repr, fixed, exponent, more digits than a double holds.
        number = float(f"{rng.random():.17f}e{rng.randint(-330, 310)}")
        written = rng.choice([repr(number), f"{number:.{rng.randint(0, 25)}e}", f"{number:f}"])
        for case in (text, written, f'{{"x":{written},"y":{text}}}'):
            assert read(case) == reference_loads(case), case
            # One character cut or changed: an error, or a value, the same either way.
            if case:
                at = rng.randrange(len(case))
                for broken in (case[:at], case[:at] + rng.choice('{}[]",:0e-.\\ ') + case[at:]):
                    assert read(broken) == reference_loads(broken), broken


@pytest.mark.parametrize("depth", [513, 990, 1023, 1025, 5000])
def test_loads_finite_refuses_nesting_past_its_bound_wherever_it_is_called(depth: int) -> None:
    """``json`` stops where the interpreter's stack does (lower the deeper its caller is),
    orjson at 1,024: past :data:`MAX_NESTING` both are refused, at the bracket that goes
    too deep, however deep the stack already is."""
    from evalreg.canonical import MAX_NESTING, loads_finite

    assert MAX_NESTING == 512
    text = '{"a":' * (depth // 2) + "[" * (depth - depth // 2) + "]" * (depth - depth // 2)
    text += "}" * (depth // 2)

    def at_stack_depth(frames: int) -> Any:
        if frames:
            return at_stack_depth(frames - 1)
        return loads_finite(text)

    for frames in (0, 400, 800):
        with pytest.raises(json.JSONDecodeError, match="nested more than 512 deep") as caught:
            at_stack_depth(frames)
        opened = [i for i, char in enumerate(text) if char in "[{"]
        assert caught.value.pos == opened[MAX_NESTING]


def test_loads_finite_reads_512_deep_and_does_not_count_brackets_in_strings() -> None:
    from evalreg.canonical import loads_finite

    inner = '[[[{{{"[[['  # brackets, and an escaped quote, inside a string
    value = loads_finite("[" * 512 + json.dumps(inner) + "]" * 512)
    for _ in range(512):
        value = value[0]
    assert value == inner
    many = "[" + ",".join(['"[{"'] * 3000 + ["[" * 100 + "]" * 100] * 20) + "]"
    assert len(loads_finite(many)) == 3020


@pytest.mark.parametrize("limit", [1, 2, 7])
def test_nesting_beyond_is_where_a_walk_of_the_value_first_goes_too_deep(limit: int) -> None:
    """Against the parsed value's own depth, on generated documents with brackets, escaped
    quotes and backslashes in their strings."""
    from evalreg.canonical import nesting_beyond

    def depth(value: Any) -> int:
        children = value.values() if isinstance(value, dict) else value
        if not isinstance(value, (dict, list)):
            return 0
        return 1 + max((depth(c) for c in children), default=0)

    rng = random.Random(limit)
    strings = ["[", "]{", '\\"[', "\\", "x"]

    def make(level: int) -> Any:
        if level == 0 or rng.random() < 0.3:
            return rng.choice(strings)
        if rng.random() < 0.5:
            return [make(level - 1) for _ in range(rng.randint(0, 2))]
        return {rng.choice(strings): make(level - 1) for _ in range(rng.randint(0, 2))}

    for _ in range(300):
        text = json.dumps(make(rng.randint(0, 2 * limit + 3)))
        at = nesting_beyond(text, limit)
        assert (at is not None) == (depth(json.loads(text)) > limit), text
        if at is not None:  # the bracket that opens level limit + 1, and no earlier one
            assert text[at] in "[{" and nesting_beyond(text[:at], limit) is None
            assert nesting_beyond(text[: at + 1] + "]" * (limit + 1), limit) == at


def test_loads_finite_leaves_long_integers_to_json() -> None:
    from evalreg.canonical import loads_finite

    assert loads_finite('{"id":123456789012345678901234}') == {"id": 123456789012345678901234}
    assert type(loads_finite("18446744073709551616")) is int
