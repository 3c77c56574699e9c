"""``evalreg diff``: what changed between two revisions' recorded results, and whether it is real.

Produces plain data (JSON-ready) so the trusted comment job can re-render it; Markdown is
rendered by ``evalreg.report.diff_markdown``. BASE is resolved to the merge-base with HEAD.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalreg.errors import UsageError
from evalreg.evidence import UseCaseEvidence, gather, read_records
from evalreg.grading import cell_grader
from evalreg.metrics import cell_metrics, compare, item_scores, pass_levels
from evalreg.plan import Cell, cells, status
from evalreg.registry.loader import Registry, load_registry
from evalreg.registry.tree import GitTree, Tree, WorkspaceTree
from evalreg.selection import fmt
from evalreg.store import ResponseStore

DIFF_SCHEMA = 1
SNIPPET = 300
MAX_FLIPS = 20
OVERALL = (
    "pass_rate",
    "unacceptable_rate",
    "error_rate",
    "latency_p50_ms",
    "latency_p95_ms",
    "cost_per_item_usd",
    "failure_cost_per_1k_usd",
)


@dataclass
class Side:
    label: str
    rev: str | None
    registry: Registry
    store: ResponseStore | None = None

    def responses(self) -> ResponseStore:
        if self.store is None:
            self.store = ResponseStore.load(self.registry.tree)
        return self.store


def resolve(root: Path, base: str, head: str | None) -> tuple[Side, Side]:
    import git

    try:
        repo = git.Repo(root)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        raise UsageError(f"{root} is not a git repository") from None
    head_tree: Tree = GitTree(root, head) if head else WorkspaceTree(root)
    head_commit = head_tree.rev if isinstance(head_tree, GitTree) else "HEAD"
    try:
        bases = repo.merge_base(base, head_commit)
    except git.GitCommandError:
        raise UsageError(f"unknown revision {base!r}") from None
    if not bases:
        raise UsageError(f"{base} and {head or 'HEAD'} share no history")
    base_tree = GitTree(root, bases[0].hexsha)
    head_rev = head_tree.rev if isinstance(head_tree, GitTree) else None
    return (
        Side(f"{base} (merge-base {base_tree.rev[:12]})", base_tree.rev, load_registry(base_tree)),
        Side(head or "working tree", head_rev, load_registry(head_tree)),
    )


def snippet(text: str | None) -> str | None:
    if text is None:
        return None
    return text if len(text) <= SNIPPET else text[: SNIPPET - 1] + "…"


def _item_text(registry: Registry, cell: Cell, item_id: str) -> str | None:
    from evalreg.curation import redact

    try:
        evalset = registry.evalset_of(cell.task_id, cell.split)
    except (KeyError, ValueError):
        return None
    for item in evalset.items:
        if item.id == item_id:
            data = redact(item, cell.task.redact)
            if data.get("input") is not None:
                return json.dumps(data["input"], ensure_ascii=False, sort_keys=True)
            turns = data.get("messages") or []
            return str(turns[-1]["content"]) if turns else None
    return None


def _redact_output(text: str | None, cell: Cell) -> str | None:
    """The output with the task's ``output.*`` fields redacted (all of it for ``output``)."""
    from evalreg.curation import REDACTED, redact

    paths = [p.partition(".")[2] for p in cell.task.redact if p.split(".")[0] == "output"]
    if text is None or not paths:
        return text
    if "" in paths:
        return REDACTED
    try:
        value = json.loads(text)
    except ValueError:
        return REDACTED  # cannot find the fields in unparsed text: show none of it
    return json.dumps(redact(value, paths), ensure_ascii=False, sort_keys=True)


def _output(side: Side, record: dict[str, Any]) -> str | None:
    key = record.get("key")
    if not key:
        return None
    try:
        stored = side.responses().get(key)
    except Exception:  # the remote may be unreachable (a fork PR): snippets are optional
        return None
    return stored["response"]["text"] if stored else None


def _flips(
    base: Side,
    head: Side,
    cell: Cell,
    base_records: list[dict[str, Any]],
    head_records: list[dict[str, Any]],
    pass_level: str,
) -> dict[str, Any]:
    ok = pass_levels(pass_level)
    b_ids, b_scores, _ = item_scores(base_records, lambda r: r["level"] in ok)
    h_ids, h_scores, _ = item_scores(head_records, lambda r: r["level"] in ok)
    b_score = dict(zip(b_ids, b_scores, strict=True))
    h_score = dict(zip(h_ids, h_scores, strict=True))
    b_first = {r["item"]: r for r in base_records if r["sample"] == 0}
    h_first = {r["item"]: r for r in head_records if r["sample"] == 0}
    changed = sorted(
        i for i in set(b_first) & set(h_first) if b_first[i]["content"] != h_first[i]["content"]
    )
    regressions: list[dict[str, Any]] = []
    improvements: list[dict[str, Any]] = []
    for item in sorted(set(b_score) & set(h_score)):
        if item in changed:
            continue
        before, after = b_score[item] >= 0.5, h_score[item] >= 0.5
        if before == after:
            continue
        entry = {
            "item": item,
            "tags": h_first[item]["tags"],
            "base_level": b_first[item]["level"],
            "head_level": h_first[item]["level"],
            "failed_criteria": sorted(
                c for c, v in h_first[item]["criteria"].items() if not v["passed"]
            ),
        }
        (improvements if after else regressions).append(entry)
    for entry in regressions[:MAX_FLIPS] + improvements[:MAX_FLIPS]:
        entry["input"] = snippet(_item_text(head.registry, cell, entry["item"]))
        entry["base_output"] = snippet(_redact_output(_output(base, b_first[entry["item"]]), cell))
        entry["head_output"] = snippet(_redact_output(_output(head, h_first[entry["item"]]), cell))
    return {
        "regressions_total": len(regressions),
        "improvements_total": len(improvements),
        "regressions": regressions[:MAX_FLIPS],
        "improvements": improvements[:MAX_FLIPS],
        "changed_items": {"count": len(changed), "ids": changed[:MAX_FLIPS]},
        "added_items": len(set(h_first) - set(b_first)),
        "removed_items": len(set(b_first) - set(h_first)),
    }


def _overall(ev: UseCaseEvidence | None, cid: str) -> dict[str, float] | None:
    if ev is None or cid not in ev.metrics:
        return None
    m = ev.metrics[cid]["all"]
    return {k: m[k].value for k in OVERALL if k in m}


def _counterfactual(
    base: Side,
    head: Side,
    base_cell: Cell,
    head_cell: Cell,
    base_records: list[dict[str, Any]],
    head_records: list[dict[str, Any]],
    pass_level: str,
    root: Path,
) -> dict[str, Any] | None:
    """Re-grade BASE's stored responses under HEAD's rubric: the ruler's share of a change."""
    try:
        store = base.responses()
    except Exception:
        return None
    grader = cell_grader(head_cell, head.registry, store, root)
    items = {i.id: i for i in base.registry.evalset_of(base_cell.task_id, base_cell.split).items}
    regraded = []
    for r in base_records:
        item = items.get(r["item"])
        if item is None:
            return None
        stored = store.get(r["key"]) if r.get("key") else None
        regraded.append(grader.record(item, r["sample"], r.get("key"), stored, r.get("error")))

    def rate(records: list[dict[str, Any]]) -> float:
        metrics = cell_metrics(records, head_cell.task, head_cell.rubric, pass_level)
        return metrics["all"]["pass_rate"].value

    before, regrade, after = rate(base_records), rate(regraded), rate(head_records)
    return {
        "base": before,
        "base_regraded": regrade,
        "head": after,
        "ruler": regrade - before,
        "model": after - regrade,
    }


def diff(root: Path, base_ref: str, head_ref: str | None = None) -> dict[str, Any]:
    """The diff of recorded results between the merge-base of BASE and HEAD, and HEAD."""
    base, head = resolve(root, base_ref, head_ref)
    base_status = {s.cell.id: s for s in status(base.registry)}
    head_status = {s.cell.id: s for s in status(head.registry)}
    base_cells = {c.id: c for c in cells(base.registry)}
    head_cells = {c.id: c for c in cells(head.registry)}
    base_ev = {
        s: gather(base.registry, s, list(base_status.values())) for s in base.registry.selections
    }
    head_ev = {
        s: gather(head.registry, s, list(head_status.values())) for s in head.registry.selections
    }
    warnings: list[str] = []
    out_cells = []
    for cid in sorted(set(base_cells) | set(head_cells)):
        b, h = base_cells.get(cid), head_cells.get(cid)
        entry: dict[str, Any] = {"id": cid}
        b_records = (
            read_records(base.registry, b) if b and base_status[cid].state != "pending" else []
        )
        h_records = (
            read_records(head.registry, h) if h and head_status[cid].state != "pending" else []
        )
        if h is None:
            entry["status"] = "removed"
        elif b is None:
            entry["status"] = "added" if h_records else "added, pending"
        elif not h_records:
            entry["status"] = "pending"
        elif not b_records:
            entry["status"] = "new results"
        else:
            entry["status"] = "compared"
        if b is not None and h is not None:
            bp, hp = base_status[cid].parts, head_status[cid].parts
            changed = sorted(k for k in hp if bp.get(k) != hp.get(k))
            entry["fingerprint_changes"] = changed
            for part, what in (("evalset", "eval set"), ("rubric", "rubric")):
                if part in changed:
                    warnings.append(
                        f"The {what} of {cid} changed: results before and after are "
                        "measured differently."
                    )
        sel = head.registry.selections.get(h.selection) if h else None
        pass_level = sel.policy.pass_level if sel else "correct"
        sel_id = h.selection if h else (b.selection if b else "")
        entry["overall"] = {
            "base": _overall(base_ev.get(b.selection) if b else None, cid.split("/", 1)[1]),
            "head": _overall(head_ev.get(sel_id), cid.split("/", 1)[1]) if h else None,
        }
        if b_records and h_records and b is not None and h is not None:
            entry["slices"] = [
                {
                    "slice": c.slice,
                    "n": c.diff.n,
                    "diff": c.diff.mean,
                    "lo": c.diff.lo,
                    "hi": c.diff.hi,
                    "only_base": c.diff.b,
                    "only_head": c.diff.c,
                    "p_adjusted": c.p_adjusted,
                    "verdict": c.verdict,
                    "mde": c.mde,
                }
                for c in compare(b_records, h_records, pass_level)
            ]
            entry["flips"] = _flips(base, head, h, b_records, h_records, pass_level)
            if "rubric" in entry.get("fingerprint_changes", []):
                entry["counterfactual"] = _counterfactual(
                    base, head, b, h, b_records, h_records, pass_level, root
                )
        out_cells.append(entry)
    return {
        "schema_version": DIFF_SCHEMA,
        "base": {"label": base.label, "rev": base.rev},
        "head": {"label": head.label, "rev": head.rev},
        "warnings": sorted(set(warnings)),
        "selections": _selections(base_ev, head_ev),
        "cells": out_cells,
    }


def _gate_state(ev: UseCaseEvidence | None, cand: str) -> list[tuple[str, str]]:
    if ev is None or cand not in ev.decision.assessments:
        return []
    a = ev.decision.assessments[cand]
    if a.pending:
        return [(f"gate {i + 1}", "pending") for i in range(len(ev.selection.policy.gates))]
    return [
        (
            f"gate {g.index}: {g.describe()}",
            "pass" if g.passed else ("too small" if g.too_small else f"fail ({fmt(g.value)})"),
        )
        for g in a.gates
    ]


def _selections(
    base_ev: dict[str, UseCaseEvidence], head_ev: dict[str, UseCaseEvidence]
) -> list[dict[str, Any]]:
    out = []
    for sid in sorted(set(base_ev) | set(head_ev)):
        b, h = base_ev.get(sid), head_ev.get(sid)
        gates = []
        cands = sorted(
            set(b.decision.assessments if b else {}) | set(h.decision.assessments if h else {})
        )
        for cand in cands:
            before = dict(_gate_state(b, cand))
            after = dict(_gate_state(h, cand))
            for gate in sorted(set(before) | set(after)):
                if before.get(gate) != after.get(gate):
                    gates.append(
                        {
                            "candidate": cand,
                            "gate": gate,
                            "before": before.get(gate, "–"),
                            "after": after.get(gate, "–"),
                        }
                    )
        either = h if h is not None else b
        out.append(
            {
                "id": sid,
                "use_case": either.selection.use_case if either is not None else sid,
                "declared": [
                    b.decision.declared if b else None,
                    h.decision.declared if h else None,
                ],
                "recommended": [
                    b.decision.recommended if b else None,
                    h.decision.recommended if h else None,
                ],
                "waiver": [bool(b and b.decision.waiver), bool(h and h.decision.waiver)],
                "policy_changed": bool(b and h and b.selection.policy != h.selection.policy),
                "gates": gates,
            }
        )
    return out
