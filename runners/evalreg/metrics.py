"""Metrics a policy, report or diff can name, computed per slice from a cell's outcomes.

Pure functions of the samples (``outcomes.Outcomes``, columns of the per-item records):
rates carry intervals (clustered by item, and by ``cluster`` when items declare one),
errors are kept out of the quality denominators, money is USD.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from statistics import NormalDist
from typing import Any

import numpy as np
import numpy.typing as npt

from evalreg import stats
from evalreg.families import (
    MIN_SLICE_ITEMS,
    NONE_DETECTABLE,
    PRIMARY,
    SLICES,
    TOO_SMALL_TO_TEST,
    UNTESTED,
    family_sentence,
    holm_levels,
)
from evalreg.registry import schema
from evalreg.registry.rates import ITEM_RATES
from evalreg.results.outcomes import ERROR, FAILED, Codes, Ints, Mask, Outcomes
from evalreg.results.records import LEVELS

__all__ = [
    "COVERAGE",
    "LOWER_IS_BETTER",
    "MIN_SLICE_ITEMS",
    "NONE_DETECTABLE",
    "PRIMARY",
    "SLICES",
    "TOO_SMALL_TO_TEST",
    "UNTESTED",
    "Comparison",
    "ItemCounts",
    "Metric",
    "SliceMetrics",
    "aligned",
    "cell_metrics",
    "compare",
    "covered",
    "family_sentence",
    "item_scores",
    "pass_levels",
    "passing",
    "verdicts",
]

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
COVERAGE = "coverage:"
"""The prefix of a human criterion's coverage: graded / applicable samples."""
_CORRECT = frozenset({"correct"})
_ACCEPTABLE = frozenset({"correct", "acceptable"})
_UNACCEPTABLE = frozenset({"unacceptable"})


@dataclass(frozen=True)
class Metric:
    """A value with its interval (rates only) and how many items stand behind it."""

    value: float
    lo: float | None = None
    hi: float | None = None
    n: int = 0
    clusters: int = 0
    """How many clusters the interval rests on when items declared them (0 otherwise)."""
    undefined: str = ""
    """Why the value is undefined (then ``value`` means nothing and no gate on it passes)."""

    def bound(self, on: str) -> float:
        if on == "lower_bound" and self.lo is not None:
            return self.lo
        if on == "upper_bound" and self.hi is not None:
            return self.hi
        return self.value


SliceMetrics = dict[str, Metric]


def covered(m: Metric) -> tuple[int, int]:
    """A ``coverage:<id>`` metric's counts: (graded, applicable) samples."""
    return round(m.value * m.n), m.n


def pass_levels(pass_level: str) -> frozenset[str]:
    return frozenset({"correct"} if pass_level == "correct" else {"correct", "acceptable"})


class ItemCounts:
    """Per item: how many of its samples count (``n``) and how many of those pass (``k``)."""

    def __init__(self, k: Ints, n: Ints) -> None:
        self.k = k
        self.n = n
        self.has: Mask = n > 0
        """Items with a counted sample."""
        self.positive: Mask = k > 0
        """Items with a passing sample."""
        self.binary = bool(((k == 0) | (k == n)).all())
        """Whether every item's samples all pass or all fail (its score is 0 or 1)."""

    def scores(self, where: Mask) -> list[float]:
        """The items' mean scores (``k / n``, the float a mean of 0/1 values gives)."""
        scores: list[float] = (self.k[where] / self.n[where]).tolist()
        return scores


_LEVEL_INDEX = {name: code for code, name in enumerate(LEVELS)}
_KINDS = 6
"""Sample kinds counted per item: the three levels, error, unknown level, and a spare."""


Counts = npt.NDArray[np.signedinteger[Any]]
"""Per-item counts of samples (32-bit when held per item, 64-bit when summed)."""


def _per_item(item: Ints, codes: Codes, values: range, size: int) -> Counts:
    """Per item (``item``: each sample's), how many of its samples have each of ``values``
    as their code: one column a value, as 32-bit counts. A column at a time, so that a
    million items' table is never counted in 64 bits at once (a report's peak)."""
    table = np.empty((size, len(values)), dtype=np.int32)
    for column, value in enumerate(values):
        table[:, column] = np.bincount(item[codes == value], minlength=size)
    return table


class _Cell:
    """What every slice of one cell shares: per-item counts, computed once."""

    def __init__(self, o: Outcomes) -> None:
        self.o = o
        self.graded = o.graded
        size = len(o.ids)
        # Per item, its samples of each level code.
        self.by_level = _per_item(o.item, o.level, range(_KINDS), size)
        self.graded_n: Ints = self.by_level.sum(axis=1) - self.by_level[:, ERROR]
        # Per item, its error share: an item erroring on every repeat is one item, not
        # many independent failures, as with every other rate.
        self.errors = ItemCounts(self.by_level[:, ERROR], self.by_level.sum(axis=1))
        self.own_cluster = o.items.own_cluster
        self.alone = o.items.alone
        self._levels: dict[frozenset[str], ItemCounts] = {}
        self._criteria: dict[str, Ints] = {}
        self._criterion_counts: dict[str, ItemCounts] = {}
        self._failures: list[tuple[float, Mask]] = []
        self._failures_key: object = None

    def level_counts(self, levels: frozenset[str]) -> ItemCounts:
        """Per item: its graded samples, and those whose level is one of ``levels``."""
        counts = self._levels.get(levels)
        if counts is None:
            columns = sorted(_LEVEL_INDEX[name] for name in levels if name in _LEVEL_INDEX)
            k = self.by_level[:, columns].sum(axis=1)
            counts = self._levels[levels] = ItemCounts(k, self.graded_n)
        return counts

    def _criterion_table(self, cid: str) -> Ints:
        """Per item, its samples of each code of criterion ``cid``, in columns ungraded,
        absent, failed, passed (codes -2, -1, 0, 1)."""
        table = self._criteria.get(cid)
        if table is None:
            codes = self.o.criteria.get(cid)
            size = len(self.o.ids)
            if codes is None:
                table = np.zeros((size, 4), dtype=np.int32)
            else:
                table = _per_item(self.o.item, codes, range(-2, 2), size)
            self._criteria[cid] = table
        return table

    def criterion_counts(self, cid: str) -> ItemCounts:
        """Per item: its samples criterion ``cid`` graded, and those it passed."""
        counts = self._criterion_counts.get(cid)
        if counts is None:
            table = self._criterion_table(cid)
            counts = self._criterion_counts[cid] = ItemCounts(
                table[:, 3], table[:, 2] + table[:, 3]
            )
        return counts

    def coverage(self, cid: str, items: Mask) -> Metric | None:
        """The share of the samples of ``items`` that criterion ``cid`` applies to which it
        graded (``n``: the samples it applies to); None when it applies to none."""
        table = self._criterion_table(cid)[items]
        graded = int(table[:, 2:].sum())
        applicable = graded + int(table[:, 0].sum())
        return Metric(graded / applicable, n=applicable) if applicable else None

    def rate(
        self, counts: ItemCounts, where: Mask, confidence: float, has: Mask | None = None
    ) -> Metric:
        """The rate over the items in ``where`` that have a counted sample, with its
        interval (as ``stats.clustered_rate`` gives it for their scores and clusters).
        ``has`` is ``where & counts.has`` when the caller has it already."""
        if has is None:
            has = where & counts.has
        n = int(np.count_nonzero(has))
        if not n:
            return Metric(0.0, 0.0, 1.0, 0)
        clustered = not self.alone and not bool(self.own_cluster[has].all())
        if not clustered and (counts.binary or self._binary(counts, has)):
            rate = stats.binary_rate(int(np.count_nonzero(has & counts.positive)), n, confidence)
        else:
            clusters = [self.o.clusters[i] for i in np.flatnonzero(has)] if clustered else None
            rate = stats.clustered_rate(counts.scores(has), clusters, confidence)
        return Metric(rate.mean, rate.lo, rate.hi, n, rate.clusters)

    def failures(self, task: schema.Task) -> list[tuple[float, Mask]]:
        """Per failure mode: its cost, and which graded samples it hit."""
        key = tuple((m.cost_usd, tuple(m.detected_by)) for m in task.failure_modes)
        if self._failures_key != key:
            modes = []
            for mode in task.failure_modes:
                hit = np.zeros(len(self.o), dtype=bool)
                for cid in mode.detected_by:
                    codes = self.o.criteria.get(cid)
                    if codes is not None:
                        hit |= codes == FAILED
                modes.append((mode.cost_usd, hit & self.graded))
            self._failures, self._failures_key = modes, key
        return self._failures

    @staticmethod
    def _binary(counts: ItemCounts, where: Mask) -> bool:
        k, n = counts.k[where], counts.n[where]
        return bool(((k == 0) | (k == n)).all())


def _slice_metrics(
    cell: _Cell,
    name: str,
    items: Mask,
    task: schema.Task,
    pass_level: str,
    confidence: float,
    criteria: Sequence[str],
    human: Sequence[str],
) -> SliceMetrics:
    o = cell.o
    ok = pass_levels(pass_level)
    samples = items[o.item]
    graded = samples & cell.graded
    # Items with a graded sample: what every level rate counts over.
    present = items & (cell.graded_n > 0)
    passing = cell.level_counts(ok)
    out: SliceMetrics = {
        metric: cell.rate(cell.level_counts(levels), items, confidence, present)
        for metric, levels in (
            ("pass_rate", ok),
            ("correct_rate", _CORRECT),
            ("acceptable_rate", _ACCEPTABLE),
            ("unacceptable_rate", _UNACCEPTABLE),
        )
    }
    n_graded = int(np.count_nonzero(graded))
    out["error_rate"] = cell.rate(cell.errors, items, confidence)
    n_items = out["pass_rate"].n
    if passing.binary:
        agreeing = n_items
    else:
        # An item is consistent when its samples all pass or all fail.
        k, m = passing.k[present], passing.n[present]
        agreeing = int(np.count_nonzero((k == 0) | (k == m)))
    out["consistency"] = Metric(agreeing / n_items if n_items else 1.0, n=n_items)
    usage = o.usage(name, graded)
    if usage.timed or not usage.graded:  # graded, none timed (batch): latency unknown
        out["latency_p50_ms"] = Metric(float(usage.latency_p50_ms), n=usage.timed)
        out["latency_p95_ms"] = Metric(float(usage.latency_p95_ms), n=usage.timed)
    cost = usage.cost_micro_usd / 1_000_000
    per_request = cost / n_graded if n_graded else 0.0
    out["cost_per_item_usd"] = Metric(per_request, n=n_graded)
    out["monthly_cost_usd"] = Metric(per_request * (task.monthly_volume or 0), n=n_graded)
    failure = 0.0
    for cost_usd, hit in cell.failures(task):
        hits = int(np.count_nonzero(hit & samples))
        failure += (hits / n_graded if n_graded else 0.0) * cost_usd
    out["failure_cost_per_1k_usd"] = Metric(failure * 1000, n=n_graded)
    for cid in criteria:
        out[f"criterion:{cid}"] = cell.rate(cell.criterion_counts(cid), items, confidence)
    for cid in human:
        coverage = cell.coverage(cid, items)
        if coverage is not None:
            out[f"{COVERAGE}{cid}"] = coverage
    return out


def item_scores(outcomes: Outcomes, metric: str, pass_level: str) -> dict[str, float] | None:
    """Per item with a counted sample, its score on the rate ``metric``: the share of its
    samples that count for it (pass, have the level, err, or pass criterion ``<id>``), so
    that the rate is the mean of these scores. None for a metric that is no such rate
    (latency, cost, consistency, coverage)."""
    cell = _Cell(outcomes)
    counts: ItemCounts
    if metric == "error_rate":
        counts = cell.errors
    elif metric.startswith("criterion:"):
        counts = cell.criterion_counts(metric.removeprefix("criterion:"))
    elif metric in ITEM_RATES:
        levels = {
            "pass_rate": pass_levels(pass_level),
            "correct_rate": _CORRECT,
            "acceptable_rate": _ACCEPTABLE,
            "unacceptable_rate": _UNACCEPTABLE,
        }[metric]
        counts = cell.level_counts(levels)
    else:
        return None
    ids = outcomes.ids
    return {ids[i]: float(counts.k[i] / counts.n[i]) for i in np.flatnonzero(counts.has)}


def cell_metrics(
    outcomes: Outcomes,
    task: schema.Task,
    rubric: schema.Rubric,
    pass_level: str = "correct",
    confidence: float = 0.95,
    only: Collection[str] | None = None,
) -> dict[str, SliceMetrics]:
    """Metrics for the whole cell (slice ``all``) and for every tag (or the slices named in
    ``only``: what a decision reads, when nothing else is shown).

    A criterion's pass rate counts the samples it graded; for a human criterion,
    ``coverage:<id>`` is the share of the samples it applies to that it graded."""
    criteria = [c.id for c in rubric.criteria]
    human = [c.id for c in rubric.criteria if isinstance(c.grader, schema.HumanGrader)]
    cell = _Cell(outcomes)
    return {
        name: _slice_metrics(cell, name, items, task, pass_level, confidence, criteria, human)
        for name, items in outcomes.slices().items()
        if only is None or name in only
    }


@dataclass(frozen=True)
class Comparison:
    """Paired comparison of two candidates on one slice's shared, unchanged items.

    ``diff`` carries the interval at ``level`` (``1 - level`` confidence): the stated
    level for the primary comparison, the level Holm tested this slice at for the slice
    family (see :func:`verdicts`), so the interval excludes 0 exactly when the verdict is
    better or worse. ``mde`` is what that test, at that level, detects with 80 % power
    (None, with ``mde_note``, when it can detect nothing).
    """

    slice: str
    diff: stats.PairedDiff
    p_adjusted: float | None
    mde: float | None
    verdict: str
    """better | worse | no detectable difference | too small to test (from the second
    candidate's side)."""
    family: str = PRIMARY
    level: float | None = None
    mde_note: str | None = None


def aligned(base: Outcomes, other: Outcomes) -> tuple[Ints, Mask]:
    """For each of ``base``'s items, the index of the same item in ``other`` (0 where it is
    missing) and whether it is there with the same content (the items that pair)."""
    if base.ids == other.ids:
        index = np.arange(len(base.ids), dtype=np.int64)
        if base.source is not None and base.source == other.source:
            return index, np.ones(len(base.ids), dtype=bool)
        pairs = zip(base.content(), other.content(), strict=True)
        return index, np.array([a == b for a, b in pairs], dtype=bool)
    where = {item: i for i, item in enumerate(other.ids)}
    found = [where.get(item, -1) for item in base.ids]
    index = np.array([max(i, 0) for i in found], dtype=np.int64)
    theirs = other.content()
    same = [i >= 0 and theirs[i] == c for i, c in zip(found, base.content(), strict=True)]
    return index, np.array(same, dtype=bool)


def compare(
    base: Outcomes,
    other: Outcomes,
    pass_level: str,
    confidence: float = 0.95,
) -> list[Comparison]:
    """``other`` against ``base`` per slice: difference with its interval, test and
    minimum detectable effect, in the families :func:`verdicts` describes. Items pair by
    id *and* content hash."""
    ok = pass_levels(pass_level)
    alpha = 1 - confidence
    if not base.ids or not other.ids:
        return []
    a_cell, b_cell = _Cell(base), _Cell(other)
    a_pass, b_pass = a_cell.level_counts(ok), b_cell.level_counts(ok)
    index, same = aligned(base, other)
    # ``other``'s per-item counts and slices, in ``base``'s item order.
    b_k, b_n = b_pass.k[index], b_pass.n[index]
    b_slices = other.slices()
    diffs: dict[str, stats.PairedDiff] = {}
    for name, a_items in base.slices().items():
        if name not in b_slices:
            continue
        shared = a_items & (a_pass.n > 0) & same & b_slices[name][index] & (b_n > 0)
        n = int(np.count_nonzero(shared))
        if not n:
            continue
        clustered = not bool(a_cell.own_cluster[shared].all())
        ak, an, bk, bn = a_pass.k[shared], a_pass.n[shared], b_k[shared], b_n[shared]
        a_binary = bool(((ak == 0) | (ak == an)).all())
        b_binary = bool(((bk == 0) | (bk == bn)).all())
        if not clustered and a_binary and b_binary:
            a_ok, b_ok = ak > 0, bk > 0
            only_a = int(np.count_nonzero(a_ok & ~b_ok))
            only_b = int(np.count_nonzero(b_ok & ~a_ok))
            diffs[name] = stats.paired_binary(n, only_a, only_b, confidence)
        else:
            clusters = [base.clusters[i] for i in np.flatnonzero(shared)] if clustered else None
            diffs[name] = stats.paired_comparison(
                (ak / an).tolist(), (bk / bn).tolist(), clusters, confidence
            )
    return verdicts(diffs, alpha)


def verdicts(diffs: dict[str, stats.PairedDiff], alpha: float) -> list[Comparison]:
    """Per slice's paired difference: its family, the interval at the level it is tested
    at, "better" or "worse" only when that interval excludes 0, and the MDE there.

    ``all`` is the primary test at ``alpha``. The other slices with at least
    :data:`MIN_SLICE_ITEMS` items are one Holm family: sorted by raw p-value, the ``i``-th
    (0-based) of ``m`` is tested at ``alpha / (m - i)`` until the first that is not
    rejected, and it and every later one at that first failing level. A slice's adjusted
    p-value is below ``alpha`` exactly when its raw p-value is below its level, so the
    interval at that level (the same statistic inverted, see :class:`stats.PairedDiff`)
    agrees with Holm's verdict. Smaller slices are shown with their raw interval, untested.
    """
    family = {k: d.p_value for k, d in diffs.items() if k != "all" and d.n >= MIN_SLICE_ITEMS}
    adjusted = stats.holm(family) if family else {}
    levels = holm_levels(family, alpha)
    if "all" in diffs:
        adjusted["all"], levels["all"] = diffs["all"].p_value, alpha
    out = []
    for name, d in diffs.items():
        if name not in levels:
            out.append(Comparison(name, d, None, None, TOO_SMALL_TO_TEST, UNTESTED))
            continue
        level = levels[name]
        lo, hi = d.interval(1.0 - level)
        shown = replace(d, lo=lo, hi=hi)
        if lo > 0.0 or hi < 0.0:
            verdict = "better" if lo > 0.0 else "worse"
        else:
            verdict = "no detectable difference"
        mde = _mde(d, level)
        note = NONE_DETECTABLE if mde is None else None
        kind = PRIMARY if name == "all" else SLICES
        out.append(Comparison(name, shown, adjusted[name], mde, verdict, kind, level, note))
    return out


def _mde(d: stats.PairedDiff, level: float) -> float | None:
    """The minimum detectable effect of the test ``d`` comes from, at ``level``."""
    if d.method == "exact":
        return stats.mde_mcnemar(d.n, d.b + d.c, alpha=level)
    # The clustered test: (z_{1-level/2} + z_{0.8}) standard errors, with the planning
    # floor of stats.mde_paired where the sample shows no spread at all.
    floor = stats.mde_paired(d.n, 0.0, alpha=level)
    normal = NormalDist()
    scale = normal.inv_cdf(1.0 - level / 2.0) + normal.inv_cdf(0.8)
    return min(1.0, max(scale * d.se, floor))


def passing(outcomes: Outcomes, pass_level: str) -> tuple[Mask, Mask]:
    """Per item: whether it has a graded sample, and whether it passes (its mean score over
    its graded samples is at least 0.5)."""
    counts = _Cell(outcomes).level_counts(pass_levels(pass_level))
    has: Mask = counts.n > 0
    passes: Mask = has & (2 * counts.k >= counts.n)
    return has, passes
