"""Judge calibration: how well a judge's verdicts agree with human grades of the same outputs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from evalreg.human import alpha
from evalreg.metrics import Metric, SliceMetrics, by_slice
from evalreg.registry import schema

METRIC = "judge_human_agreement"


def pairs(records: Sequence[dict[str, Any]], rubric: schema.Rubric) -> list[tuple[bool, bool]]:
    """(judge passed, human majority passed) for every graded sample holding both."""
    links = [
        (c.grader.calibrates, c.id)
        for c in rubric.criteria
        if isinstance(c.grader, schema.HumanGrader) and c.grader.calibrates
    ]
    out = []
    for r in records:
        if r["error"] is not None:
            continue
        for judge_id, human_id in links:
            judge, human = r["criteria"].get(judge_id), r["criteria"].get(human_id)
            if judge is not None and human is not None:
                out.append((bool(judge["passed"]), bool(human["passed"])))
    return out


def agreement(records: Sequence[dict[str, Any]], rubric: schema.Rubric) -> Metric | None:
    """Krippendorff's alpha between judge and humans (nominal), None without human grades."""
    both = pairs(records, rubric)
    if not both:
        return None
    value = alpha([list(p) for p in both])
    return Metric(value if value is not None else 0.0, n=len(both))


def add_agreement(
    metrics: dict[str, SliceMetrics], records: Sequence[dict[str, Any]], rubric: schema.Rubric
) -> None:
    """Add ``judge_human_agreement`` to every slice that has calibrated samples."""
    for name, rs in by_slice(records).items():
        m = agreement(rs, rubric)
        if m is not None and name in metrics:
            metrics[name][METRIC] = m
