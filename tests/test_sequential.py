"""The anytime-valid confidence sequences of ``evalreg.sequential``: against the authors' own
implementation, against exhaustive enumeration of a small population's orders, and the
properties a stopping rule leans on (nesting, exactness at the end, coverage, symmetry)."""

from __future__ import annotations

import itertools
import math
import random

import numpy as np
import pytest

from evalreg import sequential
from evalreg.sequential import Comparison, Gate


def population(kind: str, size: int, seed: int) -> list[float]:
    """A population in a random order, from Python's own generator (stable across versions)."""
    rng = random.Random(seed)
    if kind == "binary":
        scores = [1.0 if rng.random() < 0.7 else 0.0 for _ in range(size)]
    elif kind == "levels":
        scores = [rng.choice((0.0, 0.5, 1.0)) for _ in range(size)]
    else:
        scores = [round(rng.random() ** 2, 3) for _ in range(size)]
    rng.shuffle(scores)
    return scores


# ``confseq.betting.hedged_cs(x, alpha, N=M, breaks=1000, running_intersection=True)`` of
# confseq 0.0.11 (Waudby-Smith & Ramdas' package), on the first ``n`` draws of each
# population above, at the times listed. confseq builds a C++ extension against Boost and
# pulls plotting libraries, so its figures are recorded here rather than installed for the
# tests; over these cases the two agree to 1e-16 at every time before the last.
CONFSEQ = [
    (
        ("binary", 200, 200, 0.05, 1),
        {
            1: (0.005, 1.0),
            2: (0.005, 0.995),
            5: (0.068, 0.99),
            10: (0.178, 0.928),
            50: (0.46, 0.804),
            100: (0.541, 0.768),
            150: (0.593, 0.751),
            199: (0.705, 0.71),
        },
    ),
    (
        ("levels", 500, 250, 0.05, 7),
        {
            1: (0.0, 0.998),
            2: (0.001, 0.997),
            5: (0.114, 0.969),
            10: (0.349, 0.934),
            62: (0.464, 0.774),
            125: (0.487, 0.703),
            187: (0.487, 0.646),
            249: (0.487, 0.619),
        },
    ),
    (
        ("scores", 100, 60, 0.1, 3),
        {
            1: (0.00257, 0.99257),
            2: (0.01176, 0.99176),
            5: (0.186, 0.854),
            10: (0.265, 0.726),
            15: (0.283, 0.65),
            30: (0.283, 0.51),
            45: (0.295, 0.477),
            59: (0.313, 0.46),
        },
    ),
    (
        ("binary", 40, 40, 0.2, 4),
        {
            1: (0.0, 0.975),
            2: (0.025, 0.975),
            5: (0.329, 0.975),
            10: (0.387, 0.875),
            20: (0.452, 0.775),
            30: (0.479, 0.7),
            39: (0.625, 0.65),
        },
    ),
]


@pytest.mark.parametrize(("case", "want"), CONFSEQ, ids=[c[0][0] + str(c[0][1]) for c in CONFSEQ])
def test_the_interval_is_confseqs_hedged_betting_cs(
    case: tuple[str, int, int, float, int], want: dict[int, tuple[float, float]]
) -> None:
    kind, size, n, alpha, seed = case
    got = sequential.confidence_sequence(population(kind, size, seed)[:n], size, alpha)
    for t, bounds in want.items():
        assert got[t - 1] == pytest.approx(bounds, abs=1e-9), t


@pytest.mark.parametrize("kind", ["binary", "levels", "scores"])
def test_the_last_draw_gives_the_exact_mean(kind: str) -> None:
    scores = population(kind, 300, 11)
    exact = math.fsum(scores) / 300
    assert sequential.confidence_sequence(scores, 300, 0.05)[-1] == (exact, exact)


def test_the_paired_interval_ends_at_the_exact_mean_difference() -> None:
    first, second = population("binary", 120, 1), population("levels", 120, 2)
    exact = math.fsum(a - b for a, b in zip(first, second, strict=True)) / 120
    cs = sequential.paired_confidence_sequence(first, second, 120, 0.05)
    assert cs[-1] == (exact, exact)
    assert all(-1.0 <= lo <= hi <= 1.0 for lo, hi in cs)


@pytest.mark.parametrize("kind", ["binary", "levels", "scores"])
def test_the_intervals_are_nested(kind: str) -> None:
    cs = sequential.confidence_sequence(population(kind, 400, 5)[:300], 400, 0.05)
    for (lo0, hi0), (lo1, hi1) in itertools.pairwise(cs):
        assert lo0 <= lo1 <= hi1 <= hi0


def test_the_interval_covers_the_mean_in_at_least_one_minus_alpha_of_orders() -> None:
    """Spot checks over seeded orders: the whole sequence covers, at every time at once."""
    scores = population("levels", 150, 8)
    mean = math.fsum(scores) / 150
    rng = random.Random(9)
    misses = 0
    for _ in range(60):
        rng.shuffle(scores)
        cs = sequential.confidence_sequence(scores, 150, 0.1)
        misses += not all(lo - 1e-12 <= mean <= hi + 1e-12 for lo, hi in cs)
    assert misses <= 6


def test_mirrored_scores_mirror_the_interval() -> None:
    scores = population("scores", 200, 12)[:150]
    cs = sequential.confidence_sequence(scores, 200, 0.05)
    mirrored = sequential.confidence_sequence([1.0 - x for x in scores], 200, 0.05)
    for (lo, hi), (mlo, mhi) in zip(cs, mirrored, strict=True):
        assert (mlo, mhi) == pytest.approx((1.0 - hi, 1.0 - lo), abs=1e-9)


def test_every_order_of_a_small_population_errs_at_most_alpha_of_the_time() -> None:
    """Exhaustive: each of the C(10, 6) equally likely orders of six passes in ten items,
    checked after every item against the full run's decision of a gate at its exact rate
    (``≥ 0.6``, so the full run passes) and one at 0.5."""
    alpha = 0.2
    orders = [
        [1.0 if i in ones else 0.0 for i in range(10)]
        for ones in itertools.combinations(range(10), 6)
    ]
    for threshold in (0.6, 0.5):
        wrong = 0
        for order in orders:
            sides = sequential.threshold_sides(order, 10, threshold, alpha)
            wrong += bool(sides.below.any())  # a fail is wrong: the full rate is 0.6
        assert wrong / len(orders) <= alpha, threshold
    covered = 0
    for order in orders:
        cs = sequential.confidence_sequence(order, 10, alpha)
        covered += all(lo <= 0.6 <= hi for lo, hi in cs)
    assert covered / len(orders) >= 1 - alpha


def test_the_interval_beside_a_decision_never_disagrees_with_it() -> None:
    scores = population("binary", 500, 21)
    for t in range(16, 500, 48):
        for threshold in (0.55, 0.62, 0.7, 0.8):
            verdict = sequential.decide([Gate("g", scores[:t], threshold)], [], 500).verdicts[0]
            lo, hi = verdict.interval
            if verdict.outcome == "pass":
                assert lo >= threshold
            if verdict.outcome == "fail":
                assert hi <= threshold
            if verdict.outcome is None:
                assert lo < threshold <= hi or lo <= threshold < hi


def test_a_clear_gate_is_decided_early() -> None:
    rng = random.Random(1)
    scores = [1.0 if rng.random() < 0.95 else 0.0 for _ in range(1000)]
    decided_at = next(
        t
        for t in range(16, 1001, 16)
        if sequential.decide([Gate("g", scores[:t], 0.6)], [], 1000).decided
    )
    assert decided_at <= 64
    assert sequential.decide([Gate("g", scores[:64], 0.6)], [], 1000).verdicts[0].outcome == "pass"
    low = sequential.decide([Gate("errors", scores[:64], 0.5, op="<=")], [], 1000)
    assert low.verdicts[0].outcome == "fail"


def test_a_rate_exactly_at_the_threshold_is_decided_wrong_in_at_most_alpha_of_orders() -> None:
    """300 of 500 pass, the gate is ``≥ 0.6``: the full run passes. Failing it at any time is
    wrong (and passing it early would need the mean excluded too); the last item passes it."""
    rng = random.Random(4)
    orders = []
    for _ in range(400):
        scores = [1.0] * 300 + [0.0] * 200
        rng.shuffle(scores)
        orders.append(scores)
    sides = sequential.threshold_sides(orders, 500, 0.6, 0.05)
    wrong = sides.below.any(axis=1) | sides.above.any(axis=1)
    assert wrong.mean() <= 0.05
    assert sides.at_least[:, -1].all()
    assert sides.at_most[:, -1].all()
    right = orders[int(np.argmin(wrong))]
    assert all(
        sequential.decide([Gate("g", right[:t], 0.6)], [], 500).verdicts[0].outcome is None
        for t in range(16, 500, 16)
    )
    final = sequential.decide([Gate("g", right, 0.6)], [], 500)
    assert final.verdicts[0].outcome == "pass"
    assert final.verdicts[0].interval == (0.6, 0.6)


def test_comparisons_name_the_better_candidate_or_a_tie_only_at_the_end() -> None:
    rng = random.Random(6)
    better = [1.0 if rng.random() < 0.9 else 0.0 for _ in range(400)]
    worse = [1.0 if rng.random() < 0.4 else 0.0 for _ in range(400)]
    early = sequential.decide([], [Comparison("a-b", better[:96], worse[:96])], 400)
    assert early.verdicts[0].outcome == "first"
    assert early.verdicts[0].interval[0] > 0
    swapped = sequential.decide([], [Comparison("b-a", worse[:96], better[:96])], 400)
    assert swapped.verdicts[0].outcome == "second"
    same = sequential.decide([], [Comparison("a-a", better[:399], better[:399])], 400)
    assert not same.decided
    tie = sequential.decide([], [Comparison("a-a", better, better)], 400)
    assert tie.verdicts[0].outcome == "tie"


def test_alpha_is_split_evenly_across_the_family() -> None:
    scores = population("binary", 200, 3)
    decision = sequential.decide(
        [Gate("a", scores[:50], 0.5), Gate("b", scores[:50], 0.9, op="<=")],
        [Comparison("c", scores[:50], scores[:50])],
        200,
        alpha=0.06,
    )
    assert decision.alpha_each == pytest.approx(0.02)
    assert all(v.alpha == pytest.approx(0.02) for v in decision.verdicts)
    alone = sequential.decide([Gate("a", scores[:50], 0.5)], [], 200, alpha=0.02)
    assert alone.verdicts[0] == decision.verdicts[0]


def test_nothing_bought_decides_nothing() -> None:
    decision = sequential.decide([Gate("g", [], 0.5)], [Comparison("c", [], [])], 10)
    assert not decision.decided
    assert [v.interval for v in decision.verdicts] == [(0.0, 1.0), (-1.0, 1.0)]
    assert sequential.confidence_sequence([], 10, 0.05) == []


def test_bad_input_is_refused() -> None:
    with pytest.raises(ValueError, match="in \\[0, 1\\]"):
        sequential.confidence_sequence([0.5, 1.5], 10, 0.05)
    with pytest.raises(ValueError, match="3 draws from a population of 2"):
        sequential.confidence_sequence([0.0, 1.0, 1.0], 2, 0.05)
    with pytest.raises(ValueError, match="alpha"):
        sequential.confidence_sequence([0.5], 2, 1.0)
    with pytest.raises(ValueError, match="2 first scores against 1"):
        sequential.paired_confidence_sequence([0.0, 1.0], [1.0], 5, 0.05)


def test_many_orders_at_once_match_one_at_a_time() -> None:
    scores = np.array(population("levels", 64, 2))
    orders = np.stack([np.roll(scores, k) for k in range(5)])
    together = sequential.threshold_sides(orders, 64, 0.45, 0.05)
    for k in range(5):
        alone = sequential.threshold_sides(orders[k], 64, 0.45, 0.05)
        assert (together.above[k] == alone.above).all()
        assert (together.below[k] == alone.below).all()


def test_the_purchase_order_is_a_pure_function_of_the_eval_sets_content():
    from evalreg.sequential import purchase_order

    ids = [f"q-{i:03d}" for i in range(200)]
    order = purchase_order("36f724ac8703" * 2, ids)
    assert sorted(order) == ids  # a permutation
    assert order != ids  # not the file's order
    assert purchase_order("36f724ac8703" * 2, list(reversed(ids))) == order  # input order aside
    assert purchase_order("36f724ac8703" * 2, ids) == order  # the same on every call
    assert purchase_order("0" * 24, ids) != order  # another eval set, another order
    assert purchase_order("36f724ac8703" * 2, ids, seed=1) != order


def test_the_purchase_order_puts_each_item_anywhere_alike():
    """Over many eval set versions, the first of 4 items lands in each place about a
    quarter of the time (a chi-square check at a generous level)."""
    from evalreg.sequential import purchase_order

    counts = [0, 0, 0, 0]
    for version in range(4000):
        counts[purchase_order(f"{version:032x}", ["a", "b", "c", "d"]).index("a")] += 1
    chi2 = sum((c - 1000) ** 2 / 1000 for c in counts)
    assert chi2 < 16.27  # the 0.999 quantile of chi-square with 3 degrees of freedom
