"""Metrics a policy, report or diff can name, computed per slice from a cell's item records.

Pure functions of the records: rates carry intervals (clustered by item, and by ``cluster``
when items declare one), errors are kept out of the quality denominators, money is USD.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from evalreg import stats
from evalreg.registry import schema
from evalreg.results import ALL, percentile

LOWER_IS_BETTER = frozenset(
    {
        "unacceptable_rate",
        "error_rate",
        "latency_p50_ms",
        "latency_p95_ms",
        "cost_per_item_usd",
        "monthly_cost_usd",
        "failure_cost_per_1k_usd",
    }
)
RATE_METRICS = frozenset(
    {"pass_rate", "correct_rate", "acceptable_rate", "unacceptable_rate", "error_rate"}
)


@dataclass(frozen=True)
class Metric:
    """A value with its interval (rates only) and how many items stand behind it."""

    value: float
    lo: float | None = None
    hi: float | None = None
    n: int = 0

    def bound(self, on: str) -> float:
        if on == "lower_bound" and self.lo is not None:
            return self.lo
        if on == "upper_bound" and self.hi is not None:
            return self.hi
        return self.value


SliceMetrics = dict[str, Metric]


def pass_levels(pass_level: str) -> frozenset[str]:
    return frozenset({"correct"} if pass_level == "correct" else {"correct", "acceptable"})


def by_slice(records: Iterable[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        out[ALL].append(r)
        for tag in r["tags"]:
            out[tag].append(r)
    return dict(out)


def item_scores(
    records: Sequence[dict[str, Any]], passed: Any
) -> tuple[list[str], list[float], list[str]]:
    """Per item (graded samples only): id, mean of ``passed(record)`` and cluster."""
    samples: dict[str, list[float]] = defaultdict(list)
    clusters: dict[str, str] = {}
    for r in records:
        if r["error"] is not None:
            continue
        verdict = passed(r)
        if verdict is None:
            continue
        samples[r["item"]].append(1.0 if verdict else 0.0)
        clusters[r["item"]] = r.get("cluster") or r["item"]
    ids = sorted(samples)
    return ids, [sum(samples[i]) / len(samples[i]) for i in ids], [clusters[i] for i in ids]


def _rate(records: Sequence[dict[str, Any]], passed: Any, confidence: float) -> Metric:
    ids, scores, clusters = item_scores(records, passed)
    if not ids:
        return Metric(0.0, 0.0, 1.0, 0)
    clustered = clusters if any(c != i for c, i in zip(clusters, ids, strict=True)) else None
    rate = stats.clustered_rate(scores, clustered, confidence)
    return Metric(rate.mean, rate.lo, rate.hi, len(ids))


def slice_metrics(
    records: Sequence[dict[str, Any]],
    task: schema.Task,
    pass_level: str,
    confidence: float,
    criteria: Sequence[str],
) -> SliceMetrics:
    """Every metric for one slice's records."""
    ok = pass_levels(pass_level)
    graded = [r for r in records if r["error"] is None]
    out: SliceMetrics = {
        "pass_rate": _rate(records, lambda r: r["level"] in ok, confidence),
        "correct_rate": _rate(records, lambda r: r["level"] == "correct", confidence),
        "acceptable_rate": _rate(
            records, lambda r: r["level"] in ("correct", "acceptable"), confidence
        ),
        "unacceptable_rate": _rate(records, lambda r: r["level"] == "unacceptable", confidence),
    }
    errors = len(records) - len(graded)
    lo, hi = stats.wilson(errors, len(records), confidence)
    out["error_rate"] = Metric(errors / len(records) if records else 0.0, lo, hi, len(records))
    per_item: dict[str, list[bool]] = defaultdict(list)
    for r in graded:
        per_item[r["item"]].append(r["level"] in ok)
    n_items = len(per_item)
    out["consistency"] = Metric(stats.consistency(list(per_item.values())), n=n_items)
    latencies = [int(r["latency_ms"]) for r in graded]
    out["latency_p50_ms"] = Metric(float(percentile(latencies, 50)), n=len(graded))
    out["latency_p95_ms"] = Metric(float(percentile(latencies, 95)), n=len(graded))
    cost = sum(int(r["cost_micro_usd"]) for r in graded) / 1_000_000
    per_request = cost / len(graded) if graded else 0.0
    out["cost_per_item_usd"] = Metric(per_request, n=len(graded))
    out["monthly_cost_usd"] = Metric(per_request * (task.monthly_volume or 0), n=len(graded))
    failure = 0.0
    for mode in task.failure_modes:
        hits = sum(
            any(
                cid in r["criteria"] and not r["criteria"][cid]["passed"]
                for cid in mode.detected_by
            )
            for r in graded
        )
        failure += (hits / len(graded) if graded else 0.0) * mode.cost_usd
    out["failure_cost_per_1k_usd"] = Metric(failure * 1000, n=len(graded))
    for cid in criteria:
        out[f"criterion:{cid}"] = _rate(
            records,
            lambda r, c=cid: r["criteria"][c]["passed"] if c in r["criteria"] else None,
            confidence,
        )
    return out


def cell_metrics(
    records: Sequence[dict[str, Any]],
    task: schema.Task,
    rubric: schema.Rubric,
    pass_level: str = "correct",
    confidence: float = 0.95,
) -> dict[str, SliceMetrics]:
    """Metrics for the whole cell (slice ``all``) and for every tag."""
    criteria = [c.id for c in rubric.criteria]
    return {
        name: slice_metrics(rs, task, pass_level, confidence, criteria)
        for name, rs in sorted(by_slice(records).items())
    }


@dataclass(frozen=True)
class Comparison:
    """Paired comparison of two candidates on one slice's shared, unchanged items."""

    slice: str
    diff: stats.PairedDiff
    p_adjusted: float
    mde: float
    verdict: str
    """better | worse | no detectable difference (from the second candidate's side)."""


def compare(
    base: Sequence[dict[str, Any]],
    other: Sequence[dict[str, Any]],
    pass_level: str,
    confidence: float = 0.95,
) -> list[Comparison]:
    """``other`` against ``base`` per slice: difference with CI, McNemar exact, Holm across
    slices, and the minimum detectable effect. Items pair by id *and* content hash."""
    ok = pass_levels(pass_level)
    alpha = 1 - confidence
    base_slices, other_slices = by_slice(base), by_slice(other)
    diffs: dict[str, stats.PairedDiff] = {}
    for name in sorted(set(base_slices) & set(other_slices)):
        a_ids, a_scores, a_clusters = item_scores(base_slices[name], lambda r: r["level"] in ok)
        b_ids, b_scores, _ = item_scores(other_slices[name], lambda r: r["level"] in ok)
        a_content = {r["item"]: r["content"] for r in base_slices[name]}
        b_content = {r["item"]: r["content"] for r in other_slices[name]}
        a_map = dict(zip(a_ids, zip(a_scores, a_clusters, strict=True), strict=True))
        b_map = dict(zip(b_ids, b_scores, strict=True))
        shared = [i for i in a_ids if i in b_map and a_content[i] == b_content[i]]
        if not shared:
            continue
        clusters = [a_map[i][1] for i in shared]
        diffs[name] = stats.paired_comparison(
            [a_map[i][0] for i in shared],
            [b_map[i] for i in shared],
            clusters if any(c != i for c, i in zip(clusters, shared, strict=True)) else None,
            confidence,
        )
    adjusted = stats.holm({k: d.p_value for k, d in diffs.items()}) if diffs else {}
    out = []
    for name, d in diffs.items():
        mde = stats.mde_paired(d.n, (d.b + d.c) / d.n if d.n else 0.0, alpha=alpha)
        if adjusted[name] < alpha and d.mean != 0:
            verdict = "better" if d.mean > 0 else "worse"
        else:
            verdict = "no detectable difference"
        out.append(Comparison(name, d, adjusted[name], mde, verdict))
    return out
