"""Level assignment: a rubric's level rules turn one item's verdicts into a level and a score."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Literal

from evalreg.graders import Verdict
from evalreg.registry import schema

Level = Literal["correct", "acceptable", "unacceptable"]


def applies(criterion: schema.Criterion, tags: Sequence[str]) -> bool:
    """Whether ``criterion`` grades an item with ``tags``: always, unless it names slices."""
    return criterion.slices is None or any(tag in criterion.slices for tag in tags)


def assign_level(
    rubric: schema.Rubric,
    verdicts: Mapping[str, Verdict | None],
    item_tags: Sequence[str],
) -> tuple[Level, float]:
    """The item's level and weighted score under ``rubric``.

    The score is the weighted mean of the applicable criteria's scores (1.0 when none
    applies). The level is ``correct`` when ``levels.correct`` holds, else ``acceptable``
    when ``levels.acceptable`` holds, else ``unacceptable``.

    Args:
        rubric: the criteria and level rules.
        verdicts: criterion id to verdict; criteria that do not apply to the item (see
            ``applies``) may be ``None`` or absent, and their verdicts are not read.
        item_tags: the item's tags, which decide which criteria apply.

    Raises:
        ValueError: an applicable criterion has no verdict, or a rule names a criterion
            the rubric does not have.
    """
    known = {c.id for c in rubric.criteria}
    for rule in (rubric.levels.correct, rubric.levels.acceptable):
        if isinstance(rule.require, list) and not known.issuperset(rule.require):
            unknown = sorted(set(rule.require) - known)
            raise ValueError(f"a level rule requires criteria the rubric does not have: {unknown}")
    applicable: dict[str, tuple[schema.Criterion, Verdict]] = {}
    for criterion in rubric.criteria:
        if applies(criterion, item_tags):
            verdict = verdicts.get(criterion.id)
            if verdict is None:
                raise ValueError(f"criterion {criterion.id!r} applies but has no verdict")
            applicable[criterion.id] = (criterion, verdict)
    weight = math.fsum(c.weight for c, _ in applicable.values())
    score = (
        math.fsum(c.weight * v.score for c, v in applicable.values()) / weight if weight else 1.0
    )
    if _holds(rubric.levels.correct, applicable, score):
        return "correct", score
    if _holds(rubric.levels.acceptable, applicable, score):
        return "acceptable", score
    return "unacceptable", score


def _holds(
    rule: schema.LevelRule,
    applicable: Mapping[str, tuple[schema.Criterion, Verdict]],
    score: float,
) -> bool:
    """Whether ``rule`` holds; a listed criterion that does not apply counts as passed."""
    if rule.min_score is not None and score < rule.min_score:
        return False
    if rule.require == "none":
        return True
    if rule.require == "all":
        return all(v.passed for _, v in applicable.values())
    if rule.require == "critical":
        return all(v.passed for c, v in applicable.values() if c.critical)
    return all(applicable[cid][1].passed for cid in rule.require if cid in applicable)
