"""Exact and normalised matching of an answer against its expected value."""

from __future__ import annotations

import unicodedata
from typing import Any

from evalreg.graders.base import (
    GradeFn,
    GradingContext,
    Verdict,
    answer,
    as_text,
    expected,
    needs_expected_field,
    register,
    show,
)
from evalreg.graders.parsing import Parsed
from evalreg.registry import schema


@register("exact", needs=needs_expected_field)
def exact(config: schema.ExactGrader, ctx: GradingContext) -> GradeFn:
    """Pass when the answer equals the expected value as JSON (``true`` is not ``1``).

    Args:
        config: ``field`` is the dotted path graded (absent: the whole answer); ``value`` a
            literal expected value (absent: the item's ``expected[expected_field or
            field]``, or all of ``expected`` without a field); ``ignore_case`` compares
            every string, however deeply nested, casefolded.
        ctx: not used.
    """

    def grade(parsed: Parsed, item: schema.Item) -> Verdict:
        got = answer(parsed, config.field)
        want = (
            config.value
            if config.value is not None
            else expected(item, config.expected_field or config.field)
        )
        return match_verdict(got, want, same(got, want, ignore_case=config.ignore_case))

    return grade


@register("normalized", needs=needs_expected_field)
def normalized(config: schema.NormalizedGrader, ctx: GradingContext) -> GradeFn:
    """Pass when answer and expected value agree after normalisation (see ``normal_form``).

    Args:
        config: ``field``, ``value`` and ``expected_field`` as for ``exact``.
        ctx: not used.
    """

    def grade(parsed: Parsed, item: schema.Item) -> Verdict:
        got = answer(parsed, config.field)
        want = (
            config.value
            if config.value is not None
            else expected(item, config.expected_field or config.field)
        )
        return match_verdict(got, want, normal_form(got) == normal_form(want))

    return grade


def same(a: Any, b: Any, *, ignore_case: bool = False) -> bool:
    """JSON equality: booleans are not numbers, ``1`` equals ``1.0``, key order is ignored."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, str) and isinstance(b, str) and ignore_case:
        return a.casefold() == b.casefold()
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(
            same(x, y, ignore_case=ignore_case) for x, y in zip(a, b, strict=True)
        )
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k], ignore_case=ignore_case) for k in a)
    return bool(a == b)


def normal_form(value: Any) -> str:
    """Text as compared by ``normalized``: NFKC, casefolded, no punctuation, single spaces.

    A non-string compares as its sorted JSON, with every string inside it normalised.
    """
    if isinstance(value, str):
        return normalize_text(value)
    return as_text(_normalize_strings(value))


def normalize_text(text: str) -> str:
    """NFKC and casefold, drop Unicode punctuation (categories P*), collapse whitespace."""
    folded = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", text).casefold())
    kept = "".join(char for char in folded if not unicodedata.category(char).startswith("P"))
    return " ".join(kept.split())


def match_verdict(got: Any, want: Any, passed: bool) -> Verdict:
    """The verdict of a comparison, quoting the expected value (and the answer when it differs)."""
    if passed:
        return Verdict(True, 1.0, f"matched {show(want)}")
    return Verdict(False, 0.0, f"expected {show(want)}, got {show(got)}")


def _normalize_strings(value: Any) -> Any:
    if isinstance(value, str):
        return normalize_text(value)
    if isinstance(value, list):
        return [_normalize_strings(v) for v in value]
    if isinstance(value, dict):
        return {k: _normalize_strings(v) for k, v in value.items()}
    return value
