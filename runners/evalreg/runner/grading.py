"""Grade one cell's stored responses into per-item records (pure: no I/O, no model calls)."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from evalreg.cells import Cell
from evalreg.evalsets.evalset import item_content
from evalreg.graders import GradingContext, Verdict, build_grader
from evalreg.graders.base import GradeFn
from evalreg.graders.human import HumanGrades, parse_grades
from evalreg.graders.levels import LevelRules, applies
from evalreg.graders.llm_judge import JudgeFailed, Judges, JudgeVerdict
from evalreg.graders.parsing import parse_output
from evalreg.providers.base import Completion
from evalreg.providers.fetch import Job
from evalreg.providers.pricing import cost_micro_usd
from evalreg.registry import schema
from evalreg.registry.loader import Registry
from evalreg.results.records import CriterionVerdict, ItemRecord, Tokens, rounded
from evalreg.store.segments import StoredRecords


class CellGrader:
    """Grades responses for one cell under its rubric and the task's output parser.

    Judge criteria read the judge's stored verdict; human criteria read imported grades
    for the exact response; every other criterion is graded by code. A human criterion
    with too few grades for a response is listed in the record's ``ungraded``.
    """

    def __init__(
        self,
        cell: Cell,
        context: GradingContext,
        judges: Judges | None = None,
        human: dict[str, HumanGrades] | None = None,
    ) -> None:
        self.cell = cell
        self.judges = judges
        self.human = human or {}
        self.criteria = [
            (c, None if isinstance(c.grader, _ELSEWHERE) else build_grader(c.grader, context))
            for c in cell.rubric.criteria
        ]
        self._grade_of = {c.id: grade for c, grade in self.criteria}
        self._rules_built: LevelRules | None = None
        self._output = cell.task.output
        self._price = cell.pin.price
        # What every sample of the item being graded shares (samples come one item at a time).
        self._item: schema.Item | None = None
        self._content = ""
        self._tags: list[str] = []
        self._graded: list[tuple[schema.Criterion, GradeFn | None]] = []
        self._order: list[str] = []
        """The ids of ``_graded``'s criteria in id order: the order of a record's criteria."""
        self._of_tags: dict[
            tuple[str, ...], tuple[list[tuple[schema.Criterion, GradeFn | None]], list[str]]
        ] = {}
        """``_graded`` and ``_order`` of each set of item tags met so far."""

    @property
    def _rules(self) -> LevelRules:
        """Built when first needed: a rubric's bad level rule fails its first grading."""
        if self._rules_built is None:
            self._rules_built = LevelRules(self.cell.rubric)
        return self._rules_built

    def _criteria_of(
        self, tags: Sequence[str]
    ) -> tuple[list[tuple[schema.Criterion, GradeFn | None]], list[str]]:
        """The criteria that grade an item with ``tags`` (each with its grading function, in
        the rubric's order) and their ids in id order: the same for every item so tagged."""
        key = tuple(tags)
        found = self._of_tags.get(key)
        if found is None:
            graded = [(c, self._grade_of[c.id]) for c in self._rules.applicable(tags)]
            found = self._of_tags[key] = graded, sorted(c.id for c, _ in graded)
        return found

    def _record(
        self,
        item: schema.Item,
        sample: int,
        key: str | None,
        error: str | None,
        criteria: dict[str, CriterionVerdict],
        level: str | None,
        score: float,
        latency_ms: int,
        tokens: Tokens,
        cost: int,
    ) -> ItemRecord:
        """A sample's record, built in one go (its optional fields are added after)."""
        return {
            "item": item.id,
            "content": self._content,
            "sample": sample,
            "tags": self._tags,
            "cluster": item.cluster,
            "key": key,
            "error": error,
            "criteria": criteria,
            "level": level,
            "score": score,
            "latency_ms": latency_ms,
            "tokens": tokens,
            "cost_micro_usd": cost,
        }

    def judge_jobs(self, item: schema.Item, sample: int, stored: dict[str, Any]) -> list[Job]:
        """The judge requests this output needs (to buy them before grading)."""
        if self.judges is None:
            return []
        text = stored["response"]["text"]
        calls = stored["response"].get("tool_calls") or ()
        label = f"{self.cell.id}/{item.id}#{sample}"
        jobs = []
        for c, _ in self.criteria:
            if isinstance(c.grader, schema.MODEL_GRADED) and applies(c, item.tags):
                # A judge request that cannot be made buys nothing: grading records why.
                with contextlib.suppress(JudgeFailed):
                    jobs.append(self.judges.job(c, item, text, label, calls))
        return jobs

    def _special(
        self,
        criterion: schema.Criterion,
        item: schema.Item,
        sample: int,
        key: str | None,
        completion: Completion,
    ) -> Verdict | JudgeVerdict | None:
        grader = criterion.grader
        if isinstance(grader, schema.HumanGrader):
            grades = self.human.get(grader.file)
            passed = grades.majority(key, grader.min_raters) if grades else None
            return None if passed is None else Verdict(passed, float(passed), "human majority")
        assert isinstance(grader, schema.MODEL_GRADED)
        if self.judges is None:
            raise JudgeFailed("no judge available")
        label = f"{self.cell.id}/{item.id}#{sample}"
        calls = [call.as_record() for call in completion.tool_calls]
        return self.judges.verdict(criterion, item, completion.text, label, calls)

    def record(
        self,
        item: schema.Item,
        sample: int,
        key: str | None,
        stored: dict[str, Any] | None,
        error: str | None,
    ) -> ItemRecord:
        """The per-item record for one sample: an error, or verdicts, level and usage.

        ``error`` is why the response is missing; for a stored response, the error a run
        recorded for the sample (a judge's, whose request is still unanswered).
        """
        if item is not self._item:
            self._item, self._content, self._tags = item, item_content(item), sorted(item.tags)
            self._graded, self._order = self._criteria_of(item.tags)
        if stored is None:
            # No response: no verdicts, and nothing counted.
            no_tokens: Tokens = {"input": 0, "output": 0, "reasoning": 0}
            return self._record(
                item, sample, key, error or "missing", {}, None, 0.0, 0, no_tokens, 0
            )
        completion = Completion.from_record(stored["response"])
        parsed = parse_output(completion.text, self._output, completion.tool_calls)
        applicable: dict[str, tuple[schema.Criterion, Verdict]] = {}
        ungraded: list[str] = []
        # What the judges' responses for this sample cost; None when no judge grades it.
        judge_cost: int | None = None
        judge_failure: str | None = None
        for criterion, grade in self._graded:
            if grade is not None:
                verdict = grade(parsed, item)
            else:
                try:
                    special = self._special(criterion, item, sample, key, completion)
                except JudgeFailed as exc:
                    # The other judges are still read: what they cost was spent.
                    judge_cost = (judge_cost or 0) + exc.cost_micro_usd
                    if exc.unanswered and error is not None and error.startswith("judge: "):
                        # Re-grading a recorded failure (reproduce, diff): its cause stands.
                        judge_failure = judge_failure or error
                    judge_failure = judge_failure or f"judge: {exc}"
                    continue
                if isinstance(special, JudgeVerdict):
                    judge_cost = (judge_cost or 0) + special.cost_micro_usd
                    special = Verdict(special.passed, special.score, special.reason[:80])
                if special is None:
                    # Too few raters graded this response: left out of its level and score,
                    # as a criterion that does not apply is, and recorded as not graded.
                    ungraded.append(criterion.id)
                    continue
                verdict = special
            applicable[criterion.id] = (criterion, verdict)
        criteria: dict[str, CriterionVerdict] = {}
        level: str | None = None
        score = 0.0
        if judge_failure is None:
            for cid in self._order:
                found = applicable.get(cid)
                if found is not None:
                    v = found[1]
                    criteria[cid] = {
                        "passed": v.passed,
                        "score": rounded(v.score),
                        "detail": v.detail,
                    }
            level, score = self._rules.assign(applicable)
            score = rounded(score)
        # A judge's failure leaves no verdicts, but the candidate's response was bought and
        # is stored: its usage and cost count.
        tokens: Tokens = {
            "input": completion.input_tokens,
            "output": completion.output_tokens,
            "reasoning": completion.reasoning_tokens,
        }
        record = self._record(
            item,
            sample,
            key,
            judge_failure,
            criteria,
            level,
            score,
            int(stored.get("latency_ms", 0)),
            tokens,
            cost_micro_usd(self._price, completion),
        )
        if judge_failure is None and ungraded:
            # Only then, so records of rubrics graded in full keep their bytes.
            record["ungraded"] = sorted(ungraded)
        if completion.batch:
            record["batch"] = True  # no latency was measured: left out of latency figures
        if judge_cost is not None:
            record["judge_cost_micro_usd"] = judge_cost
        if completion.tool_calls:  # only then, so records without tool calls keep their bytes
            record["tool_calls"] = [call.name for call in completion.tool_calls]
        return record


_ELSEWHERE = (*schema.MODEL_GRADED, schema.HumanGrader)


def cell_grader(
    cell: Cell, registry: Registry, store: StoredRecords | None, code_root: Path
) -> CellGrader:
    """A ``CellGrader`` wired to this registry's judges, human grades and response store."""
    human = {
        c.grader.file: parse_grades(registry.tree.read_data(c.grader.file), c.grader.file)
        for c in cell.rubric.criteria
        if isinstance(c.grader, schema.HumanGrader)
    }
    return CellGrader(
        cell,
        GradingContext(cell.task.output.schema_, code_root, tuple(cell.task.tools)),
        Judges(registry.pins, store),
        human,
    )
