"""What stopping early costs and saves: ``evalreg.sequential``'s decisions on simulated use
cases, against a fixed-size run that buys every item.

Each use case is an eval set of ``--items`` items (default 1,000) bought in a uniformly
random order in rounds of ``--round`` items (default 16), the decision checked after each
round and buying stopped once it is settled. Scenarios:

- *gate*: one candidate against ``rate ≥ 0.60``; its pass rate over the eval set is exactly
  the threshold (the null) or 5, 10, 15 or 30 points above it;
- *pairwise*: two candidates on the same items, 50 % passed by both and 10 % by the second
  only; the first passes 10 % + δ alone, so the difference is δ = 0 (the null: a tie), 5,
  10, 15 or 30 points;
- *family*: both candidates' gates (``≥ 0.50``) and their comparison decided together at the
  stated alpha, Bonferroni-split three ways.

The eval sets are built with exact counts, so the full run's decision is known; a decision
is wrong when it differs from it. Each row prints the share of use cases decided wrong
(guaranteed at most alpha) and the mean share of items not bought, beside the fixed-size run
(every item bought, never wrong). Seeded (numpy ``Generator(PCG64)``): the same arguments
print the same table. Prints, never asserts.

Run: python tests/benchmarks/sequential.py [--cases N] [--items M] [--round R] [--alpha A]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from evalreg.sequential import threshold_sides

GATE = 0.60
FAMILY_GATE = 0.50
DELTAS = (0.0, 0.05, 0.10, 0.15, 0.30)


def orders(population: np.ndarray, cases: int, rng: np.random.Generator) -> np.ndarray:
    """``cases`` random orders of the population's rows (items on axis 0)."""
    keys = rng.random((cases, population.shape[0]))
    return population[np.argsort(keys, axis=1)]


def stopping(settled: np.ndarray, size: int, step: int) -> np.ndarray:
    """The items bought when each use case stops: the first round end that settles it."""
    ends = np.unique(np.minimum(np.arange(step, size + step, step), size)) - 1
    at_ends = settled[:, ends]
    first = np.argmax(at_ends, axis=1)
    return ends[first] + 1


def gate_run(scores: np.ndarray, size: int, threshold: float, alpha: float, step: int):
    """Items bought and the decision (True: pass) of a ``≥ threshold`` gate, per use case."""
    sides = threshold_sides(scores, size, threshold, alpha)
    bought = stopping(sides.at_least | sides.below, size, step)
    rows = np.arange(scores.shape[0])
    return bought, sides.at_least[rows, bought - 1]


def pair_run(first: np.ndarray, second: np.ndarray, size: int, alpha: float, step: int):
    """Items bought and the decision (1 first, -1 second, 0 tie) of a comparison."""
    sides = threshold_sides((first - second + 1.0) / 2.0, size, 0.5, alpha)
    tie = sides.at_least & sides.at_most
    bought = stopping(sides.above | sides.below | tie, size, step)
    rows = np.arange(first.shape[0])
    at = bought - 1
    outcome = np.where(sides.above[rows, at], 1, np.where(sides.below[rows, at], -1, 0))
    return bought, outcome


def pair_population(size: int, delta: float) -> np.ndarray:
    """Columns (first, second): 50 % both pass, 10 % second only, 10 % + δ first only."""
    both, second_only = round(0.5 * size), round(0.1 * size)
    first_only = round((0.1 + delta) * size)
    rows = [(1.0, 1.0)] * both + [(0.0, 1.0)] * second_only + [(1.0, 0.0)] * first_only
    rows += [(0.0, 0.0)] * (size - len(rows))
    return np.array(rows)


def scenarios(args: argparse.Namespace, rng: np.random.Generator):
    """Yield (name, wrong share, mean share of items saved) for every scenario."""
    size, step, alpha, cases = args.items, args.round, args.alpha, args.cases
    for delta in DELTAS:
        passes = round((GATE + delta) * size)
        population = np.array([1.0] * passes + [0.0] * (size - passes))
        scores = orders(population, cases, rng)
        bought, passed = gate_run(scores, size, GATE, alpha, step)
        full = passes >= GATE * size
        yield f"gate ≥ {GATE:.2f}, rate +{delta * 100:.0f} pt", passed != full, bought
    for delta in DELTAS:
        drawn = orders(pair_population(size, delta), cases, rng)
        bought, outcome = pair_run(drawn[..., 0], drawn[..., 1], size, alpha, step)
        full = int(np.sign(round(delta * size)))
        yield f"pairwise, difference {delta * 100:.0f} pt", outcome != full, bought
    for delta in (0.0, 0.15, 0.30):
        drawn = orders(pair_population(size, delta), cases, rng)
        each = alpha / 3
        bought_a, pass_a = gate_run(drawn[..., 0], size, FAMILY_GATE, each, step)
        bought_b, pass_b = gate_run(drawn[..., 1], size, FAMILY_GATE, each, step)
        bought_c, outcome = pair_run(drawn[..., 0], drawn[..., 1], size, each, step)
        full_a = drawn[0, :, 0].sum() >= FAMILY_GATE * size
        full_b = drawn[0, :, 1].sum() >= FAMILY_GATE * size
        wrong = (pass_a != full_a) | (pass_b != full_b) | (outcome != np.sign(round(delta * size)))
        bought = np.maximum(np.maximum(bought_a, bought_b), bought_c)
        yield f"family of 3 (2 gates, 1 pair), {delta * 100:.0f} pt", wrong, bought


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--cases", type=int, default=1_000, help="use cases per scenario")
    parser.add_argument("--items", type=int, default=1_000, help="items in each eval set")
    parser.add_argument("--round", type=int, default=16, help="items bought per round")
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=20_240)
    args = parser.parse_args()
    rng = np.random.Generator(np.random.PCG64(args.seed))
    started = time.perf_counter()
    print(f"{args.items} items, rounds of {args.round}, alpha {args.alpha}, {args.cases} cases")
    header = f"{'scenario':<40} {'wrong':>7} {'saved':>7} {'median bought':>14}"
    print(f"{header}   fixed-size run: wrong, saved")
    total = 0
    for name, wrong, bought in scenarios(args, rng):
        total += len(bought)
        saved = 1.0 - bought.mean() / args.items
        print(
            f"{name:<40} {wrong.mean():>7.2%} {saved:>7.1%} {int(np.median(bought)):>14}"
            f"   0.00 %, 0.0 %"
        )
    print(f"{total} use cases in {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
