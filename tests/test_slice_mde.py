"""One definition of the smallest change a slice can detect, shared by the governance report
and `evalreg evalset stats`."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from evalreg import stats
from evalreg.registry.loader import load_registry
from evalreg.report.writer import render
from evalreg.text.numbers import whole_points

ROOT = Path(__file__).resolve().parents[1]
EVALSET = "evalsets/support_tickets.jsonl"


def limitations_bullet(page: str) -> dict[str, str]:
    """Slice → the MDE in points the report's "too small to detect" bullet gives it."""
    (line,) = [ln for ln in page.splitlines() if ln.startswith("- Too small to detect")]
    return dict(re.findall(r"`([^`]+)` (\d+(?:\.\d)?)", line.split("):", 1)[1]))


def test_the_report_and_evalset_stats_give_a_slice_the_same_mde(cli) -> None:
    page = render(load_registry(ROOT))["reports/support-triage.md"].decode()
    shown = limitations_bullet(page)
    result = cli(ROOT, "evalset", "stats", "--json")
    assert result.code == 0, result.err
    rows = {row["slice"]: row for row in json.loads(result.out)["evalsets"][EVALSET]}
    assert len(shown) > 10
    for name, points in shown.items():
        row = rows[name]
        assert not row["detectable"], name
        assert points == whole_points(row["mde_paired"]), name
        assert f"(MDE {points} points)" in row["verdict"]
        assert row["mde_paired"] == stats.slice_mde(row["units"])
    # Every slice the report sizes (the whole eval set, and slices of 10 items or more) that
    # stats calls too small is in the bullet, and no other.
    big = {name for name, row in rows.items() if name == "all" or row["items"] >= 10}
    assert set(shown) == {name for name in big if not rows[name]["detectable"]}


@pytest.mark.parametrize("units", (1, 8, 51, 314, 10_000))
def test_slice_mde_is_the_paired_planning_formula(units: int) -> None:
    # δ = (z_{0.975} + z_{0.8}) · sqrt(0.10 / n), no floor on the stated discordance.
    assert stats.slice_mde(units) == pytest.approx(min(1.0, 2.8015852 * (0.1 / units) ** 0.5))
    assert stats.slice_mde(units, discordance=0.02) < stats.slice_mde(units)


def test_slice_mde_edges() -> None:
    assert stats.slice_mde(0) == 1.0
    assert stats.slice_mde(100, discordance=0.0) == 0.0  # a stated plan, taken as stated
    with pytest.raises(ValueError):
        stats.slice_mde(-1)
    with pytest.raises(ValueError):
        stats.slice_mde(10, power=1.0)
