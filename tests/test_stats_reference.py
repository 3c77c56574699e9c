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


def test_paired_intervals_and_tests_agree_at_the_edges() -> None:
    # n = 1 and 2, all discordant one way, none discordant, 10,000 pairs.
    for n, b, c in ((1, 0, 0), (1, 1, 0), (2, 0, 2), (2, 1, 1), (100, 0, 0), (10_000, 400, 480)):
        diff = stats.paired_binary(n, b, c)
        assert diff.lo <= diff.mean <= diff.hi
        assert diff.hi > diff.lo  # never a point
        assert (diff.lo > 0 or diff.hi < 0) == (diff.p_value < 0.05)
        if b + c:
            want = mcnemar([[0, b], [c, 0]], exact=False, correction=False).pvalue
            assert diff.p_value == pytest.approx(want, abs=1e-12)
    assert math.isclose(stats.paired_binary(10_000, 400, 480).mean, 0.008)


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
