"""Exact and normalised matching of an answer against its expected value."""

from __future__ import annotations

import re
import string
import unicodedata
from collections.abc import Callable
from typing import Any

from evalreg.graders.base import (
    GradeFn,
    GradingContext,
    Verdict,
    answer,
    as_text,
    clip,
    expected,
    needs_expected_field,
    register,
    show,
)
from evalreg.graders.parsing import Parsed
from evalreg.registry import schema

_ASCII_PUNCTUATION = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


@register("exact", needs=needs_expected_field)
def exact(config: schema.ExactGrader, ctx: GradingContext) -> GradeFn:
    """Pass when the answer equals the expected value as JSON (``true`` is not ``1``).

    Args:
        config: ``field`` is the dotted path graded (absent: the whole answer; ``raw``: the
            output exactly as returned); ``value`` a literal expected value (absent: the
            item's ``expected[expected_field or field]``, or all of ``expected`` without a
            field); ``ignore_case`` compares every string, however deeply nested, folded
            as ``case`` says; ``match: any`` passes on one of a list of expected values;
            ``compare: prefix`` passes when the answer's text starts with the expected text;
            ``compare: components`` compares JSON as ``components`` does.
        ctx: not used.
    """
    fold = folder(config.case) if config.ignore_case else None

    def agrees(got: Any, want: Any) -> bool:
        if config.compare == "components":
            return components(got, want)
        if config.compare == "prefix":
            got_text, want_text = as_text(got), as_text(want)
            if fold is not None:
                got_text, want_text = fold(got_text), fold(want_text)
            return got_text.startswith(want_text)
        return same(got, want, fold=fold)

    def grade(parsed: Parsed, item: schema.Item) -> Verdict:
        got = parsed.text if config.raw else answer(parsed, config.field)
        want = (
            config.value
            if config.value is not None
            else expected(item, config.expected_field or config.field)
        )
        if config.match == "any":
            return any_verdict(got, alternatives(want), agrees)
        return match_verdict(got, want, agrees(got, want))

    return grade


@register("normalized", needs=needs_expected_field)
def normalized(config: schema.NormalizedGrader, ctx: GradingContext) -> GradeFn:
    """Pass when answer and expected value agree after normalisation (see ``normal_form``).

    Args:
        config: ``field``, ``value``, ``expected_field`` and ``match`` as for ``exact``;
            ``form`` picks the normalisation (``unicode`` or ``squad``); ``compare:
            overlap`` passes when either normal form contains the other.
        ctx: not used.
    """
    normal = normal_form if config.form == "unicode" else squad_form

    def agrees(got: Any, want: Any) -> bool:
        a, b = normal(got), normal(want)
        if config.compare == "overlap" and a and b:
            return a in b or b in a
        return a == b

    def grade(parsed: Parsed, item: schema.Item) -> Verdict:
        got = answer(parsed, config.field)
        want = (
            config.value
            if config.value is not None
            else expected(item, config.expected_field or config.field)
        )
        if config.match == "any":
            return any_verdict(got, alternatives(want), agrees)
        return match_verdict(got, want, agrees(got, want))

    return grade


def same(a: Any, b: Any, *, fold: Callable[[str], str] | None = None) -> bool:
    """JSON equality: booleans are not numbers, ``1`` equals ``1.0``, key order is ignored;
    with ``fold``, strings compare folded."""
    if type(a) is str and type(b) is str:  # most comparisons: decided without the rest
        return a == b if fold is None else fold(a) == fold(b)
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, str) and isinstance(b, str) and fold is not None:
        return fold(a) == fold(b)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y, fold=fold) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k], fold=fold) for k in a)
    return bool(a == b)


def components(got: Any, want: Any) -> bool:
    """JSON equal component by component, as OpenAI evals' ``json_match`` decides: a
    missing key or ``null`` on either side never matches (not even ``null``), objects
    agree on the union of their keys, lists in order and length, other values by Python
    equality (``true == 1``, ``1 == 1.0``)."""
    if got is None or want is None:
        return False
    if isinstance(got, dict):
        return isinstance(want, dict) and all(
            components(got.get(k), want.get(k)) for k in got.keys() | want.keys()
        )
    if isinstance(got, list):
        return (
            isinstance(want, list)
            and len(got) == len(want)
            and all(components(a, b) for a, b in zip(got, want, strict=True))
        )
    return bool(got == want)


def folder(case: schema.Case) -> Callable[[str], str]:
    """The case folding ``ignore_case`` applies: ``str.casefold`` or ``str.lower``."""
    return str.casefold if case == "casefold" else str.lower


def alternatives(want: Any) -> list[Any]:
    """The acceptable values of ``match: any``: a list's elements, or a lone value."""
    return want if isinstance(want, list) else [want]


def any_verdict(got: Any, wants: list[Any], agrees: Callable[[Any, Any], bool]) -> Verdict:
    """Pass when ``got`` agrees with one of ``wants``, quoting the first that does."""
    for want in wants:
        if agrees(got, want):
            return Verdict(True, 1.0, f"matched {show(want)}")
    listed = ", ".join(show(w) for w in wants)
    return Verdict(False, 0.0, clip(f"expected one of {listed}, got {show(got)}"))


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


def squad_form(value: Any) -> str:
    """Text as SQuAD's answer normalisation has it: lower-cased, ASCII punctuation and the
    articles *a*, *an*, *the* dropped, whitespace collapsed. Non-strings as sorted JSON."""
    text = value if isinstance(value, str) else as_text(value)
    kept = "".join(char for char in text.lower() if char not in _ASCII_PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", kept).split())


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
