"""Calibration of the intervals and tests evalreg prints for clustered items, and the size of
the paired verdict's test, as tables: each method against its nominal level.

1. **Rates** (``stats.clustered_rate``): coverage of the 95 % interval at 2 to 30 clusters,
   before (a Wilson interval on the effective sample size, normal reference) and after
   (Korn & Graubard's degrees-of-freedom factor on that size), in two scenarios:

   - *as documented*: 10 items a cluster, cluster pass rates ``Beta(1.2, 2.8)`` (mean 0.3,
     intra-class correlation 0.2);
   - *low rate, unequal clusters*: 2 to 30 items a cluster (uniform), cluster rates
     ``Beta(0.2, 3.8)`` (mean 0.05, intra-class correlation 0.2).

2. **Paired differences** (``stats.paired_comparison`` with clusters): coverage of the 95 %
   interval and false-positive rate of the 5 % test at 2 to 30 clusters, for the naive
   method (exact McNemar over items, ``mean ± z·CR1 se``) and the clustered McNemar test
   with a ``t`` reference on G - 1 degrees of freedom. Each cluster ``g`` of ``--items``
   items draws a discordance ``ψ_g ~ Beta(2, 6)`` and a direction ``π_g``; each item is
   discordant with probability ``ψ_g`` and, when it is, B wins with probability ``π_g``.
   Under the null ``π_g ~ Beta(2, 2)``; for coverage ``π_g ~ Beta(3, 2)``, whose true
   difference is ``E[ψ] · (2 E[π] - 1) = 0.25 · 0.2 = 0.05``.

3. **The paired verdict's size** on independent pass/fail pairs, conditional on the number
   of discordant pairs ``m`` (1 to 200): the chance the test rejects when each discordant
   pair goes either way with probability 1/2, for the asymptotic score test (before) and
   McNemar's exact conditional test (after). Exact, no simulation.

Seeded (numpy ``Generator(PCG64)``): the same arguments print the same tables.

Run: python tests/benchmarks/cluster_calibration.py [--reps N] [--items M] [--seed S]
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

import numpy as np
from scipy.stats import binom

from evalreg import stats

CLUSTERS = (2, 3, 5, 10, 20, 30)
CONFIDENCE = 0.95
Z = 1.959963984540054


# ---------------------------------------------------------------- rates


def rate_data(
    rng: np.random.Generator, groups: int, sizes: tuple[int, int], shape: tuple[float, float]
) -> tuple[list[float], list[str]]:
    """One data set: each item's pass/fail, and its cluster."""
    rates = rng.beta(*shape, size=groups)
    counts = rng.integers(sizes[0], sizes[1] + 1, size=groups)
    scores = [float(rng.random() < r) for r, k in zip(rates, counts, strict=True) for _ in range(k)]
    clusters = [f"g{g}" for g, k in enumerate(counts) for _ in range(k)]
    return scores, clusters


def rate_before(scores: list[float], clusters: list[str]) -> tuple[float, float]:
    """The interval before the degrees-of-freedom factor: Wilson on ``n / max(1, deff)``."""
    n = len(scores)
    mean = math.fsum(scores) / n
    se = stats._cluster_se(scores, mean, clusters)
    srs = mean * (1.0 - mean) / (n - 1)
    deff = se * se / srs if se is not None and srs > 0.0 else 1.0
    n_eff = n / max(1.0, deff)
    return stats._wilson_bounds(mean * n_eff, n_eff, Z)


def rate_after(scores: list[float], clusters: list[str]) -> tuple[float, float]:
    rate = stats.clustered_rate(scores, clusters, CONFIDENCE)
    return rate.lo, rate.hi


def rates(args: argparse.Namespace) -> None:
    scenarios = (
        ("as documented", (args.items, args.items), (1.2, 2.8), 0.3),
        ("low rate, unequal clusters", (2, 30), (0.2, 3.8), 0.05),
    )
    methods: tuple[tuple[str, Callable[[list[float], list[str]], tuple[float, float]]], ...] = (
        ("before", rate_before),
        ("after", rate_after),
    )
    print("Rates: coverage of the 95 % interval (stats.clustered_rate)\n")
    print(f"{'scenario':<27}  {'clusters':>8}  {'before':>7}  {'after':>7}  {'width':>6}")
    for name, sizes, shape, truth in scenarios:
        for groups in CLUSTERS:
            row = []
            width = 0.0
            for _, method in methods:
                rng = np.random.Generator(np.random.PCG64([args.seed, groups, len(name)]))
                covered, widths = 0, []
                for _ in range(args.reps):
                    lo, hi = method(*rate_data(rng, groups, sizes, shape))
                    covered += lo <= truth <= hi
                    widths.append(hi - lo)
                row.append(covered / args.reps)
                width = float(np.median(widths))
            print(f"{name:<27}  {groups:>8}  {row[0]:>7.1%}  {row[1]:>7.1%}  {width:>6.2f}")
    print("\n(width: the median width of the interval after)\n")


# ---------------------------------------------------------------- paired differences


def simulate(
    rng: np.random.Generator, groups: int, items: int, direction: tuple[float, float]
) -> tuple[list[float], list[float], list[str]]:
    """One data set: A's and B's pass/fail per item, and each item's cluster."""
    psi = rng.beta(2.0, 6.0, size=groups)
    pi = rng.beta(*direction, size=groups)
    discordant = rng.random((groups, items)) < psi[:, None]
    b_wins = rng.random((groups, items)) < pi[:, None]
    a = (discordant & ~b_wins).astype(float).ravel().tolist()
    b = (discordant & b_wins).astype(float).ravel().tolist()
    clusters = [f"g{g}" for g in range(groups) for _ in range(items)]
    return a, b, clusters


def naive(a: list[float], b: list[float], clusters: list[str]) -> tuple[float, float, float]:
    """The method before clustering entered the test: ``(lo, hi, p)``."""
    diffs = [y - x for x, y in zip(a, b, strict=True)]
    mean = math.fsum(diffs) / len(diffs)
    se = stats._cluster_se(diffs, mean, clusters)
    se = 1.0 if se is None else se
    only_a = sum(1 for x, y in zip(a, b, strict=True) if x > y)
    only_b = sum(1 for x, y in zip(a, b, strict=True) if y > x)
    return mean - Z * se, mean + Z * se, stats.mcnemar_exact(only_a, only_b)


def clustered(a: list[float], b: list[float], clusters: list[str]) -> tuple[float, float, float]:
    d = stats.paired_comparison(a, b, clusters, CONFIDENCE)
    return d.lo, d.hi, d.p_value


def paired(args: argparse.Namespace) -> None:
    alpha = 1.0 - CONFIDENCE
    truth = 0.25 * 0.2
    print(
        f"Paired differences: {args.items} items a cluster; nominal coverage "
        f"{CONFIDENCE:.0%}, nominal false-positive rate {alpha:.0%}\n"
    )
    print(f"{'clusters':>8}  {'method':<10}  {'coverage':>8}  {'false pos.':>10}")
    for groups in CLUSTERS:
        for name, method in (("naive", naive), ("clustered", clustered)):
            # The same data sets for both methods: the rows differ only by the method.
            rng = np.random.Generator(np.random.PCG64([args.seed, groups]))
            covered = rejected = 0
            for _ in range(args.reps):
                lo, hi, _p = method(*simulate(rng, groups, args.items, (3.0, 2.0)))
                covered += lo <= truth <= hi
                _lo, _hi, p = method(*simulate(rng, groups, args.items, (2.0, 2.0)))
                rejected += p < alpha
            print(
                f"{groups:>8}  {name:<10}  {covered / args.reps:>8.1%}  "
                f"{rejected / args.reps:>10.1%}"
            )
    print()


# ---------------------------------------------------------------- the paired verdict's size


def sizes(top: int = 200) -> None:
    print(
        f"The paired verdict's size given m discordant pairs (m = 1 .. {top}), independent "
        "pass/fail pairs\n"
    )
    print(f"{'level':>6}  {'test':<22}  {'m over level':>12}  {'largest size':>12}  {'at m':>5}")
    tests: tuple[tuple[str, Callable[[int, int], float]], ...] = (
        ("asymptotic (before)", stats.mcnemar_score),
        ("exact conditional", stats.mcnemar_exact),
    )
    for alpha in (0.05, 0.01):
        for name, test in tests:
            over, worst, where = 0, 0.0, 0
            for m in range(1, top + 1):
                rejected = [c for c in range(m + 1) if test(m - c, c) < alpha]
                size = float(binom.pmf(rejected, m, 0.5).sum())
                over += size > alpha
                if size > worst:
                    worst, where = size, m
            print(f"{alpha:>6}  {name:<22}  {over:>12}  {worst:>12.4f}  {where:>5}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--reps", type=int, default=4000, help="data sets per cell")
    parser.add_argument("--items", type=int, default=10, help="items per cluster")
    parser.add_argument("--seed", type=int, default=17)
    args = parser.parse_args(argv)
    rates(args)
    paired(args)
    sizes()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
