"""What the per-item explorer shows of a use case, as JSON-ready data: every sample with
what it rests on (the item, the request a candidate's model received, its stored output,
each criterion's verdict, the judges' rationales and the human grades, as
``results.item_evidence`` gathers them), each candidate's outcome per item, and the
outcomes at a base revision, which mark the items whose outcome changed between the two.

Read from one tree (the working tree or a revision, with its DVC data as of then). Text is
redacted as everything that writes items is: the task's ``redact`` fields, and item text
and outputs are left out entirely when ``texts`` is false (a registry whose
``privacy.snippets`` is off).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from evalreg.cells import Cell, cells
from evalreg.graders.levels import applies
from evalreg.metrics import pass_levels
from evalreg.providers.tools import call_text
from evalreg.registry import schema
from evalreg.registry.loader import Registry, load_registry
from evalreg.registry.tree import GitTree, Tree, WorkspaceTree
from evalreg.results.export import NUMBERS as EXPORT_NUMBERS
from evalreg.results.export import columns as export_columns
from evalreg.results.freshness import require_use_case, status, use_case_status
from evalreg.results.item_evidence import CellEvidence, Evidence, SampleEvidence
from evalreg.results.records import LEVELS, ItemRecord, read_records
from evalreg.store.segments import ResponseStore
from evalreg.text.numbers import count, milliseconds, number, usd_micro

SAMPLES_FORMAT = 1
PASS, FAIL, UNGRADED = "1", "0", "."
"""An item's outcome for one candidate, one character each: its graded samples pass (their
mean is at least one half, as paired comparisons count it), fail, or it has none."""


def use_case_samples(
    registry: Registry,
    selection_id: str,
    *,
    label: str,
    store: ResponseStore | None = None,
    base: Registry | None = None,
    base_label: str | None = None,
    texts: bool = True,
) -> dict[str, Any]:
    """The explorer's data for one use case of ``registry``.

    ``label`` names the revision read ("working tree", "revision 1a2b3c4d5e6f");
    ``store`` is its response store (read here when not given); ``base``, a second
    revision's registry, adds each candidate's outcomes there for the items whose content
    is the same on both sides.
    """
    selection = registry.selections[selection_id]
    task = registry.tasks[selection.task]
    rubric = registry.rubrics[task.rubric]
    evalset = registry.evalset_of(selection.task)
    items = sorted(evalset.items, key=lambda i: i.id)
    index = {item.id: n for n, item in enumerate(items)}
    if store is None:
        store = ResponseStore.load(registry.tree)
    statuses = use_case_status(registry, status(registry), selection_id)
    gathered = Evidence(registry, store, texts=texts, redact=True).use_case(statuses)
    prompts = gathered.prompts
    candidates = [
        _candidate(st.cell, selection, st.state, prompt)
        for st, prompt in zip(statuses, gathered.prompt_of, strict=True)
    ]
    levels = pass_levels(selection.policy.pass_level)
    # One cell's records held at a time.
    columns = [_column(gathered.cell(n), items, index, levels) for n in range(len(statuses))]
    shown = []
    requests: list[list[list[list[str]] | str | None]] = [[] for _ in prompts]
    for item in items:
        text = gathered.text(item)
        shown.append(_item(item, text.fields))
        for at, request in enumerate(text.requests):
            requests[at].append(_request(request))
    contents = {item.id: gathered.content(item) for item in items} if base is not None else {}
    base_passes = [
        _base_passes(base, st.cell.id, index, contents, levels) if base is not None else None
        for st in statuses
    ]
    return {
        "format": SAMPLES_FORMAT,
        "use_case": selection_id,
        "title": selection.use_case,
        "task": selection.task,
        "evalset": {"path": evalset.path, "md5": evalset.md5, "items": len(items)},
        "label": label,
        "base_label": base_label if base is not None else None,
        "pass_level": selection.policy.pass_level,
        "pass_levels": sorted(pass_levels(selection.policy.pass_level)),
        "levels": list(LEVELS),
        "texts": texts,
        "redacted": sorted(task.redact),
        "slices": sorted({t for item in items for t in item.tags}),
        "criteria": [
            {
                "id": c.id,
                "description": c.description,
                "critical": c.critical,
                "grader": c.grader.type,
            }
            for c in rubric.criteria
        ],
        "candidates": candidates,
        # The columns `evalreg export` writes, which the page's CSV download writes too.
        "export": {
            "columns": list(export_columns([c.id for c in rubric.criteria])),
            "numbers": sorted(EXPORT_NUMBERS),
        },
        "prompts": [{"system": s, "template": t} for s, t in prompts],
        "items": shown,
        "requests": requests,
        "samples": [samples for samples, _ in columns],
        "passes": [passes for _, passes in columns],
        "base_passes": base_passes,
    }


def samples_at(
    root: Path,
    use_cases: Sequence[str] = (),
    *,
    rev: str | None = None,
    base: str | None = None,
    texts: bool | None = None,
) -> Iterator[dict[str, Any]]:
    """``use_case_samples`` of each of ``use_cases`` (every use case when empty), read from
    the working tree or revision ``rev``; ``base`` names a revision to mark changed
    outcomes against. ``texts`` None follows the registry's ``privacy.snippets``."""
    tree: Tree = GitTree(root, rev) if rev else WorkspaceTree(root)
    registry = load_registry(tree)
    wanted = list(use_cases) or sorted(registry.selections)
    for sid in wanted:
        require_use_case(registry, sid)
    base_tree = GitTree(root, base) if base else None
    base_registry = load_registry(base_tree) if base_tree is not None else None
    store = ResponseStore.load(tree)
    label = tree.label if isinstance(tree, GitTree) else "working tree"
    show = registry.settings.privacy.snippets if texts is None else texts
    for sid in wanted:
        yield use_case_samples(
            registry,
            sid,
            label=label,
            store=store,
            base=base_registry,
            base_label=base_tree.label if base_tree is not None else None,
            texts=show,
        )


def _candidate(cell: Cell, selection: schema.Selection, state: str, prompt: int) -> dict[str, Any]:
    pin = cell.pin
    return {
        "id": cell.candidate.id,
        "pin": cell.candidate.pin,
        "provider": pin.provider,
        "model": pin.snapshot() or pin.callable or "",
        "params": {**pin.params, **pin.extra_params},
        "declared": cell.candidate.id == selection.selected,
        "state": state,
        "prompt": prompt,
    }


def _item(item: schema.Item, shown: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"id": item.id, "tags": sorted(item.tags)}
    if shown is None:
        return out
    if shown.get("input") is not None:
        out["input"] = shown["input"]
    else:
        out["messages"] = [
            [m["role"], str(m.get("content") or "")] for m in shown.get("messages") or []
        ]
    if shown.get("expected") is not None:
        out["expected"] = shown["expected"]
    return out


def _request(request: list[dict[str, Any]] | str | None) -> list[list[str]] | str | None:
    """The messages a prompt renders for an item as (role, content) pairs, or why it cannot
    be rendered; None when texts are left out."""
    if not isinstance(request, list):
        return request
    return [[m["role"], str(m["content"])] for m in request]


def _column(
    cell: CellEvidence, items: list[schema.Item], index: dict[str, int], levels: frozenset[str]
) -> tuple[list[list[dict[str, Any]]], str]:
    """A cell's samples of each item, in the order of ``items``, and its outcome per item."""
    samples = [[_sample(s, cell.status.cell, item) for s in cell.samples(item)] for item in items]
    return samples, _passes(cell.records, index, levels)


def _sample(sample: SampleEvidence, cell: Cell, item: schema.Item) -> dict[str, Any]:
    """One sample's record with its output, the judges' full rationales and human grades."""
    record = sample.record
    out: dict[str, Any] = {
        "sample": record["sample"],
        "level": record["level"],
        "error": record["error"],
        "score": number(record["score"]),
        "latency": milliseconds(record["latency_ms"]),
        "tokens": [count(record["tokens"][k]) for k in ("input", "output", "reasoning")],
        "cost": usd_micro(record["cost_micro_usd"]),
        "usage": [
            None if record.get("batch") else record["latency_ms"],
            record["tokens"]["input"],
            record["tokens"]["output"],
            record["cost_micro_usd"],
        ],
        "criteria": [
            [cid, bool(v["passed"]), _partial(v["score"]), v["detail"]]
            for cid, v in sorted(record["criteria"].items())
        ],
        "ungraded": list(record.get("ungraded", [])),
    }
    if "judge_cost_micro_usd" in record:
        out["judge_cost"] = usd_micro(record["judge_cost_micro_usd"])
    if sample.response is not None:
        out["model"] = str(sample.response.get("model") or "")
        if sample.output is not None:
            out["output"] = sample.output
        if sample.tool_calls:
            out["tool_calls"] = [call_text(call) for call in sample.tool_calls]
    rationales = {}
    grades = {}
    for criterion in cell.rubric.criteria:
        if not applies(criterion, item.tags):
            continue
        rationale = sample.rationales.get(criterion.id)
        if rationale is not None:
            rationales[criterion.id] = (
                rationale.reason
                if rationale.problem is None
                else f"no verdict: {rationale.problem}"
            )
        row = sample.grades.get(criterion.id)
        if row:
            grades[criterion.id] = [[rater, grade] for rater, grade in row.items()]
    if rationales:
        out["judges"] = rationales
    if grades:
        out["human"] = grades
    return out


def _passes(records: list[ItemRecord], index: dict[str, int], levels: frozenset[str]) -> str:
    """Per item of ``index``, in its order: ``PASS``, ``FAIL`` or ``UNGRADED``."""
    graded = [0] * len(index)
    passed = [0] * len(index)
    for r in records:
        at = index.get(r["item"])
        if at is None or r["error"] is not None:
            continue
        graded[at] += 1
        passed[at] += r["level"] in levels
    return "".join(
        UNGRADED if n == 0 else PASS if 2 * k >= n else FAIL
        for k, n in zip(passed, graded, strict=True)
    )


def _base_passes(
    base: Registry,
    cell_id: str,
    index: dict[str, int],
    contents: dict[str, str],
    levels: frozenset[str],
) -> str | None:
    """Cell ``cell_id``'s outcome per item of ``index`` at the base revision; ``UNGRADED``
    for an item whose content (``contents``, here) differs there (a changed item is not a
    flip). None: no such cell there."""
    cell = next((c for c in cells(base) if c.id == cell_id), None)
    if cell is None:
        return None
    records = read_records(base.tree, cell)
    if not records:
        return None
    same = [r for r in records if contents.get(r["item"]) == r["content"]]
    return _passes(same, index, levels)


def _partial(score: float) -> str:
    """A criterion's score where it says more than its verdict (neither 0 nor 1), else ""."""
    return "" if score in (0, 1) else number(score)
