"""Selection policy to decision: gates fixed beforehand, an objective, a non-inferiority
margin, and whether the declared candidate is what the policy recommends.

Pure: it takes metrics per candidate and returns the decision with its reasons.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from evalreg import stats
from evalreg.metrics import COVERAGE, LOWER_IS_BETTER, Metric, SliceMetrics, covered
from evalreg.registry import schema
from evalreg.selection.stopping import State
from evalreg.sequential import Verdict
from evalreg.text.numbers import (
    compared_on,
    coverage_text,
    exact,
    gate_text,
    number,
    percent,
    wide_by_necessity,
)


@dataclass(frozen=True)
class GateResult:
    gate: schema.Gate
    index: int
    value: float | None
    """The number compared with the threshold (point or bound), None when unmeasured."""
    n: int
    passed: bool
    too_small: bool = False
    note: str = ""
    point: float | None = None
    """The metric's point estimate (``value`` itself for a gate on the point)."""
    clusters: int = 0
    """For a gate on a bound: the clusters its interval rests on (0: items not clustered)."""

    def describe(self) -> str:
        return gate_text(self.gate)

    def compared(self) -> str:
        """What was compared with the threshold, named: ``measured 0.62`` for a gate on the
        point, ``upper bound 0.709 (point estimate 0.62)`` for one on a bound, so a bound is
        never read as the estimate."""
        if self.value is None:
            return "not measured"
        if self.gate.metric.startswith(COVERAGE) and self.point is not None:
            return f"measured {coverage_text(round(self.point * self.n), self.n)}"
        if self.gate.on == "point" or self.point is None:
            return f"measured {number(self.value)}"
        return (
            f"{compared_on(self.gate)} {number(self.value)} (point estimate {number(self.point)})"
        )

    def why(self) -> str:
        """Why the gate failed: what it compared, and the note when there is one."""
        if self.value is None:
            return self.note or self.compared()
        return f"{self.compared()}; {self.note}" if self.note else self.compared()


@dataclass(frozen=True)
class Assessment:
    candidate: str
    pending: bool
    gates: list[GateResult] = field(default_factory=list)

    @property
    def eligible(self) -> bool:
        return not self.pending and all(g.passed for g in self.gates)


@dataclass(frozen=True)
class Decision:
    declared: str
    recommended: str | None
    ranking: list[str]
    """Eligible candidates in objective order (best first)."""
    assessments: dict[str, Assessment]
    reasons: list[str]
    waiver: schema.Waiver | None

    @property
    def agrees(self) -> bool:
        return self.declared == self.recommended

    @property
    def needs_waiver(self) -> bool:
        return not self.agrees and self.waiver is None


_LATENCY = frozenset({"latency_p50_ms", "latency_p95_ms"})


def check_gate(
    gate: schema.Gate, index: int, metric: Metric | None, confidence: float
) -> GateResult:
    if metric is None and gate.metric in _LATENCY:
        # Latency is left out where none was measured: responses bought in a batch.
        note = "no latency measured: its responses were bought through a batch API"
        return GateResult(gate, index, None, 0, False, note=note)
    if metric is None or metric.n == 0:
        return GateResult(gate, index, None, 0, False, note="no graded items in this slice")
    if metric.undefined:
        return GateResult(gate, index, None, metric.n, False, note=metric.undefined)
    value = metric.bound(gate.on)
    if gate.min is not None:
        passed = value >= gate.min
        small = gate.on == "lower_bound" and stats.too_small(
            metric.n, metric.value, gate.min, "lower", confidence
        )
    else:
        assert gate.max is not None
        passed = value <= gate.max
        small = gate.on == "upper_bound" and stats.too_small(
            metric.n, metric.value, gate.max, "upper", confidence
        )
    note = (
        f"too small to tell: {metric.n} items cannot show this with "
        f"{percent(confidence, 0)} confidence"
        if small and not passed
        else ""
    )
    if gate.metric.startswith(COVERAGE) and not passed:
        small = False  # a count of the responses graded, not an estimate: never too small
        graded, applicable = covered(metric)
        note = (
            f"{applicable - graded} of the {applicable} responses "
            f"{gate.metric.removeprefix(COVERAGE)!r} applies to have no human grade"
        )
    clusters = metric.clusters if gate.on != "point" else 0
    if not note and not passed and stats.few_clusters(clusters):
        note = wide_by_necessity(clusters).strip(" ()")
    return GateResult(
        gate,
        index,
        value,
        metric.n,
        passed,
        small and not passed,
        note,
        point=metric.value,
        clusters=clusters,
    )


def _as_settled(result: GateResult, verdict: Verdict | None) -> GateResult:
    """A gate's result as a sequential run proved it: passed only when proved to pass,
    with the anytime-valid interval the proof rests on."""
    if verdict is None:
        return result
    lo, hi = verdict.interval or (0.0, 1.0)
    interval = (
        f"anytime-valid interval {number(lo)} to {number(hi)} at alpha {number(verdict.alpha)}"
    )
    proved = {"pass": "proved to pass", "fail": "proved to fail"}.get(
        verdict.outcome or "", "not settled on the items bought"
    )
    return replace(
        result,
        passed=verdict.outcome == "pass",
        too_small=verdict.outcome is None,
        note=f"{proved}: {interval}",
    )


def _value(metrics: dict[str, SliceMetrics], metric: str) -> float:
    m = metrics.get("all", {}).get(metric)
    return m.value if m is not None else 0.0


def _objective_key(
    objective: schema.Objective, metrics: dict[str, SliceMetrics], candidate: str
) -> tuple[object, ...]:
    if objective.lexicographic is not None:
        parts = [
            -_value(metrics, t.metric) if t.maximize is not None else _value(metrics, t.metric)
            for t in objective.lexicographic
        ]
        return (*parts, candidate)
    score = sum(
        t.weight * (_value(metrics, t.metric) if t.maximize else -_value(metrics, t.metric))
        for t in objective.terms
    )
    return (-score, candidate)


def decide(
    selection: schema.Selection,
    metrics: dict[str, dict[str, SliceMetrics]],
    pending: set[str],
    settled: State | None = None,
) -> Decision:
    """Apply the policy to every candidate's metrics; pending candidates are never ranked.

    ``settled``: the verdicts of a sequential run that stopped before every item was
    bought (``selection.stopping``). They decide in place of the fixed-size tests, whose
    intervals on part of the items carry no guarantee for the whole eval set: a gate passes
    when proved to pass, and the recommendation is the one the run settled on."""
    policy = selection.policy
    waiver = next((w for w in selection.waivers if w.candidate == selection.selected), None)
    assessments: dict[str, Assessment] = {}
    reasons: list[str] = []
    for cand in selection.candidates:
        if cand.id in pending or cand.id not in metrics:
            assessments[cand.id] = Assessment(cand.id, True)
            reasons.append(f"{cand.id} is pending (no results) and is not ranked")
            continue
        results = [
            check_gate(g, i, metrics[cand.id].get(g.slice, {}).get(g.metric), policy.confidence)
            for i, g in enumerate(policy.gates, start=1)
        ]
        if settled is not None:
            results = [_as_settled(r, settled.gates.get((cand.id, r.index))) for r in results]
        assessments[cand.id] = Assessment(cand.id, False, results)
        for r in results:
            if not r.passed and settled is not None and r.too_small:
                reasons.append(
                    f"{cand.id}: gate {r.index} ({r.describe()}) was not settled when the "
                    f"sequential run stopped buying it: {r.why()}"
                )
            elif not r.passed:
                reasons.append(f"{cand.id} fails gate {r.index} ({r.describe()}): {r.why()}")
    eligible = [c for c, a in assessments.items() if a.eligible]
    ranking = sorted(eligible, key=lambda c: _objective_key(policy.objective, metrics[c], c))
    recommended = ranking[0] if ranking else None
    if settled is not None:
        recommended = settled.recommended if settled.decided else None
        if recommended is not None and recommended in ranking:
            ranking.remove(recommended)
            ranking.insert(0, recommended)
        if not settled.decided:
            reasons.append("the sequential run stopped before the decision was settled")
            return Decision(selection.selected, None, ranking, assessments, reasons, waiver)
    if recommended is None:
        reasons.append("no candidate passes every gate: nothing can be recommended")
    else:
        first = policy.objective.terms[0]
        reasons.append(
            f"{recommended} ranks first among eligible candidates by "
            f"{'maximizing' if first.maximize else 'minimizing'} {first.metric} "
            f"({number(_value(metrics[recommended], first.metric))})"
        )
        ni = policy.non_inferiority
        if ni is not None and len(ranking) > 1:
            best = _value(metrics[recommended], ni.metric)
            lower_better = ni.metric in LOWER_IS_BETTER

            def close_enough(c: str) -> bool:
                v = _value(metrics[c], ni.metric)
                return v <= best + ni.margin if lower_better else v >= best - ni.margin

            near = [c for c in ranking if close_enough(c)]
            prefer = ni.prefer
            chosen = sorted(
                near,
                key=lambda c: (
                    -_value(metrics[c], prefer.metric)
                    if prefer.maximize
                    else _value(metrics[c], prefer.metric),
                    ranking.index(c),
                ),
            )[0]
            if chosen != recommended:
                reasons.append(
                    f"{chosen} is within the non-inferiority margin ({exact(ni.margin)} on "
                    f"{ni.metric}) of {recommended} and better on {prefer.metric}: "
                    f"{chosen} is recommended"
                )
                recommended = chosen
    return Decision(selection.selected, recommended, ranking, assessments, reasons, waiver)
