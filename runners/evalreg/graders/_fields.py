"""Field graders: one field of a parsed JSON answer against the item's expected value."""

from __future__ import annotations

import math
from typing import Any

from evalreg.graders._match import match_verdict, same
from evalreg.graders.base import (
    GradeFn,
    GradingContext,
    Ungradable,
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

_ROUNDING = 1e-12
"""Relative slack on numeric tolerances, so a difference exactly at the bound passes."""


@register("field_exact", needs=needs_expected_field)
def field_exact(config: schema.FieldExactGrader, ctx: GradingContext) -> GradeFn:
    """Pass when the field equals the expected value as JSON (``true`` is not ``1``).

    Args:
        config: ``field`` is the dotted path into the answer (integers index lists);
            ``expected_field`` the key in the item's ``expected`` (absent: ``field``);
            ``ignore_case`` compares every string casefolded.
        ctx: not used.
    """

    field, key = config.field, config.expected_field or config.field
    fold = str.casefold if config.ignore_case else None

    def grade(parsed: Parsed, item: schema.Item) -> Verdict:
        got = answer(parsed, field)
        want = expected(item, key)
        return match_verdict(got, want, same(got, want, fold=fold))

    return grade


@register("field_numeric", needs=needs_expected_field)
def field_numeric(config: schema.FieldNumericGrader, ctx: GradingContext) -> GradeFn:
    """Pass when the field is a number within ``tolerance`` of the expected number.

    Numbers written as strings (``"42.5"``) count; booleans, NaN and infinities do not.

    Args:
        config: ``field`` and ``expected_field`` as for ``field_exact``; ``tolerance`` the
            largest allowed difference (default 0: equal); ``relative: true`` makes it a
            share of the expected value (0.05 is 5 %).
        ctx: not used.
    """

    def grade(parsed: Parsed, item: schema.Item) -> Verdict:
        key = config.expected_field or config.field
        got_value, want_value = answer(parsed, config.field), expected(item, key)
        return within(
            got_value,
            want_value,
            config.tolerance,
            relative=config.relative,
            what=(f"output field {config.field!r}", f"item's expected {key!r}"),
        )

    return grade


def within(
    got_value: Any, want_value: Any, tolerance: float, *, relative: bool, what: tuple[str, str]
) -> Verdict:
    """Pass when ``got_value`` is a number within ``tolerance`` of ``want_value`` (a share of
    it when ``relative``); ``what`` names the two sides for ``Ungradable``."""
    got = _number(got_value, what[0])
    want = _number(want_value, what[1])
    difference = abs(got - want)
    allowed = tolerance * abs(want) if relative else tolerance
    passed = difference <= allowed + _ROUNDING * max(abs(got), abs(want))
    detail = f"expected {show(want_value)}, got {show(got_value)}"
    if not passed:
        detail += f": off by {difference:.6g}, allowed {allowed:.6g}"
    return Verdict(passed, float(passed), detail)


@register("field_fuzzy", needs=needs_expected_field)
def field_fuzzy(config: schema.FieldFuzzyGrader, ctx: GradingContext) -> GradeFn:
    """Score the field's similarity to the expected text; pass at or above ``threshold``.

    Similarity is the normalised Indel similarity of the two string forms, in 0..1: what
    ``rapidfuzz.fuzz.ratio`` reports divided by 100. Case and whitespace count.

    Args:
        config: ``field`` and ``expected_field`` as for ``field_exact``; ``threshold`` the
            lowest passing similarity (default 0.8).
        ctx: not used.
    """
    from rapidfuzz.distance import Indel  # imported when a rubric uses it (start-up)

    def grade(parsed: Parsed, item: schema.Item) -> Verdict:
        got = as_text(answer(parsed, config.field))
        want = as_text(expected(item, config.expected_field or config.field))
        ratio = Indel.normalized_similarity(got, want)
        detail = f"similarity {ratio:.3f} to {show(want)} (threshold {config.threshold:g})"
        return Verdict(ratio >= config.threshold, ratio, detail)

    return grade


@register("field_set_f1", needs=needs_expected_field)
def field_set_f1(config: schema.FieldSetF1Grader, ctx: GradingContext) -> GradeFn:
    """Score the F1 of the field's set of strings against the expected set.

    Both sides must be lists; duplicates and order do not count, elements compare by their
    string form (case counts). Two empty sets score 1.

    Args:
        config: ``field`` and ``expected_field`` as for ``field_exact``; ``threshold`` the
            lowest passing F1 (default 1: the sets must be equal).
        ctx: not used.
    """

    def grade(parsed: Parsed, item: schema.Item) -> Verdict:
        key = config.expected_field or config.field
        got = _string_set(answer(parsed, config.field), f"output field {config.field!r}")
        want = _string_set(expected(item, key), f"item's expected {key!r}")
        f1 = f1_score(len(got & want), len(got), len(want))
        detail = f"F1 {f1:.3f}"
        missing, extra = sorted(want - got), sorted(got - want)
        if missing:
            detail += f"; missing {show(missing)}"
        if extra:
            detail += f"; extra {show(extra)}"
        return Verdict(f1 >= config.threshold, f1, detail)

    return grade


def f1_score(hits: int, made: int, wanted: int) -> float:
    """F1 of ``hits`` matches among ``made`` answers and ``wanted`` expected (1 when both are
    empty)."""
    return 2 * hits / (made + wanted) if made or wanted else 1.0


def _number(value: Any, what: str) -> float:
    """``value`` as a finite float; raises ``Ungradable`` naming ``what`` otherwise."""
    if isinstance(value, int | float | str) and not isinstance(value, bool):
        try:
            number = float(value)
        except (ValueError, OverflowError):
            pass
        else:
            if math.isfinite(number):
                return number
    raise Ungradable(f"{what} is not a number: {show(value)}")


def _string_set(value: Any, what: str) -> set[str]:
    """The string forms of a list's elements; raises ``Ungradable`` when it is no list."""
    if not isinstance(value, list):
        raise Ungradable(f"{what} is not a list: {show(value)}")
    return {as_text(v) for v in value}
