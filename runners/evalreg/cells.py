"""Cells: the (task, candidate) pairs of a registry, and their fingerprints.

A cell is one (task, candidate). Its fingerprint hashes everything that can change its
results; ``results.freshness`` compares it with the fingerprint a committed summary
records.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from evalreg.canonical import digest
from evalreg.registry import schema
from evalreg.registry.loader import Registry
from evalreg.registry.tree import Tree

RESULTS_DIR = "reports/results"
METRICS_DIR = "reports/metrics"
"""Where each cell's DVC metrics file goes (``results.dvc_metrics``), beside no summary, so a
candidate id never names another cell's file."""
_IGNORED_FOR_RESULTS = {"description", "benchmarks", "limits", "redact", "allow_insecure_http"}


@dataclass(frozen=True)
class Cell:
    """One (task, candidate) of one selection, with everything needed to run it."""

    selection: str
    task_id: str
    candidate: schema.Candidate
    task: schema.Task
    rubric: schema.Rubric
    pin: schema.Pin
    split: str = "dev"
    """``dev`` (the task's eval set) or ``holdout`` (its sealed hold-out set)."""

    @property
    def id(self) -> str:
        suffix = "@holdout" if self.split == "holdout" else ""
        return f"{self.task_id}/{self.candidate.id}{suffix}"

    @property
    def judges(self) -> list[str]:
        """The pins that judge criteria of its rubric (judges, embedders), by id, each once."""
        pins = {schema.grading_pin(c.grader) for c in self.rubric.criteria}
        return sorted(p for p in pins if p is not None)

    @property
    def _stem(self) -> str:
        suffix = ".holdout" if self.split == "holdout" else ""
        return f"{RESULTS_DIR}/{self.task_id}/{self.candidate.id}{suffix}"

    @property
    def summary_path(self) -> str:
        return f"{self._stem}.json"

    @property
    def items_path(self) -> str:
        return f"{self._stem}.items.jsonl"

    @property
    def metrics_path(self) -> str:
        return self._stem.replace(RESULTS_DIR, METRICS_DIR, 1) + ".json"


def cells(registry: Registry, split: str = "dev") -> list[Cell]:
    """Every cell of every selection, in (task, candidate) order, each listed once.

    Use cases that run one task with a candidate of one id share that cell (the loader
    makes them name one pin and one prompt): it is listed once, as the first of them (by
    id) sees it. ``use_case_cells`` gives each use case's own view of its cells.

    With ``split="holdout"``, the cells of tasks that have a sealed hold-out set.
    """
    out: dict[str, Cell] = {}
    for sel_id in sorted(registry.selections):
        for cell in use_case_cells(registry, sel_id, split):
            out.setdefault(cell.id, cell)
    return [out[k] for k in sorted(out)]


def use_case_cells(registry: Registry, selection_id: str, split: str = "dev") -> list[Cell]:
    """The cells of one use case, in the order of its candidates, as that use case sees them
    (its selection, its candidate entries): a cell it shares with another use case has the
    same id and results files in both."""
    sel = registry.selections[selection_id]
    task = registry.tasks[sel.task]
    if split == "holdout" and task.holdout is None:
        return []
    rubric = registry.rubrics[task.rubric]
    return [
        Cell(selection_id, sel.task, cand, task, rubric, registry.pins[cand.pin], split)
        for cand in sel.candidates
    ]


def use_cases_of(registry: Registry, cell: Cell) -> list[str]:
    """The use cases (selection ids, sorted) whose candidates include ``cell``."""
    return sorted(
        sid
        for sid, sel in registry.selections.items()
        if sel.task == cell.task_id and any(c.id == cell.candidate.id for c in sel.candidates)
    )


def _dump(model: schema.Model | None) -> Any:
    if model is None:
        return None
    # Defaults are left out, so a schema that gains an optional field (or a file that spells
    # out a default) does not change any fingerprint.
    data = model.model_dump(mode="json", by_alias=True, exclude_defaults=True)
    return {k: v for k, v in data.items() if k not in _IGNORED_FOR_RESULTS}


def fingerprint_parts(registry: Registry, cell: Cell) -> dict[str, Any]:
    """Everything that can change a cell's results, each hashed separately so staleness
    can say which part changed."""
    from evalreg.evalsets.attachments import attachments_digest
    from evalreg.graders.base import GRADER_VERSION

    evalset = registry.evalset_of(cell.task_id, cell.split)
    code_paths: list[str] = []
    if cell.pin.callable is not None:
        code_paths += [cell.pin.callable.rpartition(":")[0], *cell.pin.files]
    for c in cell.rubric.criteria:
        if isinstance(c.grader, schema.PythonGrader):
            code_paths += [c.grader.callable.rpartition(":")[0], *c.grader.files]
        if isinstance(c.grader, schema.HumanGrader):
            code_paths.append(c.grader.file)
    attached = attachments_digest(evalset)
    return {
        "evalset": evalset.md5,
        # Only where items attach files: every other cell keeps its fingerprint.
        **({"attachments": attached} if attached is not None else {}),
        "task": digest(_dump(cell.task)),
        "rubric": digest(_dump(cell.rubric)),
        "pin": digest(_dump(cell.pin)),
        "prompt_variant": digest(_dump(cell.candidate.prompt)) if cell.candidate.prompt else None,
        "judges": {j: digest(_dump(registry.pins[j])) for j in cell.judges if j in registry.pins},
        "repeats": cell.task.repeats,
        "graders": GRADER_VERSION,
        "code": {p: _file_digest(registry.tree, p) for p in sorted(set(code_paths))},
    }


def _file_digest(tree: Tree, rel: str) -> str:
    return hashlib.sha256(tree.read_data(rel)).hexdigest()


def fingerprint(parts: dict[str, Any]) -> str:
    return digest(parts)
