"""One item's recorded evidence in every use case that holds it: what ``evalreg show`` prints.

Read from one version of the repository (the working tree, or a revision through git and
DVC), as ``results.item_evidence`` gathers it, with nothing redacted (a local view): the
item from its eval set; per candidate, the messages its prompt renders, each sample's
stored response and the request body exactly as sent, every criterion's recorded verdict
with the judge's whole reason and each rater's grade, level, latency, tokens and cost.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from evalreg.cells import Cell
from evalreg.errors import UsageError
from evalreg.evalsets.evalset import EvalSet
from evalreg.registry import schema
from evalreg.registry.loader import Registry, load_registry
from evalreg.registry.tree import GitTree, Tree, WorkspaceTree
from evalreg.results.freshness import CellStatus, status, use_case_status
from evalreg.results.item_evidence import Evidence, ItemEvidence, SampleEvidence
from evalreg.results.records import Tokens
from evalreg.store.segments import KeyLookup

CLOSE_MATCHES = 5
"""How many similar item ids an unknown one is answered with."""


@dataclass(frozen=True)
class CriterionView:
    """One criterion on one sample, as recorded."""

    id: str
    description: str
    grader: str
    """The grader's type (``field_exact``, ``llm_judge``, ``human``...)."""
    critical: bool
    verdict: str
    """``passed``, ``failed``, ``not graded`` (it applies, too few raters graded the
    response), ``not applicable`` (not in the item's slices) or ``no verdict`` (the sample
    has none: an error)."""
    score: float | None = None
    detail: str = ""
    judge: str | None = None
    """The judge's pin, for an ``llm_judge`` criterion."""
    judge_reason: str | None = None
    """The judge's whole reason, read from its stored response (the record keeps 80
    characters of it)."""
    human: dict[str, bool] = field(default_factory=dict)
    """Each rater's grade of the response, for a ``human`` criterion."""


@dataclass(frozen=True)
class SampleView:
    """One sample of one candidate: its stored response and its recorded grading."""

    sample: int
    key: str | None
    error: str | None
    level: str | None
    score: float
    output: str | None
    """The stored response's text; None when the store has none."""
    model: str | None
    """The model name the provider returned."""
    finish_reason: str | None
    latency_ms: int
    tokens: Tokens
    cost_micro_usd: int
    judge_cost_micro_usd: int | None
    request: Any
    """The request body exactly as sent (the stored record's), or None."""
    criteria: list[CriterionView]
    outdated: bool
    """Recorded for another version of the item (its content changed since)."""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    """The functions the response called: name and arguments (and why the arguments did
    not parse); empty when it called none or texts are left out."""


@dataclass(frozen=True)
class CandidateView:
    id: str
    pin: str
    cell: str
    state: str
    """``fresh``, ``stale`` or ``pending``, at the version read."""
    reasons: list[str]
    declared: bool
    messages: list[dict[str, str]] | None
    """What the candidate's prompt renders for the item: system first, then the turns."""
    prompt_error: str | None
    samples: list[SampleView]
    body: Any = None
    """An ``http`` pin's request body as its service was sent it (its templates rendered
    from ``messages``): the first stored sample's; None for every other pin."""


@dataclass(frozen=True)
class ItemView:
    """One item in one use case, with every candidate shown."""

    revision: str
    """Where it was read: "working tree" or "revision 1a2b3c4d5e6f"."""
    use_case: str
    title: str
    task: str
    split: str
    evalset: str
    evalset_md5: str
    line: int
    item: dict[str, Any]
    candidates: list[CandidateView]

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def show_item(
    root: Path,
    item_id: str,
    *,
    rev: str | None = None,
    candidates: Sequence[str] = (),
    use_cases: Sequence[str] = (),
    tasks: Sequence[str] = (),
) -> list[ItemView]:
    """``item_id`` in each use case (of ``use_cases`` and ``tasks``, when given) whose eval
    set holds it, with the candidates named (default: all), read at ``rev`` (default: the
    working tree).

    Raises ``UsageError`` for an unknown item (naming similar ids), use case, task or
    candidate, and for a revision with no recorded results for what is asked.
    """
    tree: Tree = GitTree(root, rev) if rev is not None else WorkspaceTree(root)
    registry = load_registry(tree)
    _check_names(registry, use_cases, tasks)
    # Each use case sees its own cells (a cell two use cases share is shown in both).
    views: dict[tuple[str, str], list[CellStatus]] = {}
    for split in ("dev", "holdout"):
        statuses = status(registry, split=split)
        for sid in sorted(registry.selections):
            seen = use_case_status(registry, statuses, sid, split)
            if seen and _chosen(sid, registry.selections[sid].task, use_cases, tasks):
                views[(sid, split)] = seen
    found: dict[tuple[str, str], tuple[EvalSet, schema.Item]] = {}
    for (sid, split), seen in views.items():
        evalset = registry.evalset_of(seen[0].cell.task_id, split)
        item = next((i for i in evalset.items if i.id == item_id), None)
        if item is not None:
            found[(sid, split)] = (evalset, item)
    if not found:
        everything = [st for seen in views.values() for st in seen]
        raise UsageError(_unknown_item(registry, item_id, everything, tree))
    chosen = [st for at in found for st in views[at]]
    _check_candidates(chosen, candidates, sorted({sid for sid, _ in found}))
    chosen = [st for st in chosen if not candidates or st.cell.candidate.id in candidates]
    if rev is not None and all(st.state == "pending" for st in chosen):
        asked = ", ".join(sorted({sid for sid, _ in found}))
        raise UsageError(
            f"{tree.label} has no recorded results for item {item_id!r} in {asked}: every "
            "cell is pending there (pick a revision after `evalreg run` was committed)"
        )
    evidence = Evidence(registry, KeyLookup(tree))
    out = []
    for (selection, split), (evalset, item) in sorted(found.items()):
        sel = registry.selections[selection]
        order = {c.id: n for n, c in enumerate(sel.candidates)}
        shown = sorted(
            (st for st in chosen if (st.cell.selection, st.cell.split) == (selection, split)),
            key=lambda st: (st.cell.candidate.id != sel.selected, order[st.cell.candidate.id]),
        )
        gathered = evidence.use_case(shown).item(item)
        out.append(
            ItemView(
                revision=tree.label,
                use_case=selection,
                title=sel.use_case,
                task=sel.task,
                split=split,
                evalset=evalset.path,
                evalset_md5=evalset.md5,
                line=evalset.lines.get(item.id, 0),
                item=gathered.text.fields,
                candidates=[_candidate_view(st, gathered, sel.selected) for st in shown],
            )
        )
    return out


def _chosen(selection: str, task: str, use_cases: Sequence[str], tasks: Sequence[str]) -> bool:
    return (not use_cases or selection in use_cases) and (not tasks or task in tasks)


def _check_names(registry: Registry, use_cases: Sequence[str], tasks: Sequence[str]) -> None:
    for flag, asked, known in (
        ("--use-case", use_cases, registry.selections),
        ("--task", tasks, registry.tasks),
    ):
        for name in asked:
            if name not in known:
                raise UsageError(f"{flag} {name}: no such {flag[2:]} ({_one_of(sorted(known))})")


def _check_candidates(
    chosen: list[CellStatus], candidates: Sequence[str], use_cases: list[str]
) -> None:
    known = sorted({st.cell.candidate.id for st in chosen})
    for name in candidates:
        if name not in known:
            where = ", ".join(use_cases)
            raise UsageError(f"--candidate {name}: not a candidate of {where} ({_one_of(known)})")


def _one_of(names: list[str]) -> str:
    return "one of " + ", ".join(names) if names else "there are none"


def _unknown_item(registry: Registry, item_id: str, statuses: list[CellStatus], tree: Tree) -> str:
    paths = sorted({registry.evalset_of(st.cell.task_id, st.cell.split).path for st in statuses})
    ids = sorted({i.id for path in paths for i in registry.evalsets[path].items})
    close = difflib.get_close_matches(item_id, ids, n=CLOSE_MATCHES, cutoff=0.6)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    return f"no item {item_id!r} in {', '.join(paths) or 'any eval set'} ({tree.label}){hint}"


def _candidate_view(st: CellStatus, evidence: ItemEvidence, declared: str) -> CandidateView:
    cell = st.cell
    mine = next(c for c in evidence.candidates if c.status is st)
    request = evidence.text.requests[mine.prompt]
    return CandidateView(
        id=cell.candidate.id,
        pin=cell.candidate.pin,
        cell=cell.id,
        state=st.state,
        reasons=list(st.reasons),
        declared=cell.candidate.id == declared,
        messages=request if isinstance(request, list) else None,
        prompt_error=request if isinstance(request, str) else None,
        samples=[_sample_view(cell, s) for s in mine.samples],
        body=next((s.request for s in mine.samples if s.request is not None), None)
        if cell.pin.provider == "http"
        else None,
    )


def _sample_view(cell: Cell, sample: SampleEvidence) -> SampleView:
    record, response = sample.record, sample.response or {}
    return SampleView(
        sample=record["sample"],
        key=record["key"],
        error=record["error"],
        level=record["level"],
        score=record["score"],
        output=sample.output,
        model=_text(response.get("model")),
        finish_reason=_text(response.get("finish_reason")),
        latency_ms=record["latency_ms"],
        tokens=record["tokens"],
        cost_micro_usd=record["cost_micro_usd"],
        judge_cost_micro_usd=record.get("judge_cost_micro_usd"),
        request=sample.request,
        criteria=[_criterion_view(c, sample) for c in cell.rubric.criteria],
        outdated=sample.outdated,
        tool_calls=[
            {k: call[k] for k in ("name", "arguments", "error") if k in call}
            for call in sample.tool_calls
        ],
    )


def _criterion_view(criterion: schema.Criterion, sample: SampleEvidence) -> CriterionView:
    grader, record = criterion.grader, sample.record
    common: dict[str, Any] = {
        "id": criterion.id,
        "description": criterion.description,
        "grader": grader.type,
        "critical": criterion.critical,
    }
    verdict = record["criteria"].get(criterion.id)
    if isinstance(grader, schema.HumanGrader):
        common["human"] = sample.grades.get(criterion.id, {})
    if isinstance(grader, schema.JudgeGrader):
        common["judge"] = grader.judge
        rationale = sample.rationales.get(criterion.id)
        if rationale is not None and verdict is not None:
            common["judge_reason"] = rationale.reason
    if verdict is not None:
        passed = "passed" if verdict["passed"] else "failed"
        return CriterionView(
            **common, verdict=passed, score=verdict["score"], detail=verdict["detail"]
        )
    if record["error"] is not None:
        return CriterionView(**common, verdict="no verdict")
    if criterion.id in record.get("ungraded", ()):
        return CriterionView(**common, verdict="not graded")
    return CriterionView(**common, verdict="not applicable")


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None
