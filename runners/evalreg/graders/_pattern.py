"""Pattern graders: a regular expression, or text that must (or must not) appear."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from evalreg.graders._match import folder
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
from evalreg.text.utf16 import code_units, from_code_units


@register("regex")
def regex(config: schema.RegexGrader, ctx: GradingContext) -> GradeFn:
    """Pass when ``pattern`` is found (``re.search``) in the answer's string form.

    Args:
        config: ``pattern`` is the regular expression; ``field`` the dotted path searched
            (absent: the whole answer; non-strings are searched as sorted JSON);
            ``raw`` searches the output exactly as returned; ``ignore_case`` matches
            case-insensitively; ``ascii`` makes ``\\d``, ``\\w``, ``\\b`` and case folding
            ASCII-only; ``utf16`` reads the pattern and the text as UTF-16 code units, as
            JavaScript does; ``must_match: false`` inverts the grader, so it passes when the
            pattern is absent.
        ctx: not used.
    """
    flags = (re.IGNORECASE if config.ignore_case else 0) | (re.ASCII if config.ascii else 0)
    units = config.utf16
    pattern = re.compile(code_units(config.pattern) if units else config.pattern, flags)

    def grade(parsed: Parsed, item: schema.Item) -> Verdict:
        text = searched(parsed, config)
        found = pattern.search(code_units(text) if units else text)
        if found is None:
            if config.must_match:
                return Verdict(False, 0.0, f"no match in {show(text)}")
            return Verdict(True, 1.0, "no match, as required")
        # a match may start or end inside a surrogate pair: that half is shown escaped
        matched = show(from_code_units(found.group(0)) if units else found.group(0))
        if config.must_match:
            return Verdict(True, 1.0, f"matched {matched}")
        return Verdict(False, 0.0, f"matched {matched}, which must not appear")

    return grade


@register("contains", needs=needs_expected_field)
def contains(config: schema.ContainsGrader, ctx: GradingContext) -> GradeFn:
    """Pass when every needle (``match: any``: one needle) appears in the answer's string form.

    Args:
        config: ``value`` is the needle, or a list of needles; without it the needles are
            the item's ``expected[expected_field or field]`` (text or list); ``field`` is
            the dotted path searched (absent: the whole answer; ``raw``: the output exactly
            as returned); ``ignore_case`` (default true) compares folded as ``case`` says.
        ctx: not used.
    """
    fold = _folder(config)

    def grade(parsed: Parsed, item: schema.Item) -> Verdict:
        text, needles = _haystack_and_needles(config, parsed, item)
        missing = [n for n in needles if fold(n) not in text]
        if config.match == "any":
            if len(missing) < len(needles):
                found = next(n for n in needles if n not in missing)
                return Verdict(True, 1.0, f"contains {show(found)}")
            return Verdict(False, 0.0, clip("missing all of " + ", ".join(map(show, needles))))
        if missing:
            return Verdict(False, 0.0, "missing " + ", ".join(show(n) for n in missing))
        return Verdict(True, 1.0, "contains " + ", ".join(show(n) for n in needles))

    return grade


@register("not_contains", needs=needs_expected_field)
def not_contains(config: schema.ContainsGrader, ctx: GradingContext) -> GradeFn:
    """Pass when no needle appears in the answer's string form (``match: all``: when not
    every needle does).

    Args:
        config: ``value``, ``expected_field``, ``field``, ``raw``, ``ignore_case`` and
            ``case`` as for ``contains``.
        ctx: not used.
    """
    fold = _folder(config)

    def grade(parsed: Parsed, item: schema.Item) -> Verdict:
        text, needles = _haystack_and_needles(config, parsed, item)
        present = [n for n in needles if fold(n) in text]
        if config.match == "all":
            if len(present) < len(needles):
                absent = next(n for n in needles if n not in present)
                return Verdict(True, 1.0, f"{show(absent)} is absent")
            return Verdict(
                False, 0.0, clip("contains every one of " + ", ".join(map(show, present)))
            )
        if present:
            return Verdict(False, 0.0, "contains " + ", ".join(show(n) for n in present))
        return Verdict(True, 1.0, f"none of {len(needles)} present")

    return grade


def _haystack_and_needles(
    config: schema.ContainsGrader, parsed: Parsed, item: schema.Item
) -> tuple[str, list[str]]:
    """The searched text (folded as configured) and the needles, in their given order."""
    text = _folder(config)(searched(parsed, config))
    source: Any = (
        config.value
        if config.value is not None
        else expected(item, config.expected_field or config.field)
    )
    needles = source if isinstance(source, list) else [source]
    return text, [as_text(n) for n in needles]


def searched(
    parsed: Parsed,
    config: schema.ContainsGrader
    | schema.RegexGrader
    | schema.LevenshteinGrader
    | schema.RougeGrader
    | schema.BleuGrader,
) -> str:
    """The text a pattern or overlap grader reads: the raw output, or the answer's string
    form."""
    return parsed.text if config.raw else as_text(answer(parsed, config.field))


def _folder(config: schema.ContainsGrader) -> Callable[[str], str]:
    return folder(config.case) if config.ignore_case else _same_text


def _same_text(text: str) -> str:
    return text
