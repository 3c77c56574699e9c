"""Which cells are fresh, stale or pending: each cell's fingerprint against its committed summary.

A cell is stale when its fingerprint differs from the one its committed summary records
(or the summary counts responses since purged, or provider errors to retry), and pending
when it has no committed summary at all.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from evalreg.cells import Cell, cells, fingerprint, fingerprint_parts, use_case_cells
from evalreg.errors import UsageError
from evalreg.registry.loader import Registry
from evalreg.registry.tree import Tree
from evalreg.results.records import CellSummary, read_summary
from evalreg.store.purge_log import read_log


@dataclass
class CellStatus:
    cell: Cell
    state: str
    """fresh | stale | pending"""
    reasons: list[str] = field(default_factory=list)
    fingerprint: str = ""
    parts: dict[str, Any] = field(default_factory=dict)
    decided: tuple[int, int] | None = None
    """(N, M) for a fresh cell whose results hold the first N of its M items: a sequential
    run stopped there, its use cases decided (``run --until-decided``)."""

    @property
    def shown(self) -> str:
        """The state as ``status`` shows it: ``decided (N of M)`` for a decided cell."""
        if self.decided is not None and self.state == "fresh":
            return f"decided ({self.decided[0]} of {self.decided[1]})"
        return self.state

    def as_dict(self) -> dict[str, Any]:
        """What ``evalreg status --json`` prints of the cell."""
        decided = self.decided is not None and self.state == "fresh"
        out: dict[str, Any] = {
            "cell": self.cell.id,
            "state": "decided" if decided else self.state,
            "reasons": self.reasons,
            "fingerprint": self.fingerprint,
        }
        if self.decided is not None:
            out["items"], out["of"] = self.decided
        return out


def status(
    registry: Registry, committed: Tree | None = None, split: str = "dev"
) -> list[CellStatus]:
    """Each cell's state against the summaries in ``committed`` (default: the registry's tree)."""
    tree = committed or registry.tree
    purged = _purged(tree)
    out = []
    for cell in cells(registry, split):
        parts = fingerprint_parts(registry, cell)
        fp = fingerprint(parts)
        summary = read_summary(tree, cell)
        if summary is None:
            out.append(CellStatus(cell, "pending", ["never run"], fp, parts))
            continue
        reasons = []
        if summary.get("fingerprint") != fp:
            old = summary.get("fingerprint_parts", {})
            changed = sorted(k for k in parts if old.get(k) != parts[k])
            reasons.append("changed: " + ", ".join(changed or ["fingerprint"]))
        md5 = summary.get("items_file", {}).get("md5")
        if md5 in purged:
            reasons.append(f"responses purged: {', '.join(sorted(purged[md5]))}")
        errors = int(summary.get("totals", {}).get("errors", 0))
        if errors:
            reasons.append(f"{errors} provider errors to retry")
        reasons += _sequential_changes(registry, summary)
        state = "stale" if reasons else "fresh"
        out.append(CellStatus(cell, state, reasons, fp, parts, _decided(summary)))
    return out


def _sequential_changes(registry: Registry, summary: CellSummary) -> list[str]:
    """Why results a sequential run stopped early no longer stand: a use case reading them
    whose policy now asks for another ``alpha`` or ``min_items``, or larger rounds."""
    stop = summary.get("sequential")
    if not isinstance(stop, dict):
        return []
    out = []
    for sid, given in sorted((stop.get("use_cases") or {}).items()):
        selection = registry.selections.get(sid)
        now = selection.policy.sequential if selection is not None else None
        if now is None or not isinstance(given, dict):
            continue
        if (
            now.alpha != given.get("alpha")
            or now.min_items != given.get("min_items")
            or now.round > int(given.get("round") or 0)
        ):
            out.append(f"changed: the sequential policy of {sid}")
    return out


def _decided(summary: CellSummary) -> tuple[int, int] | None:
    """(N, M) when the summary records a sequential run's stop before the last item."""
    stop = summary.get("sequential")
    if not isinstance(stop, dict):
        return None
    items, of = stop.get("items"), stop.get("of")
    if isinstance(items, int) and isinstance(of, int) and 0 <= items < of:
        return items, of
    return None


def require_use_case(registry: Registry, selection_id: str) -> None:
    """Refuse (``UsageError``) a use case ``registry`` does not hold, naming those it does."""
    if selection_id not in registry.selections:
        known = ", ".join(sorted(registry.selections)) or "none"
        raise UsageError(f"unknown use case {selection_id!r} (use cases: {known})")


def use_case_status(
    registry: Registry, statuses: Iterable[CellStatus], selection_id: str, split: str = "dev"
) -> list[CellStatus]:
    """The states of one use case's cells, in the order of its candidates, each as that use
    case sees the cell (``cells.use_case_cells``), from ``statuses`` (``status``'s, of the
    same registry and split)."""
    by_id = {st.cell.id: st for st in statuses}
    return [
        replace(by_id[cell.id], cell=cell) for cell in use_case_cells(registry, selection_id, split)
    ]


def _purged(tree: Tree) -> dict[str, set[str]]:
    """md5 of per-item records written before a purge → the items purged from them.

    Results recorded before a purge still count responses the store no longer holds; they
    are stale until re-graded.
    """
    out: dict[str, set[str]] = {}
    for purge in read_log(tree):
        for md5 in purge.results:
            out.setdefault(md5, set()).add(purge.item)
    return out
