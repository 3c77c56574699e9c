"""Pattern graders: a regular expression, or text that must (or must not) appear."""

from __future__ import annotations

import re
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


@register("regex")
def regex(config: schema.RegexGrader, ctx: GradingContext) -> GradeFn:
    """Pass when ``pattern`` is found (``re.search``) in the answer's string form.

    Args:
        config: ``pattern`` is the regular expression; ``field`` the dotted path searched
            (absent: the whole answer; non-strings are searched as sorted JSON);
            ``ignore_case`` matches case-insensitively; ``must_match: false`` inverts the
            grader, so it passes when the pattern is absent.
        ctx: not used.
    """
    pattern = re.compile(config.pattern, re.IGNORECASE if config.ignore_case else 0)

    def grade(parsed: Parsed, item: schema.Item) -> Verdict:
        text = as_text(answer(parsed, config.field))
        found = pattern.search(text)
        if config.must_match:
            if found is None:
                return Verdict(False, 0.0, f"no match in {show(text)}")
            return Verdict(True, 1.0, f"matched {show(found.group(0))}")
        if found is None:
            return Verdict(True, 1.0, "no match, as required")
        return Verdict(False, 0.0, f"matched {show(found.group(0))}, which must not appear")

    return grade


@register("contains", needs=needs_expected_field)
def contains(config: schema.ContainsGrader, ctx: GradingContext) -> GradeFn:
    """Pass when every needle appears in the answer's string form.

    Args:
        config: ``value`` is the needle, or a list of needles; without it the needles are
            the item's ``expected[expected_field or field]`` (text or list); ``field`` is
            the dotted path searched (absent: the whole answer); ``ignore_case`` (default
            true) compares casefolded.
        ctx: not used.
    """

    def grade(parsed: Parsed, item: schema.Item) -> Verdict:
        text, needles = _haystack_and_needles(config, parsed, item)
        missing = [n for n in needles if _fold(n, config) not in text]
        if missing:
            return Verdict(False, 0.0, "missing " + ", ".join(show(n) for n in missing))
        return Verdict(True, 1.0, "contains " + ", ".join(show(n) for n in needles))

    return grade


@register("not_contains", needs=needs_expected_field)
def not_contains(config: schema.ContainsGrader, ctx: GradingContext) -> GradeFn:
    """Pass when no needle appears in the answer's string form.

    Args:
        config: ``value``, ``expected_field``, ``field`` and ``ignore_case`` as for
            ``contains``.
        ctx: not used.
    """

    def grade(parsed: Parsed, item: schema.Item) -> Verdict:
        text, needles = _haystack_and_needles(config, parsed, item)
        present = [n for n in needles if _fold(n, config) in text]
        if present:
            return Verdict(False, 0.0, "contains " + ", ".join(show(n) for n in present))
        return Verdict(True, 1.0, f"none of {len(needles)} present")

    return grade


def _haystack_and_needles(
    config: schema.ContainsGrader, parsed: Parsed, item: schema.Item
) -> tuple[str, list[str]]:
    """The searched text (folded as configured) and the needles, in their given order."""
    text = _fold(as_text(answer(parsed, config.field)), config)
    source: Any = (
        config.value
        if config.value is not None
        else expected(item, config.expected_field or config.field)
    )
    needles = source if isinstance(source, list) else [source]
    return text, [as_text(n) for n in needles]


def _fold(text: str, config: schema.ContainsGrader) -> str:
    return text.casefold() if config.ignore_case else text
