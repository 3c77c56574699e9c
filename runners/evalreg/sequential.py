"""Anytime-valid confidence sequences for a finite eval set bought in random order, and the
stopping decision they license (``run --until-decided``).

Method: Waudby-Smith & Ramdas (2023), "Estimating means of bounded random variables by
betting", JRSS-B 86(1):1-27, Section 6 (sampling without replacement). The ``M`` items of an
eval set are drawn in a uniformly random order; ``x_t ∈ [0, 1]`` is the score of the t-th
draw. For a candidate population mean ``m``, the mean of the items not yet drawn is

    μ_t(m) = (M·m - Σ_{i<t} x_i) / (M - t + 1),

and the hedged capital process (their Theorem 3, with Section 6's μ_t) is

    K_t⁺(m) = Π_{i≤t} (1 + λ_i⁺ (x_i - μ_i(m))),   K_t⁻(m) = Π_{i≤t} (1 - λ_i⁻ (x_i - μ_i(m))),
    K_t(m)  = max(θ K_t⁺(m), (1 - θ) K_t⁻(m)),   θ = 1/2,

with the predictable plug-in bets (their eq. 26, "PrPl-EB")
``λ̇_t = sqrt(2 log(2/alpha) / (v_{t-1} t log(1 + t)))``,
``v_t = (1/4 + Σ_{i≤t} (x_i - μ̂_i)²) / (t + 1)``, ``μ̂_t = (1/2 + Σ_{i≤t} x_i) / (t + 1)``,
truncated as ``λ_t⁺ = min(λ̇_t, c / μ_t(m))`` and ``λ_t⁻ = min(λ̇_t, c / (1 - μ_t(m)))`` with
``c = 1/2``, which keeps every factor at least ``1 - c > 0``. This is the construction of the
authors' own package (``confseq.betting.hedged_cs`` with ``N=M``), which the tests check
against.

Guarantee: under the true mean each K_t is a nonnegative supermartingale with K_0 = 1, so by
Ville's inequality ``P(∃ t ≤ M: K_t(m*) ≥ 1/alpha) ≤ alpha``: the sets
``{m : K_t(m) < 1/alpha}``, and their running intersection, contain the population mean at
every t at once with probability at least 1 - alpha over the order, whatever rule decides
when to stop. At ``t = M`` the mean is known exactly. Every factor of K⁺ falls as ``m``
rises and every factor of K⁻ rises (the bets do not depend on ``m`` except through the
truncation), so each set is an interval whose lower end K⁺ alone sets and whose upper end
K⁻ alone sets; a decision therefore needs the capital at the threshold only, and an
interval needs one grid of candidate means.

numpy is imported inside the functions that use it, so importing this module costs nothing.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import ArrayLike, NDArray

__all__ = [
    "DEFAULT_GRID",
    "Comparison",
    "Decision",
    "Gate",
    "Sides",
    "Verdict",
    "confidence_sequence",
    "decide",
    "paired_confidence_sequence",
    "threshold_sides",
]

#: Candidate means ``j / DEFAULT_GRID`` an interval is read off (confseq's ``breaks``):
#: each bound is conservative by at most its step.
DEFAULT_GRID = 1000

#: θ, the weight of the upward bet in the hedged process (the paper's default).
_THETA = 0.5

#: c, the truncation of the bets, as in the paper's experiments and confseq.
_TRUNCATION = 0.5

#: Candidate means evaluated together by :func:`confidence_sequence`.
_BLOCK = 64

#: μ_t within this of 0 or 1 is taken as exactly there (sums of scores are rounded).
_TOLERANCE = 1e-12


# ---------------------------------------------------------------- the capital process


def _plugin_bets(x: NDArray[np.float64], alpha: float) -> NDArray[np.float64]:
    """The predictable plug-in bets λ̇_t of each row of ``x`` (last axis is time)."""
    import numpy as np

    t = np.arange(1, x.shape[-1] + 1, dtype=np.float64)
    mean = np.minimum((0.5 + np.cumsum(x, axis=-1)) / (t + 1.0), 1.0)
    variance = (0.25 + np.cumsum((x - mean) ** 2, axis=-1)) / (t + 1.0)
    previous = np.concatenate([np.full((*x.shape[:-1], 1), 0.25), variance[..., :-1]], axis=-1)
    bets: NDArray[np.float64] = np.sqrt(
        2.0 * math.log(1.0 / (alpha * _THETA)) / (t * np.log1p(t) * previous)
    )
    return bets


def _excluded(
    x: NDArray[np.float64], population: int, m: NDArray[np.float64], alpha: float
) -> tuple[NDArray[np.bool_], NDArray[np.bool_]]:
    """Whether ``m`` has been excluded from below (K⁺) and from above (K⁻) by each time.

    ``x`` has time on its last axis; ``m`` broadcasts against ``x[..., :1]``. Both results
    are running ("by time t"), the running intersection of the paper's Section 3.3. A mean
    that the draws so far make impossible (μ_t below 0 or above 1) has infinite capital.
    """
    import numpy as np

    t = np.arange(1, x.shape[-1] + 1, dtype=np.float64)
    before = np.cumsum(x, axis=-1) - x
    mu = (population * m - before) / (population - t + 1.0)
    bets = _plugin_bets(x, alpha)
    level = math.log(1.0 / (alpha * _THETA))
    with np.errstate(divide="ignore", invalid="ignore"):
        up_mu = np.maximum(mu, 0.0)
        up = np.log1p(np.minimum(bets, _TRUNCATION / up_mu) * (x - up_mu))
        up = np.where(mu < -_TOLERANCE, np.inf, up)
        down_mu = np.minimum(mu, 1.0)
        down = np.log1p(-np.minimum(bets, _TRUNCATION / (1.0 - down_mu)) * (x - down_mu))
        down = np.where(mu > 1.0 + _TOLERANCE, np.inf, down)
    below = np.logical_or.accumulate(np.cumsum(up, axis=-1) >= level, axis=-1)
    above = np.logical_or.accumulate(np.cumsum(down, axis=-1) >= level, axis=-1)
    return below, above


@dataclass(frozen=True)
class Sides:
    """What the draws so far prove about a population mean μ* against a threshold ``c``.

    Each field has the shape of the draws (time on the last axis): ``above`` proves
    ``μ* > c``, ``below`` proves ``μ* < c``, ``at_least`` proves ``μ* ≥ c`` and ``at_most``
    proves ``μ* ≤ c``, each with the level's guarantee. At ``t = M`` they are exact.
    """

    above: NDArray[np.bool_]
    below: NDArray[np.bool_]
    at_least: NDArray[np.bool_]
    at_most: NDArray[np.bool_]


def threshold_sides(values: ArrayLike, population: int, threshold: float, alpha: float) -> Sides:
    """Which side of ``threshold`` the population mean is shown to lie on, after each draw.

    ``values`` holds the scores in ``[0, 1]`` in the order drawn, one row a sequence (a
    2-D array simulates many orders at once). ``threshold`` is excluded from below when
    ``K⁺(threshold) ≥ 2/alpha`` at some time so far, which by monotonicity excludes every mean
    at or below it; from above alike with K⁻. The finite population adds what is certain
    whatever the rest scores: ``Σ x / M`` is a lower bound and ``1 - (t - Σ x) / M`` an upper
    one (compared in sums, so the last draw decides exactly). With probability at least
    1 - alpha over the order, nothing proved here is false at any time (Waudby-Smith & Ramdas
    2023, Section 6).
    """
    import numpy as np

    x = np.asarray(values, dtype=np.float64)
    _check_draws(x, population)
    below_excluded, above_excluded = _excluded(x, population, np.full(1, threshold), alpha)
    t = np.arange(1, x.shape[-1] + 1, dtype=np.float64)
    total = np.cumsum(x, axis=-1)
    low_sum, high_gap = threshold * population, (1.0 - threshold) * population
    return Sides(
        above=below_excluded | (total > low_sum),
        below=above_excluded | (t - total > high_gap),
        at_least=below_excluded | (total >= low_sum),
        at_most=above_excluded | (t - total >= high_gap),
    )


def _check_draws(x: NDArray[np.float64], population: int) -> None:
    """Reject scores outside ``[0, 1]`` and more draws than the population holds."""
    import numpy as np

    if population < 1:
        raise ValueError(f"population must be >= 1, got {population!r}")
    if x.shape[-1] > population:
        raise ValueError(f"{x.shape[-1]} draws from a population of {population}")
    if x.size and not bool(np.all((x >= 0.0) & (x <= 1.0))):
        raise ValueError("every score must be in [0, 1]")


# ---------------------------------------------------------------- intervals


def confidence_sequence(
    xs: Sequence[float],
    population: int,
    alpha: float,
    *,
    grid: int = DEFAULT_GRID,
    points: Sequence[float] = (),
) -> list[tuple[float, float]]:
    """The running-intersection confidence sequence for a finite population's mean.

    ``xs`` are the first draws, in a uniformly random order, from ``population`` scores in
    ``[0, 1]``; the result holds one closed interval ``(lo, hi)`` after each draw. With
    probability at least ``1 - alpha`` over the order, every interval contains the mean of
    all ``population`` scores (Waudby-Smith & Ramdas 2023, Section 6: the hedged capital
    process above). The intervals are nested, and after the last draw the interval is the
    exact mean.

    The bounds are read off the candidate means ``j / grid`` and ``points`` (a gate's
    threshold, so that an interval never disagrees with the decision beside it): ``lo`` is
    the largest candidate excluded from below, so each bound is conservative by at most
    one step of the grid. Cost is ``O(len(xs) · grid)``; 2,000 draws take a few tens of
    milliseconds.
    """
    import numpy as np

    x = np.asarray(xs, dtype=np.float64)
    _check_draws(x, population)
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be strictly between 0 and 1, got {alpha!r}")
    if not x.size:
        return []
    candidates = np.union1d(np.linspace(0.0, 1.0, grid + 1), np.clip(points, 0.0, 1.0))
    # Exclusion from below is a down-set of the sorted candidates, from above an up-set, so
    # counting the excluded ones finds each bound. Blocks of candidates stay in cache.
    lowest = np.zeros(x.size, dtype=np.int64)
    highest = np.zeros(x.size, dtype=np.int64)
    for start in range(0, len(candidates), _BLOCK):
        block = candidates[start : start + _BLOCK, None]
        below, above = _excluded(x, population, block, alpha)
        lowest += below.sum(axis=0)
        highest += above.sum(axis=0)
    lo = np.where(lowest > 0, candidates[np.maximum(lowest - 1, 0)], 0.0)
    top = len(candidates) - 1
    hi = np.where(highest > 0, candidates[np.minimum(top + 1 - highest, top)], 1.0)
    t = np.arange(1, x.size + 1, dtype=np.float64)
    total = np.cumsum(x)
    lo = np.maximum.accumulate(np.maximum(lo, total / population))
    hi = np.minimum.accumulate(np.minimum(hi, 1.0 - (t - total) / population))
    out = list(zip(lo.tolist(), hi.tolist(), strict=True))
    if x.size == population:
        exact = math.fsum(xs) / population
        out[-1] = (exact, exact)
    return out


def paired_confidence_sequence(
    first: Sequence[float],
    second: Sequence[float],
    population: int,
    alpha: float,
    *,
    grid: int = DEFAULT_GRID,
) -> list[tuple[float, float]]:
    """The confidence sequence for the mean paired difference ``first - second``.

    Each item's difference ``d = a - b ∈ [-1, 1]`` is mapped to ``(d + 1) / 2 ∈ [0, 1]``,
    :func:`confidence_sequence` runs on that (0 a grid point, so the sign is read without
    grid error), and the bounds are mapped back; the guarantee is the same. After the last
    draw the interval is the exact mean difference.
    """
    if len(first) != len(second):
        raise ValueError(f"{len(first)} first scores against {len(second)} second ones")
    diffs = [a - b for a, b in zip(first, second, strict=True)]
    mapped = [(d + 1.0) / 2.0 for d in diffs]
    out = [
        (2.0 * lo - 1.0, 2.0 * hi - 1.0)
        for lo, hi in confidence_sequence(mapped, population, alpha, grid=grid, points=(0.5,))
    ]
    if out and len(diffs) == population:
        exact = math.fsum(diffs) / population
        out[-1] = (exact, exact)
    return out


# ---------------------------------------------------------------- decisions


@dataclass(frozen=True)
class Gate:
    """A rate that must be at least (``op=">="``) or at most (``op="<="``) a threshold.

    ``scores`` are the items' scores in ``[0, 1]`` in the order bought.
    """

    name: str
    scores: Sequence[float]
    threshold: float
    op: Literal[">=", "<="] = ">="
    population: int | None = None
    """The items the rate is over, when not every item of the eval set (a slice)."""


@dataclass(frozen=True)
class Comparison:
    """Two candidates' scores on the same items, in the order bought: which is higher."""

    name: str
    first: Sequence[float]
    second: Sequence[float]
    population: int | None = None
    """The items compared, when not every item of the eval set."""


@dataclass(frozen=True)
class Verdict:
    """One gate's or comparison's state: ``outcome`` is None until decided, then ``"pass"``
    or ``"fail"`` for a gate and ``"first"``, ``"second"`` or ``"tie"`` for a comparison.
    ``interval`` is the current confidence interval (of the rate, or of the difference
    ``first - second``) at level ``alpha``, and never disagrees with the outcome; None when
    it was not asked for (``decide(intervals=False)``)."""

    name: str
    outcome: str | None
    interval: tuple[float, float] | None
    alpha: float

    @property
    def decided(self) -> bool:
        return self.outcome is not None


@dataclass(frozen=True)
class Decision:
    """Every verdict, and whether all are decided (then buying may stop)."""

    verdicts: tuple[Verdict, ...]
    alpha_each: float

    @property
    def decided(self) -> bool:
        return all(v.decided for v in self.verdicts)


def decide(
    gates: Sequence[Gate],
    comparisons: Sequence[Comparison],
    population: int,
    alpha: float = 0.05,
    *,
    grid: int = DEFAULT_GRID,
    intervals: bool = True,
) -> Decision:
    """Whether the items bought so far settle every gate and comparison.

    ``intervals=False`` leaves the verdicts' intervals out: the outcomes need only the
    capital at each threshold (``O(t)``), an interval a grid of means (``O(t · grid)``).

    ``alpha`` is split evenly (Bonferroni) over the ``k`` gates and comparisons: each gets a
    confidence sequence at ``alpha / k``, so with probability at least ``1 - alpha`` over the
    order every one of them covers its population mean at every time at once. On that
    event each decided outcome is the outcome a full run of all ``population`` items gives,
    whenever the decision is taken: a gate ``rate ≥ c`` passes once the rate is shown
    ``≥ c`` and fails once shown ``< c`` (``≤`` mirrored); a comparison names ``first`` or
    ``second`` once the difference is shown above or below 0, and ``tie`` only when the last
    item shows it exactly 0. So the chance of stopping on any decision a full run would not
    make is at most ``alpha`` (Waudby-Smith & Ramdas 2023, Section 6).
    """
    k = len(gates) + len(comparisons)
    if k == 0:
        return Decision((), alpha)
    each = alpha / k
    grid_or_none = grid if intervals else None
    verdicts = [_gate_verdict(g, g.population or population, each, grid_or_none) for g in gates]
    verdicts += [
        _comparison_verdict(c, c.population or population, each, grid_or_none) for c in comparisons
    ]
    return Decision(tuple(verdicts), each)


def _gate_verdict(gate: Gate, population: int, alpha: float, grid: int | None) -> Verdict:
    """One gate's outcome at level ``alpha`` (see :func:`decide`); its interval on a grid of
    ``grid`` steps, or none."""
    if not gate.scores:
        return Verdict(gate.name, None, (0.0, 1.0) if grid else None, alpha)
    ci = (
        confidence_sequence(gate.scores, population, alpha, grid=grid, points=(gate.threshold,))
        if grid
        else None
    )
    if len(gate.scores) == population:
        rate = math.fsum(gate.scores) / population
        shown_at_least, shown_at_most = rate >= gate.threshold, rate <= gate.threshold
        shown_above, shown_below = not shown_at_most, not shown_at_least
    else:
        sides = threshold_sides([gate.scores], population, gate.threshold, alpha)
        shown_at_least, shown_at_most = bool(sides.at_least[0, -1]), bool(sides.at_most[0, -1])
        shown_above, shown_below = bool(sides.above[0, -1]), bool(sides.below[0, -1])
    if gate.op == ">=":
        outcome = "pass" if shown_at_least else "fail" if shown_below else None
    else:
        outcome = "pass" if shown_at_most else "fail" if shown_above else None
    return Verdict(gate.name, outcome, ci[-1] if ci else None, alpha)


def _comparison_verdict(
    comparison: Comparison, population: int, alpha: float, grid: int | None
) -> Verdict:
    """One comparison's outcome at level ``alpha`` (see :func:`decide`); its interval on a
    grid of ``grid`` steps, or none."""
    if not comparison.first:
        return Verdict(comparison.name, None, (-1.0, 1.0) if grid else None, alpha)
    ci = (
        paired_confidence_sequence(
            comparison.first, comparison.second, population, alpha, grid=grid
        )
        if grid
        else None
    )
    outcome: str | None
    if len(comparison.first) == population:
        diff = math.fsum(a - b for a, b in zip(comparison.first, comparison.second, strict=True))
        diff /= population
        outcome = "first" if diff > 0 else "second" if diff < 0 else "tie"
    else:
        pairs = zip(comparison.first, comparison.second, strict=True)
        sides = threshold_sides([[(a - b + 1.0) / 2.0 for a, b in pairs]], population, 0.5, alpha)
        above, below = bool(sides.above[0, -1]), bool(sides.below[0, -1])
        outcome = "first" if above else "second" if below else None
    return Verdict(comparison.name, outcome, ci[-1] if ci else None, alpha)


def purchase_order(evalset_md5: str, item_ids: Sequence[str], seed: int = 0) -> list[str]:
    """The order a sequential run buys an eval set's items in: a pseudo-random permutation
    that is a pure function of the eval set's content hash (and ``seed``), whatever order
    ``item_ids`` come in. Every candidate and every use case on the same eval set gets the
    same order, so comparisons stay paired and a shared cell is bought once; another version
    of the eval set gets another order. Each item's place is the SHA-256 of the hash, the
    seed and its id, so the order is uniform over permutations as far as SHA-256 is a random
    function (ties, which need a collision, fall back to the ids)."""
    import hashlib

    prefix = f"{evalset_md5}\0{seed}\0".encode()

    def place(item_id: str) -> tuple[bytes, str]:
        return hashlib.sha256(prefix + item_id.encode("utf-8", "surrogatepass")).digest(), item_id

    return sorted(item_ids, key=place)
