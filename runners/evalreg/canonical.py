"""Canonical JSON: the one serialisation used for hashing, request bodies and result files."""

from __future__ import annotations

import hashlib
import json
import math
import re
import sys
from typing import Any

import orjson

_ENCODE = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
).encode
_SCALARS = frozenset({str, int, bool, type(None)})


def canonical_bytes(obj: Any) -> bytes:
    """Sorted keys, no whitespace, UTF-8, no NaN: equal values give equal bytes.

    The bytes are ``json.dumps``'s. orjson writes them several times faster whenever it
    writes the same: for plain JSON values whose floats ``json`` writes without an
    exponent (see ``_plain``); everything else, and whatever orjson declines (integers
    beyond 64 bits, non-string keys, very deep nesting), is left to ``json``.
    """
    try:
        if _plain(obj):
            return orjson.dumps(obj, option=orjson.OPT_SORT_KEYS)
    except (TypeError, RecursionError):  # orjson.JSONEncodeError is a TypeError
        pass
    return _ENCODE(obj).encode("utf-8")


def _plain(value: Any) -> bool:
    """Whether ``value`` holds only dicts, lists, strings, integers, booleans, None and
    floats that are 0 or in [1e-4, 1e16) in magnitude (the exact types, no subclasses).

    Strings and integers come out of orjson and ``json`` alike; so do floats in that
    range (both write the shortest round-trip digits, with no exponent). Outside it
    ``json`` writes ``1e-05`` where orjson writes ``0.00001``.
    """
    kind = type(value)
    # Containers first, then scalars, and the types compared one by one rather than looked
    # up in a set: this runs for every request body and item hashed, and takes a third to
    # a half less time than with the set lookup first.
    if kind is dict:
        values = value.values()
    elif kind is list:
        values = value
    elif kind is float:
        return bool(value == 0.0 or 1e-4 <= abs(value) < 1e16)
    else:
        return kind in _SCALARS
    # A loop, not all(...): the generator costs a third of the time, once per value. A
    # float is checked here rather than in a call of its own (records hold several).
    for v in values:
        kind = type(v)
        if kind is str or kind is int or v is None or kind is bool:
            continue
        if kind is float:
            if not (v == 0.0 or 1e-4 <= abs(v) < 1e16):
                return False
        elif kind is dict or kind is list:
            if not _plain(v):
                return False
        else:
            return False
    return True


def digest(obj: Any) -> str:
    """sha256 hex of ``obj``'s canonical JSON."""
    return hashlib.sha256(canonical_bytes(obj)).hexdigest()


def loads_finite(text: str) -> Any:
    """``json.loads(text)``, refusing with a ``ValueError`` what canonical JSON cannot write
    back: ``NaN`` and infinities (also a number beyond a double's range, which reads as
    one), and integers longer than Python converts.

    orjson reads it several times faster whenever it reads the same: text with no run of
    19 digits or more (orjson reads an integer beyond 64 bits as a float) that orjson
    accepts (it refuses ``NaN``, infinities, a number beyond a double's range and a lone
    surrogate escape, which ``json`` reads). Everything else is left to ``json``, whose
    answer or error it is. ``tests/test_canonical.py`` holds the two to the same values.

    Text nested more than :data:`MAX_NESTING` deep is refused (``NestedTooDeep``, a
    ``JSONDecodeError``, where it goes too deep), whichever reader would read it: how deep
    ``json`` goes depends on how deep the caller's stack already is, and what it reads must
    still be walked and written back by code that recurses as it does."""
    if (at := nesting_beyond(text, MAX_NESTING)) is not None:
        raise NestedTooDeep(f"nested more than {MAX_NESTING} deep", text, at)
    if _LONG_DIGITS.search(text) is None:
        try:
            return orjson.loads(text)
        except orjson.JSONDecodeError:
            pass
    return _FINITE_DECODE(text)


_LONG_DIGITS = re.compile(r"\d{19}")

MAX_NESTING = 512
"""How deep JSON read by :func:`loads_finite` may nest lists and objects."""


class NestedTooDeep(json.JSONDecodeError):
    """JSON nested more than :data:`MAX_NESTING` deep (``pos``: where it goes too deep)."""


_STRING_OR_BRACKET = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]', re.DOTALL)


def nesting_beyond(text: str, limit: int) -> int | None:
    """Where JSON ``text`` opens a list or object more than ``limit`` deep (an offset into
    ``text``), or None (brackets inside strings are not counted). Read from the text, so it
    costs no recursion however deep the text goes, and most text is passed over by counting
    its brackets: going deeper than ``limit`` takes more than ``limit`` of them."""
    if len(text) <= limit or text.count("[") + text.count("{") <= limit:
        return None
    depth = 0
    for match in _STRING_OR_BRACKET.finditer(text):
        char = match.group()
        if char in "[{":
            depth += 1
            if depth > limit:
                return match.start()
        elif char in "]}":
            depth -= 1
    return None


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a finite number")


def _finite_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise ValueError(f"{text} is beyond the range of a double")
    return value


def _int(text: str) -> int:
    digits = len(text.lstrip("-"))
    if digits > sys.get_int_max_str_digits() > 0:
        raise ValueError(
            f"an integer of {digits:,} digits (at most {sys.get_int_max_str_digits():,} are read)"
        )
    return int(text)


_FINITE_DECODE = json.JSONDecoder(
    parse_constant=_refuse_constant, parse_float=_finite_float, parse_int=_int
).decode
