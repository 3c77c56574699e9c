"""Every metric and comparison computed straight from per-item records, one record at a time.

The reference ``tests/test_metrics.py`` holds ``evalreg.metrics`` to: the literal, slow
definitions (as evalreg computed them before metrics read columns).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import Any

from evalreg import stats
from evalreg.metrics import Comparison, Metric, pass_levels, verdicts
from evalreg.registry import schema
from evalreg.results.records import percentile

_CORRECT = frozenset({"correct"})
_ACCEPTABLE = frozenset({"correct", "acceptable"})
_UNACCEPTABLE = frozenset({"unacceptable"})
_ITEM = itemgetter("item")


SliceMetrics = dict[str, Metric]


def by_slice(records: Iterable[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Every record in ``all``, and in each of its tags' slices (once each)."""
    out: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        out.setdefault("all", []).append(r)
        for tag in sorted(set(r["tags"]) - {"all"}):
            out.setdefault(tag, []).append(r)
    return out


@dataclass(frozen=True)
class _Items:
    """One slice's graded samples by item, items in id order: built once per slice, read by
    every metric of it. Most eval sets have one sample an item, so that case keeps the
    records themselves (``single``) rather than a list per item."""

    ids: list[str]
    single: list[dict[str, Any]] | None
    """Each item's one graded record, when no item has more than one."""
    grouped: list[list[dict[str, Any]]] | None
    """Otherwise, per item, its graded records in the order the slice lists them."""
    clusters: list[str]
    """Per item, the cluster its last sample names (or the item id)."""
    clustered: bool
    """Whether any item is in a cluster other than its own."""

    @property
    def samples(self) -> list[list[dict[str, Any]]]:
        return self.grouped if self.grouped is not None else [[r] for r in self.single or ()]


def _group(records: Iterable[dict[str, Any]]) -> _Items:
    graded = [r for r in records if r["error"] is None]
    if len({r["item"] for r in graded}) == len(graded):
        single = sorted(graded, key=_ITEM)
        ids = [r["item"] for r in single]
        clusters = [r.get("cluster") or i for r, i in zip(single, ids, strict=True)]
        grouped = None
    else:
        groups: dict[str, list[dict[str, Any]]] = {}
        for r in graded:
            groups.setdefault(r["item"], []).append(r)
        ids = sorted(groups)
        single, grouped = None, [groups[i] for i in ids]
        clusters = [s[-1].get("cluster") or i for i, s in zip(ids, grouped, strict=True)]
    clustered = any(c != i for c, i in zip(clusters, ids, strict=True))
    return _Items(ids, single, grouped, clusters, clustered)


def _scores(items: _Items, passed: Any) -> tuple[list[str], list[float], list[str]]:
    ids: list[str] = []
    scores: list[float] = []
    clusters: list[str] = []
    if items.single is not None:
        for r, cluster in zip(items.single, items.clusters, strict=True):
            verdict = passed(r)
            if verdict is not None:
                ids.append(r["item"])
                scores.append(1.0 if verdict else 0.0)
                clusters.append(cluster)
        return ids, scores, clusters
    for item, samples in zip(items.ids, items.samples, strict=True):
        values: list[float] = []
        cluster = item
        for r in samples:
            verdict = passed(r)
            if verdict is not None:
                values.append(1.0 if verdict else 0.0)
                cluster = r.get("cluster") or item
        if values:
            ids.append(item)
            scores.append(sum(values) / len(values))
            clusters.append(cluster)
    return ids, scores, clusters


def item_scores(
    records: Sequence[dict[str, Any]], passed: Any
) -> tuple[list[str], list[float], list[str]]:
    """Per item (graded samples only): id, mean of ``passed(record)`` and cluster."""
    return _scores(_group(records), passed)


def _level_scores(items: _Items, accepted: frozenset[str]) -> list[float]:
    """Per item, the share of its samples whose level is one of ``accepted``."""
    if items.single is not None:
        return [1.0 if r["level"] in accepted else 0.0 for r in items.single]
    return [
        sum([1.0 if r["level"] in accepted else 0.0 for r in samples]) / len(samples)
        for samples in items.samples
    ]


def _criterion_scores(items: _Items, cid: str) -> tuple[list[str], list[float], list[str]]:
    """``_scores`` for criterion ``cid``'s verdicts (items it did not grade are left out)."""
    if items.single is None or items.clustered:
        return _scores(
            items, lambda r: r["criteria"][cid]["passed"] if cid in r["criteria"] else None
        )
    ids: list[str] = []
    scores: list[float] = []
    for r in items.single:
        verdict = r["criteria"].get(cid)
        if verdict is not None and (passed := verdict["passed"]) is not None:
            ids.append(r["item"])
            scores.append(1.0 if passed else 0.0)
    return ids, scores, ids


def _metric(
    ids: list[str], scores: list[float], clusters: list[str] | None, confidence: float
) -> Metric:
    """A rate with its interval; ``clusters`` None when every item is its own cluster."""
    if not ids:
        return Metric(0.0, 0.0, 1.0, 0)
    rate = stats.clustered_rate(scores, clusters, confidence)
    return Metric(rate.mean, rate.lo, rate.hi, len(ids), rate.clusters)


def _clustered(ids: list[str], clusters: list[str]) -> list[str] | None:
    return clusters if any(c != i for c, i in zip(clusters, ids, strict=True)) else None


def _level_rate(items: _Items, accepted: frozenset[str], confidence: float) -> Metric:
    clusters = items.clusters if items.clustered else None
    return _metric(items.ids, _level_scores(items, accepted), clusters, confidence)


def _error_rate(records: Sequence[dict[str, Any]], confidence: float) -> Metric:
    """Mean over items of each item's share of samples that errored, clustered like a rate."""
    samples: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        samples.setdefault(r["item"], []).append(r)
    ids = sorted(samples)
    scores = [sum(1.0 for r in samples[i] if r["error"] is not None) / len(samples[i]) for i in ids]
    clusters = [samples[i][-1].get("cluster") or i for i in ids]
    return _metric(ids, scores, _clustered(ids, clusters), confidence)


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
    items = _group(graded)
    out: SliceMetrics = {
        "pass_rate": _level_rate(items, ok, confidence),
        "correct_rate": _level_rate(items, _CORRECT, confidence),
        "acceptable_rate": _level_rate(items, _ACCEPTABLE, confidence),
        "unacceptable_rate": _level_rate(items, _UNACCEPTABLE, confidence),
    }
    out["error_rate"] = _error_rate(records, confidence)
    n_items = len(items.ids)
    out["consistency"] = Metric(
        stats.consistency(
            # One sample always agrees with itself.
            [(True,)] * n_items
            if items.single is not None
            else [[r["level"] in ok for r in samples] for samples in items.samples]
        ),
        n=n_items,
    )
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
        ids, scores, clusters = _criterion_scores(items, cid)
        out[f"criterion:{cid}"] = _metric(ids, scores, _clustered(ids, clusters), confidence)
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


def _pass_shares(
    records: Iterable[dict[str, Any]], ok: frozenset[str]
) -> tuple[dict[str, float], dict[str, str], dict[str, str]]:
    """In one pass, per item: the share of its graded samples that pass and its cluster (as
    ``item_scores`` gives them), and the content hash of its last record.

    Only strings and numbers are stored per item: no container is allocated per record,
    so a large comparison never sets off the garbage collector.
    """
    passes: dict[str, int] = {}
    samples: dict[str, int] = {}
    clusters: dict[str, str] = {}
    content: dict[str, str] = {}
    for r in records:
        item = r["item"]
        content[item] = r["content"]
        if r["error"] is None:
            passes[item] = passes.get(item, 0) + (r["level"] in ok)
            samples[item] = samples.get(item, 0) + 1
            clusters[item] = r.get("cluster") or item
    # A mean of 0/1 values: passes / samples is exactly the float item_scores computes.
    return {i: passes[i] / n for i, n in samples.items()}, clusters, content


def compare(
    base: Sequence[dict[str, Any]],
    other: Sequence[dict[str, Any]],
    pass_level: str,
    confidence: float = 0.95,
) -> list[Comparison]:
    """``other`` against ``base`` per slice, in ``metrics.verdicts``' families, from the
    per-item records. Items pair by id *and* content hash."""
    ok = pass_levels(pass_level)
    alpha = 1 - confidence
    base_slices, other_slices = by_slice(base), by_slice(other)
    diffs: dict[str, stats.PairedDiff] = {}
    for name in sorted(set(base_slices) & set(other_slices)):
        a_shares, a_clusters, a_content = _pass_shares(base_slices[name], ok)
        b_shares, _, b_content = _pass_shares(other_slices[name], ok)
        shared = [i for i in sorted(a_shares) if i in b_shares and a_content[i] == b_content[i]]
        if not shared:
            continue
        clusters = [a_clusters[i] for i in shared]
        diffs[name] = stats.paired_comparison(
            [a_shares[i] for i in shared],
            [b_shares[i] for i in shared],
            clusters if any(c != i for c, i in zip(clusters, shared, strict=True)) else None,
            confidence,
        )
    return verdicts(diffs, alpha)
