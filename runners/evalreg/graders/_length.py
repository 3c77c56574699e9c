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
    bounds = (
        ("chars", config.min_chars, config.max_chars),
        ("words", config.min_words, config.max_words),
        ("lines", None, config.max_lines),
    )

    def grade(parsed: Parsed, item: schema.Item) -> Verdict:
        text = as_text(answer(parsed, config.field))
        counts = {"chars": len(text), "words": len(text.split()), "lines": len(text.splitlines())}
        problems: list[str] = []
        for unit, low, high in bounds:
            if low is not None and counts[unit] < low:
                problems.append(f"{unit} {counts[unit]} < min {low}")
            if high is not None and counts[unit] > high:
                problems.append(f"{unit} {counts[unit]} > max {high}")
        if problems:
            return Verdict(False, 0.0, "; ".join(problems))
        return Verdict(True, 1.0, ", ".join(f"{unit} {n}" for unit, n in counts.items()))

    return grade
