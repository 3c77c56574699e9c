"""``dvc metrics show`` and ``dvc metrics diff`` read each cell's rates and cost per slice.

Real runs against the loopback server in a real git + DVC repository; the figures DVC
prints are checked against a brute-force count over the per-item records written by the
test, not against the code that wrote them.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from evalreg.cells import METRICS_DIR

from conftest import Repo

CELLS = ("labels/mini", "labels/rules")


def dvc(repo: Repo, *args: str) -> Any:
    done = subprocess.run(
        [sys.executable, "-m", "dvc", *args, "--json"],
        cwd=repo.root,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout)


def records(repo: Repo, cell: str) -> list[dict[str, Any]]:
    path = repo.root / f"reports/results/{cell}.items.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def expected(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """What a cell's metrics file must say, counted from its per-item records."""
    by_slice: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        by_slice["all"].append(row)
        for tag in set(row["tags"]):
            by_slice[tag].append(row)
    out = {}
    for name, group in by_slice.items():
        graded = [r for r in group if r["error"] is None]
        levels = [r["level"] for r in graded]
        entry: dict[str, Any] = {
            "items": len({r["item"] for r in group}),
            "correct_rate": round(levels.count("correct") / len(graded), 4),
            "acceptable_rate": round(
                (levels.count("correct") + levels.count("acceptable")) / len(graded), 4
            ),
            "unacceptable_rate": round(levels.count("unacceptable") / len(graded), 4),
            "error_rate": round((len(group) - len(graded)) / len(group), 4),
        }
        if name == "all":
            cost = sum(r["cost_micro_usd"] for r in graded)
            entry["cost_usd"] = cost / 1e6
            entry["cost_per_1k_items_usd"] = round(cost / len(graded) / 1000, 6)
            criteria: dict[str, list[bool]] = defaultdict(list)
            for r in graded:
                for cid, verdict in r["criteria"].items():
                    criteria[cid].append(verdict["passed"])
            entry["criteria"] = {c: round(sum(v) / len(v), 4) for c, v in sorted(criteria.items())}
        out[name] = entry
    return out


def flat(entry: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out = {}
    for key, value in entry.items():
        if isinstance(value, dict):
            out.update(flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


@pytest.fixture
def ran(live: Repo, cli) -> Repo:
    result = cli(live, "run")
    assert result.code == 0, result.err
    live.commit("results")
    return live


def test_dvc_metrics_show_reads_rates_and_cost_per_slice(ran: Repo):
    index = (ran.root / "dvc.yaml").read_text()
    files = [f"{METRICS_DIR}/{c}.json" for c in CELLS]
    assert [line.strip("- ") for line in index.splitlines() if line.startswith("  - ")] == files
    shown = dvc(ran, "metrics", "show")
    data = shown[""]["data"]
    assert sorted(data) == files
    for cell, path in zip(CELLS, files, strict=True):
        want = expected(records(ran, cell))
        assert data[path]["data"] == want, cell
        keys = flat(data[path]["data"])
        # Rates and cost only: no fingerprints, verdict columns or wall-clock latency.
        assert not [k for k in keys if "fingerprint" in k or "latency" in k]
        assert all(isinstance(v, int | float) for v in keys.values())


def test_dvc_metrics_diff_shows_what_a_change_moved(ran: Repo, cli):
    before = {c: expected(records(ran, c)) for c in CELLS}
    # Every fourth item's expected label flips: the rules baseline's rates move.
    rows = [json.loads(line) for line in ran.read("evalsets/messages.jsonl").splitlines()]
    for n, row in enumerate(rows):
        if n % 4 == 0:
            row["expected"]["label"] = "a" if row["expected"]["label"] == "b" else "b"
    ran.write("evalsets/messages.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    assert cli(ran, "evalset", "add", "evalsets/messages.jsonl").code == 0
    result = cli(ran, "run")
    assert result.code == 0, result.err
    after = {c: expected(records(ran, c)) for c in CELLS}
    changed = dvc(ran, "metrics", "diff", "HEAD")
    for cell in CELLS:
        path = f"{METRICS_DIR}/{cell}.json"
        old, new = flat(before[cell]), flat(after[cell])
        moved = {k for k in new if old.get(k) != new[k]}
        assert moved, cell  # the flip changes every candidate's correct rate
        reported = changed[path]
        assert set(reported) == moved
        for key in moved:
            assert reported[key]["old"] == old[key]
            assert reported[key]["new"] == new[key]


def test_metrics_files_reproduce_and_a_hand_edit_is_named(ran: Repo, cli):
    assert cli(ran, "reproduce", "HEAD").code == 0
    path = ran.root / METRICS_DIR / "labels/rules.json"
    data = json.loads(path.read_text())
    data["all"]["correct_rate"] = 0.99
    path.write_text(json.dumps(data, indent=2) + "\n")
    ran.commit("flattering numbers")
    result = cli(ran, "reproduce", "HEAD")
    assert result.code == 1
    assert "metrics all.correct_rate: recorded 0.99, reproduced " in result.out


def test_the_same_results_write_the_same_metrics_bytes(ran: Repo, cli):
    before = {c: (ran.root / METRICS_DIR / f"{c}.json").read_bytes() for c in CELLS}
    assert cli(ran, "run", "--offline", "--force").code == 0
    after = {c: (ran.root / METRICS_DIR / f"{c}.json").read_bytes() for c in CELLS}
    assert after == before
    assert ran.git("status", "--porcelain") == ""


def test_a_revision_from_before_metrics_files_still_reproduces(ran: Repo, cli):
    # As evalreg wrote it before metrics files: dvc.yaml listing the summaries.
    ran.git("rm", "-q", "-r", METRICS_DIR)
    ran.write(
        "dvc.yaml",
        "metrics:\n" + "".join(f"  - reports/results/{c}.json\n" for c in CELLS),
    )
    old = ran.commit("results as an older evalreg recorded them")
    assert cli(ran, "reproduce", old).code == 0
    # The next run that writes results writes every cell's metrics file, not only its own.
    ran.write("registry/systems/rules.py", ran.read("registry/systems/rules.py") + "\n# v2\n")
    result = cli(ran, "run")
    assert result.code == 0, result.err
    for cell in CELLS:
        assert (ran.root / METRICS_DIR / f"{cell}.json").is_file(), cell
    assert "reports/results/" not in ran.read("dvc.yaml")
    assert sorted(dvc(ran, "metrics", "show")[""]["data"]) == [
        f"{METRICS_DIR}/{c}.json" for c in CELLS
    ]


def test_resolve_rewrites_a_metrics_file_taken_from_one_side(ran: Repo, cli):
    path = ran.root / METRICS_DIR / "labels/mini.json"
    good = path.read_bytes()
    path.write_bytes(good.replace(b'"items": 4', b'"items": 5', 1))
    assert path.read_bytes() != good
    result = cli(ran, "resolve")
    assert result.code == 0, result.err
    assert path.read_bytes() == good
    assert Path(ran.root / "dvc.yaml").read_text().count(f"  - {METRICS_DIR}/") == len(CELLS)
