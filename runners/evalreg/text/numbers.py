"""How numbers are written wherever evalreg shows them: the one formatter of values, shares,
points, money, coverage, gates and selection policies (free of heavy imports: the terminal,
the pull-request comment, the audit record and gate messages print them too).

Two kinds of number: a *measured* value (a rate, a latency, a score) is rounded for reading
(:func:`number`); a *configured* one (a threshold, a margin, a weight, a confidence) is written
exactly as the registry holds it (:func:`exact`), so two settings never read alike. Anything
unknown is written :data:`MISSING` (``n/a`` for a measured number, the dash in tables).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Protocol

MISSING = "–"
"""How a table shows a value that is unknown or not applicable."""


def finite(x: object) -> float | None:
    """``x`` as a finite float, or None for anything else (None, bools, text, NaN, ±inf, an
    integer too large for a float): what a number read from untrusted JSON may be shown as."""
    if isinstance(x, bool) or not isinstance(x, int | float):
        return None
    try:
        value = float(x)
    except OverflowError:
        return None
    return value if math.isfinite(value) else None


def _trim(text: str) -> str:
    """A fixed-point number without trailing zeros or a bare point (``-0`` read as ``0``)."""
    text = text.rstrip("0").rstrip(".") if "." in text else text
    return "0" if text == "-0" else text


# ---------------------------------------------------------------- plain numbers


def number(x: float | None) -> str:
    """A measured value: at most three decimals, no trailing zeros (``0.62``, ``1``,
    ``1234.568``), ``n/a`` when there is none."""
    value = finite(x)
    return "n/a" if value is None else _trim(f"{value:.3f}")


def exact(x: float) -> str:
    """A configured number as written: the shortest text that reads back as the same float,
    without a spurious ``.0`` (``1``, ``0.9``, ``0.0125``), so a change shows."""
    value = float(x)
    return str(int(value)) if value.is_integer() else repr(value)


_LARGEST_COUNT = 1e15
"""Counts beyond this are not counts evalreg makes (a tampered file's): shown as unknown."""


def count(x: float | None) -> str:
    """A count or another whole quantity (items, pairs, milliseconds), rounded: ``1234``."""
    value = finite(x)
    return MISSING if value is None or abs(value) > _LARGEST_COUNT else str(round(value))


def plural(n: int, singular: str, many: str | None = None) -> str:
    """``n`` with its noun agreeing: "1 item", "2 items", "0 items" (``many`` for
    irregular nouns: ``plural(n, "was", "were")``)."""
    return f"{n:,} {singular if n == 1 else (many or singular + 's')}"


def milliseconds(x: float | None) -> str:
    """A duration in whole milliseconds: ``812 ms``."""
    text = count(x)
    return text if text == MISSING else f"{text} ms"


def p_value(p: float | None) -> str:
    """A p-value to three significant digits: ``0.0412``, ``1.2e-05``."""
    value = finite(p)
    return MISSING if value is None else f"{value:.3g}"


# ---------------------------------------------------------------- shares and differences


def percent(share: float | None, digits: int = 1) -> str:
    """A share of 1 as a percentage: ``0.625`` → ``62.5%`` (``digits`` decimals)."""
    value = finite(share)
    return MISSING if value is None else f"{100 * value:.{digits}f}%"


def percent_interval(share: float | None, lo: float | None, hi: float | None) -> str:
    """A share with its interval in percent: ``62.5% (55.1 to 69.3)`` written with an en
    dash; the interval is left out when either bound is unknown."""
    text = percent(share)
    low, high = finite(lo), finite(hi)
    if text == MISSING or low is None or high is None:
        return text
    return f"{text} ({100 * low:.1f}–{100 * high:.1f})"


def points(diff: float | None, *, signed: bool = True) -> str:
    """A difference of two shares in percentage points: ``+3.1 pts`` (``3.1 pts`` unsigned,
    for a size such as a minimum detectable effect)."""
    value = finite(diff)
    if value is None:
        return MISSING
    return f"{100 * value:+.1f} pts" if signed else f"{100 * value:.1f} pts"


def points_interval(diff: float | None, lo: float | None, hi: float | None) -> str:
    """A difference with its interval: ``+3.1 pts (-1.2 to +7.4)``; the interval is left out
    when either bound is unknown."""
    text = points(diff)
    low, high = finite(lo), finite(hi)
    if text == MISSING or low is None or high is None:
        return text
    return f"{text} ({100 * low:+.1f} to {100 * high:+.1f})"


def whole_points(share: float) -> str:
    """A share as a planning size in points: whole points from 10 up, one decimal below
    (``0.05`` → ``5``, ``0.044`` → ``4.4``, ``0.14`` → ``14``)."""
    value = 100 * share
    return f"{value:.0f}" if round(value, 1) >= 10 else _trim(f"{value:.1f}")


class RateLike(Protocol):
    """What :func:`rate` reads of an estimated rate (``metrics.Metric``)."""

    @property
    def value(self) -> float: ...
    @property
    def lo(self) -> float | None: ...
    @property
    def hi(self) -> float | None: ...
    @property
    def n(self) -> int: ...
    @property
    def clusters(self) -> int: ...


def rate(m: RateLike | None, *, interval: bool = True, note: bool = True) -> str:
    """An estimated rate in percent with its interval (see :func:`percent_interval`), or
    without it; :data:`MISSING` when nothing was measured. An interval resting on few
    clusters says so (:func:`wide_by_necessity`) rather than standing bare, unless
    ``note`` is false (a table that says it once a row)."""
    if m is None or m.n == 0:
        return MISSING
    if not interval:
        return percent(m.value)
    return percent_interval(m.value, m.lo, m.hi) + (wide_by_necessity(m.clusters) if note else "")


def wide_by_necessity(clusters: int) -> str:
    """`` (only 3 clusters: the interval is wide by necessity)`` after an interval resting on
    few clusters (:func:`evalreg.stats.few_clusters`); nothing otherwise."""
    from evalreg.stats import few_clusters  # not at import: `--help` loads no dataclasses

    if not few_clusters(clusters):
        return ""
    return f" (only {plural(clusters, 'cluster')}: the interval is wide by necessity)"


def statistic(x: float | None) -> str:
    """An agreement statistic or another coefficient: two decimals (``0.87``), ``n/a`` where
    it is undefined."""
    value = finite(x)
    return "n/a" if value is None else f"{value:.2f}"


def coverage_text(graded: int, applicable: int) -> str:
    """Coverage as every report shows it: ``graded/applicable (pct)``."""
    share = 100 * graded / applicable if applicable else 0.0
    return f"{graded}/{applicable} ({share:.1f}%)"


# ---------------------------------------------------------------- money


def usd(dollars: float | None) -> str:
    """An amount in US dollars, as precise as its size needs: cents from a dollar up
    (``$1,234.50``), up to four decimals from a cent (``$0.3765``, ``$0.50``), up to six
    below (``$0.000504``, a per-item cost); at least two decimals, ``$0`` for nothing,
    ``<$0.000001`` for a positive amount smaller than that (``>-$0.000001`` negative)."""
    value = finite(dollars)
    if value is None:
        return MISSING
    sign, size = ("-" if value < 0 else ""), abs(value)
    if size == 0:
        return "$0"
    digits = 2 if size >= 1 else 4 if size >= 0.01 else 6
    whole, _, decimals = f"{size:,.{digits}f}".partition(".")
    decimals = decimals.rstrip("0").ljust(2, "0")
    if whole == "0" and decimals == "00":
        return ">-$0.000001" if sign else "<$0.000001"
    return f"{sign}${whole}.{decimals}"


def usd_micro(micro: int) -> str:
    """An amount counted in micro-dollars (as runs and the response store count spend), in
    the form of :func:`usd`."""
    return usd(micro / 1_000_000)


# ---------------------------------------------------------------- gates and policies


class GateLike(Protocol):
    """What a gate's text reads (``registry.schema.Gate``)."""

    @property
    def metric(self) -> str: ...
    @property
    def slice(self) -> str: ...
    @property
    def min(self) -> float | None: ...
    @property
    def max(self) -> float | None: ...
    @property
    def on(self) -> str: ...


class TermLike(Protocol):
    """What an objective term's text reads (``registry.schema.Term``)."""

    @property
    def maximize(self) -> str | None: ...
    @property
    def metric(self) -> str: ...
    @property
    def weight(self) -> float: ...


def _plain(name: str) -> str:
    return name


def threshold_text(gate: GateLike) -> str:
    """A gate's bound: ``≥ 0.85`` or ``≤ 0.15``."""
    return f"≥ {exact(gate.min)}" if gate.min is not None else f"≤ {exact(gate.max or 0.0)}"


def compared_on(gate: GateLike) -> str:
    """What a gate compares with its bound: ``point``, ``lower bound`` or ``upper bound``."""
    return gate.on.replace("_", " ")


def gate_text(gate: GateLike) -> str:
    """A gate as every message, report, diff and audit record writes it:
    ``unacceptable_rate on adversarial (upper bound) ≤ 0.15``; a gate on the point
    estimate names no bound: ``error_rate on all ≤ 0.01``."""
    where = "" if gate.on == "point" else f" ({compared_on(gate)})"
    return f"{gate.metric} on {gate.slice}{where} {threshold_text(gate)}"


def metric_name(metric: str) -> str:
    """A metric as a reader says it: ``pass rate``, ``needs_human pass rate`` for
    ``criterion:needs_human``, ``needs_human coverage`` for ``coverage:needs_human``."""
    for prefix, noun in (("criterion:", "pass rate"), ("coverage:", "coverage")):
        if metric.startswith(prefix):
            return f"{metric.removeprefix(prefix)} {noun}"
    return metric.replace("_", " ")


def gate_comparison(
    gate: GateLike, point: float | None, compared: float, confidence: float, passed: bool
) -> str:
    """What a gate compared, with the point estimate beside any bound:
    ``pass rate 0.82, lower 95% bound 0.74 ≥ min 0.7``; a gate on the point:
    ``error rate 0 ≤ max 0.01``. The sign says which side of the threshold it fell."""
    if gate.min is not None:
        limit = f"{'≥' if passed else '<'} min {exact(gate.min)}"
    else:
        limit = f"{'≤' if passed else '>'} max {exact(gate.max or 0.0)}"
    name = metric_name(gate.metric)
    if gate.on == "point" or point is None:
        return f"{name} {number(compared)} {limit}"
    side = gate.on.removesuffix("_bound")
    return (
        f"{name} {number(point)}, {side} {percent(confidence, 0)} bound {number(compared)} {limit}"
    )


def gates_text(gates: Sequence[GateLike]) -> str:
    """A policy's gates, in order: ``gate, gate`` or ``none``."""
    return ", ".join(gate_text(g) for g in gates) or "none"


def term_text(term: TermLike, *, weighted: bool, name: Callable[[str], str] = _plain) -> str:
    """An objective term: ``maximize pass_rate``, followed in a weighted objective by a
    multiplication sign and its weight (a lexicographic one ignores weights). ``name`` writes
    the metric (e.g. as code)."""
    goal = "maximize" if term.maximize is not None else "minimize"
    text = f"{goal} {name(term.metric)}"
    return f"{text} × {exact(term.weight)}" if weighted else text


def objective_text(
    terms: Sequence[TermLike], *, weighted: bool, name: Callable[[str], str] = _plain
) -> str:
    """An objective's terms in order: ``maximize pass_rate, then minimize cost_per_item_usd``
    (a weighted objective's terms joined with `` + ``)."""
    joiner = " + " if weighted else ", then "
    return joiner.join(term_text(t, weighted=weighted, name=name) for t in terms)
