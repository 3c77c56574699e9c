"""Judge calibration: how well a judge's verdicts agree with human grades of the same outputs."""

from __future__ import annotations

import numpy as np

from evalreg.graders.human import alpha
from evalreg.metrics import Metric, SliceMetrics
from evalreg.registry import schema
from evalreg.results.outcomes import ABSENT, PASSED, Mask, Outcomes

METRIC = "judge_human_agreement"


def pairs(outcomes: Outcomes, rubric: schema.Rubric, samples: Mask) -> list[tuple[bool, bool]]:
    """(judge passed, human majority passed) for every graded sample in ``samples`` holding
    both, in sample order."""
    links = [
        (c.grader.calibrates, c.id)
        for c in rubric.criteria
        if isinstance(c.grader, schema.HumanGrader) and c.grader.calibrates
    ]
    codes = [
        (outcomes.criteria[judge_id], outcomes.criteria[human_id])
        for judge_id, human_id in links
        if judge_id in outcomes.criteria and human_id in outcomes.criteria
    ]
    out = []
    for row in np.flatnonzero(samples & outcomes.graded):
        for judge, human in codes:
            if judge[row] != ABSENT and human[row] != ABSENT:
                out.append((bool(judge[row] == PASSED), bool(human[row] == PASSED)))
    return out


def agreement(outcomes: Outcomes, rubric: schema.Rubric, samples: Mask) -> Metric | None:
    """Krippendorff's alpha between judge and humans (nominal), None without human grades."""
    both = pairs(outcomes, rubric, samples)
    if not both:
        return None
    value = alpha([list(p) for p in both])
    return Metric(value if value is not None else 0.0, n=len(both))


def add_agreement(
    metrics: dict[str, SliceMetrics], outcomes: Outcomes, rubric: schema.Rubric
) -> None:
    """Add ``judge_human_agreement`` to every slice that has calibrated samples."""
    if not any(isinstance(c.grader, schema.HumanGrader) for c in rubric.criteria):
        return
    for name, items in outcomes.slices().items():
        m = agreement(outcomes, rubric, items[outcomes.item])
        if m is not None and name in metrics:
            metrics[name][METRIC] = m
