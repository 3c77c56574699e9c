"""What the record says where samples are small: intervals resting on few clusters say they
are wide by necessity, and agreement computed on one grade throughout reads as undefined."""

from __future__ import annotations

from pathlib import Path

import pytest

from evalreg import stats
from evalreg.graders.human import (
    ONE_GRADE,
    HumanGrades,
    alpha,
    cohen_kappa,
    one_grade,
    rater_agreement,
)
from evalreg.metrics import Metric
from evalreg.registry import schema
from evalreg.selection.policy import check_gate
from evalreg.text.numbers import rate, wide_by_necessity

REPO = Path(__file__).resolve().parents[1]


def _clustered(groups: int, size: int = 4) -> stats.Rate:
    scores = [float((g + i) % 3 == 0) for g in range(groups) for i in range(size)]
    return stats.clustered_rate(scores, [f"g{g}" for g in range(groups) for _ in range(size)])


@pytest.mark.parametrize(("groups", "few"), [(2, True), (3, True), (5, True), (6, False)])
def test_a_rate_on_few_clusters_says_its_interval_is_wide_by_necessity(
    groups: int, few: bool
) -> None:
    got = _clustered(groups)
    assert got.clusters == groups and got.few_clusters == few
    shown = rate(Metric(got.mean, got.lo, got.hi, got.n, got.clusters))
    note = f"(only {groups} clusters: the interval is wide by necessity)"
    assert shown.endswith(note) == few, shown
    assert (
        note in rate(Metric(got.mean, got.lo, got.hi, got.n, got.clusters), note=False)
    ) is False


def test_items_without_clusters_never_carry_the_note() -> None:
    # Repeats without clusters, and clusters of one item each, are independent units.
    repeats = stats.clustered_rate([0.5, 1.0, 0.0])
    singletons = stats.clustered_rate([1.0, 0.0, 1.0], ["a", "b", "c"])
    assert repeats.clusters == singletons.clusters == 0
    assert wide_by_necessity(0) == ""
    assert wide_by_necessity(1) == " (only 1 cluster: the interval is wide by necessity)"


def test_fewer_clusters_widen_the_same_rate() -> None:
    # The same 40 items, the same design effect (independent clusters), in 2, 5 and 20
    # clusters: Korn and Graubard's factor widens the interval as the clusters get fewer.
    scores = [float(i % 2) for i in range(40)]
    widths = []
    for groups in (20, 5, 2):
        got = stats.clustered_rate(scores, [f"g{i * groups // 40}" for i in range(40)])
        widths.append(got.hi - got.lo)
    assert widths[0] < widths[1] < widths[2]
    assert widths[2] > 0.85  # two clusters: nearly [0, 1], and the report says why


def test_a_gate_on_a_bound_resting_on_few_clusters_says_why_it_failed() -> None:
    got = _clustered(3)
    metric = Metric(got.mean, got.lo, got.hi, got.n, got.clusters)
    gate = schema.Gate(metric="pass_rate", min=0.3, on="lower_bound")
    result = check_gate(gate, 1, metric, 0.95)
    assert not result.passed
    assert result.clusters == 3
    assert result.note == "only 3 clusters: the interval is wide by necessity"
    # On the point, the interval does not enter: no note.
    point = check_gate(schema.Gate(metric="pass_rate", min=0.3), 1, metric, 0.95)
    assert point.clusters == 0 and "clusters" not in point.note


def test_the_paired_comparison_on_few_clusters_carries_their_number() -> None:
    a = [1.0, 0.0, 1.0, 1.0, 0.0, 1.0]
    b = [1.0, 1.0, 1.0, 0.0, 1.0, 1.0]
    got = stats.paired_comparison(a, b, ["x", "x", "y", "y", "z", "z"])
    assert got.method == "clustered" and got.clusters == 3
    assert stats.paired_comparison(a, b).clusters == 0


# ---------------------------------------------------------------- undefined agreement


def test_one_grade_throughout_is_undefined_not_perfect() -> None:
    units = [[True, True], [True, True], [True, None, True]]
    assert one_grade(units)
    assert alpha(units) is None
    assert cohen_kappa([(True, True)] * 3) is None
    # Two values seen: defined (here perfect agreement on both values).
    assert alpha([[True, True], [False, False]]) == 1.0
    assert not one_grade([[True, True], [False, False]])
    # Units graded once do not count: their single grades are not compared.
    assert one_grade([[True, True], [True, True], [False, None]])


def test_rater_agreement_says_why_it_is_undefined() -> None:
    same = HumanGrades("grades.csv", {f"k{i}": {"alice": True, "bob": True} for i in range(4)})
    assert rater_agreement(same) == ONE_GRADE
    lonely = HumanGrades("grades.csv", {"k0": {"alice": True, "bob": False}})
    assert rater_agreement(lonely) == "too few shared grades"
    mixed = HumanGrades(
        "grades.csv",
        {"k0": {"alice": True, "bob": True}, "k1": {"alice": False, "bob": False}},
    )
    assert rater_agreement(mixed) == 1.0


@pytest.mark.parametrize("metric", ["judge_human_agreement", "judge_human_kappa"])
def test_a_gate_on_undefined_agreement_does_not_pass(metric: str) -> None:
    undefined = Metric(0.0, n=12, undefined=ONE_GRADE)
    result = check_gate(schema.Gate(metric=metric, min=0.0), 1, undefined, 0.95)
    assert not result.passed and result.value is None
    assert result.note == ONE_GRADE


def test_the_example_report_says_which_intervals_are_wide_by_necessity() -> None:
    # The committed report is what `evalreg report` writes (test_example_registry checks).
    page = (REPO / "reports" / "support-triage.md").read_text(encoding="utf-8")
    assert "| feature\\_request | 20 (only 3 clusters: the interval is wide by necessity) |" in page
    assert "Intervals wide by necessity (items in 5 clusters or fewer" in page
