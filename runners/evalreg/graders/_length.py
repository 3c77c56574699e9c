"""The length grader: bounds on an answer's characters, words and lines."""

from __future__ import annotations

from evalreg.graders.base import GradeFn, GradingContext, Verdict, answer, as_text, register
from evalreg.graders.parsing import Parsed
from evalreg.registry import schema


@register("length")
def length(config: schema.LengthGrader, ctx: GradingContext) -> GradeFn:
    """Pass when the answer's string form is within every given bound (bounds are inclusive).

    Words are runs of non-whitespace; lines are counted as ``str.splitlines`` does, so a
    trailing newline adds none and empty text has none.

    Args:
        config: ``field`` is the dotted path measured (absent: the whole answer, stripped
            text for the ``text`` parser); ``min_chars``, ``max_chars``, ``min_words``,
            ``max_words`` and ``max_lines`` the bounds, each optional.
        ctx: not used.
    """
    bounds = [
        (unit, low, high)
        for unit, low, high in (
            ("chars", config.min_chars, config.max_chars),
            ("words", config.min_words, config.max_words),
            ("lines", None, config.max_lines),
        )
        if low is not None or high is not None
    ]
    field = config.field

    def grade(parsed: Parsed, item: schema.Item) -> Verdict:
        text = as_text(answer(parsed, field))
        counts = {"chars": len(text), "words": len(text.split()), "lines": len(text.splitlines())}
        problems: list[str] = []
        for unit, low, high in bounds:  # only the bounds given
            if low is not None and counts[unit] < low:
                problems.append(f"{unit} {counts[unit]} < min {low}")
            if high is not None and counts[unit] > high:
                problems.append(f"{unit} {counts[unit]} > max {high}")
        if problems:
            return Verdict(False, 0.0, "; ".join(problems))
        return Verdict(
            True, 1.0, f"chars {counts['chars']}, words {counts['words']}, lines {counts['lines']}"
        )

    return grade
