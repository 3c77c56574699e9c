"""The diff the committed summaries alone can give, when eval sets cannot be read here.

A fork's pull request cannot read the team's DVC remote, so neither the eval sets nor the
per-item records are there; the cell summaries are in git. Without the items there is no
pairing: each slice's pass rate is compared as two independent per-sample rates (Newcombe's
interval for the difference), nothing is called better or worse, and no item is listed.
Decisions are read from the selection files; what the policy recommends needs the items.
The output has the shape of ``evalreg diff``'s, with ``"mode": "summaries"``.
"""

from __future__ import annotations

import re
from typing import Any

from evalreg import stats
from evalreg.plan import Cell, cells
from evalreg.registry.loader import Registry
from evalreg.registry.schema import Selection, Waiver
from evalreg.registry.tree import PathEscapes, Tree
from evalreg.results import ALL, read_summary

MODE = "summaries"
UNTESTED = "untested"
"""The verdict of a slice compared from summaries: no paired test can be made."""


def _accepted(levels: dict[str, Any], pass_level: str) -> int:
    names = ("correct",) if pass_level == "correct" else ("correct", "acceptable")
    return sum(int(levels.get(name, 0)) for name in names)


def _overall(totals: dict[str, Any] | None, pass_level: str) -> dict[str, float] | None:
    """Per-sample rates, latency and cost from a summary's totals."""
    if not isinstance(totals, dict):
        return None
    graded = int(totals.get("graded", 0))
    samples = int(totals.get("samples", 0))
    levels = totals.get("levels") or {}
    latency = totals.get("latency_ms") or {}
    cost = int(totals.get("cost_micro_usd", 0)) / 1_000_000
    return {
        "pass_rate": _accepted(levels, pass_level) / graded if graded else 0.0,
        "unacceptable_rate": int(levels.get("unacceptable", 0)) / graded if graded else 0.0,
        "error_rate": (samples - graded) / samples if samples else 0.0,
        "latency_p50_ms": float(latency.get("p50", 0)),
        "latency_p95_ms": float(latency.get("p95", 0)),
        "cost_per_item_usd": cost / graded if graded else 0.0,
    }


def _slices(
    base: dict[str, Any], head: dict[str, Any], pass_level: str, confidence: float
) -> list[dict[str, Any]]:
    def by_name(summary: dict[str, Any]) -> dict[str, dict[str, Any]]:
        return {ALL: summary.get("totals") or {}, **(summary.get("slices") or {})}

    b, h = by_name(base), by_name(head)
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


def _items_md5(summary: dict[str, Any]) -> str | None:
    md5 = (summary.get("items_file") or {}).get("md5")
    return md5 if isinstance(md5, str) else None


def _waived(selection: Any) -> bool:
    return _waiver(selection) is not None


def _waiver(selection: Selection | None) -> Waiver | None:
    """The waiver of the declared candidate, if it has one."""
    if selection is None:
        return None
    return next((w for w in selection.waivers if w.candidate == selection.selected), None)


def waiver_entry(waiver: Waiver | None) -> dict[str, str] | None:
    """A waiver as the diff states it: who approved which candidate, when and why."""
    if waiver is None:
        return None
    return {
        "candidate": waiver.candidate,
        "approver": waiver.approver,
        "date": str(waiver.date),
        "reason": waiver.reason,
    }


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
        elif _items_md5(bs) is not None and _items_md5(bs) == _items_md5(hs):
            entry["status"] = "unchanged"
        else:
            entry["status"] = "compared"
        if bs is not None and hs is not None:
            entry["fingerprint_changes"] = fingerprint_changes(
                cid, bs.get("fingerprint_parts") or {}, hs.get("fingerprint_parts") or {}, warnings
            )
        sel = head.selections.get(h.selection) if h else None
        policy = sel.policy if sel else None
        pass_level = policy.pass_level if policy else "correct"
        entry["overall"] = {
            "base": _overall(bs.get("totals"), pass_level) if bs else None,
            "head": _overall(hs.get("totals"), pass_level) if hs else None,
        }
        if entry["status"] in ("compared", "unchanged") and bs is not None and hs is not None:
            confidence = policy.confidence if policy else 0.95
            entry["slices"] = _slices(bs, hs, pass_level, confidence)
        out_cells.append(entry)
    selections = []
    for sid in sorted(base.selections.keys() | head.selections.keys()):
        bsel, hsel = base.selections.get(sid), head.selections.get(sid)
        either = hsel if hsel is not None else bsel
        assert either is not None
        selections.append(
            {
                "id": sid,
                "use_case": either.use_case,
                "declared": [bsel.selected if bsel else None, hsel.selected if hsel else None],
                "recommended": [None, None],
                "waiver": [_waived(bsel), _waived(hsel)],
                "waivers": [waiver_entry(_waiver(bsel)), waiver_entry(_waiver(hsel))],
                "policy_changed": bool(bsel and hsel and bsel.policy != hsel.policy),
                "gates": [],
            }
        )
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
