"""Gather a use case's committed evidence from a tree: results, metrics, decision, comparisons."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from evalreg.calibration import add_agreement
from evalreg.evalsets import EvalSet
from evalreg.human import parse_grades, rater_agreement
from evalreg.metrics import Comparison, SliceMetrics, cell_metrics, compare
from evalreg.plan import Cell, CellStatus, cells, status
from evalreg.registry import schema
from evalreg.registry.loader import Registry
from evalreg.results import read_summary
from evalreg.selection import Decision, decide


@dataclass
class CandidateEvidence:
    candidate: schema.Candidate
    cell: Cell
    state: str
    """fresh | stale | pending"""
    reasons: list[str]
    summary: dict[str, Any] | None
    records: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class UseCaseEvidence:
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
    rater_agreement: dict[str, float | None] = field(default_factory=dict)
    """Human grades file → Krippendorff's alpha among its raters."""
    holdout: dict[str, SliceMetrics] = field(default_factory=dict)
    """Candidate → metrics on the sealed hold-out set (slice ``all``), where it was run."""


def read_records(registry: Registry, cell: Cell) -> list[dict[str, Any]]:
    tree = registry.tree
    if not (tree.is_file(cell.items_path) or tree.is_file(cell.items_path + ".dvc")):
        return []
    data = tree.read_data(cell.items_path)
    return [json.loads(line) for line in data.splitlines() if line.strip()]


def gather(
    registry: Registry,
    selection_id: str,
    statuses: list[CellStatus] | None = None,
    *,
    comparisons: bool = True,
) -> UseCaseEvidence:
    """Everything the report needs for one use case (``comparisons=False``: only what a
    decision needs, which is all ``evalreg check`` asks for)."""
    selection = registry.selections[selection_id]
    task = registry.tasks[selection.task]
    rubric = registry.rubrics[task.rubric]
    by_cell = {s.cell.id: s for s in (statuses if statuses is not None else status(registry))}
    policy = selection.policy
    candidates: dict[str, CandidateEvidence] = {}
    metrics: dict[str, dict[str, SliceMetrics]] = {}
    for cand in selection.candidates:
        st = by_cell[f"{selection.task}/{cand.id}"]
        summary = read_summary(registry.tree, st.cell)
        records = read_records(registry, st.cell) if summary is not None else []
        candidates[cand.id] = CandidateEvidence(
            cand, st.cell, st.state, st.reasons, summary, records
        )
        if records:
            metrics[cand.id] = cell_metrics(
                records, task, rubric, policy.pass_level, policy.confidence
            )
            add_agreement(metrics[cand.id], records, rubric)
    pending = {c for c, e in candidates.items() if not e.records}
    decision = decide(selection, metrics, pending)
    declared = candidates[selection.selected]
    compared = {
        cid: compare(declared.records, ev.records, policy.pass_level, policy.confidence)
        for cid, ev in candidates.items()
        if comparisons and cid != selection.selected and ev.records and declared.records
    }
    raters = {
        c.grader.file: rater_agreement(
            parse_grades(registry.tree.read_data(c.grader.file), c.grader.file)
        )
        for c in rubric.criteria
        if isinstance(c.grader, schema.HumanGrader)
    }
    holdout = {}
    for cell in cells(registry, "holdout"):
        if cell.selection == selection_id and read_summary(registry.tree, cell) is not None:
            held = read_records(registry, cell)
            if held:
                holdout[cell.candidate.id] = cell_metrics(
                    held, task, rubric, policy.pass_level, policy.confidence
                )["all"]
    return UseCaseEvidence(
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
    )
