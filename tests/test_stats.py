"""Statistics against published worked examples and hand-computed cases."""

from __future__ import annotations

import math
import random
import subprocess
import sys
from fractions import Fraction

import numpy as np
import pytest
from scipy.stats import t as t_dist

from evalreg import stats
from evalreg.stats import (
    DISCORDANCE_FLOOR,
    EXACT_MCNEMAR_LIMIT,
    PairedDiff,
    Rate,
    binary_rate,
    clustered_mcnemar,
    clustered_rate,
    consistency,
    difference_interval,
    holm,
    mcnemar_exact,
    mde_paired,
    mde_rate,
    paired_binary,
    paired_comparison,
    too_small,
    wilson,
)

Z95 = 1.959963984540054  # standard normal 0.975 quantile
Z_SUM = 2.801585218112968  # z_0.975 + z_0.8, the alpha = 0.05 / power = 0.8 multiplier

# ---------------------------------------------------------------- wilson

# Newcombe RG (1998), "Two-sided confidence intervals for the single proportion: comparison
# of seven methods", Stat. Med. 17:857-872, Table I, method 3 (Wilson score, no continuity
# correction). Quoted to four decimals; also checked against an independent implementation.
NEWCOMBE_TABLE_I = [
    (81, 263, 0.2553, 0.3662),
    (15, 148, 0.0624, 0.1605),
    (0, 20, 0.0000, 0.1611),
    (1, 29, 0.0061, 0.1718),
]


@pytest.mark.parametrize(("k", "n", "lo", "hi"), NEWCOMBE_TABLE_I)
def test_wilson_matches_newcombe_table_i(k: int, n: int, lo: float, hi: float) -> None:
    got = wilson(k, n)
    assert got == pytest.approx((lo, hi), abs=5e-5)


def test_wilson_edges() -> None:
    assert wilson(0, 0) == (0.0, 1.0)
    assert wilson(0, 40)[0] == 0.0
    assert wilson(40, 40)[1] == 1.0
    # 0/n upper bound is z^2 / (n + z^2) in closed form.
    assert wilson(0, 40)[1] == pytest.approx(Z95**2 / (40 + Z95**2), rel=1e-12)
    # k/n and (n-k)/n are mirror images.
    lo, hi = wilson(7, 30)
    assert wilson(23, 30) == pytest.approx((1 - hi, 1 - lo), abs=1e-12)
    # Higher confidence, wider interval.
    assert wilson(7, 30, 0.99)[0] < lo
    assert wilson(7, 30, 0.99)[1] > hi


@pytest.mark.parametrize(
    ("k", "n", "confidence"), [(-1, 5, 0.95), (6, 5, 0.95), (1, -1, 0.95), (1, 5, 1.0)]
)
def test_wilson_rejects_bad_input(k: int, n: int, confidence: float) -> None:
    with pytest.raises(ValueError):
        wilson(k, n, confidence)


# ---------------------------------------------------------------- mcnemar_exact


def _binomial_two_sided(b: int, c: int) -> float:
    """Exact two-sided sign-test p-value by direct summation, in rationals."""
    m = b + c
    tail = sum(Fraction(math.comb(m, i), 2**m) for i in range(min(b, c) + 1))
    return float(min(Fraction(1), 2 * tail))


def test_mcnemar_small_table_by_hand() -> None:
    # b = 1, c = 9: p = 2 * (C(10,0) + C(10,1)) / 2^10 = 22 / 1024.
    assert mcnemar_exact(1, 9) == pytest.approx(22 / 1024, rel=1e-12)
    assert mcnemar_exact(9, 1) == pytest.approx(22 / 1024, rel=1e-12)


def test_mcnemar_agresti_presidential_approval() -> None:
    # Agresti A, Categorical Data Analysis (2nd ed. 2002, Table 10.1; 3rd ed. 2013, Table
    # 11.1): approval of the President's performance in two surveys of the same 1600 people,
    # 794 approve/approve, 150 approve/disapprove, 86 disapprove/approve, 570 both disapprove.
    # Agresti's McNemar statistic is z = (86 - 150) / sqrt(86 + 150) = -4.17 (p < 0.0001);
    # the exact binomial p-value on the 236 discordant pairs is 3.716e-05.
    b, c = 150, 86
    assert (c - b) / math.sqrt(b + c) == pytest.approx(-4.17, abs=5e-3)
    p = mcnemar_exact(b, c)
    assert p == pytest.approx(_binomial_two_sided(b, c), rel=1e-9)
    assert p == pytest.approx(3.716e-05, rel=1e-3)


def test_mcnemar_edges() -> None:
    assert mcnemar_exact(0, 0) == 1.0
    assert mcnemar_exact(5, 5) == 1.0  # capped, not 2 * P(X <= 5) > 1
    assert mcnemar_exact(0, 1) == 1.0
    assert mcnemar_exact(0, 6) == pytest.approx(2 / 64, rel=1e-12)
    with pytest.raises(ValueError):
        mcnemar_exact(-1, 3)


# ---------------------------------------------------------------- holm


def test_holm_wikipedia_example() -> None:
    # Wikipedia, "Holm-Bonferroni method", Example: p1 = 0.01, p2 = 0.04, p3 = 0.03,
    # p4 = 0.005 at alpha = 0.05; H4 and H1 are rejected. Adjusted: sorted 0.005, 0.01, 0.03,
    # 0.04 times 4, 3, 2, 1 = 0.02, 0.03, 0.06, 0.04 -> monotone 0.02, 0.03, 0.06, 0.06.
    got = holm({"H1": 0.01, "H2": 0.04, "H3": 0.03, "H4": 0.005})
    assert got == pytest.approx({"H1": 0.03, "H2": 0.06, "H3": 0.06, "H4": 0.02})
    assert list(got) == ["H1", "H2", "H3", "H4"]
    assert sorted(key for key, value in got.items() if value <= 0.05) == ["H1", "H4"]


def test_holm_monotone_capped_and_ties() -> None:
    # 3 * 0.01 = 0.03; 2 * 0.011 = 0.022 -> raised to 0.03; 1 * 0.5.
    assert holm({"a": 0.011, "b": 0.5, "c": 0.01}) == pytest.approx(
        {"a": 0.03, "b": 0.5, "c": 0.03}
    )
    assert holm({"x": 0.4, "y": 0.6}) == pytest.approx({"x": 0.8, "y": 0.8})
    assert holm({"x": 0.7, "y": 0.9}) == {"x": 1.0, "y": 1.0}
    # Ties get equal values whatever the key order.
    assert holm({"b": 0.02, "a": 0.02, "c": 0.5}) == pytest.approx({"a": 0.06, "b": 0.06, "c": 0.5})
    assert holm({}) == {}
    assert holm({"only": 0.2}) == {"only": 0.2}
    with pytest.raises(ValueError):
        holm({"bad": float("nan")})


# ---------------------------------------------------------------- paired_comparison

A = [1.0, 1.0, 0.0, 0.0, 1.0]
B = [1.0, 0.0, 1.0, 1.0, 1.0]


def test_paired_comparison_by_hand() -> None:
    # d = B - A = [0, -1, 1, 1, 0]: mean 0.2, residuals -0.2, -1.2, 0.8, 0.8, -0.2,
    # sum of squares 2.8, var = 5/4 * 2.8 / 25 = 0.14 (= stdev(d)^2 / n).
    got = paired_comparison(A, B)
    se = math.sqrt(0.14)
    assert (got.n, got.b, got.c) == (5, 1, 2)
    assert got.mean == pytest.approx(0.2)
    assert got.se == pytest.approx(se)
    # Pass/fail without clusters: McNemar's exact test, 1 against 2 discordant pairs:
    # 2 · P(X ≤ 1) for X ~ Binomial(3, 1/2) = 2 · 4/8 ≥ 1. Tango's interval holds 0 already.
    assert got.method == "exact"
    assert got.p_value == 1.0
    assert (got.lo, got.hi) == stats.tango_interval(5, 1, 2)


def test_paired_comparison_clustered_by_hand() -> None:
    # Cluster residual sums: x = -0.2 - 1.2 = -1.4, y = 0.8 + 0.8 = 1.6, z = -0.2;
    # squares 1.96 + 2.56 + 0.04 = 4.56; var = 3/2 * 4.56 / 25 = 0.2736.
    got = paired_comparison(A, B, clusters=["x", "x", "y", "y", "z"])
    se = math.sqrt(0.2736)
    assert got.se == pytest.approx(se)
    assert got.mean == pytest.approx(0.2)
    assert (got.b, got.c) == (1, 2)
    # Cluster sums S = -1, 2, 0: X² = 1² / max(1 + 4 + 0, Σd² = 3) = 0.2 on G = 3 clusters,
    # t = sqrt(2 · 0.2 / 2.8) on 2 degrees of freedom.
    assert clustered_mcnemar([0.0, -1.0, 1.0, 1.0, 0.0], ["x", "x", "y", "y", "z"]) == 0.2
    assert got.p_value == pytest.approx(2 * t_dist.sf(math.sqrt(0.4 / 2.8), 2))
    # Interval: n²(0.2 - δ)² ≤ x·(5 - 2·2δ + 9δ²) with x = 3t²/(2 + t²), t = t_{2, 0.975}
    # (the cluster bound; the pair bound, 3 - 2δ + 5δ², is narrower here).
    t = t_dist.ppf(0.975, 2)
    x = 3 * t * t / (2 + t * t)
    qa, qb, qc = 25 - 9 * x, 25 * 0.2 - 2 * x, 25 * 0.04 - 5 * x
    half = math.sqrt(qb * qb - qa * qc)
    assert (got.lo, got.hi) == pytest.approx(
        (max(-1.0, (qb - half) / qa), min(1.0, (qb + half) / qa))
    )
    # Singleton clusters are the unclustered estimator and exact McNemar.
    assert paired_comparison(A, B, clusters=list("abcde")) == paired_comparison(A, B)


def test_clustered_mcnemar_with_singleton_clusters_is_mcnemars_statistic() -> None:
    for b, c, ties in ((0, 0, 3), (1, 0, 0), (3, 7, 5), (12, 2, 40), (9, 9, 1)):
        diffs = [-1.0] * b + [1.0] * c + [0.0] * ties
        expected = (c - b) ** 2 / (b + c) if b + c else 0.0
        assert clustered_mcnemar(diffs) == pytest.approx(expected)
        assert clustered_mcnemar(diffs, [str(i) for i in range(len(diffs))]) == pytest.approx(
            expected
        )


def test_clustered_mcnemar_by_hand() -> None:
    # Clusters g1 [1, 1, 0], g2 [1, -1], g3 [-1], g4 [1, 1]: S = 2, 0, -1, 2; ΣS = 3,
    # ΣS² = 9 (≥ Σd² = 7), so X² = 9 / 9 = 1, where McNemar ignoring the clusters
    # ((5 - 2)² / 7 ≈ 1.29) would count the pairs of one cluster as independent.
    diffs = [1.0, 1.0, 0.0, 1.0, -1.0, -1.0, 1.0, 1.0]
    clusters = ["g1", "g1", "g1", "g2", "g2", "g3", "g4", "g4"]
    assert clustered_mcnemar(diffs, clusters) == 1.0
    assert clustered_mcnemar(diffs) == pytest.approx(9 / 7)
    # Discordance that cancels within clusters is floored at independent pairs' variance.
    assert clustered_mcnemar([1.0, -1.0, 1.0, -1.0, 1.0], ["a", "a", "b", "b", "c"]) == 1 / 5
    with pytest.raises(ValueError):
        clustered_mcnemar([1.0], ["a", "b"])


def test_clustered_interval_excludes_zero_exactly_when_the_test_rejects() -> None:
    rng = random.Random(4)
    checked = 0
    for _ in range(3000):
        groups = rng.randint(2, 12)
        sizes = [rng.randint(1, 6) for _ in range(groups - 1)] + [rng.randint(2, 6)]
        clusters = [f"g{g}" for g, size in enumerate(sizes) for _ in range(size)]
        lean = rng.random()
        d = [rng.choice((-1.0, 0.0, 1.0, 1.0)) if rng.random() < lean else 0.0 for _ in clusters]
        a = [1.0 if x < 0 else 0.0 for x in d]
        b = [1.0 if x > 0 else 0.0 for x in d]
        for confidence in (0.95, 0.99):
            got = paired_comparison(a, b, clusters, confidence)
            excludes = got.lo > 0.0 or got.hi < 0.0
            assert excludes == (got.p_value < 1 - confidence), (d, clusters, got)
            assert got.lo <= got.mean <= got.hi
            checked += excludes
    assert checked > 100  # the grid holds many significant tables, not only null ones


def test_clustered_pairs_do_not_count_as_independent_evidence() -> None:
    # 4 clusters of 10 items; B wins every discordant pair of two clusters and A every one
    # of a third: McNemar over items says p < 0.01, the clustered test does not reject.
    d = [1.0] * 10 + [1.0] * 10 + [-1.0] * 4 + [0.0] * 6 + [0.0] * 10
    a = [1.0 if x < 0 else 0.0 for x in d]
    b = [1.0 if x > 0 else 0.0 for x in d]
    clusters = [f"g{i // 10}" for i in range(40)]
    assert mcnemar_exact(4, 20) < 0.01
    got = paired_comparison(a, b, clusters)
    assert got.p_value > 0.05
    assert got.lo < 0.0 < got.hi


def test_paired_comparison_is_antisymmetric() -> None:
    a = [1.0, 0.0, 1.0, 0.5, 0.25, 1.0, 0.0, 0.75]
    b = [0.0, 1.0, 1.0, 1.0, 0.0, 0.5, 0.0, 1.0]
    clusters = ["p", "p", "q", "q", "r", "r", "s", "s"]
    for groups in (None, clusters):
        forward = paired_comparison(a, b, groups)
        backward = paired_comparison(b, a, groups)
        assert backward.mean == pytest.approx(-forward.mean)
        assert (backward.lo, backward.hi) == pytest.approx((-forward.hi, -forward.lo))
        assert backward.se == pytest.approx(forward.se)
        assert (backward.b, backward.c) == (forward.c, forward.b)
        assert backward.p_value == forward.p_value


def test_paired_comparison_with_repeats_tests_the_mean_not_the_dichotomy() -> None:
    # Score >= 0.5 passes: only B passes items 0..8, only A passes item 9. Yet B's mean is
    # lower (-0.041): McNemar on the dichotomy (p = 22/1024) would call B better. Repeats
    # are tested on the mean differences: X² = 0.041² / (9 · 0.01² + 0.5²).
    a = [0.49] * 9 + [0.5]
    b = [0.5] * 9 + [0.0]
    got = paired_comparison(a, b)
    assert (got.b, got.c) == (1, 9)
    assert got.mean == pytest.approx(-0.041)
    x = 0.41**2 / (9 * 0.01**2 + 0.5**2)
    assert clustered_mcnemar([y - v for v, y in zip(a, b, strict=True)]) == pytest.approx(x)
    assert got.p_value == pytest.approx(2 * t_dist.sf(math.sqrt(9 * x / (10 - x)), 9))
    assert got.p_value > 0.05
    assert got.method == "clustered"


def test_paired_comparison_edges() -> None:
    assert paired_comparison([], []) == PairedDiff(0, 0.0, 0.0, 0.0, 0.0, 0, 0, 1.0)
    same = paired_comparison([1.0, 0.0, 1.0], [1.0, 0.0, 1.0])
    assert (same.mean, same.se, same.p_value) == (0.0, 0.0, 1.0)
    assert same.lo < 0.0 < same.hi  # never a zero-width interval
    one = paired_comparison([0.0], [1.0])
    assert one.se == 1.0 and one.lo < 0.0 < one.hi == 1.0
    assert paired_comparison(A, B, clusters=["k"] * 5).se == 1.0
    with pytest.raises(ValueError):
        paired_comparison([1.0], [1.0, 0.0])
    with pytest.raises(ValueError):
        paired_comparison([1.0], [1.5])
    with pytest.raises(ValueError):
        paired_comparison([1.0], [0.0], clusters=["a", "b"])


# ---------------------------------------------------------------- minimum detectable effects


def test_mde_paired_by_hand() -> None:
    # (z_0.975 + z_0.8) * sqrt(psi / n) with psi = 0.2.
    assert mde_paired(100, 0.2) == pytest.approx(Z_SUM * math.sqrt(0.002))
    assert mde_paired(100, 0.2) == pytest.approx(0.12529, abs=1e-5)
    assert mde_paired(400, 0.2) == pytest.approx(0.06265, abs=1e-5)
    # Below the floor the floor applies (0 included); it can be switched off.
    assert DISCORDANCE_FLOOR == 0.10
    assert mde_paired(100, 0.0) == mde_paired(100, 0.10) == pytest.approx(0.08859, abs=1e-5)
    assert mde_paired(100, 0.05, discordance_floor=0.0) == pytest.approx(Z_SUM * math.sqrt(0.0005))
    assert mde_paired(0, 0.3) == 1.0
    assert mde_paired(1, 1.0) == 1.0  # clamped
    sizes = [10, 40, 100, 400, 1000]
    values = [mde_paired(n, 0.15) for n in sizes]
    assert values == sorted(values, reverse=True)
    assert len(set(values)) == len(values)


def test_mde_rate_by_hand() -> None:
    # (z_0.975 + z_0.8) * sqrt(p (1 - p) / n) with p = 0.5.
    assert mde_rate(100, 0.5) == pytest.approx(Z_SUM * 0.05)
    assert mde_rate(100, 0.5) == pytest.approx(0.14008, abs=1e-5)
    assert mde_rate(400, 0.5) == pytest.approx(0.07004, abs=1e-5)
    # 0/40 and 40/40 use p = 0.05 / 0.95: sqrt(0.0475 / 40) * 2.8016 = 0.0965.
    assert mde_rate(40, 0.0) == mde_rate(40, 1.0) == pytest.approx(0.09654, abs=1e-5)
    assert mde_rate(40, 0.0) == mde_rate(40, 0.05)
    assert mde_rate(0, 0.5) == 1.0
    values = [mde_rate(n, 0.9) for n in (10, 40, 100, 400, 1000)]
    assert values == sorted(values, reverse=True)
    assert mde_rate(40, 0.5) > 0.05 > mde_rate(4000, 0.5)
    with pytest.raises(ValueError):
        mde_rate(10, 0.5, power=1.0)


# ---------------------------------------------------------------- clustered_rate


@pytest.mark.parametrize(("k", "n"), [(81, 263), (0, 20), (1, 29), (40, 40), (1, 1)])
def test_clustered_rate_matches_wilson_for_pass_fail(k: int, n: int) -> None:
    got = clustered_rate([1.0] * k + [0.0] * (n - k))
    assert (got.lo, got.hi) == wilson(k, n)
    assert (got.k, got.n) == (k, n)
    assert got.mean == pytest.approx(k / n)
    # Singleton clusters are the same design, up to rounding.
    if n > 1:
        labelled = clustered_rate([1.0] * k + [0.0] * (n - k), clusters=[str(i) for i in range(n)])
        assert (labelled.lo, labelled.hi) == pytest.approx(wilson(k, n), abs=1e-9)


def test_clustered_rate_widens_with_correlated_clusters() -> None:
    # 40 items in 10 clusters of 4; 5 clusters all pass, 5 all fail. Residual sums are
    # +-2 per cluster: var = 10/9 * 40 / 1600, se = 1/6; deff = (1/36) / (0.25/39) = 4.33.
    scores = [1.0] * 20 + [0.0] * 20
    clusters = [f"c{i // 4}" for i in range(40)]
    got = clustered_rate(scores, clusters)
    assert got.se == pytest.approx(1 / 6)
    plain = wilson(20, 40)
    assert got.lo < plain[0] and got.hi > plain[1]
    assert got.lo < got.mean == 0.5 < got.hi
    # Independent clusters (alternating) have no design effect; what remains is Korn and
    # Graubard's degrees-of-freedom factor for 10 clusters, (t_39 / t_9)² on 40 items.
    mixed = clustered_rate(scores, [f"c{i % 10}" for i in range(40)])
    factor = (t_dist.ppf(0.975, 39) / t_dist.ppf(0.975, 9)) ** 2
    assert (mixed.lo, mixed.hi) == pytest.approx(
        stats._wilson_bounds(20 * factor, 40 * factor, Z95)
    )
    assert mixed.clusters == 10 and not mixed.few_clusters


def test_clustered_rate_with_repeats() -> None:
    # Item means over 4 samples; each item is its own cluster.
    scores = [1.0, 0.75, 0.5, 1.0, 0.0, 0.25, 1.0, 1.0]
    got = clustered_rate(scores)
    assert got.k == pytest.approx(5.5)
    assert got.mean == pytest.approx(5.5 / 8)
    mean = 5.5 / 8
    expected_se = math.sqrt(sum((s - mean) ** 2 for s in scores) / 7 / 8)
    assert got.se == pytest.approx(expected_se)
    assert 0.0 <= got.lo < got.mean < got.hi <= 1.0
    # Averaging repeats never narrows the interval below n pass/fail items.
    half = clustered_rate([0.5] * 40)
    assert (half.lo, half.hi) == pytest.approx(wilson(20, 40), abs=1e-12)
    # No variation never collapses the interval: all-zero clustered items keep the bound of
    # 0 of n items, n the effective size (40 with the factor of 10 clusters).
    zeros = clustered_rate([0.0] * 40, clusters=[f"c{i // 4}" for i in range(40)])
    factor = (t_dist.ppf(0.975, 39) / t_dist.ppf(0.975, 9)) ** 2
    assert zeros.hi == pytest.approx(stats._wilson_bounds(0.0, 40 * factor, Z95)[1])
    assert zeros.hi > wilson(0, 40)[1]


def test_clustered_rate_edges() -> None:
    assert clustered_rate([]) == Rate(0.0, 0, 0.0, 0.0, 1.0, 0.0)
    single = clustered_rate([0.6])
    assert single.se == 0.5
    assert single.lo < 0.6 < single.hi
    one_cluster = clustered_rate([1.0, 0.0, 1.0], clusters=["a", "a", "a"])
    assert one_cluster.se == 0.5
    assert one_cluster.hi - one_cluster.lo > wilson(2, 3)[1] - wilson(2, 3)[0]
    with pytest.raises(ValueError):
        clustered_rate([1.2])
    with pytest.raises(ValueError):
        clustered_rate([1.0, 0.0], clusters=["a"])


# ---------------------------------------------------------------- consistency and too_small


def test_consistency() -> None:
    assert consistency([]) == 1.0
    assert consistency([[True], [False], []]) == 1.0
    assert consistency([[True, True, True], [False, False], [True, False], [False, True]]) == 0.5


def test_too_small() -> None:
    # Gate "unacceptable_rate <= 0.02 on upper_bound": 0/40 has Wilson upper bound 0.0876,
    # so 40 items can never pass; 0/400 has 0.0095 <= 0.02.
    assert too_small(40, 0.0, 0.02, "upper")
    assert not too_small(400, 0.0, 0.02, "upper")
    # The observed rate does not change the verdict.
    assert too_small(40, 0.5, 0.02, "upper")
    assert not too_small(400, 0.5, 0.02, "upper")
    # Boundary: z^2 / (n + z^2) <= 0.02 iff n >= 49 z^2 = 188.2, so 189 is the smallest n.
    assert wilson(0, 189)[1] <= 0.02 < wilson(0, 188)[1]
    assert too_small(188, 0.0, 0.02, "upper")
    assert not too_small(189, 0.0, 0.02, "upper")
    assert too_small(188, 1.0, 0.98, "lower")
    assert not too_small(189, 1.0, 0.98, "lower")
    # Gate "correct_rate >= 0.98 on lower_bound" mirrors it.
    assert too_small(40, 1.0, 0.98, "lower")
    assert not too_small(400, 1.0, 0.98, "lower")
    # No items: too small for any informative threshold.
    assert too_small(0, 0.0, 0.5, "upper")
    assert not too_small(0, 0.0, 1.0, "upper")
    assert not too_small(0, 0.0, 0.0, "lower")
    with pytest.raises(ValueError):
        too_small(40, 0.0, 0.02, "upper_bound")


def test_import_does_not_load_scipy() -> None:
    code = "import sys, evalreg.stats; sys.exit('scipy' in sys.modules or 'numpy' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


# ---------------------------------------------------------------- counts instead of lists


def test_mcnemar_is_the_rounded_exact_value_and_agrees_with_scipy() -> None:
    from scipy.stats import binomtest

    rng = random.Random(7)
    cases = [(1, 9), (150, 86), (0, 40), (3, 1000), (250, 270)]
    cases += [(rng.randint(0, 400), rng.randint(0, 400)) for _ in range(300)]
    for b, c in cases:
        p = mcnemar_exact(b, c)
        assert p == _binomial_two_sided(b, c)  # correctly rounded, bit for bit
        reference = min(1.0, float(binomtest(b, b + c, 0.5).pvalue)) if b + c else 1.0
        assert p == pytest.approx(reference, rel=1e-9, abs=1e-300)


def test_mcnemar_beyond_the_exact_limit_uses_scipy() -> None:
    from scipy.stats import binomtest

    b, c = EXACT_MCNEMAR_LIMIT // 2, EXACT_MCNEMAR_LIMIT // 2 + 400
    assert mcnemar_exact(b, c) == float(binomtest(b, b + c, 0.5).pvalue)
    assert 0.0 < mcnemar_exact(b, c) < 0.01


def test_binary_rate_is_clustered_rate_of_zeros_and_ones() -> None:
    rng = random.Random(11)
    for trial in range(2000):
        n = rng.randint(0, 120) if trial % 10 else rng.randint(1000, 5000)
        k = rng.randint(0, n)
        scores = [1.0] * k + [0.0] * (n - k)
        rng.shuffle(scores)
        confidence = (0.9, 0.95, 0.99)[trial % 3]
        assert binary_rate(k, n, confidence) == clustered_rate(scores, None, confidence)
    with pytest.raises(ValueError):
        binary_rate(5, 4)


def test_paired_binary_is_paired_comparison_of_pass_fail_pairs() -> None:
    rng = random.Random(13)
    for trial in range(2000):
        n = rng.randint(0, 150)
        a = [float(rng.random() < 0.7) for _ in range(n)]
        b = [float(rng.random() < rng.random()) for _ in range(n)]
        only_a = sum(1 for x, y in zip(a, b, strict=True) if x > y)
        only_b = sum(1 for x, y in zip(a, b, strict=True) if y > x)
        confidence = (0.9, 0.95)[trial % 2]
        expected = paired_comparison(a, b, None, confidence)
        assert paired_binary(n, only_a, only_b, confidence) == expected
    with pytest.raises(ValueError):
        paired_binary(3, 2, 2)


def test_difference_interval_matches_newcombe_method_10() -> None:
    # Newcombe 1998, Stat. Med. 17:873-890, Table II, method 10 (hybrid score):
    # (a) 56/70 vs 48/80: 0.0524 to 0.3339; (b) 9/10 vs 3/10: 0.1705 to 0.8090.
    d, lo, hi = difference_interval(48, 80, 56, 70)
    assert d == pytest.approx(0.2) and lo == pytest.approx(0.0524, abs=1e-4)
    assert hi == pytest.approx(0.3339, abs=1e-4)
    d, lo, hi = difference_interval(3, 10, 9, 10)
    assert d == pytest.approx(0.6)
    assert (lo, hi) == (pytest.approx(0.1705, abs=1e-4), pytest.approx(0.8090, abs=1e-4))
    # Swapping the sides mirrors the interval; an empty side knows nothing.
    assert difference_interval(56, 70, 48, 80)[1] == pytest.approx(-0.3339, abs=1e-4)
    lo, hi = difference_interval(0, 0, 5, 10)[1:]
    assert lo < -0.4 and hi > 0.4
    with pytest.raises(ValueError):
        difference_interval(5, 4, 1, 2)


# ---------------------------------------------------------------- paired interval and verdict


def test_tango_interval_matches_the_published_example_and_is_never_a_point() -> None:
    # Fagerland, Lydersen & Laake 2014, Stat. Med. 33:2850-2875, airway hyper-responsiveness
    # example (n11=1, n12=1, n21=7, n22=12): Tango's score interval -0.517 to -0.026.
    lo, hi = stats.tango_interval(21, 7, 1)
    assert (lo, hi) == (pytest.approx(-0.5172, abs=1e-4), pytest.approx(-0.0260, abs=1e-4))
    for n, b, c in ((100, 0, 0), (5, 0, 5), (5, 5, 0), (1, 0, 0)):
        lo, hi = stats.tango_interval(n, b, c)
        assert hi - lo > 0.02, (n, b, c)
    assert stats.tango_interval(100, 0, 0)[1] == pytest.approx(0.037, abs=1e-3)


def test_tango_statistic_at_zero_is_mcnemar_as_statsmodels_computes_it() -> None:
    from statsmodels.stats.contingency_tables import mcnemar

    for b, c in ((0, 1), (3, 9), (7, 1), (20, 20), (0, 60), (13, 40)):
        n = b + c + 17
        ref = mcnemar([[5, b], [c, 12]], exact=False, correction=False)
        assert stats.tango_statistic(n, b, c, 0.0) ** 2 == pytest.approx(ref.statistic)
        assert stats.mcnemar_score(b, c) == pytest.approx(ref.pvalue, rel=1e-12)


@pytest.mark.slow  # every table up to n = 100 at three levels: about 20 s
def test_interval_excludes_zero_exactly_when_significant_over_a_grid() -> None:
    from evalreg.metrics import verdicts

    for n in (1, 2, 5, 10, 20, 37, 60, 100):
        for b in range(0, min(n, 60) + 1):
            for c in range(0, min(n - b, 60) + 1):
                d = stats.paired_binary(n, b, c)
                for alpha in (0.05, 0.05 / 3, 0.01):
                    lo, hi = d.interval(1 - alpha)
                    assert lo <= d.mean <= hi
                    assert (lo > 0 or hi < 0) == (d.p_value < alpha), (n, b, c, alpha)
                (row,) = verdicts({"all": d}, 0.05)
                excluded = row.diff.lo > 0 or row.diff.hi < 0
                assert excluded == (row.verdict != "no detectable difference")
                assert excluded == (row.p_adjusted is not None and row.p_adjusted < 0.05)


@pytest.mark.slow  # 300 random families of slices
def test_holm_family_intervals_agree_with_holm_verdicts() -> None:
    from evalreg.metrics import SLICES, verdicts

    rng = random.Random(5)
    for _ in range(300):
        diffs = {"all": stats.paired_binary(400, rng.randint(0, 60), rng.randint(0, 60))}
        for i in range(rng.randint(1, 12)):
            n = rng.randint(10, 100)
            b = rng.randint(0, n // 2)
            diffs[f"s{i}"] = stats.paired_binary(n, b, rng.randint(0, min(n - b, 60)))
        for row in verdicts(diffs, 0.05):
            assert row.p_adjusted is not None
            excluded = row.diff.lo > 0 or row.diff.hi < 0
            assert excluded == (row.p_adjusted < 0.05), row
            if row.slice != "all":
                assert row.family == SLICES
            else:  # the primary test is not corrected with the slices
                assert row.p_adjusted == diffs["all"].p_value and row.level == 0.05


def test_small_slices_are_shown_not_tested_and_mde_never_contradicts_the_verdict() -> None:
    from evalreg.metrics import NONE_DETECTABLE, TOO_SMALL_TO_TEST, verdicts

    diffs = {"all": stats.paired_binary(500, 30, 31), "tiny": stats.paired_binary(9, 0, 8)}
    diffs |= {f"s{i}": stats.paired_binary(10, 0, 8) for i in range(55)}
    rows = {r.slice: r for r in verdicts(diffs, 0.05)}
    assert rows["tiny"].verdict == TOO_SMALL_TO_TEST and rows["tiny"].p_adjusted is None
    # "+80 pts (8 flips to 0) ... no detectable difference (MDE 79.2 pts)" cannot appear:
    # at the Holm level 10 items detect nothing, and say so.
    s0 = rows["s0"]
    assert s0.verdict == "no detectable difference"
    assert s0.mde is None and s0.mde_note == NONE_DETECTABLE
    for n in (10, 20, 40, 100):
        for b in range(0, n + 1, 3):
            for c in range(0, n - b + 1, 2):
                for row in verdicts({"all": stats.paired_binary(n, b, c)}, 0.05 / 20):
                    if row.verdict == "no detectable difference" and row.mde is not None:
                        assert abs(row.diff.mean) < row.mde, (n, b, c)


def test_mde_is_exact_power_of_the_score_test() -> None:
    from scipy.stats import binom

    assert stats.mde_mcnemar(20, 0) is None  # 2 discordant pairs can never be significant
    mde = stats.mde_mcnemar(100, 20)
    assert mde is not None
    pi = (1 + mde * 100 / 20) / 2
    z = 1.959963984540054
    reject = [k for k in range(21) if abs(2 * k - 20) > z * math.sqrt(20)]
    assert sum(binom.pmf(k, 20, pi) for k in reject) == pytest.approx(0.8, abs=1e-6)


def test_a_clustered_comparison_at_another_level_agrees_with_its_test():
    # Holm gives each slice its own level: the clustered interval at that level must still
    # exclude 0 exactly when the clustered test rejects there.
    import random

    rng = random.Random(7)
    checked = 0
    for _ in range(300):
        groups = rng.randint(2, 8)
        size = rng.randint(1, 5)
        clusters = [f"g{g}" for g in range(groups) for _ in range(size)]
        lean = rng.uniform(-0.4, 0.4)
        a = [float(rng.random() < 0.5) for _ in clusters]
        b = [float(rng.random() < 0.5 + lean) for _ in clusters]
        got = paired_comparison(a, b, clusters)
        if got.method != "clustered":
            continue
        for alpha in (0.05, 0.025, 0.0125, 0.01):
            assert got.significant(alpha) == (got.p_value < alpha), (a, b, clusters, alpha)
        checked += 1
    assert checked > 200


def _bisect_one_at_a_time(value_at, target: float, low: float, high: float, steps: int) -> float:
    for _ in range(steps):
        middle = (low + high) / 2.0
        if value_at(middle) >= target:
            high = middle
        else:
            low = middle
    return high


@pytest.mark.parametrize("steps", [1, 5, 6, 7, 60])
def test_bisection_a_few_rounds_at_a_time_visits_the_points_one_at_a_time_would(steps: int):
    rng = random.Random(steps)
    # Not monotone, so any point visited differently would show in the result.
    table = {}

    def noisy(x: float) -> float:
        return table.setdefault(x, x + rng.uniform(-0.05, 0.05))

    def many(points):
        return [noisy(p) for p in points]

    for target in (0.55, 0.6, 0.75, 0.9, 0.999):
        expected = _bisect_one_at_a_time(noisy, target, 0.5, 1.0, steps)
        assert stats._bisect_up(many, target, 0.5, 1.0, steps=steps) == expected


def test_mde_mcnemar_is_the_bisection_of_its_exact_binomial_power():
    from scipy.stats import binom, binomtest

    # Discordant pairs above the floor (a tenth of n), so m is the count given.
    # Small and large m, and both tails (lower < 0 only for m <= z²-ish, where nothing is
    # detectable: 60 pairs at 5 %/3 has one tail near the bound).
    cases = [(100, 20, 0.05), (400, 45, 0.01), (60, 60, 0.05 / 3), (9000, 900, 0.05)]
    cases += [(40_000, 31_007, 0.05), (20_000, 2_500, 0.2), (15_000, 14_999, 0.001)]
    cases += [(100, 10, 0.05), (30, 7, 0.05)]
    for n, discordant, alpha in cases:
        m = discordant
        # The exact test's rejection region, from scipy's binomial distribution (the
        # binomial test's p-value at 1/2), checked against scipy's binomial test at its edge.
        pvalues = np.minimum(1.0, 2.0 * binom.cdf(np.arange(m // 2 + 1), m, 0.5))
        lower = int(np.flatnonzero(pvalues < alpha).max())
        assert binomtest(lower, m, 0.5).pvalue < alpha <= binomtest(lower + 1, m, 0.5).pvalue
        upper = m - lower

        def power(pi: float, m=m, upper=upper, lower=lower) -> float:
            return float(binom.sf(upper - 1, m, pi)) + float(binom.cdf(lower, m, pi))

        strong = _bisect_one_at_a_time(power, 0.8, 0.5, 1.0, 60)
        assert stats.mde_mcnemar(n, discordant, alpha) == m / n * (2.0 * strong - 1.0)


def test_the_exact_tests_need_scipy_special_not_scipy_stats():
    # scipy.stats costs most of a second to import, scipy.special a fifth: the binomial
    # tails and Student's t are the special functions scipy.stats itself evaluates.
    probe = (
        "import sys; from evalreg import stats; "
        "stats.mde_mcnemar(4000, 700); "
        "stats.paired_comparison([1.0, 0.0, 1.0, 0.0, 1.0, 1.0], [1.0, 1.0, 0.0, 0.0, 1.0, 0.0], "
        "['a', 'a', 'b', 'b', 'c', 'c']); "
        "print('scipy.special' in sys.modules, 'scipy.stats' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert done.stdout.split() == ["True", "False"], done.stderr


def test_clustered_comparison_is_scipy_stats_students_t_bit_for_bit():
    rng = random.Random(11)
    checked = 0
    for _ in range(300):
        n = rng.randint(4, 200)
        groups = rng.randint(2, max(2, n // 3))
        a = [rng.choice([0.0, 0.5, 1.0]) for _ in range(n)]
        b = [x if rng.random() < 0.6 else rng.choice([0.0, 1.0]) for x in a]
        clusters = [f"c{rng.randrange(groups)}" for _ in range(n)]
        got = stats.paired_comparison(a, b, clusters)
        g = len(set(clusters))
        statistic = stats.clustered_mcnemar([y - x for x, y in zip(a, b, strict=True)], clusters)
        if got.method != "clustered" or not 0.0 < statistic < g:
            continue
        wald = math.sqrt((g - 1) * statistic / (g - statistic))
        assert got.p_value == min(1.0, max(0.0, 2.0 * float(t_dist.sf(wald, g - 1))))
        checked += 1
    assert checked > 100
