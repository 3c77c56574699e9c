"""The diff the committed summaries alone can give, when eval sets cannot be read here.

A fork's pull request cannot read the team's DVC remote, so neither the eval sets nor the
per-item records are there; the cell summaries are in git. Without the items there is no
pairing: each slice's pass rate is compared as two independent per-sample rates (Newcombe's
interval for the difference), nothing is called better or worse, and no item is listed.
The policy is applied on each side to metrics read from the summaries' per-slice counts
(per-sample rates), so what it recommends is shown as well as what is declared.
The output has the shape of ``evalreg diff``'s, with ``"mode": "summaries"``.

Both diffs share the test for results that changed without a cause (``unexplained``): a
cell's fingerprint covers everything that can change its results, so a summary whose
numbers moved while its fingerprint stayed is a hand edit, or results from other inputs.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from evalreg import stats
from evalreg.cells import Cell, cells, use_cases_of
from evalreg.compare.config import config_changes
from evalreg.compare.selections import selections_diff
from evalreg.compare.statuses import UNEXPLAINED
from evalreg.metrics import COVERAGE, Metric, SliceMetrics
from evalreg.registry import schema
from evalreg.registry.loader import Registry
from evalreg.registry.tree import PathEscapes, Tree
from evalreg.results.records import (
    ALL,
    VERDICT_CHARS,
    CellSummary,
    CriterionCounts,
    SampleColumns,
    SliceAggregate,
    items_md5,
    read_summary,
)
from evalreg.results.tally import SliceTally
from evalreg.selection.policy import Decision, decide

MODE = "summaries"
UNTESTED = "untested"
"""The verdict of a slice compared from summaries: no paired test can be made."""
"""The status of a cell whose recorded results changed while its fingerprint did not."""
RULER_PARTS = frozenset({"rubric", "judges", "graders"})
"""Fingerprint parts that change how responses are graded (the ruler), not the responses."""
RESULT_FIELDS = ("items_file", "samples", "slices", "totals")
"""The fields of a summary that hold its results (the rest is provenance)."""


def unexplained(before: CellSummary, after: CellSummary) -> list[str]:
    """The result fields that differ between two summaries of a cell whose fingerprint is
    the same on both sides (sorted; empty when nothing moved or the fingerprint changed).
    A field only one side has (``samples`` before schema 2) is not compared."""
    fingerprint = before.get("fingerprint")
    if not isinstance(fingerprint, str) or fingerprint != after.get("fingerprint"):
        return []
    if before.get("fingerprint_parts") != after.get("fingerprint_parts"):
        return []
    if before.get("sequential") != after.get("sequential"):
        return []  # a sequential run stopped elsewhere, or the cell was completed: other items
    b: Mapping[str, object] = before
    a: Mapping[str, object] = after
    return [f for f in RESULT_FIELDS if f in b and f in a and b[f] != a[f]]


def ruler_changes(changed: list[str]) -> list[str]:
    """The parts among a cell's ``changed`` fingerprint parts that change the grading."""
    return [part for part in changed if part in RULER_PARTS]


@dataclass(frozen=True)
class Decided:
    """A selection and the policy's decision on one side of a diff."""

    selection: schema.Selection
    decision: Decision


def _accepted(levels: Mapping[str, int], pass_level: str) -> int:
    names = ("correct",) if pass_level == "correct" else ("correct", "acceptable")
    return sum(int(levels.get(name, 0)) for name in names)


def _overall(totals: SliceAggregate | None, pass_level: str) -> dict[str, float] | None:
    """Per-sample rates, latency and cost from a summary's totals."""
    if not isinstance(totals, dict):
        return None
    graded = int(totals.get("graded", 0))
    samples = int(totals.get("samples", 0))
    levels = totals.get("levels") or {}
    latency = totals.get("latency_ms") or {}
    cost = int(totals.get("cost_micro_usd", 0)) / 1_000_000
    out = {
        "pass_rate": _accepted(levels, pass_level) / graded if graded else 0.0,
        "unacceptable_rate": int(levels.get("unacceptable", 0)) / graded if graded else 0.0,
        "error_rate": (samples - graded) / samples if samples else 0.0,
        "cost_per_item_usd": cost / graded if graded else 0.0,
    }
    if not graded or graded > int(totals.get("batched", 0)):  # else unknown (batch)
        out["latency_p50_ms"] = float(latency.get("p50", 0))
        out["latency_p95_ms"] = float(latency.get("p95", 0))
    return out


def _slices(
    base: CellSummary, head: CellSummary, pass_level: str, confidence: float
) -> list[dict[str, Any]]:
    b, h = _by_name(base), _by_name(head)
    out = []
    for name in sorted(b.keys() & h.keys()):
        kb, nb = _accepted(b[name].get("levels") or {}, pass_level), int(b[name].get("graded", 0))
        kh, nh = _accepted(h[name].get("levels") or {}, pass_level), int(h[name].get("graded", 0))
        if not nb or not nh:
            continue
        d, lo, hi = stats.difference_interval(kb, nb, kh, nh, confidence)
        out.append(
            {
                "slice": name,
                "n": nh,
                "n_base": nb,
                "diff": d,
                "lo": lo,
                "hi": hi,
                "only_base": None,
                "only_head": None,
                "p_adjusted": None,
                "verdict": UNTESTED,
                "mde": None,
            }
        )
    return out


def _by_name(summary: CellSummary) -> dict[str, SliceAggregate]:
    """A summary's aggregates by slice name, the totals as ``all``."""
    totals = summary.get("totals") or _NO_TOTALS
    return {ALL: totals, **(summary.get("slices") or {})}


_NO_TOTALS = SliceTally().result()
"""The totals of a summary without any (edited by hand): the aggregate of no samples."""
_NO_COUNTS = CriterionCounts(applicable=0, passed=0)
"""The counts of a criterion a slice has none for."""


def _rate(k: int, n: int, confidence: float) -> Metric:
    lo, hi = stats.wilson(k, n, confidence)
    return Metric(k / n if n else 0.0, lo, hi, n)


def _criteria_failed(counts: Mapping[str, CriterionCounts], cid: str) -> int:
    c = counts.get(cid) or _NO_COUNTS
    return int(c.get("applicable", 0)) - int(c.get("passed", 0))


def _failure_hits(
    mode: schema.FailureMode,
    counts: Mapping[str, CriterionCounts],
    samples: SampleColumns | None,
) -> int | None:
    """Graded samples that failure ``mode`` hit: from the slice's criterion counts when one
    criterion detects it, else from the per-sample columns (``samples``, slice ``all``
    only); None when neither can tell."""
    if len(mode.detected_by) == 1:
        return _criteria_failed(counts, mode.detected_by[0])
    columns = samples.get("criteria") if samples else None
    if not isinstance(columns, dict):
        return None
    wanted = [columns.get(cid) for cid in mode.detected_by]
    if not all(isinstance(c, str) for c in wanted):
        return None
    failed = VERDICT_CHARS[False]
    # An error sample has no verdicts (its characters are "absent"), so it is never a hit.
    return sum(failed in verdicts for verdicts in zip(*wanted, strict=False))


def summary_metrics(
    summary: CellSummary, task: schema.Task, rubric: schema.Rubric, policy: schema.Policy
) -> dict[str, SliceMetrics]:
    """The metrics a policy names, per slice, from a summary's counts alone.

    Rates are per sample with Wilson intervals (what ``evalreg.metrics`` gives for one
    sample an item without clusters); consistency is known only with one sample an item,
    judge-human agreement never, and a failure cost per slice only when each mode has a
    single detecting criterion (on ``all`` the per-sample columns tell the rest). A metric
    that cannot be read is left out, so a gate on it does not pass.
    """
    confidence = policy.confidence
    slices = _by_name(summary)
    out: dict[str, SliceMetrics] = {}
    for name, t in slices.items():
        if not isinstance(t, dict):
            continue
        samples, graded = int(t.get("samples", 0)), int(t.get("graded", 0))
        levels = t.get("levels") or {}
        counts = t.get("criteria") or {}
        m: SliceMetrics = {
            "pass_rate": _rate(_accepted(levels, policy.pass_level), graded, confidence),
            "correct_rate": _rate(_accepted(levels, "correct"), graded, confidence),
            "acceptable_rate": _rate(_accepted(levels, "acceptable"), graded, confidence),
            "unacceptable_rate": _rate(int(levels.get("unacceptable", 0)), graded, confidence),
        }
        m["error_rate"] = _rate(samples - graded, samples, confidence)
        if task.repeats == 1:
            m["consistency"] = Metric(1.0, n=graded)
        overall = _overall(t, policy.pass_level) or {}
        timed = graded - int(t.get("batched", 0))
        for metric in ("latency_p50_ms", "latency_p95_ms"):
            if metric in overall:
                m[metric] = Metric(overall[metric], n=timed)
        m["cost_per_item_usd"] = Metric(overall.get("cost_per_item_usd", 0.0), n=graded)
        per_request = overall.get("cost_per_item_usd", 0.0)
        m["monthly_cost_usd"] = Metric(per_request * (task.monthly_volume or 0), n=graded)
        columns = summary.get("samples") if name == ALL else None
        hits = [_failure_hits(mode, counts, columns) for mode in task.failure_modes]
        if None not in hits:
            failure = sum(
                mode.cost_usd * (h or 0) / graded
                for mode, h in zip(task.failure_modes, hits, strict=True)
                if graded
            )
            m["failure_cost_per_1k_usd"] = Metric(failure * 1000, n=graded)
        for c in rubric.criteria:
            entry = counts.get(c.id) or _NO_COUNTS
            applicable = int(entry.get("applicable", 0))
            passed = applicable - _criteria_failed(counts, c.id)
            m[f"criterion:{c.id}"] = _rate(passed, applicable, confidence)
            if isinstance(c.grader, schema.HumanGrader):
                ungraded = int(entry.get("ungraded", 0))
                if applicable + ungraded:
                    share = applicable / (applicable + ungraded)
                    m[f"{COVERAGE}{c.id}"] = Metric(share, n=applicable + ungraded)
        out[name] = m
    return out


def summary_decisions(registry: Registry) -> dict[str, Decided]:
    """Per selection, the policy applied to its candidates' committed summaries; a
    candidate without a summary is pending."""
    out: dict[str, Decided] = {}
    by_id = {c.id: c for c in cells(registry)}
    for sid, selection in registry.selections.items():
        task = registry.tasks[selection.task]
        rubric = registry.rubrics[task.rubric]
        metrics: dict[str, dict[str, SliceMetrics]] = {}
        for cand in selection.candidates:
            cell = by_id.get(f"{selection.task}/{cand.id}")
            summary = read_summary(registry.tree, cell) if cell is not None else None
            if summary is not None:
                metrics[cand.id] = summary_metrics(summary, task, rubric, selection.policy)
        pending = {c.id for c in selection.candidates if c.id not in metrics}
        out[sid] = Decided(selection, decide(selection, metrics, pending))
    return out


DVC_CONFIG = ".dvc/config"


def remote_config_change(base: Tree, head: Tree) -> dict[str, Any]:
    """The DVC remotes (default and URLs) each side's ``.dvc/config`` configures, and
    whether they differ: results read from another remote are not the team's evidence."""
    sides = {"base": _remotes(base), "head": _remotes(head)}
    return {**sides, "changed": sides["base"] != sides["head"]}


def _remotes(tree: Tree) -> dict[str, Any]:
    from configobj import ConfigObj, ConfigObjError

    try:
        text = tree.read(DVC_CONFIG).decode("utf-8") if tree.is_file(DVC_CONFIG) else ""
        conf = ConfigObj(text.splitlines(), list_values=False, interpolation=False)
    except (OSError, UnicodeDecodeError, ConfigObjError, PathEscapes):
        return {"default": None, "remotes": {}, "unreadable": True}
    remotes = {}
    for section, values in conf.items():
        found = _REMOTE_SECTION.fullmatch(section.strip())
        if found and isinstance(values, dict):
            remotes[found.group(1)] = _without_password(str(values.get("url", "")))
    core = conf.get("core")
    default = core.get("remote") if isinstance(core, dict) else None
    return {"default": str(default) if default is not None else None, "remotes": remotes}


_REMOTE_SECTION = re.compile(r"""['"]?remote\s+"([^"]*)"['"]?""")


def _without_password(url: str) -> str:
    """``url`` with any password in it replaced: the comment is public."""
    return re.sub(r"^([a-z0-9+.-]+://[^/@:]*):[^/@]*@", r"\1:[redacted]@", url, flags=re.I)


def summary_diff(
    base: Registry, head: Registry, base_label: str, head_label: str, missing: list[str]
) -> dict[str, Any]:
    """The diff of two revisions' committed summaries (see the module docstring)."""
    base_cells: dict[str, Cell] = {c.id: c for c in cells(base)}
    head_cells: dict[str, Cell] = {c.id: c for c in cells(head)}
    warnings: list[str] = []
    out_cells = []
    ruled: set[str] = set()
    for cid in sorted(base_cells.keys() | head_cells.keys()):
        b, h = base_cells.get(cid), head_cells.get(cid)
        bs = read_summary(base.tree, b) if b else None
        hs = read_summary(head.tree, h) if h else None
        entry: dict[str, Any] = {"id": cid}
        if h is None:
            entry["status"] = "removed"
        elif b is None:
            entry["status"] = "added" if hs else "added, pending"
        elif hs is None:
            entry["status"] = "pending"
        elif bs is None:
            entry["status"] = "new results"
        elif unexplained(bs, hs):
            entry["status"] = UNEXPLAINED
        elif items_md5(bs) is not None and items_md5(bs) == items_md5(hs):
            entry["status"] = "unchanged"
        else:
            entry["status"] = "compared"
        if bs is not None and hs is not None:
            entry["fingerprint_changes"] = fingerprint_changes(
                cid, bs.get("fingerprint_parts") or {}, hs.get("fingerprint_parts") or {}, warnings
            )
            entry["unexplained"] = unexplained(bs, hs)
            if b is not None and h is not None:
                config = config_changes(b, h)
                if config:
                    entry["config_changes"] = config
            # Without the responses nothing can be re-graded: a ruler change is unattributed.
            entry["ruler_changed"] = bool(ruler_changes(entry["fingerprint_changes"]))
            if entry["ruler_changed"] and h is not None:
                entry["counterfactual"] = None
                ruled.update(use_cases_of(head, h))
        sel = head.selections.get(h.selection) if h else None
        policy = sel.policy if sel else None
        pass_level = policy.pass_level if policy else "correct"
        entry["overall"] = {
            "base": _overall(bs.get("totals"), pass_level) if bs else None,
            "head": _overall(hs.get("totals"), pass_level) if hs else None,
        }
        if bs is not None and hs is not None:
            confidence = policy.confidence if policy else 0.95
            entry["slices"] = _slices(bs, hs, pass_level, confidence)
        out_cells.append(entry)
    selections = selections_diff(summary_decisions(base), summary_decisions(head), ruled)
    return {
        "mode": MODE,
        # Not a change of the evidence: this machine cannot read it (a fork's pull request).
        "data_unavailable": sorted(set(missing)),
        "cells": out_cells,
        "selections": selections,
        "warnings": sorted(set(warnings)),
        "base": {"label": base_label},
        "head": {"label": head_label},
    }


def fingerprint_changes(
    cid: str, before: dict[str, Any], after: dict[str, Any], warnings: list[str]
) -> list[str]:
    """The fingerprint parts of cell ``cid`` that differ between the sides, sorted; a
    changed eval set or rubric adds a warning (the results measure different things)."""
    changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    for part, what in (("evalset", "eval set"), ("rubric", "rubric")):
        if part in changed:
            warnings.append(
                f"The {what} of {cid} changed: results before and after are measured differently."
            )
    return changed
