"""Sizing slices: how many items a slice needs, and the smallest change it can detect."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from evalreg import stats
from evalreg.errors import UsageError
from evalreg.evalsets.evalset import EvalSet
from evalreg.text.numbers import whole_points


@dataclass(frozen=True)
class ItemsNeeded:
    """Items a slice needs to detect a change: against a fixed rate, and between candidates."""

    rate: int
    paired: int


@dataclass(frozen=True)
class SliceStats:
    """What one slice of an eval set can show.

    ``units`` are the independent units the MDEs are computed on: distinct clusters, each
    unclustered item counting as its own (items of one cluster may fail together, so this
    is the conservative count). ``mde_rate`` is the smallest detectable change of one
    candidate's rate from ``baseline``; ``mde_paired`` the smallest detectable difference
    between two candidates on the same items, assuming they disagree on a ``discordance``
    share of them. The verdict is about ``mde_paired``: choosing between candidates is what
    the slice is for.
    """

    slice: str
    items: int
    conversations: int
    units: int
    mde_rate: float
    mde_paired: float
    discordance: float
    detect: float
    detectable: bool
    verdict: str


def evalset_stats(
    evalset: EvalSet,
    *,
    detect: float = 0.05,
    baseline: float = 0.5,
    discordance: float = stats.DISCORDANCE_FLOOR,
    alpha: float = 0.05,
    power: float = 0.8,
) -> list[SliceStats]:
    """Per slice (``all`` first, then tags in order): its size and the changes it can detect.

    MDEs use :func:`stats.mde_rate` at ``baseline`` and :func:`stats.slice_mde` (the
    smallest change a slice can detect, as the governance report states it too) with the
    stated ``discordance``, both at ``alpha`` and ``power``. The verdict reads "can detect a
    5-point change (MDE 4.4 points)" or "too small to detect a 5-point change (MDE 14
    points)".
    """
    _check_plan(detect, baseline, discordance)
    out = []
    # Counted as the eval set was parsed: an eval set read back from its file is not read
    # again.
    for name, facts in evalset.facts.slices.items():
        items, conversations, units = facts.items, facts.conversations, facts.units
        mde_rate = stats.mde_rate(units, baseline, alpha, power)
        mde_paired = stats.slice_mde(units, discordance=discordance, alpha=alpha, power=power)
        detectable = mde_paired <= detect
        change = f"a {whole_points(detect)}-point change (MDE {whole_points(mde_paired)} points)"
        out.append(
            SliceStats(
                slice=name,
                items=items,
                conversations=conversations,
                units=units,
                mde_rate=mde_rate,
                mde_paired=mde_paired,
                discordance=discordance,
                detect=detect,
                detectable=detectable,
                verdict=("can detect " if detectable else "too small to detect ") + change,
            )
        )
    return out


def items_needed(
    detect: float,
    baseline: float,
    *,
    discordance: float = stats.DISCORDANCE_FLOOR,
    alpha: float = 0.05,
    power: float = 0.8,
) -> ItemsNeeded:
    """The fewest independent items whose MDE is at most ``detect``: for one candidate's rate
    at ``baseline`` and for a paired comparison at ``discordance`` (the same formulas as
    :func:`evalset_stats`, so a slice of that size is exactly the first to "can detect")."""
    _check_plan(detect, baseline, discordance)
    return ItemsNeeded(
        rate=_fewest(lambda n: stats.mde_rate(n, baseline, alpha, power), detect),
        paired=_fewest(
            lambda n: stats.slice_mde(n, discordance=discordance, alpha=alpha, power=power),
            detect,
        ),
    )


def _fewest(mde: Callable[[int], float], detect: float) -> int:
    """The smallest ``n`` with ``mde(n) <= detect`` (``mde`` falls as ``n`` grows)."""
    high = 1
    while mde(high) > detect:
        high *= 2
    low = high // 2  # mde(low) > detect, or low == 0
    while high - low > 1:
        middle = (low + high) // 2
        if mde(middle) <= detect:
            high = middle
        else:
            low = middle
    return high


def _check_plan(detect: float, baseline: float, discordance: float) -> None:
    if not 0.0 < detect < 1.0:
        raise UsageError(f"the change to detect must be between 0 and 1, got {detect}")
    if not 0.0 <= baseline <= 1.0:
        raise UsageError(f"the baseline rate must be between 0 and 1, got {baseline}")
    if not 0.0 < discordance <= 1.0:
        raise UsageError(f"the discordance must be in (0, 1], got {discordance}")


@dataclass(frozen=True)
class SizingReport:
    """``evalset stats``: what each slice of each eval set can detect, under one plan."""

    detect: float
    baseline: float
    discordance: float
    needed: ItemsNeeded
    evalsets: dict[str, list[SliceStats]]
    """By repository path, in path order."""

    def as_dict(self) -> dict[str, Any]:
        """What ``evalreg evalset stats --json`` prints."""
        return {
            "detect": self.detect,
            "baseline": self.baseline,
            "discordance": self.discordance,
            "items_needed": asdict(self.needed),
            "evalsets": {p: [asdict(s) for s in rows] for p, rows in self.evalsets.items()},
        }


def sizing_report(
    evalsets: Mapping[str, EvalSet], *, detect: float, baseline: float, discordance: float
) -> SizingReport:
    """Every slice of ``evalsets`` (by path) sized for changes of ``detect``."""
    plan = {"detect": detect, "baseline": baseline, "discordance": discordance}
    needed = items_needed(**plan)
    return SizingReport(
        detect,
        baseline,
        discordance,
        needed,
        {path: evalset_stats(es, **plan) for path, es in sorted(evalsets.items())},
    )
