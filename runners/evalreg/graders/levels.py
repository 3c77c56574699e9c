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
    rules = LevelRules(rubric)
    applicable: dict[str, tuple[schema.Criterion, Verdict]] = {}
    for criterion in rules.applicable(item_tags):
        verdict = verdicts.get(criterion.id)
        if verdict is None:
            raise ValueError(f"criterion {criterion.id!r} applies but has no verdict")
        applicable[criterion.id] = (criterion, verdict)
    return rules.assign(applicable)


class LevelRules:
    """A rubric's level rules, checked once, for the many items graded under them.

    Raises:
        ValueError: a rule names a criterion the rubric does not have.
    """

    def __init__(self, rubric: schema.Rubric) -> None:
        known = {c.id for c in rubric.criteria}
        for rule in (rubric.levels.correct, rubric.levels.acceptable):
            if isinstance(rule.require, list) and not known.issuperset(rule.require):
                unknown = sorted(set(rule.require) - known)
                raise ValueError(
                    f"a level rule requires criteria the rubric does not have: {unknown}"
                )
        self.criteria = rubric.criteria
        self.correct = rubric.levels.correct
        self.acceptable = rubric.levels.acceptable
        self._applicable: dict[tuple[str, ...], list[schema.Criterion]] = {}

    def applicable(self, item_tags: Sequence[str]) -> list[schema.Criterion]:
        """The criteria that grade an item with ``item_tags``, in the rubric's order."""
        tags = tuple(item_tags)
        found = self._applicable.get(tags)
        if found is None:
            found = self._applicable[tags] = [c for c in self.criteria if applies(c, tags)]
        return found

    def assign(
        self, applicable: Mapping[str, tuple[schema.Criterion, Verdict]]
    ) -> tuple[Level, float]:
        """The level and score of an item from the verdicts of its applicable criteria
        (criterion id to criterion and verdict, in the rubric's order)."""
        # One pass over the verdicts, lists (not generators) into fsum: this runs once for
        # every sample graded.
        weights: list[float] = []
        weighted: list[float] = []
        failed = failed_critical = False
        for criterion, verdict in applicable.values():
            weights.append(criterion.weight)
            weighted.append(criterion.weight * verdict.score)
            if not verdict.passed:
                failed = True
                failed_critical = failed_critical or criterion.critical
        weight = math.fsum(weights)
        score = math.fsum(weighted) / weight if weight else 1.0
        if _holds(self.correct, applicable, score, failed, failed_critical):
            return "correct", score
        if _holds(self.acceptable, applicable, score, failed, failed_critical):
            return "acceptable", score
        return "unacceptable", score


def _holds(
    rule: schema.LevelRule,
    applicable: Mapping[str, tuple[schema.Criterion, Verdict]],
    score: float,
    failed: bool,
    failed_critical: bool,
) -> bool:
    """Whether ``rule`` holds, given whether some applicable criterion failed and whether
    a critical one did; a listed criterion that does not apply counts as passed."""
    if rule.min_score is not None and score < rule.min_score:
        return False
    if rule.require == "none":
        return True
    if rule.require == "all":
        return not failed
    if rule.require == "critical":
        return not failed_critical
    return all(applicable[cid][1].passed for cid in rule.require if cid in applicable)
