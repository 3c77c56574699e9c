"""How each selection's decision moved between two sides of a diff: declared and
recommended candidates, waivers and gates, whichever way the evidence was read."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from evalreg.registry import schema
from evalreg.registry.schema import Waiver
from evalreg.selection.policy import Decision


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


class SideDecision(Protocol):
    """A selection and its decision on one side: the evidence gathered from the per-item
    data, or (``summaries.Decided``) from the summaries alone."""

    @property
    def selection(self) -> schema.Selection: ...

    @property
    def decision(self) -> Decision: ...


def _gate_state(ev: SideDecision | None, cand: str) -> list[tuple[str, str]]:
    if ev is None or cand not in ev.decision.assessments:
        return []
    a = ev.decision.assessments[cand]
    if a.pending:
        return [(f"gate {i + 1}", "pending") for i in range(len(ev.selection.policy.gates))]
    return [
        (
            f"gate {g.index}: {g.describe()}",
            "pass" if g.passed else ("too small" if g.too_small else f"fail: {g.compared()}"),
        )
        for g in a.gates
    ]


def selections_diff(
    base_ev: Mapping[str, SideDecision],
    head_ev: Mapping[str, SideDecision],
    ruled: set[str],
) -> list[dict[str, Any]]:
    """Per selection: declared and recommended candidates, waivers and gates on both
    sides; ``ruled`` are the selections whose rubric or graders changed."""
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
                "waivers": [
                    waiver_entry(b.decision.waiver) if b else None,
                    waiver_entry(h.decision.waiver) if h else None,
                ],
                "policy_changed": bool(b and h and b.selection.policy != h.selection.policy),
                "ruler_changed": sid in ruled,
                "gates": gates,
            }
        )
    return out
