"""The one formatter of numbers, shares, money, gates and policies (text/numbers.py)."""

from __future__ import annotations

import math

import pytest

from evalreg.metrics import Metric
from evalreg.registry import schema
from evalreg.text import numbers
from evalreg.text.numbers import (
    MISSING,
    count,
    coverage_text,
    exact,
    finite,
    gate_text,
    gates_text,
    milliseconds,
    number,
    objective_text,
    p_value,
    percent,
    percent_interval,
    plural,
    points,
    points_interval,
    rate,
    statistic,
    term_text,
    threshold_text,
    usd,
    usd_micro,
    whole_points,
)

UNKNOWN = [None, math.nan, math.inf, -math.inf, True, "0.5", [0.5], 10**400]


@pytest.mark.parametrize("x", UNKNOWN)
def test_nothing_that_is_not_a_finite_number_is_written_as_one(x: object) -> None:
    assert finite(x) is None
    for write in (count, milliseconds, p_value, percent, points, usd):
        assert write(x) == MISSING, write  # type: ignore[operator]
    assert number(x) == statistic(x) == "n/a"  # type: ignore[arg-type]
    assert percent_interval(x, 0.1, 0.2) == points_interval(x, 0.1, 0.2) == MISSING  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("x", "want"),
    [
        (0, "0"),
        (1.0, "1"),
        (0.62, "0.62"),
        (0.6245, "0.625"),  # binary 0.62450000…055: rounds up
        (0.6255, "0.625"),  # binary 0.62549999…945: rounds down
        (0.1245, "0.124"),
        (0.0004, "0"),
        (-0.0004, "0"),  # never "-0"
        (-0.25, "-0.25"),
        (1234567.891, "1234567.891"),
        (1e20, "100000000000000000000"),
    ],
)
def test_a_measured_number_has_at_most_three_decimals_and_no_trailing_zeros(
    x: float, want: str
) -> None:
    assert number(x) == want


@pytest.mark.parametrize(
    ("x", "want"),
    [(1, "1"), (1.0, "1"), (0.9, "0.9"), (0.0125, "0.0125"), (0.12345678, "0.12345678")],
)
def test_a_configured_number_is_written_exactly(x: float, want: str) -> None:
    assert exact(x) == want
    assert float(exact(x)) == x


def test_two_settings_that_differ_never_read_alike() -> None:
    assert exact(0.9001) != exact(0.9002)
    assert number(0.9001) == number(0.9002)  # the reason a threshold is not a measured value


@pytest.mark.parametrize(
    ("x", "want"),
    [(0, "0"), (12, "12"), (12.5, "12"), (13.5, "14"), (-3, "-3"), (10**15, "1000000000000000")],
)
def test_counts_round_to_whole_numbers(x: float, want: str) -> None:
    assert count(x) == want


def test_a_count_no_run_could_make_is_unknown() -> None:
    assert count(10**16) == MISSING  # a tampered summary, not a count
    assert milliseconds(812) == "812 ms"
    assert milliseconds(None) == MISSING


@pytest.mark.parametrize(
    ("share", "digits", "want"),
    [
        (0, 1, "0.0%"),
        (1, 1, "100.0%"),
        (0.625, 1, "62.5%"),
        (0.00049, 1, "0.0%"),
        (0.0005, 1, "0.1%"),  # binary 0.000500000…01
        (-0.125, 1, "-12.5%"),
        (0.95, 0, "95%"),
        (12.5, 1, "1250.0%"),
    ],
)
def test_percent(share: float, digits: int, want: str) -> None:
    assert percent(share, digits) == want
    assert percent(share, digits) == f"{share:.{digits}%}"  # the form f-strings give


def test_intervals() -> None:
    assert percent_interval(0.625, 0.551, 0.693) == "62.5% (55.1–69.3)"
    assert percent_interval(0.625, None, 0.693) == "62.5%"
    assert points_interval(0.031, -0.012, 0.074) == "+3.1 pts (-1.2 to +7.4)"
    assert points_interval(0.0, 0.0, 0.0) == "+0.0 pts (+0.0 to +0.0)"
    assert points_interval(0.031, 0.0, None) == "+3.1 pts"


def test_points_signed_and_unsigned() -> None:
    assert points(0.031) == "+3.1 pts"
    assert points(-0.4) == "-40.0 pts"
    assert points(0.0) == "+0.0 pts"
    assert points(0.124, signed=False) == "12.4 pts"


@pytest.mark.parametrize(
    ("share", "want"),
    [(0.05, "5"), (0.044, "4.4"), (0.04, "4"), (0.0999, "10"), (0.14, "14"), (0.886, "89")],
)
def test_whole_points_below_ten_keep_one_decimal(share: float, want: str) -> None:
    assert whole_points(share) == want


def test_a_rate_with_and_without_its_interval() -> None:
    m = Metric(0.625, 0.551, 0.693, 40)
    assert rate(m) == "62.5% (55.1–69.3)"
    assert rate(m, interval=False) == "62.5%"
    assert rate(Metric(0.5, None, None, 10)) == "50.0%"
    assert rate(Metric(0.0, 0.0, 0.0, 0)) == rate(None) == MISSING


def test_statistics_and_p_values() -> None:
    assert statistic(0.8666) == "0.87"
    assert statistic(-0.1) == "-0.10"
    assert p_value(0.041234) == "0.0412"
    assert p_value(0.000012345) == "1.23e-05"
    assert p_value(1.0) == "1"


def test_coverage() -> None:
    assert coverage_text(3, 4) == "3/4 (75.0%)"
    assert coverage_text(0, 0) == "0/0 (0.0%)"
    assert coverage_text(1, 3) == "1/3 (33.3%)"


@pytest.mark.parametrize(
    ("dollars", "want"),
    [
        (0, "$0"),
        (0.0, "$0"),
        (1, "$1.00"),
        (1234.5, "$1,234.50"),
        (16166.666, "$16,166.67"),
        (1e12, "$1,000,000,000,000.00"),
        (0.5, "$0.50"),
        (0.24, "$0.24"),
        (0.3765, "$0.3765"),
        (0.060178, "$0.0602"),
        (0.99999, "$1.00"),  # rounds up to a dollar
        (0.0099999999, "$0.01"),
        (0.000504, "$0.000504"),
        (0.000002, "$0.000002"),
        (0.0000015, "$0.000002"),
        (0.0000004, "<$0.000001"),
        (1e-12, "<$0.000001"),
        (-0.25, "-$0.25"),
        (-1234.5, "-$1,234.50"),
        (-0.000002, "-$0.000002"),
        (-1e-12, ">-$0.000001"),
    ],
)
def test_money(dollars: float, want: str) -> None:
    assert usd(dollars) == want


def test_money_counted_in_micro_dollars_reads_as_dollars() -> None:
    assert usd_micro(0) == "$0"
    assert usd_micro(1) == "$0.000001"
    assert usd_micro(504) == "$0.000504"
    assert usd_micro(376_520) == "$0.3765"
    assert usd_micro(12_345_678_901) == "$12,345.68"


def gate(**data: object) -> schema.Gate:
    return schema.Gate.model_validate(data)


def test_a_gate_is_written_one_way() -> None:
    bound = gate(metric="unacceptable_rate", slice="adversarial", max=0.15, on="upper_bound")
    point = gate(metric="criterion:needs_human", min=0.85)
    assert gate_text(bound) == "unacceptable_rate on adversarial (upper bound) ≤ 0.15"
    assert gate_text(point) == "criterion:needs_human on all ≥ 0.85"
    assert threshold_text(bound) == "≤ 0.15" and threshold_text(point) == "≥ 0.85"
    assert gate_text(gate(metric="error_rate", max=0)) == "error_rate on all ≤ 0"
    assert gate_text(gate(metric="pass_rate", min=0.8125, on="lower_bound")) == (
        "pass_rate on all (lower bound) ≥ 0.8125"  # a threshold is never rounded
    )
    assert gates_text([bound, point]) == f"{gate_text(bound)}, {gate_text(point)}"
    assert gates_text([]) == "none"


def test_the_decision_the_audit_and_the_report_write_a_gate_alike() -> None:
    from evalreg.audit.record import _policy_parts
    from evalreg.selection.policy import check_gate

    g = gate(metric="pass_rate", slice="edge", min=0.7, on="lower_bound")
    policy = schema.Policy.model_validate(
        {"gates": [g.model_dump()], "objective": {"lexicographic": [{"maximize": "pass_rate"}]}}
    )
    result = check_gate(g, 1, Metric(0.5, 0.4, 0.6, 100), 0.95)
    assert result.describe() == gate_text(g) == _policy_parts(policy)["gates"]


def test_objectives_and_terms() -> None:
    lexicographic = schema.Objective.model_validate(
        {"lexicographic": [{"maximize": "pass_rate"}, {"minimize": "cost_per_item_usd"}]}
    )
    weighted = schema.Objective.model_validate(
        {"weighted": [{"maximize": "pass_rate", "weight": 0.7}, {"minimize": "cost", "weight": 1}]}
    )
    assert objective_text(lexicographic.terms, weighted=False) == (
        "maximize pass_rate, then minimize cost_per_item_usd"
    )
    assert objective_text(weighted.terms, weighted=True) == (
        "maximize pass_rate × 0.7 + minimize cost × 1"
    )
    assert term_text(weighted.terms[0], weighted=True, name=lambda m: f"`{m}`") == (
        "maximize `pass_rate` × 0.7"
    )
    # A lexicographic objective ignores weights, so its text does too.
    assert term_text(weighted.terms[0], weighted=False) == "maximize pass_rate"


def test_the_module_is_the_only_home_of_these_formatters() -> None:
    """No renderer keeps a copy of its own (the names the old copies had)."""
    from evalreg.audit import changes
    from evalreg.report import diff_markdown, governance, terminal
    from evalreg.selection import policy

    for module, name in [
        (terminal, "usd"),
        (governance, "pct"),
        (governance, "_agreement"),
        (diff_markdown, "_num"),
        (diff_markdown, "_money"),
        (diff_markdown, "_pts"),
        (diff_markdown, "_float"),
        (policy, "fmt"),
        (changes, "num"),
    ]:
        found = getattr(module, name, None)
        assert found is None or found.__module__ == numbers.__name__, f"{module.__name__}.{name}"


@pytest.mark.parametrize(
    ("n", "args", "text"),
    [
        (0, ("item",), "0 items"),
        (1, ("item",), "1 item"),
        (2, ("item",), "2 items"),
        (12_345, ("response",), "12,345 responses"),
        (1, ("recorded cell",), "1 recorded cell"),
        (3, ("was", "were"), "3 were"),
    ],
)
def test_a_count_agrees_with_its_noun(n, args, text):
    assert plural(n, *args) == text
