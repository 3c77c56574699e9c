"""Gather a use case's committed evidence from a tree: results, metrics, decision, comparisons."""

from __future__ import annotations

from dataclasses import dataclass, field

from evalreg.cells import Cell, use_case_cells
from evalreg.evalsets.evalset import EvalSet
from evalreg.graders.human import parse_grades, rater_agreement, rater_kappa
from evalreg.metrics import Comparison, SliceMetrics, cell_metrics, compare
from evalreg.registry import schema
from evalreg.registry.loader import Registry
from evalreg.results.freshness import CellStatus, status, use_case_status
from evalreg.results.outcomes import Outcomes, from_records, from_summary
from evalreg.results.records import (
    ALL,
    CellSummary,
    items_md5,
    read_records,
    read_summary,
)
from evalreg.selection.calibration import Calibration, add_agreement, calibrations
from evalreg.selection.policy import Decision, decide
from evalreg.selection.stopping import DEFAULTS, State, UseCase, assess_outcomes, use_case_of


@dataclass
class CandidateEvidence:
    candidate: schema.Candidate
    cell: Cell
    state: str
    """fresh | stale | pending"""
    reasons: list[str]
    summary: CellSummary | None
    outcomes: Outcomes | None = None
    """The graded samples, when results exist."""


@dataclass
class SelectionEvidence:
    selection_id: str
    selection: schema.Selection
    task: schema.Task
    rubric: schema.Rubric
    evalset: EvalSet
    candidates: dict[str, CandidateEvidence]
    metrics: dict[str, dict[str, SliceMetrics]]
    decision: Decision
    comparisons: dict[str, list[Comparison]]
    """Every other candidate against the declared one, per slice."""
    rater_agreement: dict[str, float | str] = field(default_factory=dict)
    """Human grades file → Krippendorff's alpha among its raters."""
    holdout: dict[str, SliceMetrics] = field(default_factory=dict)
    """Candidate → metrics on the sealed hold-out set (slice ``all``), where it was run."""
    calibrations: dict[str, list[Calibration]] = field(default_factory=dict)
    """Candidate → judge criteria whose agreement with human grades was measured there."""
    rater_kappa: dict[str, tuple[float | None, int]] = field(default_factory=dict)
    """Human grades file with exactly two raters → their Cohen's kappa and shared grades."""
    settled: Settled | None = None
    """Where a sequential run stopped, when a candidate's results rest on part of the items."""


@dataclass(frozen=True)
class Settled:
    """A use case decided on part of its items: its verdicts, and the items each
    candidate's results hold (of ``case.size``)."""

    state: State
    case: UseCase
    items: dict[str, int]
    """By candidate id."""
    method: str


OutcomeCache = dict[tuple[str, ...], Outcomes]
"""Outcomes already read, by items-file md5 and criteria: a diff reads each file once."""


def read_outcomes(
    registry: Registry,
    cell: Cell,
    summary: CellSummary | None = None,
    cache: OutcomeCache | None = None,
) -> Outcomes | None:
    """The cell's recorded samples as columns, or None when it has none.

    With ``summary`` (the cell's) and a ``cache``, an items file with the same md5 is read
    only once.
    """
    criteria = [c.id for c in cell.rubric.criteria]
    md5 = items_md5(summary)
    key = (md5, *criteria) if md5 else None
    if cache is not None and key is not None and key in cache:
        return cache[key]
    outcomes = None
    if summary is not None:
        evalset = registry.evalset_of(cell.task_id, cell.split)

        def items_file() -> bytes:
            return registry.tree.read_data(cell.items_path)

        outcomes = from_summary(summary, evalset, criteria, items_file)
    if outcomes is None:
        records_ = read_records(registry.tree, cell)
        if not records_:
            return None
        outcomes = from_records(records_, criteria)
    if cache is not None and key is not None:
        cache[key] = outcomes
    return outcomes


def _metrics(
    outcomes: Outcomes,
    task: schema.Task,
    rubric: schema.Rubric,
    policy: schema.Policy,
    only: frozenset[str] | None = None,
) -> dict[str, SliceMetrics]:
    """``cell_metrics`` with judge-human agreement, computed once per outcomes, task,
    rubric and policy (both sides of a diff share the outcomes of an unchanged cell);
    ``only`` the slices named, when nothing but a decision is asked for."""
    key = (policy.pass_level, policy.confidence, only)
    seen = outcomes.memo.get(key)
    if seen is None or seen[0] != task or seen[1] != rubric:
        computed = cell_metrics(outcomes, task, rubric, policy.pass_level, policy.confidence, only)
        add_agreement(computed, outcomes, rubric)
        seen = outcomes.memo[key] = (task, rubric, computed)
    return {name: dict(values) for name, values in seen[2].items()}


def gather(
    registry: Registry,
    selection_id: str,
    statuses: list[CellStatus] | None = None,
    *,
    comparisons: bool = True,
    cache: OutcomeCache | None = None,
) -> SelectionEvidence:
    """Everything the report needs for one use case (``comparisons=False``: only what a
    decision needs, which is all ``evalreg check`` asks for)."""
    selection = registry.selections[selection_id]
    task = registry.tasks[selection.task]
    rubric = registry.rubrics[task.rubric]
    seen = use_case_status(
        registry, statuses if statuses is not None else status(registry), selection_id
    )
    policy = selection.policy
    # A decision reads slice ``all`` and the slices its gates name; the report reads all.
    only = None if comparisons else frozenset({ALL, *(g.slice for g in policy.gates)})
    candidates: dict[str, CandidateEvidence] = {}
    metrics: dict[str, dict[str, SliceMetrics]] = {}
    for cand, st in zip(selection.candidates, seen, strict=True):
        summary = read_summary(registry.tree, st.cell)
        outcomes = read_outcomes(registry, st.cell, summary, cache) if summary is not None else None
        candidates[cand.id] = CandidateEvidence(
            cand, st.cell, st.state, st.reasons, summary, outcomes
        )
        if outcomes is not None:
            metrics[cand.id] = _metrics(outcomes, task, rubric, policy, only)
    pending = {c for c, e in candidates.items() if e.outcomes is None}
    settled = _settled(registry, selection_id, candidates)
    decision = decide(selection, metrics, pending, settled.state if settled else None)
    declared = candidates[selection.selected].outcomes
    compared = {
        cid: compare(declared, ev.outcomes, policy.pass_level, policy.confidence)
        for cid, ev in candidates.items()
        if comparisons
        and cid != selection.selected
        and ev.outcomes is not None
        and declared is not None
    }
    grades = {
        c.grader.file: parse_grades(registry.tree.read_data(c.grader.file), c.grader.file)
        for c in rubric.criteria
        if isinstance(c.grader, schema.HumanGrader)
    }
    raters = {path: rater_agreement(g) for path, g in grades.items()}
    kappas = {path: k for path, g in grades.items() if (k := rater_kappa(g)) is not None}
    calibrated = {
        cid: found
        for cid, ev in candidates.items()
        if ev.outcomes is not None
        and (found := calibrations(ev.outcomes, rubric, metrics[cid].get("all", {})))
    }
    holdout = {}
    for cell in use_case_cells(registry, selection_id, "holdout"):
        held_summary = read_summary(registry.tree, cell)
        if held_summary is not None:
            held = read_outcomes(registry, cell, held_summary)
            if held is not None:
                holdout[cell.candidate.id] = cell_metrics(
                    held, task, rubric, policy.pass_level, policy.confidence
                )["all"]
    return SelectionEvidence(
        selection_id,
        selection,
        task,
        rubric,
        registry.evalset_of(selection.task),
        candidates,
        metrics,
        decision,
        compared,
        raters,
        holdout,
        calibrated,
        kappas,
        settled,
    )


def _settled(
    registry: Registry, selection_id: str, candidates: dict[str, CandidateEvidence]
) -> Settled | None:
    """The verdicts of the sequential run whose stop a candidate's summary records, from
    the recorded results, with the parameters it recorded; None when every candidate's
    results hold every item."""
    stops = {
        cid: stop
        for cid, ev in candidates.items()
        if ev.summary is not None and (stop := ev.summary.get("sequential")) is not None
    }
    if not stops:
        return None
    selection = registry.selections[selection_id]
    recorded = next(
        (s["use_cases"][selection_id] for s in stops.values() if selection_id in s["use_cases"]),
        None,
    )
    params = (
        schema.Sequential(
            alpha=recorded["alpha"], min_items=recorded["min_items"], round=recorded["round"]
        )
        if recorded is not None
        else selection.policy.sequential or DEFAULTS
    )
    case = use_case_of(registry, selection_id, params)
    items = {
        cid: stops[cid]["items"] if cid in stops else case.size if ev.outcomes else 0
        for cid, ev in candidates.items()
    }
    state = assess_outcomes(
        case,
        {ev.cell.id: ev.outcomes for ev in candidates.values()},
        {ev.cell.id: items[cid] for cid, ev in candidates.items()},
    )
    return Settled(state, case, items, next(iter(stops.values()))["method"])
