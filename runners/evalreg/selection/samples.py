"""Every sample of a use case joined with what it rests on: the item, the request a
candidate's model received, its stored output, each criterion's verdict, the judges'
rationales and the human grades — what the per-item explorer shows, as JSON-ready data.

Read from one tree (the working tree or a revision, with its DVC data as of then); a
second tree's passes, when given, mark the items whose outcome changed between revisions.
Text is redacted as everything that prints items is: the task's ``redact`` fields, and
item text and outputs are left out entirely when ``texts`` is false (a registry whose
``privacy.snippets`` is off).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from evalreg.cells import Cell, cells
from evalreg.errors import PromptError, UsageError
from evalreg.evalsets.evalset import item_content
from evalreg.evalsets.privacy import redact_fields, redact_output, redacts_output
from evalreg.graders.human import HumanGrades, parse_grades
from evalreg.graders.levels import applies
from evalreg.graders.llm_judge import JudgeFailed, Judges
from evalreg.metrics import pass_levels
from evalreg.prompting import as_text, effective_prompt, render_messages
from evalreg.redaction import REDACTED
from evalreg.registry import schema
from evalreg.registry.loader import Registry, load_registry
from evalreg.registry.tree import GitTree, Tree, WorkspaceTree
from evalreg.report.numbers import count, milliseconds, number, usd_micro
from evalreg.results.freshness import status
from evalreg.results.records import LEVELS, ItemRecord
from evalreg.selection.evidence import read_records
from evalreg.store.segments import ResponseStore

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
    judges = Judges(registry.pins, store)
    human = {
        c.grader.file: parse_grades(registry.tree.read_data(c.grader.file), c.grader.file)
        for c in rubric.criteria
        if isinstance(c.grader, schema.HumanGrader)
    }
    states = {s.cell.id: s.state for s in status(registry)}
    by_candidate = {c.candidate.id: c for c in cells(registry) if c.selection == selection_id}
    shown = [redact_fields(item, task.redact) if texts else None for item in items]

    prompts: list[tuple[str | None, str]] = []
    candidates = []
    samples = []
    passes = []
    base_passes = []
    for cand in selection.candidates:
        cell = by_candidate[cand.id]
        prompt = effective_prompt(task, cand.prompt)
        if prompt not in prompts:
            prompts.append(prompt)
        records = read_records(registry, cell)
        candidates.append(_candidate(cell, selection, states[cell.id], prompts.index(prompt)))
        per_item: list[list[dict[str, Any]]] = [[] for _ in items]
        for record in records:
            at = index.get(record["item"])
            if at is None:
                continue  # a record of an item the eval set no longer has
            per_item[at].append(_sample(record, cell, items[at], store, judges, human, texts=texts))
        samples.append(per_item)
        levels = pass_levels(selection.policy.pass_level)
        passes.append(_passes(records, index, levels))
        base_passes.append(
            _base_passes(base, selection_id, cand.id, items, levels) if base is not None else None
        )
    requests = [
        [
            _request(selection.task, task, variant, shown_item, item, texts)
            for item, shown_item in zip(items, shown, strict=True)
        ]
        for variant in (schema.PromptVariant(system=s, template=t) for s, t in prompts)
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
        "prompts": [{"system": s, "template": t} for s, t in prompts],
        "items": [_item(item, shown_item) for item, shown_item in zip(items, shown, strict=True)],
        "requests": requests,
        "samples": samples,
        "passes": passes,
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
        if sid not in registry.selections:
            known = ", ".join(sorted(registry.selections)) or "none"
            raise UsageError(f"unknown use case {sid!r} (use cases: {known})")
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
        "model": pin.model or pin.callable or "",
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
        out["messages"] = [[m["role"], str(m["content"])] for m in shown.get("messages") or []]
    if shown.get("expected") is not None:
        out["expected"] = shown["expected"]
    return out


def _request(
    task_id: str,
    task: schema.Task,
    variant: schema.PromptVariant,
    shown: Any,
    item: schema.Item,
    texts: bool,
) -> list[list[str]] | str | None:
    """The messages the prompt renders for the item (from its redacted fields), or why it
    cannot be rendered; None when texts are left out."""
    if not texts:
        return None
    subject = item if not task.redact else schema.Item.model_validate(shown)
    try:
        return [
            [m["role"], as_text(m["content"])]
            for m in render_messages(task, variant, subject, cell=task_id)
        ]
    except PromptError as exc:
        return str(exc)


def _sample(
    record: ItemRecord,
    cell: Cell,
    item: schema.Item,
    store: ResponseStore,
    judges: Judges,
    human: dict[str, HumanGrades],
    *,
    texts: bool,
) -> dict[str, Any]:
    """One sample's record with its output, the judges' full rationales and human grades."""
    key = record["key"]
    stored = store.get(key) if key else None
    text = str(stored["response"]["text"]) if stored is not None else None
    # Verdict details and judges' reasons may quote the output: redacted with it.
    quoting = texts and not redacts_output(cell.task.redact)
    out: dict[str, Any] = {
        "sample": record["sample"],
        "level": record["level"],
        "error": record["error"],
        "score": number(record["score"]),
        "latency": milliseconds(record["latency_ms"]),
        "tokens": [count(record["tokens"][k]) for k in ("input", "output", "reasoning")],
        "cost": usd_micro(record["cost_micro_usd"]),
        "criteria": [
            [cid, bool(v["passed"]), _partial(v["score"]), v["detail"] if quoting else REDACTED]
            for cid, v in sorted(record["criteria"].items())
        ],
        "ungraded": list(record.get("ungraded", [])),
    }
    if "judge_cost_micro_usd" in record:
        out["judge_cost"] = usd_micro(record["judge_cost_micro_usd"])
    if stored is not None:
        out["model"] = str(stored["response"].get("model") or "")
        if texts:
            out["output"] = redact_output(text or "", cell.task.redact)
    rationales = {}
    grades = {}
    for criterion in cell.rubric.criteria:
        grader = criterion.grader
        if not applies(criterion, item.tags):
            continue
        if isinstance(grader, schema.JudgeGrader) and text is not None and quoting:
            try:
                verdict = judges.verdict(criterion, item, text, f"{cell.id}/{item.id}")
            except JudgeFailed as exc:
                rationales[criterion.id] = f"no verdict: {exc}"
            else:
                rationales[criterion.id] = verdict.reason
        elif isinstance(grader, schema.HumanGrader) and key:
            row = human[grader.file].grades.get(key)
            if row:
                grades[criterion.id] = [[rater, row[rater]] for rater in sorted(row)]
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
    selection_id: str,
    candidate: str,
    items: list[schema.Item],
    levels: frozenset[str],
) -> str | None:
    """The candidate's outcome per item at the base revision; ``UNGRADED`` for an item whose
    content differs there (a changed item is not a flip). None: no such cell there."""
    cell = next(
        (c for c in cells(base) if c.selection == selection_id and c.candidate.id == candidate),
        None,
    )
    if cell is None:
        return None
    records = read_records(base, cell)
    if not records:
        return None
    contents = {item.id: item_content(item) for item in items}
    same = [r for r in records if contents.get(r["item"]) == r["content"]]
    return _passes(same, {item.id: n for n, item in enumerate(items)}, levels)


def _partial(score: float) -> str:
    """A criterion's score where it says more than its verdict (neither 0 nor 1), else ""."""
    return "" if score in (0, 1) else number(score)
