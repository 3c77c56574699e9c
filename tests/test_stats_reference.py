"""Every statistic evalreg prints, against statsmodels and scipy, on grids that include the
edges: 0 of n, n of n, n = 1 and 2, and n = 10,000."""

from __future__ import annotations

import gc
import itertools
import math
import random

import numpy as np
import pytest
from scipy.stats import binomtest
from statsmodels.regression.linear_model import OLS
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.proportion import confint_proportions_2indep, proportion_confint

from evalreg import stats

SIZES = (1, 2, 3, 10, 59, 60, 10_000)
LEVELS = (0.95, 0.99, 0.9875)


def counts(n: int) -> list[int]:
    return sorted({0, 1, n // 3, n // 2, n - 1, n} & set(range(n + 1)))


@pytest.mark.parametrize("confidence", LEVELS)
@pytest.mark.parametrize("n", SIZES)
def test_wilson_is_statsmodels_wilson(n: int, confidence: float) -> None:
    for k in counts(n):
        lo, hi = proportion_confint(k, n, alpha=1 - confidence, method="wilson")
        assert stats.wilson(k, n, confidence) == pytest.approx((lo, hi), abs=1e-12), (k, n)


@pytest.mark.parametrize("n", SIZES)
def test_binary_rate_is_wilson_on_the_items(n: int) -> None:
    for k in counts(n):
        rate = stats.binary_rate(k, n)
        lo, hi = proportion_confint(k, n, alpha=0.05, method="wilson")
        assert (rate.lo, rate.hi) == pytest.approx((lo, hi), abs=1e-12)


def test_mcnemar_exact_is_statsmodels_exact() -> None:
    for b, c in itertools.product(range(0, 41, 3), range(0, 41, 4)):
        want = mcnemar([[10, b], [c, 10]], exact=True).pvalue
        assert stats.mcnemar_exact(b, c) == pytest.approx(want, abs=1e-12), (b, c)
    # Large counts: the exact binomial test scipy gives.
    assert stats.mcnemar_exact(4_000, 4_200) == pytest.approx(
        binomtest(4_000, 8_200, 0.5).pvalue, rel=1e-9
    )


def test_mcnemar_score_is_statsmodels_asymptotic_without_correction() -> None:
    for b, c in itertools.product(range(0, 61, 5), range(0, 61, 7)):
        if b + c == 0:
            assert stats.mcnemar_score(b, c) == 1.0
            continue
        want = mcnemar([[0, b], [c, 0]], exact=False, correction=False).pvalue
        assert stats.mcnemar_score(b, c) == pytest.approx(want, abs=1e-12), (b, c)


def test_holm_is_statsmodels_holm(monkeypatch: pytest.MonkeyPatch) -> None:
    # statsmodels' Holm runs a full garbage collection on every call (0.3 s each in this
    # suite's heap, half a minute in all); skipping it changes no number.
    monkeypatch.setattr(gc, "collect", lambda generation=2: 0)
    rng = random.Random(3)
    for size in (1, 2, 5, 55):
        for _ in range(20):
            ps = [rng.choice([rng.random(), rng.random() / 100, 1.0, 0.0]) for _ in range(size)]
            got = stats.holm({f"s{i}": p for i, p in enumerate(ps)})
            want = multipletests(ps, method="holm")[1]
            assert [got[f"s{i}"] for i in range(size)] == pytest.approx(list(want), abs=1e-12)


def test_newcombe_difference_is_statsmodels_newcomb() -> None:
    for n1, n2 in ((1, 1), (2, 3), (10, 10), (60, 59), (10_000, 10_000)):
        for k1, k2 in itertools.product(counts(n1), counts(n2)):
            _, lo, hi = stats.difference_interval(k1, n1, k2, n2)
            # statsmodels gives count1/nobs1 minus count2/nobs2: evalreg's p2 - p1.
            want = confint_proportions_2indep(k2, n2, k1, n1, method="newcomb", compare="diff")
            assert (lo, hi) == pytest.approx(want, abs=1e-12), (k1, n1, k2, n2)


@pytest.mark.parametrize("groups", [2, 3, 10, 200])
def test_cluster_robust_se_is_statsmodels_cr1(groups: int) -> None:
    rng = np.random.default_rng(groups)
    sizes = rng.integers(1, 6, size=groups)
    clusters = [f"g{g}" for g, size in enumerate(sizes) for _ in range(size)]
    scores = [float(x) for x in rng.integers(0, 2, size=len(clusters))]
    if len(set(scores)) == 1:
        scores[0] = 1.0 - scores[0]
    rate = stats.clustered_rate(scores, clusters)
    codes = np.array([int(c[1:]) for c in clusters])
    fit = OLS(np.array(scores), np.ones((len(scores), 1))).fit(
        cov_type="cluster", cov_kwds={"groups": codes}
    )
    assert rate.mean == pytest.approx(float(fit.params[0]), abs=1e-12)
    assert rate.se == pytest.approx(float(fit.bse[0]), rel=1e-10)


@pytest.mark.parametrize("confidence", LEVELS)
@pytest.mark.parametrize(
    ("groups", "size", "seed"), [(2, 10, 1), (3, 10, 2), (5, 4, 3), (10, 10, 4), (30, 3, 5)]
)
def test_clustered_rate_interval_is_korn_graubard_on_statsmodels_cluster_robust_t(
    groups: int, size: int, seed: int, confidence: float
) -> None:
    """The clustered rate's interval from statsmodels' own pieces: the cluster-robust
    standard error and the degrees of freedom of its ``t`` reference (``use_t``: G - 1),
    Korn and Graubard's factor ``(t_{n-1} / t_{df})²`` on the effective sample size, and
    statsmodels' Wilson interval on that size."""
    from scipy.stats import t as t_dist

    rng = np.random.default_rng(seed)
    rates = rng.beta(1.2, 2.8, size=groups)
    scores = [float(rng.random() < r) for r in rates for _ in range(size)]
    if len(set(scores)) == 1:
        scores[0] = 1.0 - scores[0]
    clusters = [f"g{g}" for g in range(groups) for _ in range(size)]
    codes = np.repeat(np.arange(groups), size)
    fit = OLS(np.array(scores), np.ones((len(scores), 1))).fit(
        cov_type="cluster", cov_kwds={"groups": codes}, use_t=True
    )
    n, p, se = len(scores), float(fit.params[0]), float(fit.bse[0])
    df = int(fit.df_resid_inference)
    assert df == groups - 1
    quantile = 1.0 - (1.0 - confidence) / 2.0
    n_eff = min(n, p * (1.0 - p) / (n - 1) * n / se**2)
    n_df = n_eff * (t_dist.ppf(quantile, n - 1) / t_dist.ppf(quantile, df)) ** 2
    want = proportion_confint(p * n_df, n_df, alpha=1.0 - confidence, method="wilson")
    got = stats.clustered_rate(scores, clusters, confidence)
    assert (got.lo, got.hi) == pytest.approx(want, abs=1e-9)
    assert got.clusters == groups and got.few_clusters == (groups <= 5)


def test_paired_intervals_and_tests_agree_at_the_edges() -> None:
    # n = 1 and 2, all discordant one way, none discordant, 10,000 pairs.
    for n, b, c in ((1, 0, 0), (1, 1, 0), (2, 0, 2), (2, 1, 1), (100, 0, 0), (10_000, 400, 480)):
        diff = stats.paired_binary(n, b, c)
        assert diff.lo <= diff.mean <= diff.hi
        assert diff.hi > diff.lo  # never a point
        assert (diff.lo > 0 or diff.hi < 0) == (diff.p_value < 0.05)
        if b + c:
            want = mcnemar([[0, b], [c, 0]], exact=True).pvalue
            assert diff.p_value == pytest.approx(want, abs=1e-12)
    assert math.isclose(stats.paired_binary(10_000, 400, 480).mean, 0.008)


def test_students_t_quantile_is_scipys() -> None:
    """The clustered rate's degrees-of-freedom factor needs Student's t quantiles without
    importing scipy; they agree with ``scipy.stats.t.ppf``."""
    from scipy.stats import t as t_dist

    for df in (*range(1, 400), 999, 1_000, 1_999, 10_000, 100_000, 1_000_000):
        for confidence in (0.5, 0.9, 0.95, 0.99, 0.9875, 0.999):
            want = t_dist.ppf(1.0 - (1.0 - confidence) / 2.0, df)
            got = stats._t_quantile(df, confidence)
            assert got == pytest.approx(want, rel=1e-11 if df < 2_000 else 1e-8), (df, confidence)


def _exact_pvalues(m: int) -> np.ndarray:
    """statsmodels' exact McNemar p-value for ``c = 0 .. m`` of ``m`` discordant pairs,
    as it computes it (``min(1, 2 · binom.cdf(min(b, c), m, 1/2))``), for every ``c`` at
    once; checked against statsmodels' own function on a sample."""
    from scipy.stats import binom

    c = np.arange(m + 1)
    return np.minimum(1.0, 2.0 * binom.cdf(np.minimum(c, m - c), m, 0.5))


def _verdicts_agree(top: int, alphas: tuple[float, ...]) -> None:
    for m in range(1, top + 1):
        exact = _exact_pvalues(m)
        for c in (0, m // 3, m):
            want = mcnemar([[0, m - c], [c, 0]], exact=True).pvalue
            assert exact[c] == pytest.approx(want, rel=1e-12, abs=1e-300)
        for c in range(m + 1):
            b = m - c
            for alpha in alphas:
                lo, hi = stats.exact_interval(m + 7, b, c, 1.0 - alpha)
                assert (lo > 0.0 or hi < 0.0) == (exact[c] < alpha), (b, c, alpha)
                assert lo <= (c - b) / (m + 7) <= hi


def test_the_paired_verdict_is_statsmodels_exact_mcnemar_and_its_interval_agrees() -> None:
    """The interval printed beside the verdict excludes 0 exactly when statsmodels' exact
    McNemar test rejects, for every table with up to 120 discordant pairs (the number of
    concordant pairs does not enter the test) at the usual levels, Holm's included, and at
    the far-tail levels where the exact p-value can fall below the asymptotic one."""
    _verdicts_agree(120, (0.10, 0.05, 0.01, 0.05 / 7, 0.0005, 0.0001))


@pytest.mark.slow  # about 45,000 tables at seven levels: half a minute
def test_the_paired_verdict_agrees_with_its_interval_up_to_300_discordant_pairs() -> None:
    _verdicts_agree(300, (0.20, 0.10, 0.05, 0.01, 0.05 / 7, 0.0005, 0.0001))


def test_a_verdict_never_rests_on_a_test_larger_than_its_level() -> None:
    """Conditional on the discordant count m, the size of the verdict's test (the chance it
    rejects when each discordant pair goes either way with probability 1/2) is at most the
    level, for every m up to 200; the asymptotic score test's is not."""
    from scipy.stats import binom

    score_over = 0
    for m in range(1, 201):
        c = range(m + 1)
        for alpha in (0.05, 0.01):
            rejected = [k for k in c if stats.mcnemar_exact(m - k, k) < alpha]
            assert binom.pmf(rejected, m, 0.5).sum() <= alpha, m
        score = [k for k in c if stats.mcnemar_score(m - k, k) < 0.05]
        score_over += binom.pmf(score, m, 0.5).sum() > 0.05
    assert score_over == 94  # the asymptotic test's size exceeds 0.05 at 94 counts
    # The example: 4 of 4 discordant pairs one way in 100 items.
    four = stats.paired_binary(100, 0, 4)
    assert four.p_value == 0.125 and not four.significant(0.05) and four.lo <= 0.0
    assert stats.mcnemar_score(0, 4) == pytest.approx(0.0455, abs=1e-4)
    six = stats.paired_binary(100, 0, 6)
    assert six.p_value == 0.03125 and six.significant(0.05) and six.lo > 0.0


@pytest.mark.parametrize("n", (1, 2, 10, 51, 100, 400, 10_000))
@pytest.mark.parametrize("discordance", (0.02, 0.10, 0.3, 1.0))
@pytest.mark.parametrize(("alpha", "power"), [(0.05, 0.8), (0.01, 0.9), (0.0125, 0.8)])
def test_slice_mde_is_the_statsmodels_normal_power_of_the_paired_difference(
    n: int, discordance: float, alpha: float, power: float
) -> None:
    """A paired difference ``d_i`` in {-1, 0, 1} has variance ``ψ`` near no effect, so
    McNemar's normal test on ``n`` pairs is statsmodels' one-sample normal test with effect
    size ``δ / sqrt(ψ)``. slice_mde leaves out the opposite tail, so statsmodels' two-sided
    power there is the target plus at most that tail, and its one-sided power at
    ``alpha / 2`` is the target itself."""
    from statsmodels.stats.power import NormalIndPower

    mde = stats.slice_mde(n, discordance=discordance, alpha=alpha, power=power)
    if mde == 1.0:
        return  # clamped: no difference in pass rate is larger
    effect = mde / math.sqrt(discordance)
    solver = NormalIndPower()
    one_sided = solver.power(effect, n, alpha / 2, ratio=0, alternative="larger")
    assert one_sided == pytest.approx(power, abs=1e-12)
    two_sided = solver.power(effect, n, alpha, ratio=0, alternative="two-sided")
    assert power <= two_sided <= power + 1e-4
    # And solved for the effect size, as a planner would.
    solved = solver.solve_power(None, nobs1=n, alpha=alpha, power=power, ratio=0)
    assert mde == pytest.approx(solved * math.sqrt(discordance), rel=1e-4)
