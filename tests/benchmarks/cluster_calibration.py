"""Calibration of the paired test and interval on clustered items: coverage of the 95 %
interval and false-positive rate of the 5 % test at 2, 5, 10 and 30 clusters, for the naive
method (exact McNemar over items, ``mean ± z·CR1 se``) and for ``stats.paired_comparison``
(clustered McNemar with a ``t`` reference on G - 1 degrees of freedom, its interval the
inversion of that test).

Each cluster ``g`` of ``--items`` items draws a discordance ``ψ_g ~ Beta(2, 6)`` and a
direction ``π_g``; each item is discordant with probability ``ψ_g`` and, when it is, B wins
with probability ``π_g``. Under the null ``π_g ~ Beta(2, 2)`` (no difference on average,
strongly clustered direction); for coverage ``π_g ~ Beta(3, 2)``, whose true difference is
``E[ψ] · (2 E[π] - 1) = 0.25 · 0.2 = 0.05``. Seeded (numpy ``Generator(PCG64)``): the same
arguments print the same table.

Run: python tests/benchmarks/cluster_calibration.py [--reps N] [--items M] [--seed S]
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from evalreg import stats

CLUSTERS = (2, 5, 10, 30)
CONFIDENCE = 0.95
Z = 1.959963984540054


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--reps", type=int, default=2000, help="data sets per cell")
    parser.add_argument("--items", type=int, default=30, help="items per cluster")
    parser.add_argument("--seed", type=int, default=17)
    args = parser.parse_args(argv)
    alpha = 1.0 - CONFIDENCE
    truth = 0.25 * 0.2
    print(
        f"{args.reps} data sets per row, {args.items} items a cluster; nominal coverage "
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
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
