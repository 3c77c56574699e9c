"""The python grader: a function in the repository decides, for checks no built-in grader makes."""

from __future__ import annotations

import copy
import math
from typing import Any

from evalreg.graders.base import GradeFn, GradingContext, Verdict, clip, register, show
from evalreg.graders.parsing import Parsed
from evalreg.providers.base import ProviderError
from evalreg.providers.python import load_callable
from evalreg.registry import schema


@register("python")
def python(config: schema.PythonGrader, ctx: GradingContext) -> GradeFn:
    """Call ``path/to/file.py:function`` from the repository on each output.

    The function receives one dict, a fresh deep copy each call::

        {"text": raw output, "value": parsed answer (None if it did not parse),
         "expected": item.expected, "input": item.input, "params": config params}

    and returns one of: a bool (score 1 or 0); a number in 0..1 (passes at 0.5 or more);
    or a dict ``{"passed": bool, "score": number in 0..1 (default 1 or 0), "detail": str}``.
    Anything else fails the criterion saying what came back, and so does an exception:
    ``grader raised ValueError: ...``.

    Args:
        config: ``callable`` is the function, relative to the repository root; ``params``
            are passed through as given (``files`` only feed the cell's fingerprint).
        ctx: ``root`` is the repository root the function is imported from.

    Raises:
        ValueError: there is no root, or the function cannot be imported.
    """
    if ctx.root is None:
        raise ValueError(f"python grader {config.callable}: no repository root to import from")
    try:
        function = load_callable(ctx.root, config.callable)
    except ProviderError as exc:
        raise ValueError(f"python grader {config.callable}: {exc}") from None

    def grade(parsed: Parsed, item: schema.Item) -> Verdict:
        payload = {
            "text": parsed.text,
            "value": parsed.value,
            "expected": item.expected,
            "input": item.input,
            "params": config.params,
        }
        try:
            result = function(copy.deepcopy(payload))
        except (Exception, SystemExit) as exc:  # the team's code: sys.exit is its failure too
            return Verdict(False, 0.0, clip(f"grader raised {type(exc).__name__}: {exc}"))
        return _verdict(result)

    return grade


def _verdict(result: Any) -> Verdict:
    """The verdict a grader function's return value stands for."""
    if isinstance(result, bool):
        return Verdict(result, float(result), f"returned {str(result).lower()}")
    if isinstance(result, dict):
        passed = result.get("passed")
        if not isinstance(passed, bool):
            return Verdict(False, 0.0, "grader returned a dict without a true/false 'passed'")
        score = _score(result.get("score", float(passed)))
        if score is None:
            return Verdict(False, 0.0, f"grader returned score {show(result['score'])}, not 0..1")
        return Verdict(passed, score, clip(str(result.get("detail", ""))))
    score = _score(result)
    if score is None:
        return Verdict(
            False, 0.0, f"grader returned {show(result)}, not a bool, a score in 0..1 or a dict"
        )
    return Verdict(score >= 0.5, score, f"score {score:.3f}")


def _score(value: Any) -> float | None:
    """``value`` as a score when it is a number in 0..1 (not a bool), else ``None``."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        score = float(value)
        if math.isfinite(score) and 0.0 <= score <= 1.0:
            return score
    return None
