"""Human grades that cover some responses: not graded is neither a failure nor a crash,
coverage is a metric a gate can require, and agreement is computed on the graded overlap."""

from __future__ import annotations

import csv
import io
import json

import krippendorff
import numpy as np
import pytest
from test_holdout import holdout_items, with_holdout
from test_judges_human import JUDGE_CRITERION, JUDGE_PIN

from evalreg.cells import cells
from evalreg.compare.summaries import summary_metrics
from evalreg.graders.llm_judge import JUDGE_INSTRUCTIONS
from evalreg.metrics import cell_metrics
from evalreg.registry.loader import load_registry
from evalreg.results.outcomes import from_records
from evalreg.results.records import read_summary
from evalreg.selection.evidence import gather, read_outcomes

from conftest import Repo, items_jsonl, label_of
from support import runs

CELLS = ("rules", "mini")
HUMAN_CRITERION = """\
  - id: human_ok
    description: Two reviewers agree the answer is right.
    grader:
      type: human
      file: grades/human.csv
      min_raters: 2
      calibrates: tone
"""
HUMAN_SECTION = """\
### Human grades

Coverage is graded / applicable responses. A response with too few human grades is not \
graded for that criterion: it is left out of the response's score and level, as a criterion \
that does not apply is, and out of the criterion's pass rate and the judge-human agreement.

| candidate | criterion | pass rate of graded (95 % CI) | coverage |
|---|---|---|---|
| `rules` | `human_ok` | 100.0% (43.9–100.0) | 3/4 (75.0%) |
| `mini` | `human_ok` | – | 0/4 (0.0%) |

### Judge calibration

Agreement of the judge's verdicts with the human majority on the responses both graded \
(pairs); n/a where a statistic is undefined for too few pairs, and "one grade throughout" \
where every grade was the same (both statistics are then 0/0: agreeing on a single value \
shows nothing about agreeing on the other).

| judge criterion | human criterion | candidate | pairs | Krippendorff's alpha | \
Cohen's kappa | human coverage |
|---|---|---|---|---|---|---|
| `tone` | `human_ok` | `rules` | 3 | one grade throughout | one grade throughout | \
3/4 (75.0%) |

"""
COVERAGE_GATE = "  gates:\n    - metric: coverage:human_ok\n      min: 0.8\n"


def judge_every_answer(request) -> str:
    """The judge passes answers labelled "a" and fails the others; candidates label."""
    if request.body["messages"][0]["content"] == JUDGE_INSTRUCTIONS:
        answer = request.body["messages"][1]["content"]
        return json.dumps({"score": 0.9 if '"a"' in answer else 0.2, "reason": "ok"})
    return label_of(request)


@pytest.fixture
def graded(live: Repo, server) -> Repo:
    """A judge criterion and a human criterion that calibrates it; nobody has graded yet."""
    server.responder = judge_every_answer
    live.write("registry/models/judge.yaml", JUDGE_PIN.format(url=server.base_url))
    live.write(
        "registry/rubrics/labels.yaml",
        live.read("registry/rubrics/labels.yaml").replace(
            "levels:", JUDGE_CRITERION + HUMAN_CRITERION + "levels:"
        ),
    )
    live.write("grades/human.csv", "key,alice,bob\n")
    live.commit("a judge criterion and human grades")
    return live


def records(repo: Repo, cell: str, split: str = "") -> list[dict]:
    text = repo.read(f"reports/results/labels/{cell}{split}.items.jsonl")
    return [json.loads(line) for line in text.splitlines()]


def grade(repo: Repo, rows: list[tuple[str, str, str]]) -> None:
    """Write the grades file: (key, alice, bob), a blank grade for not graded."""
    lines = ["key,alice,bob", *(",".join(row) for row in rows)]
    repo.write("grades/human.csv", "\n".join(lines) + "\n")


def judged_rows(recs: list[dict]) -> list[tuple[str, str, str]]:
    """Both raters agree with the judge on every response except m-003's, where bob
    disagrees; m-001's response gets alice's grade only (too few for min_raters: 2)."""
    rows = []
    for r in recs:
        judge = "pass" if r["criteria"]["tone"]["passed"] else "fail"
        other = ("fail" if judge == "pass" else "pass") if r["item"] == "m-003" else judge
        rows.append((r["key"], judge, "" if r["item"] == "m-001" else other))
    return rows


def expected_coverage(grades_csv: str, recs: list[dict], tag: str | None = None) -> tuple[int, int]:
    """(graded, applicable) from the grades file itself: a response is graded when at
    least two raters gave it a grade; human_ok applies to every response."""
    raters = {
        row["key"]: sum(bool(v.strip()) for k, v in row.items() if k != "key")
        for row in csv.DictReader(io.StringIO(grades_csv))
    }
    graded = applicable = 0
    for r in recs:
        if r["error"] is None and (tag is None or tag in r["tags"]):
            applicable += 1
            graded += raters.get(r["key"], 0) >= 2
    return graded, applicable


def coverage_metrics(repo: Repo) -> dict[str, dict[str, tuple[int, int]]]:
    """Per candidate and slice, the coverage metric as (graded, applicable)."""
    ev = gather(load_registry(repo.root), "labels")
    return {
        cid: {
            name: (
                round(m["coverage:human_ok"].value * m["coverage:human_ok"].n),
                m["coverage:human_ok"].n,
            )
            for name, m in slices.items()
            if "coverage:human_ok" in m
        }
        for cid, slices in ev.metrics.items()
    }


def test_grades_of_one_candidate_leave_the_other_not_graded_and_tracked(graded: Repo, cli, server):
    assert cli(graded, "run", "--candidate", "rules").code == 0
    grade(graded, judged_rows(records(graded, "rules")))
    graded.commit("rules graded by two reviewers")
    before = server.count()

    # The second candidate's responses are bought now and nobody has graded them.
    result = cli(graded, "run")
    assert result.code == 0, result.err
    assert "Traceback" not in result.err
    # mini's 4 answers, and judge verdicts for the 2 that differ from rules' answers (the
    # judge request of an answer alike is stored already).
    assert server.count() - before == 6
    assert runs.untracked_data(graded) == []
    assert "Human grades of labels/mini: human_ok 0/4 (0.0%) graded" in result.out
    assert "Human grades of labels/rules: human_ok 3/4 (75.0%) graded" in result.out

    mini, rules = records(graded, "mini"), records(graded, "rules")
    assert all(r["ungraded"] == ["human_ok"] for r in mini)
    assert all("human_ok" not in r["criteria"] for r in mini)
    assert [r["item"] for r in rules if "ungraded" in r] == ["m-001"]
    # Not graded is left out of the level, as a criterion that does not apply is: the
    # level comes from the criteria that graded the response.
    by_item = {r["item"]: r for r in mini}
    assert by_item["m-001"]["level"] == "correct"  # label and tone pass, human not graded
    assert by_item["m-000"]["level"] == "acceptable"  # the tone judge fails it: not correct

    summary = json.loads(graded.read("reports/results/labels/mini.json"))
    assert summary["totals"]["criteria"]["human_ok"] == {
        "applicable": 0,
        "passed": 0,
        "ungraded": 4,
    }
    assert summary["samples"]["criteria"]["human_ok"] == "----"
    assert "ungraded" not in summary["totals"]["criteria"]["label"]

    grades_csv = graded.read("grades/human.csv")
    got = coverage_metrics(graded)
    for cid in CELLS:
        recs = records(graded, cid)
        assert got[cid]["all"] == expected_coverage(grades_csv, recs)
        for tag in ("common", "edge"):
            assert got[cid][tag] == expected_coverage(grades_csv, recs, tag)
    assert got["rules"] == {"all": (3, 4), "common": (1, 2), "edge": (2, 2)}

    # The summary's columns, the per-item records and the summary's counts (what a fork's
    # pull request reads) give the same coverage and the same pass rate of graded.
    registry = load_registry(graded.root)
    task = registry.tasks["labels"]
    rubric = registry.rubrics["labels"]
    policy = registry.selections["labels"].policy
    for cid in CELLS:
        cell = next(c for c in cells(registry) if c.id == f"labels/{cid}")
        summary = read_summary(registry.tree, cell)
        columns = cell_metrics(read_outcomes(registry, cell, summary), task, rubric)
        recs = cell_metrics(from_records(records(graded, cid), ["human_ok"]), task, rubric)
        counts = summary_metrics(summary, task, rubric, policy)
        for name in ("all", "common", "edge"):
            for metric in ("coverage:human_ok", "criterion:human_ok"):
                assert columns[name][metric] == recs[name][metric]
            assert (
                counts[name]["coverage:human_ok"].value == columns[name]["coverage:human_ok"].value
            )
            assert counts[name]["coverage:human_ok"].n == columns[name]["coverage:human_ok"].n

    graded.commit("results")
    count = server.count()
    again = cli(graded, "run", "--offline", "--force")
    assert again.code == 0, again.err
    assert server.count() == count  # every response bought above is in the store
    assert records(graded, "mini") == mini  # and grades to the same records

    assert cli(graded, "report").code == 0
    page = graded.read("reports/labels.md")
    assert "### Human grades" in page
    section = page[page.index("### Human grades") : page.index("### Gate results")]
    assert section == HUMAN_SECTION
    # Two raters: kappa beside alpha, on the 3 responses both graded (alice passes all
    # three, bob fails m-003's: observed agreement 2/3 is what chance gives, kappa 0).
    both = np.array([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]])
    rater_alpha = krippendorff.alpha(reliability_data=both, level_of_measurement="nominal")
    assert (
        f"Agreement among the human raters of `grades/human.csv`: alpha {rater_alpha:.2f}, "
        "Cohen's kappa 0.00 on 3 responses both graded."
    ) in page
    # Measured on rules, not on mini (no response of mini has human grades).
    assert "judge calibration against human grades (`tone` on `mini`)." in page

    # The judge and the human majority passed every one of rules' 3 pairs: agreement is
    # undefined there, not perfect, and a gate on it does not pass.
    graded.write(
        "registry/selections/labels.yaml",
        graded.read("registry/selections/labels.yaml").replace(
            "  gates:\n", "  gates:\n    - metric: judge_human_agreement\n      min: 0.5\n"
        ),
    )
    graded.commit("a gate on the judge's agreement with people")
    assert cli(graded, "report").code == 0
    page = graded.read("reports/labels.md")
    assert "one grade throughout | one grade throughout |" in page
    reason = "rules fails gate 1 (judge\\_human\\_agreement on all ≥ 0.5): one grade throughout"
    assert reason in page


def test_records_without_human_criteria_keep_their_bytes(live: Repo, cli):
    assert cli(live, "run").code == 0
    first = live.read("reports/results/labels/mini.items.jsonl")
    summary = live.read("reports/results/labels/mini.json")
    assert "ungraded" not in first and "ungraded" not in summary
    live.commit("results")
    assert cli(live, "run", "--offline", "--force").code == 0
    assert live.read("reports/results/labels/mini.items.jsonl") == first
    assert live.read("reports/results/labels/mini.json") == summary


def test_a_new_item_lowers_coverage_and_a_coverage_gate_fails(graded: Repo, cli):
    assert cli(graded, "run").code == 0
    rows = [(r["key"], "pass", "pass") for cid in CELLS for r in records(graded, cid)]
    grade(graded, rows)
    graded.write(
        "registry/selections/labels.yaml",
        graded.read("registry/selections/labels.yaml").replace("  gates:\n", COVERAGE_GATE),
    )
    graded.commit("everything graded, and a coverage gate")
    assert cli(graded, "run").code == 0
    assert coverage_metrics(graded)["rules"]["all"] == (4, 4)
    assert cli(graded, "check").code == 0
    graded_everything = graded.commit("results")

    # A fifth item, added after grading: its responses are not graded.
    graded.write("evalsets/messages.jsonl", items_jsonl(5))
    assert cli(graded, "evalset", "add", str(graded.root / "evalsets/messages.jsonl")).code == 0
    graded.commit("a new item")
    result = cli(graded, "run")
    assert result.code == 0, result.err
    assert runs.untracked_data(graded) == []
    new = [r for r in records(graded, "rules") if r["item"] == "m-004"]
    assert new[0]["ungraded"] == ["human_ok"]
    got = coverage_metrics(graded)
    assert got["rules"]["all"] == got["mini"]["all"] == (4, 5)  # 80 %: still passes
    assert got["rules"]["edge"] == (2, 3)  # m-004 is an edge item
    graded.commit("results with the new item")
    diff = cli(graded, "diff", graded_everything)
    assert diff.code == 0, diff.err
    assert "| labels/rules | human\\_ok | 4/4 (100.0%) → 4/5 (80.0%) |" in diff.out

    # The gate moves to the edge slice, where 2/3 is under 0.8.
    graded.write(
        "registry/selections/labels.yaml",
        graded.read("registry/selections/labels.yaml").replace(
            "metric: coverage:human_ok\n      min: 0.8\n",
            "metric: coverage:human_ok\n      slice: edge\n      min: 0.8\n",
        ),
    )
    graded.commit("coverage gate on the edge slice")
    ev = gather(load_registry(graded.root), "labels")
    gate = ev.decision.assessments["rules"].gates[0]
    assert not gate.passed and not gate.too_small
    reason = next(r for r in ev.decision.reasons if r.startswith("rules fails gate 1"))
    assert reason == (
        "rules fails gate 1 (coverage:human_ok on edge ≥ 0.8): measured 2/3 (66.7%); "
        "1 of the 3 responses 'human_ok' applies to have no human grade"
    )
    assert ev.decision.recommended is None
    assert cli(graded, "report").code == 0
    check = cli(graded, "check")
    assert check.code == 1
    assert "coverage:human_ok" in check.out + check.err
    page = graded.read("reports/labels.md")
    assert "❌ fail: measured 2/3 (66.7%)" in page


@pytest.mark.parametrize(
    ("metric", "problem"),
    [
        (
            "coverage:label",
            "coverage is measured for human criteria, and 'label' is graded "
            "by field_exact (human criteria: human_ok)",
        ),
        ("coverage:nope", "criterion 'nope' is not in the task's rubric"),
        ("coverage:", "unknown metric 'coverage:'"),
    ],
)
def test_a_coverage_gate_names_a_human_criterion(graded: Repo, cli, metric, problem):
    graded.write(
        "registry/selections/labels.yaml",
        graded.read("registry/selections/labels.yaml").replace(
            "  gates:\n", f'  gates:\n    - metric: "{metric}"\n      min: 0.8\n'
        ),
    )
    result = cli(graded, "check")
    assert result.code == 2
    assert "Traceback" not in result.err
    assert "registry/selections/labels.yaml:" in result.err and problem in result.err


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")  # statsmodels' SE
def test_agreement_is_computed_on_the_graded_overlap_only(graded: Repo, cli):
    assert cli(graded, "run").code == 0
    # rules answers "a" throughout (the judge passes all four), mini labels right (the
    # judge passes m-001 and m-003). Some responses have one grade or none.
    plan = {
        "rules": {
            "m-000": ("fail", "fail"),
            "m-001": ("pass", ""),
            "m-002": ("pass", "pass"),
            "m-003": ("pass", "fail"),
        },
        "mini": {
            "m-000": ("fail", "fail"),
            "m-001": ("pass", "pass"),
            "m-002": ("pass", "pass"),
            "m-003": ("", ""),
        },
    }
    grade(
        graded,
        [(r["key"], *plan[cid][r["item"]]) for cid in CELLS for r in records(graded, cid)],
    )
    graded.commit("partly graded")
    assert cli(graded, "run").code == 0
    assert cli(graded, "report").code == 0

    # The overlap computed here, independently: judge verdict against the majority of two
    # raters, where both graded (min_raters: 2).
    grades = {
        row["key"]: row for row in csv.DictReader(io.StringIO(graded.read("grades/human.csv")))
    }
    from statsmodels.stats.inter_rater import cohens_kappa

    ev = gather(load_registry(graded.root), "labels")
    page = graded.read("reports/labels.md")
    for cid in CELLS:
        pairs = []
        for r in records(graded, cid):
            row = grades.get(r["key"])
            if row is None or not (row["alice"] and row["bob"]):
                continue
            votes = [row["alice"] == "pass", row["bob"] == "pass"]
            pairs.append((r["criteria"]["tone"]["passed"], sum(votes) * 2 >= len(votes)))
        assert len(pairs) == 3
        data = np.array([[float(j) for j, _ in pairs], [float(h) for _, h in pairs]])
        expected = krippendorff.alpha(reliability_data=data, level_of_measurement="nominal")
        table = np.zeros((2, 2))
        for j, h in pairs:
            table[int(j), int(h)] += 1
        kappa = cohens_kappa(table).kappa

        (cal,) = ev.calibrations[cid]
        assert (cal.judge, cal.human, cal.n) == ("tone", "human_ok", 3)
        assert cal.alpha == pytest.approx(expected)
        assert cal.kappa == pytest.approx(kappa)
        measured = ev.metrics[cid]["all"]
        assert measured["judge_human_agreement"].n == 3
        assert measured["judge_human_agreement"].value == pytest.approx(expected)
        assert measured["judge_human_kappa"].value == pytest.approx(kappa)
        assert (
            f"| `tone` | `human_ok` | `{cid}` | 3 | {expected:.2f} | {kappa:.2f} | 3/4 (75.0%) |"
        ) in page
    # Measured for every judge criterion on every candidate: not an unmeasured risk.
    assert "Unmeasured risks:" in page and "judge calibration against" not in page
    assert "Calibrated against human grades: `tone` (see Judge calibration)." in page


def test_a_holdout_run_is_not_graded_and_succeeds(graded: Repo, cli, server):
    assert cli(graded, "run").code == 0
    grade(graded, [(r["key"], "pass", "pass") for cid in CELLS for r in records(graded, cid)])
    with_holdout(graded, cli, holdout_items())
    graded.commit("graded, and a sealed hold-out set")
    assert cli(graded, "run").code == 0
    graded.commit("results")
    before = server.count()
    result = cli(graded, "run", "--holdout")
    assert result.code == 0, result.err
    assert server.count() > before
    assert runs.untracked_data(graded) == []
    held = records(graded, "mini", ".holdout")
    assert held and all(r["ungraded"] == ["human_ok"] for r in held)
    summary = json.loads(graded.read("reports/results/labels/mini.holdout.json"))
    assert summary["totals"]["criteria"]["human_ok"]["ungraded"] == len(held)
    graded.commit("hold-out results")
    count = server.count()
    assert cli(graded, "run", "--holdout", "--offline", "--force").code == 0
    assert server.count() == count


def test_unmeasured_calibration_stays_an_unmeasured_risk(live: Repo, cli, server):
    server.responder = judge_every_answer
    live.write("registry/models/judge.yaml", JUDGE_PIN.format(url=server.base_url))
    live.write(
        "registry/rubrics/labels.yaml",
        live.read("registry/rubrics/labels.yaml").replace("levels:", JUDGE_CRITERION + "levels:"),
    )
    live.commit("a judge criterion, no human grades")
    assert cli(live, "run").code == 0
    assert cli(live, "report").code == 0
    page = live.read("reports/labels.md")
    assert "The judge is not calibrated against human grades yet." in page
    assert "### Judge calibration" not in page and "### Human grades" not in page
    assert (
        "- Unmeasured risks: behaviour on inputs unlike this eval set; drift of hosted models "
        "under the same name (see Drift); judge calibration against human grades "
        "(`tone`).\n"
    ) in page


TABLES = [
    [[5, 0], [0, 5]],  # perfect agreement
    [[0, 5], [5, 0]],  # perfect disagreement
    [[3, 2], [1, 4]],
    [[7, 1], [2, 0]],
    [[0, 0], [3, 7]],  # one rater gives one grade only
    [[1, 0], [0, 0]],  # a single pair
    [[20, 13], [4, 1]],
]


def _pairs_of(table: list[list[int]]) -> list[tuple[bool, bool]]:
    return [(bool(a), bool(b)) for a in (0, 1) for b in (0, 1) for _ in range(table[a][b])]


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
@pytest.mark.parametrize("table", TABLES)
def test_cohen_kappa_matches_statsmodels(table):
    from statsmodels.stats.inter_rater import cohens_kappa

    from evalreg.graders.human import cohen_kappa

    reference = cohens_kappa(np.array(table, dtype=float)).kappa
    got = cohen_kappa(_pairs_of(table))
    if np.isnan(reference):
        assert got is None
    else:
        assert got == pytest.approx(reference, abs=1e-12)


@pytest.mark.parametrize(
    "table",
    [[[4, 0], [0, 0]], [[0, 0], [0, 9]], [[0, 0], [0, 0]]],
)
def test_cohen_kappa_is_undefined_for_one_grade_throughout(table):
    from evalreg.graders.human import cohen_kappa

    # Both raters gave every unit the same single grade (or there is nothing): chance
    # agreement is 1 and kappa 0/0; it is None (shown as n/a), never a made-up 1 or 0.
    assert cohen_kappa(_pairs_of(table)) is None


def test_two_human_raters_get_kappa_beside_alpha():
    from statsmodels.stats.inter_rater import cohens_kappa

    from evalreg.graders.human import parse_grades, rater_agreement, rater_kappa

    data = b"key,alice,bob\nk1,pass,pass\nk2,fail,pass\nk3,fail,fail\nk4,pass,\nk5,pass,pass\n"
    grades = parse_grades(data, "grades/h.csv")
    kappa, n = rater_kappa(grades) or (None, 0)
    assert n == 4  # k4 has one grade: not a pair
    assert kappa == pytest.approx(cohens_kappa(np.array([[1.0, 1.0], [0.0, 2.0]])).kappa)
    assert rater_agreement(grades) is not None
    three = parse_grades(b"key,a,b,c\nk1,pass,pass,fail\nk2,fail,fail,fail\n", "g.csv")
    assert rater_kappa(three) is None  # kappa is for two raters; alpha covers more
