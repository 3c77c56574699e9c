"""Graders: each turns a parsed output and its eval item into a verdict on one criterion.

Each grader registers under the ``type:`` name used in rubrics. ``llm_judge`` and
``human`` are graded from judge responses and human grade files, not here.
"""

from __future__ import annotations

# Imported for their @register side effect: each module adds its graders to the registry.
from evalreg.graders import (  # noqa: F401
    _fields,
    _json,
    _length,
    _match,
    _overlap,
    _pattern,
    _python,
    _refusal,
    _tools,
)
from evalreg.graders.base import (
    GRADER_VERSION,
    GradeFn,
    GradingContext,
    Verdict,
    build_grader,
    register,
)

__all__ = ["GRADER_VERSION", "GradeFn", "GradingContext", "Verdict", "build_grader", "register"]
