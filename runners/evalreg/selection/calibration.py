"""Judge calibration: how well a judge's verdicts agree with human grades of the same outputs.

Agreement is measured on the graded overlap: the samples both the judge and the human
majority graded (a response with too few human grades is not graded, and is left out).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from evalreg.graders.human import ONE_GRADE, alpha, cohen_kappa, one_grade
from evalreg.metrics import COVERAGE, Metric, SliceMetrics
from evalreg.registry import schema
from evalreg.results.outcomes import FAILED, PASSED, Codes, Mask, Outcomes

METRIC = "judge_human_agreement"
KAPPA = "judge_human_kappa"


@dataclass(frozen=True)
class Calibration:
    """One judge criterion checked by the human criterion that ``calibrates`` it."""

    judge: str
    human: str
    n: int
    """Samples graded by both (the pairs the agreement is computed on)."""
    alpha: float | None
    """Krippendorff's alpha (nominal); None with fewer than two pairs."""
    kappa: float | None
    """Cohen's kappa; None when undefined (see ``human.cohen_kappa``)."""
    coverage: Metric | None
    """The human criterion's coverage (graded / applicable samples)."""
    undefined: str = ""
    """:data:`human.ONE_GRADE` when both statistics are undefined for that reason."""


def _links(rubric: schema.Rubric) -> list[tuple[str, str]]:
    """(judge criterion, human criterion) for every human criterion that calibrates one."""
    return [
        (c.grader.calibrates, c.id)
        for c in rubric.criteria
        if isinstance(c.grader, schema.HumanGrader) and c.grader.calibrates
    ]


def _graded(codes: Codes) -> Mask:
    graded: Mask = (codes == PASSED) | (codes == FAILED)
    return graded


def _pairs(judge: Codes, human: Codes, rows: Mask) -> list[tuple[bool, bool]]:
    both = np.flatnonzero(rows & _graded(judge) & _graded(human))
    return [(bool(judge[r] == PASSED), bool(human[r] == PASSED)) for r in both]


def pairs(outcomes: Outcomes, rubric: schema.Rubric, samples: Mask) -> list[tuple[bool, bool]]:
    """(judge passed, human majority passed) for every sample in ``samples`` that both
    graded, link by link in the rubric's order, samples in order within a link."""
    rows = samples & outcomes.graded
    out = []
    for judge_id, human_id in _links(rubric):
        judge, human = outcomes.criteria.get(judge_id), outcomes.criteria.get(human_id)
        if judge is not None and human is not None:
            out += _pairs(judge, human, rows)
    return out


def calibrations(
    outcomes: Outcomes, rubric: schema.Rubric, metrics: SliceMetrics
) -> list[Calibration]:
    """Per judge criterion with a calibrating human criterion that graded some of the same
    samples, its agreement over the whole cell (``metrics``: the cell's slice ``all``)."""
    out = []
    for judge_id, human_id in _links(rubric):
        judge, human = outcomes.criteria.get(judge_id), outcomes.criteria.get(human_id)
        if judge is None or human is None:
            continue
        both = _pairs(judge, human, outcomes.graded)
        if both:
            out.append(
                Calibration(
                    judge_id,
                    human_id,
                    len(both),
                    alpha([list(p) for p in both]),
                    cohen_kappa(both),
                    metrics.get(f"{COVERAGE}{human_id}"),
                    ONE_GRADE if one_grade([list(p) for p in both]) else "",
                )
            )
    return out


def add_agreement(
    metrics: dict[str, SliceMetrics], outcomes: Outcomes, rubric: schema.Rubric
) -> None:
    """Add ``judge_human_agreement`` (Krippendorff's alpha; 0 with fewer than two pairs)
    and ``judge_human_kappa`` (where it is defined) to every slice with calibrated samples,
    ``n`` the pairs they are computed on."""
    if not any(isinstance(c.grader, schema.HumanGrader) for c in rubric.criteria):
        return
    for name, items in outcomes.slices().items():
        both = pairs(outcomes, rubric, items[outcomes.item])
        if not both or name not in metrics:
            continue
        if one_grade([list(p) for p in both]):
            # Undefined, not perfect: a gate on either does not pass, and says why.
            for metric in (METRIC, KAPPA):
                metrics[name][metric] = Metric(0.0, n=len(both), undefined=ONE_GRADE)
            continue
        value = alpha([list(p) for p in both])
        metrics[name][METRIC] = Metric(value if value is not None else 0.0, n=len(both))
        kappa = cohen_kappa(both)
        if kappa is not None:
            metrics[name][KAPPA] = Metric(kappa, n=len(both))
