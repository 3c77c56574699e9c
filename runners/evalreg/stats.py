"""Deterministic statistics for selection policies, the governance report and PR diffs."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from statistics import NormalDist

__all__ = [
    "DISCORDANCE_FLOOR",
    "FEW_CLUSTERS",
    "PairedDiff",
    "Rate",
    "binary_rate",
    "clustered_mcnemar",
    "clustered_rate",
    "consistency",
    "difference_interval",
    "exact_interval",
    "few_clusters",
    "holm",
    "mcnemar_exact",
    "mcnemar_score",
    "mde_mcnemar",
    "mde_paired",
    "mde_rate",
    "paired_binary",
    "paired_comparison",
    "slice_mde",
    "tango_interval",
    "tango_statistic",
    "too_small",
    "wilson",
]

#: Smallest discordant-pair rate :func:`mde_paired` plans with (see there for why), and the
#: discordance :func:`slice_mde` assumes when none is stated.
DISCORDANCE_FLOOR = 0.10

#: Rates closer to 0 or 1 than this are moved to it by :func:`mde_rate`.
_RATE_CLAMP = 0.05

#: Discordant pairs up to which :func:`mcnemar_exact` sums exact integers (scipy beyond).
EXACT_MCNEMAR_LIMIT = 20_000

#: At most this many clusters make an interval wide by necessity (see :func:`few_clusters`).
FEW_CLUSTERS = 5

#: A score at or above this counts as a pass in :func:`paired_comparison`.
_PASS_SCORE = 0.5

_STANDARD_NORMAL = NormalDist()


# ---------------------------------------------------------------- helpers


def _z_two_sided(confidence: float) -> float:
    """The standard normal quantile ``z`` with ``P(-z < Z < z) = confidence``."""
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be strictly between 0 and 1, got {confidence!r}")
    return _STANDARD_NORMAL.inv_cdf(1.0 - (1.0 - confidence) / 2.0)


def _clamp(value: float, lo: float, hi: float) -> float:
    """``value`` limited to ``[lo, hi]``."""
    return min(hi, max(lo, value))


def _check_count(name: str, value: int) -> None:
    """Reject a negative count."""
    if value < 0:
        raise ValueError(f"{name} must be >= 0, got {value!r}")


def _check_unit(name: str, value: float) -> None:
    """Reject a value outside ``[0, 1]`` (NaN included)."""
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} must be in [0, 1], got {value!r}")


def _check_scores(name: str, scores: Sequence[float]) -> None:
    """Reject any score outside ``[0, 1]`` (NaN included)."""
    for index, score in enumerate(scores):
        if not 0.0 <= score <= 1.0:
            raise ValueError(f"{name}[{index}] must be in [0, 1], got {score!r}")


def _check_clusters(clusters: Sequence[str] | None, n: int) -> None:
    """Reject a cluster list whose length differs from the number of items."""
    if clusters is not None and len(clusters) != n:
        raise ValueError(f"clusters has {len(clusters)} labels for {n} items")


def _wilson_bounds(k: float, n: float, z: float) -> tuple[float, float]:
    """Wilson score bounds for ``k`` successes in ``n`` trials (both may be fractional).

    ``n`` must be positive. The closed form is
    ``(k + z²/2) / (n + z²) ± z / (n + z²) · sqrt(k(n - k)/n + z²/4)``, clamped to ``[0, 1]``.
    """
    z2 = z * z
    centre = (k + z2 / 2.0) / (n + z2)
    half = z / (n + z2) * math.sqrt(max(0.0, k * (n - k) / n) + z2 / 4.0)
    return _clamp(centre - half, 0.0, 1.0), _clamp(centre + half, 0.0, 1.0)


def _cluster_se(
    values: Sequence[float], mean: float, clusters: Sequence[str] | None
) -> float | None:
    """Cluster-robust standard error of the mean of ``values``, or None when inestimable.

    The residuals ``values[i] - mean`` are summed within each cluster (each item is its own
    cluster when ``clusters`` is None), and with ``G`` clusters and ``n`` items
    ``var = G / (G - 1) · Σ_g (Σ_{i∈g} residual_i)² / n²`` (the CR1 sandwich estimator of
    a mean: Cameron & Miller 2015, "A Practitioner's Guide to Cluster-Robust Inference",
    J. Human Resources 50(2):317-372; their ``(N - 1)/(N - K)`` factor is 1 for a mean).
    With singleton clusters this equals the ordinary ``stdev(values) / sqrt(n)``.
    Returns None when fewer than two clusters exist.
    """
    n = len(values)
    if clusters is None:
        sums = [value - mean for value in values]
    else:
        by_cluster: dict[str, list[float]] = {}
        for value, label in zip(values, clusters, strict=True):
            by_cluster.setdefault(label, []).append(value - mean)
        sums = [math.fsum(residuals) for residuals in by_cluster.values()]
    groups = len(sums)
    if groups < 2:
        return None
    variance = groups / (groups - 1) * math.fsum(s * s for s in sums) / (n * n)
    return math.sqrt(variance)


def _repeated_se(counts: Sequence[tuple[float, int]], n: int) -> float | None:
    """``_cluster_se`` of ``n`` singleton-cluster values given as (residual, how many).

    ``math.fsum`` of those squares is the correctly rounded sum of the rounded squares, so
    summing them exactly as fractions and rounding once gives the same float, bit for bit,
    without a list of ``n`` values.
    """
    if n < 2:
        return None
    exact = sum((Fraction(r * r) * k for r, k in counts if k), Fraction(0))
    variance = n / (n - 1) * float(exact) / (n * n)
    return math.sqrt(variance)


# ---------------------------------------------------------------- single proportions


def wilson(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for ``k`` successes out of ``n`` trials.

    Method: Wilson (1927), in the form of Newcombe (1998) method 3 (no continuity
    correction): ``(k + z²/2) / (n + z²) ± z / (n + z²) · sqrt(k(n - k)/n + z²/4)`` with
    ``z`` the two-sided normal quantile for ``confidence``.

    Edge cases: ``n == 0`` gives ``(0.0, 1.0)`` (nothing is known). Bounds are clamped to
    ``[0, 1]``, so ``k == 0`` has lower bound exactly 0 and ``k == n`` upper bound exactly 1.
    Raises ValueError when ``k`` or ``n`` is negative, ``k > n``, or ``confidence`` is not
    strictly between 0 and 1.
    """
    z = _z_two_sided(confidence)
    _check_count("k", k)
    _check_count("n", n)
    if k > n:
        raise ValueError(f"k ({k}) must not exceed n ({n})")
    if n == 0:
        return 0.0, 1.0
    lo, hi = _wilson_bounds(float(k), float(n), z)
    if k == 0:
        lo = 0.0
    if k == n:
        hi = 1.0
    return lo, hi


def too_small(
    n: int, p: float, threshold: float, bound_side: str, confidence: float = 0.95
) -> bool:
    """Whether ``n`` items are too few for a bound-based gate to ever pass.

    A gate ``rate ≤ threshold on upper_bound`` (``bound_side="upper"``) passes when the
    Wilson upper bound is ``≤ threshold``; the smallest upper bound ``n`` items can produce
    is that of ``0/n``, ``z² / (n + z²)``. A gate ``rate ≥ threshold on lower_bound``
    (``bound_side="lower"``) passes when the Wilson lower bound is ``≥ threshold``; the
    largest lower bound is that of ``n/n``, ``n / (n + z²)``. This returns True exactly when
    that best case still fails, i.e. ``wilson(0, n)[1] > threshold`` for "upper" and
    ``wilson(n, n)[0] < threshold`` for "lower", computed with :func:`wilson` so the two
    always agree. Example: with 95 % confidence, ``0/40`` has upper bound ≈ 0.0876, so 40
    items cannot show ``≤ 0.02``; ``0/400`` (≈ 0.0095) can.

    ``p`` is the slice's observed rate. It is validated but does not enter the verdict: a
    slice is too small because of its size, whatever it measured, so a slice that fails its
    gate is never mistaken for one too small to judge (and vice versa). ``n == 0`` is too
    small for any threshold below 1 ("upper") or above 0 ("lower").

    Raises ValueError for a negative ``n``, ``p`` or ``threshold`` outside ``[0, 1]``, a
    ``bound_side`` other than "upper" or "lower", or an invalid ``confidence``.
    """
    _check_count("n", n)
    _check_unit("p", p)
    _check_unit("threshold", threshold)
    if bound_side == "upper":
        return wilson(0, n, confidence)[1] > threshold
    if bound_side == "lower":
        return wilson(n, n, confidence)[0] < threshold
    raise ValueError(f"bound_side must be 'upper' or 'lower', got {bound_side!r}")


@dataclass(frozen=True)
class Rate:
    """A rate over items: ``mean = k / n`` with its interval ``[lo, hi]`` and standard error.

    ``k`` is the sum of the item scores (fractional with repeats), ``n`` the number of items.
    """

    k: float
    n: int
    mean: float
    lo: float
    hi: float
    se: float
    clusters: int = 0
    """How many clusters the interval rests on when items declared them (0 when none did:
    then every item, or every item's repeats, is its own unit)."""

    @property
    def few_clusters(self) -> bool:
        """Whether the interval rests on at most :data:`FEW_CLUSTERS` clusters, so that it is
        wide by necessity (see :func:`few_clusters`)."""
        return few_clusters(self.clusters)


def few_clusters(clusters: int) -> bool:
    """Whether ``clusters`` (0: none declared) are so few, at most :data:`FEW_CLUSTERS`, that
    an interval resting on them is wide by necessity: the ``t`` quantile on ``G - 1``
    degrees of freedom is then at least 1.4 times the normal one, which more than halves
    the effective sample size (:func:`clustered_rate`)."""
    return 0 < clusters <= FEW_CLUSTERS


def _df_factor(n: int, groups: int, confidence: float) -> float:
    """Korn & Graubard's (1998) degrees-of-freedom factor ``(t_{n-1} / t_{G-1})²`` on the
    effective sample size of a mean of ``n`` items in ``groups`` clusters (``t_d`` the
    two-sided ``confidence`` quantile of Student's ``t`` with ``d`` degrees of freedom): 1
    when every item is its own cluster, small when the variance comes from few clusters."""
    if groups >= n or groups < 2:
        return 1.0
    return (_t_quantile(n - 1, confidence) / _t_quantile(groups - 1, confidence)) ** 2


@functools.lru_cache(maxsize=256)
def _t_quantile(df: int, confidence: float) -> float:
    """The two-sided ``confidence`` quantile of Student's ``t`` on ``df`` degrees of freedom:
    the ``t`` with ``P(|T| > t) = 1 - confidence``.

    Pure Python, so a command that computes a clustered rate (``evalreg check`` does) needs
    no scipy import (a fifth of a second, and a garbage collection): ``P(|T| > t)`` is the
    regularised incomplete beta function ``I_x(df/2, 1/2)`` at ``x = df / (df + t²)``
    (Abramowitz & Stegun 26.7.1 with 26.5.27), evaluated by its continued fraction
    (:func:`_incomplete_beta`), and the quantile is found by bisection on ``t``. It agrees
    with ``scipy.stats.t.ppf`` to 1e-11 relative up to 2,000 degrees of freedom and to
    1e-8 at a million (``lgamma``'s cancellation), which the tests check.
    """
    alpha = 1.0 - confidence
    if df == 1:  # Cauchy: closed form
        return math.tan(math.pi / 2.0 * confidence)
    if df == 2:  # closed form
        return math.sqrt(2.0 / (alpha * (2.0 - alpha)) - 2.0)

    def tail(t: float) -> float:
        return _incomplete_beta(df / 2.0, 0.5, df / (df + t * t))

    low = _z_two_sided(confidence)  # t quantiles are above the normal one
    high = 2.0 * low
    while tail(high) > alpha:
        low, high = high, 2.0 * high
    for _ in range(200):
        middle = (low + high) / 2.0
        if middle in (low, high):
            break
        if tail(middle) > alpha:
            low = middle
        else:
            high = middle
    return high


def _incomplete_beta(a: float, b: float, x: float) -> float:
    """The regularised incomplete beta function ``I_x(a, b)`` for ``a, b > 0`` and
    ``0 ≤ x ≤ 1``: the continued fraction of Abramowitz & Stegun 26.5.8 by the modified
    Lentz method, on the side of ``x`` where it converges fast (26.5.2's symmetry
    ``I_x(a, b) = 1 - I_{1-x}(b, a)`` otherwise)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    if x > (a + 1.0) / (a + b + 2.0):
        return 1.0 - _incomplete_beta(b, a, 1.0 - x)
    log_front = (
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    fraction = d
    for m in range(1, 10_000):
        for numerator in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            fraction *= c * d
        if abs(c * d - 1.0) < 1e-16:
            break
    return math.exp(log_front) * fraction / a


def clustered_rate(
    scores: Sequence[float],
    clusters: Sequence[str] | None = None,
    confidence: float = 0.95,
) -> Rate:
    """Rate over items whose scores are each an item's mean over its samples (0..1).

    ``mean`` is the mean score; ``se`` is its cluster-robust standard error (CR1, see
    :func:`_cluster_se`): clustered by ``clusters`` when given, otherwise each item is its own
    cluster, so repeats of one item never count as independent evidence.

    Interval:

    - all scores 0 or 1 and no ``clusters``: exactly ``wilson(sum, n)``;
    - otherwise a Wilson interval on the effective sample size, with Korn & Graubard's
      degrees-of-freedom correction (Korn & Graubard 1998, "Confidence intervals for
      proportions with small expected number of positive counts estimated from survey
      data", Survey Methodology 24(2):193-201):
      ``deff = se² / (mean(1 - mean) / (n - 1))`` is the design effect against simple
      random sampling of 0/1 items (with the same small-sample factor, so singleton
      clusters of 0/1 scores give ``deff = 1``), ``n_eff = n / max(1, deff)``, and with
      ``G`` clusters ``n_df = n_eff · (t_{n-1} / t_{G-1})²`` (``t_d`` the two-sided
      quantile of Student's ``t`` on ``d`` degrees of freedom, see :func:`_df_factor`); the
      interval is the Wilson interval for ``mean · n_df`` successes in ``n_df`` trials.
      The design effect is floored at 1: averaging repeats never makes the interval
      narrower than ``n`` independent pass/fail items would. The factor is 1 when every
      item is its own cluster; with few clusters the variance is estimated from few sums
      and the factor widens the interval accordingly: without it, coverage of a nominal
      95 % interval falls to about 85 % at 2 clusters (``tests/benchmarks/
      cluster_calibration.py`` prints the table). Unlike ``mean ± z·se``, this never
      collapses to a point when every item scored the same (40 items all at 0 give the
      upper bound of ``wilson(0, 40)``, not 0), and it stays inside ``[0, 1]``.

    ``clusters`` of the result is the number of distinct clusters when some cluster holds
    more than one item, 0 otherwise.

    Edge cases: no items gives ``Rate(0.0, 0, 0.0, 0.0, 1.0, 0.0)``. With one item, or all
    items in a single cluster, the variance cannot be estimated: ``se`` is reported as 0.5
    (the largest standard error a mean of values in ``[0, 1]`` can have) and the interval is
    the Wilson interval with ``n_eff = 1`` (unless the exact 0/1 case applies). Raises
    ValueError for scores outside ``[0, 1]``, a cluster list of the wrong length, or an
    invalid ``confidence``.
    """
    z = _z_two_sided(confidence)
    n = len(scores)
    _check_scores("scores", scores)
    _check_clusters(clusters, n)
    if n == 0:
        return Rate(k=0.0, n=0, mean=0.0, lo=0.0, hi=1.0, se=0.0)
    total = math.fsum(scores)
    mean = _clamp(total / n, 0.0, 1.0)
    estimated = _cluster_se(scores, mean, clusters)
    se = 0.5 if estimated is None else estimated
    if clusters is None and all(score in (0.0, 1.0) for score in scores):
        lo, hi = wilson(round(total), n, confidence)
        return Rate(k=total, n=n, mean=mean, lo=lo, hi=hi, se=se)
    groups = n if clusters is None else len(set(clusters))
    if estimated is None:
        n_eff = 1.0
    else:
        srs_variance = mean * (1.0 - mean) / (n - 1)
        deff = estimated * estimated / srs_variance if srs_variance > 0.0 else 1.0
        n_eff = n / max(1.0, deff) * _df_factor(n, groups, confidence)
    lo, hi = _wilson_bounds(mean * n_eff, n_eff, z)
    # Singleton clusters are no clustering: each item is its own unit, as without labels.
    return Rate(k=total, n=n, mean=mean, lo=lo, hi=hi, se=se, clusters=0 if groups == n else groups)


def binary_rate(k: int, n: int, confidence: float = 0.95) -> Rate:
    """:func:`clustered_rate` of ``k`` scores of 1 and ``n - k`` of 0 without clusters,
    from the two counts: the same ``Rate``, bit for bit, in constant time.

    Raises ValueError for negative counts, ``k > n`` or an invalid ``confidence``.
    """
    _check_count("k", k)
    _check_count("n", n)
    if k > n:
        raise ValueError(f"k ({k}) must not exceed n ({n})")
    _z_two_sided(confidence)  # validates it
    if n == 0:
        return Rate(k=0.0, n=0, mean=0.0, lo=0.0, hi=1.0, se=0.0)
    mean = _clamp(k / n, 0.0, 1.0)
    estimated = _repeated_se(((1.0 - mean, k), (0.0 - mean, n - k)), n)
    lo, hi = wilson(k, n, confidence)
    return Rate(
        k=float(k), n=n, mean=mean, lo=lo, hi=hi, se=0.5 if estimated is None else estimated
    )


def difference_interval(
    k1: int, n1: int, k2: int, n2: int, confidence: float = 0.95
) -> tuple[float, float, float]:
    """Difference ``p2 - p1`` of two independent proportions with its interval.

    Method: Newcombe (1998), "Interval estimation for the difference between independent
    proportions: comparison of eleven methods", Stat. Med. 17:873-890, method 10 (the
    hybrid score interval): with Wilson bounds ``[l1, u1]`` and ``[l2, u2]``,
    ``lo = d - sqrt((p2 - l2)² + (u1 - p1)²)`` and ``hi = d + sqrt((u2 - p2)² + (p1 - l1)²)``.
    His worked example, 56/70 against 48/80, gives -0.2 with ``[-0.3339, -0.0524]``.

    For unpaired data only: two candidates graded on the same items are paired, and
    :func:`paired_comparison` is the test for them. This interval ignores the pairing, so
    it is wider than the paired one would be.

    Edge cases: an empty side (``n == 0``) has the uninformative Wilson interval ``[0, 1]``
    and rate 0. Raises ValueError for invalid counts or ``confidence``.
    """
    l1, u1 = wilson(k1, n1, confidence)
    l2, u2 = wilson(k2, n2, confidence)
    p1 = k1 / n1 if n1 else 0.0
    p2 = k2 / n2 if n2 else 0.0
    d = p2 - p1
    lo = d - math.sqrt((p2 - l2) ** 2 + (u1 - p1) ** 2)
    hi = d + math.sqrt((u2 - p2) ** 2 + (p1 - l1) ** 2)
    return d, _clamp(lo, -1.0, 1.0), _clamp(hi, -1.0, 1.0)


def consistency(samples: Sequence[Sequence[bool]]) -> float:
    """Share of items whose repeated samples all agree (all pass or all fail).

    ``samples[i]`` holds item ``i``'s pass/fail outcomes, one per sample. Items with one
    sample (or none) are consistent by definition. No items gives 1.0.
    """
    if not samples:
        return 1.0
    agreeing = sum(1 for outcomes in samples if len(set(outcomes)) <= 1)
    return agreeing / len(samples)


# ---------------------------------------------------------------- paired comparisons


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value for ``b`` and ``c`` discordant pairs.

    Method: under the null hypothesis each discordant pair is equally likely to go either
    way, so ``b ~ Binomial(b + c, 1/2)``; the p-value is the two-sided binomial test
    (``scipy.stats.binomtest``), which for ``p = 1/2`` equals
    ``min(1, 2 · P(X ≤ min(b, c)))``. Concordant pairs carry no information and are not
    arguments.

    Computed in exact integer arithmetic, ``Σ_{i ≤ min(b, c)} C(n, i) / 2^(n - 1)`` rounded
    once to the nearest float, so the value is the same on every platform and library
    version (and needs no scipy import, which costs a second of start-up). The tests check
    it against ``scipy.stats.binomtest``. Above :data:`EXACT_MCNEMAR_LIMIT` discordant pairs
    the sum of big integers gets slow, and scipy computes it.

    Edge cases: ``b + c == 0`` gives 1.0. Raises ValueError for negative counts.
    """
    _check_count("b", b)
    _check_count("c", c)
    n = b + c
    if n == 0:
        return 1.0
    if n > EXACT_MCNEMAR_LIMIT:
        from scipy.stats import binomtest  # type: ignore[import-untyped,unused-ignore]

        return _clamp(float(binomtest(b, n, 0.5).pvalue), 0.0, 1.0)
    k = min(b, c)
    if 2 * k >= n:
        return 1.0
    term = total = 1
    for i in range(k):
        term = term * (n - i) // (i + 1)
        total += term
    return min(1.0, total / (1 << (n - 1)))


def holm(pvalues: Mapping[str, float]) -> dict[str, float]:
    """Holm-Bonferroni adjusted p-values, keyed as ``pvalues``.

    Method (Holm 1979, "A simple sequentially rejective multiple test procedure", Scand. J.
    Statist. 6:65-70): with ``m`` p-values sorted ascending (ties broken by key, so the order
    is deterministic), the ``i``-th (0-based) is multiplied by ``m - i``; a running maximum
    makes the adjusted values monotone in that order, and each is capped at 1. Rejecting
    exactly the hypotheses whose adjusted p-value is ``<= alpha`` is Holm's procedure at level
    ``alpha``. Tied p-values always receive equal adjusted values.

    Edge cases: an empty mapping gives ``{}``; a single p-value is returned unchanged. The
    result iterates in the input's key order. Raises ValueError for a p-value outside
    ``[0, 1]`` (NaN included).
    """
    for key, value in pvalues.items():
        _check_unit(f"p-value {key!r}", value)
    m = len(pvalues)
    ordered = sorted(pvalues.items(), key=lambda item: (item[1], item[0]))
    adjusted: dict[str, float] = {}
    running = 0.0
    for index, (key, value) in enumerate(ordered):
        running = max(running, min(1.0, (m - index) * value))
        adjusted[key] = running
    return {key: adjusted[key] for key in pvalues}


@dataclass(frozen=True)
class PairedDiff:
    """Paired comparison of candidates A and B on the same ``n`` items.

    ``mean`` is the mean of ``B - A`` (positive: B scores higher) with its interval
    ``[lo, hi]`` at the confidence it was computed for, and standard error ``se``. ``b``
    counts items only A passes, ``c`` items only B passes. ``method`` names the test
    ``p_value`` comes from; the interval agrees with it:

    - ``"exact"`` (independent pass/fail pairs): McNemar's exact conditional test
      (:func:`mcnemar_exact`) and Tango's score interval made to agree with it
      (:func:`exact_interval`);
    - ``"clustered"`` (repeats, or clusters of several items): the clustered McNemar test
      with a ``t`` reference and the interval that inverts it (:func:`_clustered_paired`).

    :meth:`interval` gives the interval at another confidence (a multiplicity-adjusted
    one); it excludes 0 exactly when ``p_value`` is below ``1 - confidence``.
    ``clusters`` is the number of clusters the ``"clustered"`` test rests on (0 for
    ``"exact"``).
    """

    n: int
    mean: float
    lo: float
    hi: float
    se: float
    b: int
    c: int
    p_value: float
    method: str = "exact"
    clusters: int = 0
    refit: Callable[[float], PairedDiff] | None = field(default=None, compare=False, repr=False)
    """For ``"clustered"``: the same comparison at another confidence (the interval is
    the test's inversion, so it needs the per-item differences again)."""

    def interval(self, confidence: float) -> tuple[float, float]:
        """The interval of ``mean`` at ``confidence``, from the same statistic."""
        if self.n == 0:
            return 0.0, 0.0
        if self.refit is not None:
            again = self.refit(confidence)
            return again.lo, again.hi
        return exact_interval(self.n, self.b, self.c, confidence)

    def significant(self, alpha: float) -> bool:
        """Whether the interval at ``1 - alpha`` excludes 0 (the test at level ``alpha``)."""
        lo, hi = self.interval(1.0 - alpha)
        return lo > 0.0 or hi < 0.0


def mcnemar_score(b: int, c: int) -> float:
    """Two-sided asymptotic McNemar p-value (no continuity correction) for ``b`` and ``c``.

    ``z = (c - b) / sqrt(b + c)``, ``p = P(|Z| ≥ |z|) = erfc(|z| / √2)``. This is the
    score test of ``H0: p_A = p_B`` that :func:`tango_interval` inverts. Fagerland,
    Lydersen & Laake (2013), "The McNemar test for binary matched-pairs data: mid-p and
    asymptotic are better than exact conditional", BMC Med. Res. Methodol. 13:91, show it
    keeps close to the nominal level down to small samples, where the exact conditional
    test is needlessly conservative. ``b + c == 0`` gives 1.0.
    """
    _check_count("b", b)
    _check_count("c", c)
    if b + c == 0:
        return 1.0
    return _clamp(math.erfc(abs(c - b) / math.sqrt(2.0 * (b + c))), 0.0, 1.0)


def tango_statistic(n: int, b: int, c: int, delta: float) -> float:
    """Tango's score statistic for ``H0: p_B - p_A = delta`` (``n`` pairs, ``b`` only A
    passes, ``c`` only B passes); decreasing in ``delta``, and McNemar's ``z`` at 0.

    ``Z = (c - b - n·delta) / sqrt(n·(2q + delta·(1 - delta)))`` with ``q`` the maximum
    likelihood estimate of P(only A passes) under ``H0``: the root of
    ``2n q² + W q - b·delta·(1 - delta) = 0``, ``W = -(b + c) + (2n - c + b)·delta``
    (Tango 1998, "Equivalence test and confidence interval for the difference in
    proportions for the paired-sample design", Stat. Med. 17:891-908, eqs. 3-5, with his
    ``x12 = c`` and ``x21 = b``). A zero variance (at ``delta = ±1``) gives ``±inf`` or 0.
    """
    w = -(b + c) + (2 * n - c + b) * delta
    q = (math.sqrt(max(0.0, w * w + 8.0 * n * b * delta * (1.0 - delta))) - w) / (4.0 * n)
    variance = n * (2.0 * q + delta * (1.0 - delta))
    numerator = c - b - n * delta
    if variance <= 0.0:
        return 0.0 if numerator == 0 else math.copysign(math.inf, numerator)
    return numerator / math.sqrt(variance)


def tango_interval(n: int, b: int, c: int, confidence: float = 0.95) -> tuple[float, float]:
    """Tango's asymptotic score interval for ``p_B - p_A`` from ``n`` pass/fail pairs.

    The set of ``delta`` whose score test (:func:`tango_statistic`) is not rejected,
    ``|Z(delta)| ≤ z``; Fagerland, Lydersen & Laake (2014), "Recommended tests and
    confidence intervals for paired binomial proportions", Stat. Med. 33:2850-2875,
    recommend it. Because ``Z(0)`` is McNemar's statistic, the interval excludes 0 exactly
    when :func:`mcnemar_score` is below ``1 - confidence``: each bound is found by
    bisection in a bracket whose ends lie on either side of it, 0 being one end whenever
    it is outside, and the end inside the interval is returned, so the bound never lands
    on the wrong side of 0. It never has zero width: (100, 0, 0) gives about ±0.037.

    Raises ValueError for negative counts, ``b + c > n``, ``n == 0`` or an invalid
    ``confidence``.
    """
    z = _z_two_sided(confidence)
    for name, value in (("n", n), ("b", b), ("c", c)):
        _check_count(name, value)
    if b + c > n or n == 0:
        raise ValueError(f"need 0 < n and b + c <= n, got n={n}, b={b}, c={c}")
    estimate = (c - b) / n

    def beyond(delta: float, limit: float) -> bool:
        # Rejected on the side of ``limit``: Z too large for the lower bound, too small
        # for the upper one.
        value = tango_statistic(n, b, c, delta)
        return value > z if limit < 0.0 else value < -z

    def side(limit: float) -> float:
        if not beyond(limit, limit):
            return limit
        outside, inside = limit, estimate
        if (limit < 0.0 < estimate) or (estimate < 0.0 < limit):
            # 0 as a bracket end, so the bound ends up on the same side of 0 as the test.
            if beyond(0.0, limit):
                outside = 0.0
            else:
                inside = 0.0
        for _ in range(200):
            middle = (outside + inside) / 2.0
            if middle in (outside, inside):
                break
            if beyond(middle, limit):
                outside = middle
            else:
                inside = middle
        return inside

    return side(-1.0), side(1.0)


def paired_comparison(
    a: Sequence[float],
    b: Sequence[float],
    clusters: Sequence[str] | None = None,
    confidence: float = 0.95,
) -> PairedDiff:
    """Compare per-item scores ``a`` and ``b`` (same items, same order, each in ``[0, 1]``).

    Scores are 1/0 for pass/fail or an item's mean over its repeats.

    - ``mean``: mean of ``b[i] - a[i]``.
    - ``se``: cluster-robust (CR1) standard error of that mean: the differences' residuals
      are summed within each cluster and their variance taken across the ``G`` clusters
      with the ``G / (G - 1)`` factor (see :func:`_cluster_se`). Without ``clusters`` each
      item is its own cluster, which is exactly the ordinary ``stdev(d) / sqrt(n)``.
    - ``b``, ``c``: items where only A passes / only B passes, a score ``≥ 0.5`` counting
      as a pass (shown beside the difference).
    - Independent pass/fail pairs (every difference -1, 0 or 1, and no cluster holding more
      than one item): exactly :func:`paired_binary` (method ``"exact"``). A difference of
      ±1 is a discordant pair, and equal scores a concordant one, whatever they are.
    - With repeats (a difference strictly between -1 and 1 other than 0) or a cluster
      holding more than one item, pairs are not independent: the test, the interval and
      ``p_value`` are those of :func:`_clustered_paired` (method ``"clustered"``: the
      clustered McNemar statistic with a ``t`` reference on ``G - 1`` degrees of freedom,
      the interval its inversion), which honour the clustering.

    Edge cases: no items gives all zeros with ``p_value`` 1.0. With all items in one
    cluster the variance cannot be estimated: ``se`` is reported as 1.0 (the largest
    standard error a mean of differences in ``[-1, 1]`` can have) and the interval is
    ``[-1, 1]``. Raises ValueError when lengths differ, a score is outside ``[0, 1]``, or
    ``confidence`` is invalid.
    """
    _z_two_sided(confidence)
    n = len(a)
    if len(b) != n:
        raise ValueError(f"a has {n} scores but b has {len(b)}")
    _check_scores("a", a)
    _check_scores("b", b)
    _check_clusters(clusters, n)
    if n == 0:
        return PairedDiff(n=0, mean=0.0, lo=0.0, hi=0.0, se=0.0, b=0, c=0, p_value=1.0)
    only_a = sum(1 for x, y in zip(a, b, strict=True) if x >= _PASS_SCORE > y)
    only_b = sum(1 for x, y in zip(a, b, strict=True) if y >= _PASS_SCORE > x)
    if clusters is not None and len(set(clusters)) == n:
        clusters = None  # singleton clusters are no clustering
    diffs = [y - x for x, y in zip(a, b, strict=True)]
    if not _grouped(diffs, clusters):
        # Differences of -1, 0 and 1 only: a -1 is a pair only A passes (1 against 0), a 1
        # one only B passes, and those are the counts above.
        return paired_binary(n, only_a, only_b, confidence)
    mean = math.fsum(diffs) / n
    estimated = _cluster_se(diffs, mean, clusters)
    se = 1.0 if estimated is None else estimated
    return _clustered_paired(n, diffs, mean, se, only_a, only_b, clusters, confidence)


def paired_binary(n: int, b: int, c: int, confidence: float = 0.95) -> PairedDiff:
    """``n`` pass/fail pairs without clusters, from the counts: ``b`` items only A passes,
    ``c`` only B passes. Method ``"exact"``: the verdict's test is McNemar's exact
    conditional test (:func:`mcnemar_exact`), whose size is at most the level for every
    number of discordant pairs, and the interval is :func:`exact_interval`, which agrees
    with it. ``se`` is the plug-in standard error of ``(c - b) / n`` (the same value
    :func:`paired_comparison` reports), shown only.

    Example: 4 pairs only B passes in 100 items, none only A, has exact ``p = 0.125``: not
    significant at 0.05 (the asymptotic test would say 0.0455); 6 of 6 has ``p = 0.03125``.

    Raises ValueError for negative counts, ``b + c > n`` or an invalid ``confidence``.
    """
    for name, value in (("n", n), ("b", b), ("c", c)):
        _check_count(name, value)
    if b + c > n:
        raise ValueError(f"b + c ({b + c}) must not exceed n ({n})")
    _z_two_sided(confidence)
    if n == 0:
        return PairedDiff(n=0, mean=0.0, lo=0.0, hi=0.0, se=0.0, b=0, c=0, p_value=1.0)
    mean = float(c - b) / n
    estimated = _repeated_se(((1.0 - mean, c), (-1.0 - mean, b), (0.0 - mean, n - b - c)), n)
    se = 1.0 if estimated is None else estimated
    lo, hi = exact_interval(n, b, c, confidence)
    return PairedDiff(n, mean, lo, hi, se, b, c, mcnemar_exact(b, c), "exact")


def exact_interval(n: int, b: int, c: int, confidence: float = 0.95) -> tuple[float, float]:
    """The interval for ``p_B - p_A`` printed beside McNemar's exact test: Tango's score
    interval (:func:`tango_interval`), made to agree with :func:`mcnemar_exact` at level
    ``1 - confidence`` by construction.

    - The exact test does not reject: the interval is widened to hold 0 if it does not
      already (the usual case where they differ: the exact test is the more conservative,
      e.g. 4 of 4 discordant pairs one way in 100 items, exact ``p = 0.125``, Tango's 95 %
      interval ``[+0.2, +9.8]`` points).
    - The exact test rejects and Tango's interval holds 0 (possible only where the exact
      p-value falls below the asymptotic one, in the far tail: all of 12 or more discordant
      pairs one way, at levels below 0.00054): the interval is Tango's at the level of the
      asymptotic test's own p-value, the widest score interval that excludes 0.

    So the interval excludes 0 exactly when ``mcnemar_exact(b, c) < 1 - confidence``.
    Raises ValueError as :func:`tango_interval` does.
    """
    lo, hi = tango_interval(n, b, c, confidence)
    alpha = 1.0 - confidence
    rejected = mcnemar_exact(b, c) < alpha
    if not rejected:
        return min(lo, 0.0), max(hi, 0.0)
    if lo > 0.0 or hi < 0.0:
        return lo, hi
    # Rejected exactly, held by the score interval: the score interval at a level just
    # above its own p-value, where Z(0) is past the critical value.
    lo, hi = tango_interval(n, b, c, 1.0 - min(0.5, mcnemar_score(b, c) * (1.0 + 1e-9)))
    tiny = math.ulp(0.0)
    return (max(lo, tiny), hi) if c > b else (lo, min(hi, -tiny))


# ---------------------------------------------------------------- clustered pairs


def _cluster_sums(
    diffs: Sequence[float], clusters: Sequence[str] | None
) -> tuple[list[float], list[int]]:
    """Per cluster (in order of first appearance): the sum of its differences, its size."""
    if clusters is None:
        return list(diffs), [1] * len(diffs)
    sums: dict[str, list[float]] = {}
    for d, label in zip(diffs, clusters, strict=True):
        sums.setdefault(label, []).append(d)
    return [math.fsum(v) for v in sums.values()], [len(v) for v in sums.values()]


def _grouped(diffs: Sequence[float], clusters: Sequence[str] | None) -> bool:
    """Whether some paired unit is not independent of another: an item's score averages
    repeats (a difference other than -1, 0, 1), or a cluster holds more than one item."""
    if any(d not in (-1.0, 0.0, 1.0) for d in diffs):
        return True
    return clusters is not None and len(set(clusters)) < len(clusters)


def clustered_mcnemar(diffs: Sequence[float], clusters: Sequence[str] | None = None) -> float:
    """The clustered McNemar statistic for per-item differences ``diffs`` (``B - A``, each
    in ``[-1, 1]``) grouped by ``clusters`` (each item its own cluster when None).

    Method: Durkalski, Palesch, Lipsitz & Rust (2003), "Analysis of clustered matched-pair
    data", Stat. Med. 22:2417-2428: with ``S_g = Σ_{i∈g} d_i`` (for pass/fail pairs the
    discordant pairs won by B minus those won by A in cluster ``g``),
    ``X² = (Σ_g S_g)² / Σ_g S_g²``. The denominator estimates the variance of ``Σ S_g``
    under the null hypothesis from the clusters, so correlated discordance within a cluster
    widens it (Obuchowski 1998 is the same idea for clustered ROC data). As in
    :func:`clustered_rate`, the design effect is floored at 1: the denominator is never
    below ``Σ_i d_i²``, the variance of independent pairs, so discordance that cancels
    within clusters cannot make the test surer than unclustered pairs would. With one pair
    per cluster both are ``b + c`` and ``X² = (c - b)² / (b + c)``, McNemar's statistic.
    An item's mean over repeats enters as its difference of means, so repeats of one item
    count as one unit of evidence, as everywhere else.

    Edge cases: no discordance gives 0. Raises ValueError for a cluster list of the wrong
    length.
    """
    _check_clusters(clusters, len(diffs))
    sums, _ = _cluster_sums(diffs, clusters)
    spread = max(math.fsum(s * s for s in sums), math.fsum(d * d for d in diffs))
    return math.fsum(sums) ** 2 / spread if spread > 0.0 else 0.0


def _accepted(
    n: int, mean: float, spread: float, cross: float, squares: float, c2: float
) -> tuple[float, float]:
    """The piece holding ``mean`` of the set of ``δ`` in ``[-1, 1]`` with
    ``n²(mean - δ)² ≤ c2 · (spread - 2·cross·δ + squares·δ²)``: the interval of a score
    test whose variance at ``δ`` is ``Σ_g (S_g - n_g δ)²``. With few or unequal clusters
    the variance can grow faster than the numerator and the set is unbounded on one side
    (or on both), and a ``δ`` far from ``mean`` is accepted again; only the piece around
    ``mean`` is an interval for it."""
    qa = n * n - c2 * squares
    qb = n * n * mean - c2 * cross
    qc = n * n * mean * mean - c2 * spread
    # qa·δ² - 2·qb·δ + qc ≤ 0
    disc = qb * qb - qa * qc
    if qa > 0.0:
        half = math.sqrt(max(0.0, disc))
        return min((qb - half) / qa, mean), max((qb + half) / qa, mean)
    if qa == 0.0:
        if qb == 0.0:
            return -1.0, 1.0
        edge = qc / (2.0 * qb)
        return (min(edge, mean), 1.0) if qb > 0.0 else (-1.0, max(edge, mean))
    if disc <= 0.0:
        return -1.0, 1.0
    half = math.sqrt(disc)
    low, high = (qb + half) / qa, (qb - half) / qa  # qa < 0: accepted outside (low, high)
    return (-1.0, max(low, mean)) if mean <= low else (min(high, mean), 1.0)


def _clustered_paired(
    n: int,
    diffs: Sequence[float],
    mean: float,
    se: float,
    b: int,
    c: int,
    clusters: Sequence[str] | None,
    confidence: float,
) -> PairedDiff:
    """The ``PairedDiff`` of clustered or repeated pairs, its interval the inversion of its
    test, so "the interval excludes 0" and "p < 1 - confidence" are the same statement.

    Test: :func:`clustered_mcnemar` ``X²`` referred to Student's ``t`` with ``G - 1``
    degrees of freedom (``G`` clusters) rather than to χ²(1): with few clusters the
    variance is estimated from few sums and the χ² reference rejects far too often (the
    small-sample correction of Bell & McCaffrey 2002 and Cameron & Miller 2015 §VI). For
    ``G`` equal clusters ``X² = G·t² / (G - 1 + t²)`` where ``t`` is the ordinary
    ``t`` statistic of the cluster sums, so ``t = sqrt((G - 1)·X² / (G - X²))`` has the
    ``t`` distribution with ``G - 1`` degrees of freedom when the sums are normal; a
    reference on ``X²`` itself would be far too conservative (``X² ≤ G`` always, so 5
    clusters could never reject at 5 %).

    Interval: every ``δ`` that the same test does not reject for ``H0: E[d] = δ``, i.e.
    ``T(δ)² = n²(mean - δ)² / max(Σ_g (S_g - n_g δ)², Σ_i (d_i - δ)²) ≤ x`` with ``x`` the
    critical ``X²`` above: the union of two quadratic inequalities, each solved in closed
    form, both holding ``mean`` (see :func:`_accepted` for the pieces kept when clusters
    are so unequal, ``n² ≤ x · Σ n_g²``, that a set is unbounded). When the test does not
    reject, the interval is widened to hold 0 if it does not already.

    ``se`` is the CR1 standard error of the mean, reported as it is.
    """
    sums, sizes = _cluster_sums(diffs, clusters)
    groups = len(sums)
    if groups < 2:
        return PairedDiff(
            n=n,
            mean=mean,
            lo=-1.0,
            hi=1.0,
            se=se,
            b=b,
            c=c,
            p_value=1.0,
            method="clustered",
            clusters=groups,
        )
    # Student's t through scipy.special, what scipy.stats.t evaluates, without importing it.
    from scipy.special import stdtr, stdtrit  # type: ignore[import-untyped,unused-ignore]

    df = groups - 1
    crit = float(stdtrit(df, 1.0 - (1.0 - confidence) / 2.0))
    statistic = clustered_mcnemar(diffs, clusters)
    p_value = 1.0
    if statistic >= groups:
        p_value = 0.0
    elif statistic > 0.0:
        wald = math.sqrt(df * statistic / (groups - statistic))
        p_value = _clamp(2.0 * float(stdtr(df, -wald)), 0.0, 1.0)
    # The critical X² that the same t quantile maps to, so test and interval agree.
    c2 = groups * crit * crit / (df + crit * crit)
    by_cluster = _accepted(
        n,
        mean,
        math.fsum(s * s for s in sums),
        math.fsum(s * m for s, m in zip(sums, sizes, strict=True)),
        float(sum(m * m for m in sizes)),
        c2,
    )
    by_pair = _accepted(n, mean, math.fsum(d * d for d in diffs), math.fsum(diffs), n, c2)
    lo, hi = min(by_cluster[0], by_pair[0]), max(by_cluster[1], by_pair[1])
    if p_value >= 1.0 - confidence:
        # 0 is accepted, though perhaps in another piece of the set: the interval holds it,
        # so it never excludes 0 beside a test that does not reject.
        lo, hi = min(lo, 0.0), max(hi, 0.0)
    return PairedDiff(
        n=n,
        mean=mean,
        lo=_clamp(lo, -1.0, 1.0),
        hi=_clamp(hi, -1.0, 1.0),
        se=se,
        b=b,
        c=c,
        p_value=p_value,
        method="clustered",
        clusters=0 if clusters is None else groups,
        refit=functools.partial(_clustered_paired, n, diffs, mean, se, b, c, clusters),
    )


# ---------------------------------------------------------------- minimum detectable effects


def _z_power_sum(alpha: float, power: float) -> float:
    """``z_{1-alpha/2} + z_{power}`` for a two-sided test at level ``alpha``."""
    if not 0.0 < power < 1.0:
        raise ValueError(f"power must be strictly between 0 and 1, got {power!r}")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be strictly between 0 and 1, got {alpha!r}")
    return _z_two_sided(1.0 - alpha) + _STANDARD_NORMAL.inv_cdf(power)


def mde_paired(
    n: int,
    discordance: float,
    alpha: float = 0.05,
    power: float = 0.8,
    *,
    discordance_floor: float = DISCORDANCE_FLOOR,
) -> float:
    """Minimum detectable difference in pass rate for a paired comparison on ``n`` items.

    Method: normal approximation to McNemar's test, solved for the difference ``δ`` given
    the discordant-pair rate ``ψ`` (share of items on which exactly one candidate passes):
    ``δ = (z_{1-alpha/2} + z_{power}) · sqrt(ψ / n)``. This is Connor (1987), "Sample size for
    testing differences in proportions for the paired-sample design", Biometrics
    43:207-211, with the variance under the alternative taken as ``ψ`` rather than
    ``ψ - δ²`` (cf. Lachin 1992, "Power and sample size evaluation for the McNemar test
    with application to matched case-control studies", Stat. Med. 11:1239-1251); dropping
    ``δ²`` overstates the variance slightly, so the answer errs large (conservative).
    Example: ``n = 100``, ``ψ = 0.2``, defaults: ``2.8016 · sqrt(0.002) ≈ 0.1253``.

    ``discordance`` below ``discordance_floor`` (default :data:`DISCORDANCE_FLOOR`, 0.10)
    is raised to it. The discordance is usually estimated from the very sample being
    judged; a sample on which the candidates (nearly) never disagree would otherwise claim
    it could detect arbitrarily small differences (``ψ = 0`` gives an MDE of 0), which is
    the opposite of what so little disagreement shows. 0.10 is a typical discordance
    between different models on one task; pass ``discordance_floor=0`` for planning with a
    known ``ψ``.

    Edge cases: ``n == 0`` gives 1.0; the result is clamped to ``[0, 1]``. Raises
    ValueError for a negative ``n``, ``discordance`` or ``discordance_floor`` outside
    ``[0, 1]``, or ``alpha``/``power`` not strictly between 0 and 1.
    """
    _check_count("n", n)
    _check_unit("discordance", discordance)
    _check_unit("discordance_floor", discordance_floor)
    z_sum = _z_power_sum(alpha, power)
    if n == 0:
        return 1.0
    psi = max(discordance, discordance_floor)
    return _clamp(z_sum * math.sqrt(psi / n), 0.0, 1.0)


def mde_mcnemar(
    n: int,
    discordant: int,
    alpha: float = 0.05,
    power: float = 0.8,
    *,
    discordance_floor: float = DISCORDANCE_FLOOR,
) -> float | None:
    """Smallest difference in pass rate McNemar's exact test (:func:`mcnemar_exact`) at
    level ``alpha`` detects with probability ``power`` on ``n`` items, or None when no
    difference is detectable.

    Method: exact binomial power, no simulation and no normal approximation. With ``m``
    discordant pairs (``discordant``, raised to ``ceil(discordance_floor · n)`` for the
    reason :func:`mde_paired` gives), the number ``C`` of them B wins is
    ``Binomial(m, π)``, the difference is ``δ = (m / n)(2π - 1)``, and the exact test
    rejects when ``min(C, m - C) ≤ j``, ``j`` the largest count with
    ``mcnemar_exact(j, m - j) < alpha`` (found by bisection on that very function, so the
    rejection region is the verdict's). Its power, two binomial tails, grows with ``π`` on
    ``[1/2, 1]``, and bisection finds the smallest ``π`` with enough power. When even
    ``m`` of ``m`` pairs one way is not significant (``2 / 2^m ≥ alpha``: 5 pairs or fewer
    at 0.05) or ``π = 1`` falls short, nothing is detectable and the result is None ("too
    few items to detect any difference").

    Raises ValueError for negative counts, ``discordant > n``, or ``alpha``/``power`` not
    strictly between 0 and 1.
    """
    _check_count("n", n)
    _check_count("discordant", discordant)
    _check_unit("discordance_floor", discordance_floor)
    if discordant > n:
        raise ValueError(f"discordant ({discordant}) must not exceed n ({n})")
    _z_power_sum(alpha, power)  # validates both
    m = min(n, max(discordant, math.ceil(discordance_floor * n)))
    lower = _exact_rejection_edge(m, alpha)
    if lower < 0:
        return None
    upper = m - lower  # rejected: C ≤ lower or C ≥ upper
    # The binomial tails as regularised incomplete beta functions, the very evaluations
    # scipy.stats.binom makes (bit for bit, as the tests check), without importing
    # scipy.stats (most of a second) or its per-call argument handling:
    # P(C >= upper) = I_pi(upper, m - upper + 1), P(C <= lower) = I_(1-pi)(m - lower, lower + 1).
    from scipy.special import betainc  # type: ignore[import-untyped,unused-ignore]

    def power_at(pi: Sequence[float]) -> list[float]:
        rejected = betainc(upper, m - upper + 1, pi)
        rejected = rejected + betainc(m - lower, lower + 1, [1.0 - p for p in pi])
        return [float(p) for p in rejected]

    if power_at([1.0])[0] < power:
        return None
    strong = _bisect_up(power_at, power, 0.5, 1.0, steps=60)
    return _clamp(m / n * (2.0 * strong - 1.0), 0.0, 1.0)


def _exact_rejection_edge(m: int, alpha: float) -> int:
    """The largest ``j`` with ``mcnemar_exact(j, m - j) < alpha`` (the p-value grows with
    ``j``), or -1 when even ``mcnemar_exact(0, m)`` is not below ``alpha``.

    The same partial sums :func:`mcnemar_exact` computes, in one pass instead of one call a
    candidate ``j``; beyond :data:`EXACT_MCNEMAR_LIMIT` pairs, bisection on it.
    """
    if m == 0:
        return -1
    if m > EXACT_MCNEMAR_LIMIT:
        if mcnemar_exact(0, m) >= alpha:
            return -1
        low, high = 0, (m + 1) // 2  # low rejects; high (2·high ≥ m: p = 1) does not
        while high - low > 1:
            middle = (low + high) // 2
            low, high = (
                (middle, high) if mcnemar_exact(middle, m - middle) < alpha else (low, middle)
            )
        return low
    denominator = 1 << (m - 1)
    term = total = 1
    j = -1
    while 2 * (j + 1) < m and min(1.0, total / denominator) < alpha:
        j += 1
        term = term * (m - j) // (j + 1)
        total += term
    return j


def _bisect_up(
    value_at: Callable[[Sequence[float]], list[float]],
    target: float,
    low: float,
    high: float,
    *,
    steps: int,
    depth: int = 6,
) -> float:
    """``steps`` rounds of bisection for the smallest point of ``[low, high]`` where
    ``value_at`` reaches ``target`` (``high`` is the end that reaches it): each round takes
    the midpoint as the new ``high`` if it reaches the target, else as the new ``low``.

    ``value_at`` takes many points at once: the midpoints the next ``depth`` rounds can visit
    (``2**depth - 1`` of them, computed as the rounds compute them) are evaluated in one call,
    then the rounds walk them. The result is exactly that of evaluating one midpoint a round,
    point for point, in a tenth of the calls (a scipy call costs as much as many elements).
    """
    done = 0
    while done < steps:
        levels = min(depth, steps - done)
        points: list[float] = []
        spans = [(low, high)]
        for _ in range(levels):
            middles = [(a + b) / 2.0 for a, b in spans]
            points.extend(middles)
            spans = [
                s for (a, b), mid in zip(spans, middles, strict=True) for s in ((a, mid), (mid, b))
            ]
        values = dict(zip(points, value_at(points), strict=True))
        for _ in range(levels):
            middle = (low + high) / 2.0
            if values[middle] >= target:
                high = middle
            else:
                low = middle
        done += levels
    return high


def slice_mde(
    units: int,
    *,
    discordance: float = DISCORDANCE_FLOOR,
    alpha: float = 0.05,
    power: float = 0.8,
) -> float:
    """The smallest change a slice can detect: the one definition the governance report and
    ``evalreg evalset stats`` share.

    Design: the comparison the pull-request diff makes, two candidates graded on the same
    items, tested with McNemar's test on the discordant pairs (two-sided, level ``alpha``,
    default 0.05), detected with probability ``power`` (default 0.8). Formula: the normal
    approximation of :func:`mde_paired`, ``δ = (z_{1-alpha/2} + z_{power}) · sqrt(ψ / n)``
    (Connor 1987), with ``n = units``, the slice's independent units (distinct clusters,
    each unclustered item its own: items of one cluster may fail together) and ``ψ`` the
    share of units on which the two candidates disagree, a planning assumption since no
    candidate has to have run: ``discordance``, default :data:`DISCORDANCE_FLOOR` (0.10, a
    typical disagreement between different models on one task), taken as stated (no
    floor). Example: 51 units at the defaults, ``2.8016 · sqrt(0.10 / 51) ≈ 0.124``.

    This is a size for planning, known before anything runs; once two candidates have run,
    the diff states the MDE of the test it made from the observed discordant pairs
    (:func:`mde_mcnemar`, exact binomial power), which can differ from it. ``units == 0``
    gives 1.0; the result is clamped to ``[0, 1]``; bad arguments raise ValueError as in
    :func:`mde_paired`.
    """
    return mde_paired(units, discordance, alpha, power, discordance_floor=0.0)


def mde_rate(n: int, p: float, alpha: float = 0.05, power: float = 0.8) -> float:
    """Minimum detectable change of a rate ``p`` measured on ``n`` items against a fixed value.

    Method: normal approximation to the one-sample test of a proportion,
    ``(z_{1-alpha/2} + z_{power}) · sqrt(p(1 - p) / n)`` (e.g. Chow, Shao & Wang, "Sample Size
    Calculations in Clinical Research", §4.1, solved for the difference). ``p`` is first
    clamped to ``[0.05, 0.95]``: at 0/40 or 40/40 the plug-in variance ``p(1 - p)`` is 0 and
    would claim any change is detectable, whereas the data cannot rule out a rate of a few
    percent. Example: ``n = 100``, ``p = 0.5``, defaults: ``2.8016 · 0.05 ≈ 0.1401``. A
    slice whose MDE exceeds the change of interest (e.g. 0.05) is too small to detect it.

    Edge cases: ``n == 0`` gives 1.0; the result is clamped to ``[0, 1]``. Raises
    ValueError for a negative ``n``, ``p`` outside ``[0, 1]``, or ``alpha``/``power`` not
    strictly between 0 and 1.
    """
    _check_count("n", n)
    _check_unit("p", p)
    z_sum = _z_power_sum(alpha, power)
    if n == 0:
        return 1.0
    q = max(min(p, 1.0 - p), _RATE_CLAMP)  # symmetric in p and 1 - p, bit for bit
    return _clamp(z_sum * math.sqrt(q * (1.0 - q) / n), 0.0, 1.0)
