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

A second table (``--policy N`` use cases per scenario, default 200) runs the rule a run
applies, ``selection.stopping.schedule``, on per-item records: three candidates, one gate
(``pass_rate ≥ 0.60``) and a lexicographic objective, candidates out of the running no longer
bought; a stop is wrong when its recommendation differs from ``selection.policy.decide`` on
every record. Scenarios: all three exactly at the gate and equal (the null), the best 5, 15
or 30 points above the other two. Its "saved" counts every candidate's items.

Run: python tests/benchmarks/sequential.py [--cases N] [--items M] [--round R] [--alpha A]
       [--policy N]
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


def policy_scenarios(args: argparse.Namespace, rng: np.random.Generator):
    """(name, wrong, share of items bought) per use case of the policy-level table."""
    from evalreg.metrics import cell_metrics
    from evalreg.registry import schema
    from evalreg.results.outcomes import from_records
    from evalreg.selection import stopping
    from evalreg.selection.policy import decide
    from evalreg.sequential import purchase_order

    rubric = schema.Rubric.model_validate(
        {
            "schema_version": 1,
            "description": "d",
            "version": "1",
            "criteria": [
                {"id": "ok", "description": "d", "grader": {"type": "field_exact", "field": "x"}}
            ],
            "levels": {"correct": {"require": "all"}, "acceptable": {"require": ["ok"]}},
        }
    )
    task = schema.Task.model_validate(
        {
            "schema_version": 1,
            "description": "d",
            "evalset": "e.jsonl",
            "prompt": {"template": "x"},
            "output": {"parser": "json"},
            "rubric": "r",
        }
    )
    names = ("a", "b", "c")
    selection = schema.Selection.model_validate(
        {
            "schema_version": 1,
            "use_case": "u",
            "task": "t",
            "candidates": [{"id": c, "pin": c} for c in names],
            "policy": {
                "gates": [{"metric": "pass_rate", "min": GATE}],
                "objective": {"lexicographic": [{"maximize": "pass_rate"}]},
            },
            "selected": "a",
            "rationale": "r",
        }
    )
    size = args.items
    ids = [f"i{n:05d}" for n in range(size)]
    params = schema.Sequential(alpha=args.alpha, min_items=args.round, round=args.round)

    def record(item: str, passed: bool) -> dict:
        return {
            "item": item,
            "sample": 0,
            "tags": [],
            "cluster": None,
            "key": None,
            "error": None,
            "criteria": {"ok": {"passed": passed, "score": float(passed)}},
            "level": "correct" if passed else "unacceptable",
            "score": float(passed),
            "latency_ms": 1,
            "tokens": {"input": 1, "output": 1, "reasoning": 0},
            "cost_micro_usd": 0,
            "content": "c",
        }

    for delta in (0.0, 0.05, 0.15, 0.30):
        wrong, bought = [], []
        for case_no in range(args.policy):
            rates = {"a": GATE + delta, "b": GATE, "c": GATE}
            records = {}
            for cand, rate in rates.items():
                passing = set(rng.choice(size, round(rate * size), replace=False).tolist())
                records[cand] = [record(i, n in passing) for n, i in enumerate(ids)]
            case = stopping.UseCase(
                "u",
                selection,
                rubric,
                1,
                dict.fromkeys(ids, ()),
                purchase_order(f"case-{case_no}", ids),
                {c: c for c in names},
                params,
            )
            position = {item: n for n, item in enumerate(case.order)}

            def buy(want: dict[str, int], records=records, position=position) -> dict:
                return {
                    c: [r for r in records[c] if position[r["item"]] < n] for c, n in want.items()
                }

            stop = stopping.schedule([case], buy)
            full = {
                c: cell_metrics(from_records(rs, ["ok"]), task, rubric) for c, rs in records.items()
            }
            expected = decide(selection, full, set()).recommended
            wrong.append(stop.states["u"].recommended != expected)
            bought.append(sum(stop.bought.values()) / (len(names) * size))
        yield f"3 candidates, 1 gate, best +{delta * 100:.0f} pt", np.array(wrong), np.array(bought)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--cases", type=int, default=1_000, help="use cases per scenario")
    parser.add_argument("--items", type=int, default=1_000, help="items in each eval set")
    parser.add_argument("--round", type=int, default=16, help="items bought per round")
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=20_240)
    parser.add_argument(
        "--policy", type=int, default=200, help="use cases per policy-level scenario (0: none)"
    )
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
    if args.policy:
        started = time.perf_counter()
        print(f"\nThe run's rule (selection.stopping), {args.policy} use cases per scenario")
        print(f"{'scenario':<40} {'wrong':>7} {'saved':>7}   fixed-size run: wrong, saved")
        for name, wrong, share in policy_scenarios(args, rng):
            print(f"{name:<40} {wrong.mean():>7.2%} {1 - share.mean():>7.1%}   0.00 %, 0.0 %")
        print(f"in {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
