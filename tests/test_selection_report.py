"""Selection policies, the governance report, `evalreg select` and the checks built on them."""

from __future__ import annotations

import json
import re
from datetime import date
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from evalreg.cli import main
from evalreg.metrics import Metric
from evalreg.registry import schema
from evalreg.selection.policy import decide

from conftest import Repo, replace_tree, template_from_live
from support.llm_server import LLMServer


def selection(**policy: object) -> schema.Selection:
    data = {
        "schema_version": 1,
        "use_case": "Labels",
        "task": "labels",
        "candidates": [{"id": c, "pin": c} for c in ("cheap", "good", "great", "new")],
        "policy": {"objective": {"lexicographic": [{"maximize": "pass_rate"}]}, **policy},
        "selected": "good",
        "rationale": "r",
    }
    return schema.Selection.model_validate(data)


def metrics(pass_rate: float, n: int = 400, cost: float = 0.001, unacceptable: float = 0.0):
    return {
        "all": {
            "pass_rate": Metric(pass_rate, pass_rate - 0.05, pass_rate + 0.05, n),
            "unacceptable_rate": Metric(unacceptable, 0.0, unacceptable + 0.01, n),
            "cost_per_item_usd": Metric(cost, n=n),
        }
    }


def test_the_best_eligible_candidate_is_recommended_and_pending_is_never_ranked():
    d = decide(
        selection(),
        {"cheap": metrics(0.7), "good": metrics(0.8), "great": metrics(0.9)},
        pending={"new"},
    )
    assert d.ranking == ["great", "good", "cheap"]
    assert d.recommended == "great"
    assert not d.agrees and d.needs_waiver
    assert "new is pending (no results) and is not ranked" in d.reasons


def test_gates_on_an_interval_bound_exclude_a_candidate():
    gates = [{"metric": "pass_rate", "min": 0.82, "on": "lower_bound"}]
    d = decide(
        selection(gates=gates),
        {"good": metrics(0.86), "great": metrics(0.9)},
        pending={"cheap", "new"},
    )
    assert d.recommended == "great"
    assert not d.assessments["good"].eligible
    assert any("good fails gate 1 (pass_rate on all (lower bound) ≥ 0.82)" in r for r in d.reasons)


def test_a_slice_too_small_for_its_gate_is_reported_as_such():
    gates = [{"metric": "unacceptable_rate", "max": 0.02, "on": "upper_bound"}]
    small = {"all": {"unacceptable_rate": Metric(0.0, 0.0, 0.0876, 40)}}
    d = decide(selection(gates=gates), {"good": small}, pending={"cheap", "great", "new"})
    gate = d.assessments["good"].gates[0]
    assert not gate.passed and gate.too_small
    assert "too small to tell: 40 items" in gate.note


def test_ties_break_by_candidate_id():
    d = decide(selection(), {"great": metrics(0.8), "cheap": metrics(0.8)}, {"good", "new"})
    assert d.ranking == ["cheap", "great"]


def test_weighted_objective():
    objective = {
        "weighted": [
            {"maximize": "pass_rate", "weight": 1},
            {"minimize": "cost_per_item_usd", "weight": 100},
        ]
    }
    d = decide(
        selection(objective=objective),
        {"cheap": metrics(0.8, cost=0.0001), "great": metrics(0.85, cost=0.002)},
        {"good", "new"},
    )
    assert d.recommended == "cheap"  # 0.8 - 0.01 beats 0.85 - 0.2


def test_non_inferiority_prefers_the_cheaper_candidate_within_the_margin():
    ni = {"metric": "pass_rate", "margin": 0.02, "prefer": {"minimize": "cost_per_item_usd"}}
    d = decide(
        selection(non_inferiority=ni),
        {
            "great": metrics(0.90, cost=0.01),
            "good": metrics(0.89, cost=0.001),
            "cheap": metrics(0.80, cost=0.0001),
        },
        {"new"},
    )
    assert d.ranking[0] == "great"
    assert d.recommended == "good"
    assert d.agrees and not d.needs_waiver
    assert any("within the non-inferiority margin" in r for r in d.reasons)


def test_a_waiver_for_the_declared_candidate_satisfies_the_policy():
    sel = selection().model_copy(
        update={
            "waivers": [
                schema.Waiver(
                    candidate="good", reason="latency", approver="ops lead", date=date(2026, 1, 1)
                )
            ]
        }
    )
    d = decide(sel, {"good": metrics(0.8), "great": metrics(0.9)}, {"cheap", "new"})
    assert not d.agrees and not d.needs_waiver


# ---------------------------------------------------------------- on real repositories
HOSTILE = "<img src=x onerror=alert(1)> @octocat org/repo#12 | ![p](https://evil.test/p.png)"


def _reported(live: Repo, server: LLMServer) -> None:
    live.write(
        "registry/selections/labels.yaml",
        live.read("registry/selections/labels.yaml").replace(
            "use_case: Message labelling", f"use_case: Message labelling\ndescription: '{HOSTILE}'"
        ),
    )
    assert main(["-C", str(live.root), "run"]) == 0
    assert main(["-C", str(live.root), "report"]) == 0
    live.commit("results and report")


@pytest.fixture(scope="module")
def reported_template(tmp_path_factory, live_template: Path, server_port: int) -> Path:
    """``reported``'s repository, built once for the module (a run and a report)."""
    return template_from_live(tmp_path_factory, live_template, server_port, _reported)


@pytest.fixture
def reported(live: Repo, reported_template: Path) -> Repo:
    """Results and the report committed, a hostile use-case description (this test's copy)."""
    return replace_tree(live, reported_template)


def test_the_report_has_every_section_and_parses_as_markdown(reported: Repo):
    page = reported.read("reports/labels.md")
    tokens = MarkdownIt("commonmark").enable("table").parse(page)
    headings = [tokens[i + 1].content for i, t in enumerate(tokens) if t.type == "heading_open"]
    for section in (
        "1. Decision",
        "2. Use case and task",
        "3. Criteria",
        "4. Candidates",
        "5. Evidence",
        "6. Drift",
        "7. Limitations",
        "8. How to reproduce",
    ):
        assert section in headings
    assert sum(t.type == "table_open" for t in tokens) >= 5
    # The families the comparisons are tested in are stated where the reader meets them.
    from evalreg.metrics import family_sentence

    assert page.count(family_sentence()) == 2
    # The only raw HTML is the report's own collapsed section of small slices.
    raw = [t.content for t in tokens if t.type in ("html_block", "html_inline")]
    assert all(re.fullmatch(r"<details><summary>[^<>]*</summary>\n|</details>\n", r) for r in raw)
    inline_children = [c for t in tokens if t.children for c in t.children]
    assert not [
        c for c in inline_children if c.type in ("image", "html_inline") and "evil" in str(c.attrs)
    ]
    assert "@octocat" not in page and "repo#12" not in page
    assert (reported.root / "reports/labels.svg").read_text().startswith("<svg")
    index = reported.read("reports/README.md")
    assert index.startswith("<!-- evalreg-report-inputs: sha256:")
    assert "[Message labelling](labels.md)" in index


def test_the_report_is_a_pure_function_of_the_tree(reported: Repo, cli, tmp_path):
    before = {
        p: (reported.root / p).read_bytes()
        for p in ("reports/README.md", "reports/labels.md", "reports/labels.svg")
    }
    assert cli(reported, "report").code == 0
    assert reported.git("status", "--porcelain") == ""
    clone = tmp_path / "clone"
    reported.git("clone", "-q", str(reported.root), str(clone))
    assert cli(clone, "report").code == 0
    for rel, data in before.items():
        assert (clone / rel).read_bytes() == data, rel


def test_check_detects_a_stale_report_without_regenerating_it(reported: Repo, cli):
    assert "out of date" not in cli(reported, "check").err
    reported.write(
        "registry/tasks/labels.yaml",
        reported.read("registry/tasks/labels.yaml").replace(
            "monthly_volume: 1000", "monthly_volume: 9000"
        ),
    )
    before = reported.snapshot()
    result = cli(reported, "check")
    assert result.code == 1
    assert "reports/README.md:1:1: finding: the governance report is out of date" in result.err
    assert reported.snapshot() == before


def test_a_declared_candidate_against_the_policy_needs_a_waiver(reported: Repo, cli):
    # Both candidates pass everything here; the policy prefers mini (higher pass rate).
    result = cli(reported, "check")
    assert "declared candidate 'rules' is not what the policy recommends ('mini')" in result.err
    assert result.code == 1

    said = cli(
        reported,
        "select",
        "labels",
        "rules",
        "--reason",
        "keep the rules for now",
        "--approver",
        "Pat Lee",
    )
    assert said.code == 0, said.err
    assert cli(reported, "report").code == 0
    after = cli(reported, "check")
    assert "is not what the policy recommends" not in after.err
    assert after.code == 0, after.err


def test_select_keeps_the_files_comments_and_layout(reported: Repo, cli):
    path = "registry/selections/labels.yaml"
    original = "# Owned by the support team.\n" + reported.read(path).replace(
        "selected: rules", "selected: rules  # today's system"
    )
    reported.write(path, original)
    assert (
        cli(reported, "select", "labels", "mini", "--reason", "mini wins on every slice").code == 0
    )
    text = reported.read(path)
    assert text.startswith("# Owned by the support team.\n")
    assert "selected: mini   # today's system" in text  # the comment keeps its column
    changed = [
        (a, b) for a, b in zip(original.splitlines(), text.splitlines(), strict=False) if a != b
    ]
    assert changed == [
        ("selected: rules  # today's system", "selected: mini   # today's system"),
        ("rationale: Baseline.", "rationale: mini wins on every slice"),
    ]


def test_select_rejects_an_unknown_candidate_and_writes_nothing(reported: Repo, cli):
    before = reported.snapshot()
    result = cli(reported, "select", "labels", "gpt-9", "--reason", "x")
    assert result.code == 2
    assert "'gpt-9' is not a candidate of labels (rules, mini)" in result.err
    assert reported.snapshot() == before


def test_summary_metrics_in_the_report_match_the_results(reported: Repo):
    summary = json.loads(reported.read("reports/results/labels/mini.json"))
    assert summary["totals"]["levels"]["correct"] == 4
    assert "| `mini` | 100.0% (" in reported.read("reports/labels.md")


# ---------------------------------------------------------------- what a gate compared


def _bound_gate_decision():
    """``good`` fails an upper-bound gate: point 0.62, upper bound 0.709."""
    gates = [{"metric": "unacceptable_rate", "max": 0.5, "on": "upper_bound"}]
    sel = selection(gates=gates)
    failing = {"all": {"unacceptable_rate": Metric(0.62, 0.53, 0.709, 400)}}
    passing = {"all": {"unacceptable_rate": Metric(0.1, 0.07, 0.13, 400)}}
    return sel, decide(sel, {"good": failing, "great": passing}, {"cheap", "new"})


def test_a_failed_bound_gate_names_the_bound_and_the_point_estimate():
    _, d = _bound_gate_decision()
    assert (
        "good fails gate 1 (unacceptable_rate on all (upper bound) ≤ 0.5): "
        "upper bound 0.709 (point estimate 0.62)"
    ) in d.reasons


def test_a_failed_point_gate_says_measured():
    gates = [{"metric": "pass_rate", "min": 0.85}]
    d = decide(selection(gates=gates), {"good": metrics(0.8)}, {"cheap", "great", "new"})
    assert "good fails gate 1 (pass_rate on all ≥ 0.85): measured 0.8" in d.reasons


def test_the_reports_gate_table_shows_the_bound_and_the_point_estimate():
    from types import SimpleNamespace

    from evalreg.report import governance

    sel, d = _bound_gate_decision()
    text = governance._gates(SimpleNamespace(selection=sel, decision=d))  # type: ignore[arg-type]
    assert "❌ fail: unacceptable rate 0.62, upper 95% bound 0.709 > max 0.5" in text
    assert "✅ pass: unacceptable rate 0.1, upper 95% bound 0.13 ≤ max 0.5" in text
    assert "Not gated yet (no results): `cheap`, `new`." in text


def test_a_gate_on_the_point_shows_the_estimate_against_the_threshold():
    from types import SimpleNamespace

    from evalreg.report import governance

    others = {"cheap", "great", "new"}
    sel = selection(gates=[{"metric": "pass_rate", "min": 0.7, "on": "lower_bound"}])
    d = decide(sel, {"good": {"all": {"pass_rate": Metric(0.82, 0.74, 0.88, 300)}}}, others)
    text = governance._gates(SimpleNamespace(selection=sel, decision=d))  # type: ignore[arg-type]
    assert "✅ pass: pass rate 0.82, lower 95% bound 0.74 ≥ min 0.7" in text
    sel = selection(gates=[{"metric": "error_rate", "max": 0.01}])
    d = decide(sel, {"good": {"all": {"error_rate": Metric(0.02, 0.01, 0.04, 300)}}}, others)
    text = governance._gates(SimpleNamespace(selection=sel, decision=d))  # type: ignore[arg-type]
    assert "❌ fail: error rate 0.02 > max 0.01" in text
    assert "bound" not in text.split("|---|")[-1]


def test_the_diff_markdown_shows_what_a_changed_gate_compared():
    import json
    from types import SimpleNamespace

    from pydantic import TypeAdapter

    from evalreg.compare.diff import selections_diff
    from evalreg.compare.diff_document import SelectionChange
    from evalreg.report.diff_markdown import _selections

    sel, after = _bound_gate_decision()
    before = decide(
        sel,
        {
            "good": {"all": {"unacceptable_rate": Metric(0.1, 0.07, 0.13, 400)}},
            "great": {"all": {"unacceptable_rate": Metric(0.1, 0.07, 0.13, 400)}},
        },
        {"cheap", "new"},
    )
    data = selections_diff(
        {"labels": SimpleNamespace(selection=sel, decision=before)},  # type: ignore[dict-item]
        {"labels": SimpleNamespace(selection=sel, decision=after)},  # type: ignore[dict-item]
        set(),
    )
    # Escaped as every cell of the comment is; it renders as the plain text.
    text = _selections(TypeAdapter(list[SelectionChange]).validate_json(json.dumps(data)))
    assert r"| pass | fail: upper bound 0\.709 \(point estimate 0\.62\) |" in text


def test_check_names_the_bound_and_the_point_estimate_of_a_failed_gate(reported: Repo, cli):
    import re

    path = "registry/selections/labels.yaml"
    reported.write(
        path, reported.read(path).replace("min: 0.5", "min: 0.99\n      on: lower_bound")
    )
    result = cli(reported, "check")
    assert result.code == 1
    said = re.search(
        r"declared candidate 'rules' is not what the policy recommends \([^)]*\); it fails gate 1 "
        r"\(pass_rate on common \(lower bound\) ≥ 0\.99\): lower bound [0-9.]+ "
        r"\(point estimate [0-9.]+\)",
        result.err,
    )
    assert said, result.err


HAND_WRITTEN = """\
# Owned by the support team; reviewed every quarter.
schema_version: 1
use_case: Message labelling
description: >
  Which system labels incoming messages. A long paragraph that a round trip through a YAML
  emitter would re-wrap at its own width, which a reviewer would then have to read again.
task: labels   \n\
candidates:
  - {id: rules, pin: rules}
  - id: mini
    pin: mini    # the model under evaluation
    description: |
      Kept verbatim:
         indentation, and a line that ends in spaces   \n\

policy:
  gates:
    - {metric: pass_rate, slice: common, min: 0.5}
  objective:
    lexicographic:
      - maximize: pass_rate
      - minimize: cost_per_item_usd

# Who decided, and why.
selected: rules
rationale: >
  The baseline, until a model
  has been evaluated.
{waivers}
# End of file.
"""


def _changed_lines(before: str, after: str) -> list[str]:
    import difflib

    return [
        line
        for line in difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0)
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]


@pytest.mark.parametrize(
    ("waivers", "expected_tail"),
    [
        ("", ["+waivers:"]),
        ("waivers: []", ["-waivers: []", "+waivers:"]),
        (
            "waivers:\n  - candidate: mini\n    reason: an earlier waiver\n"
            "    approver: Sam Doe\n    date: 2026-01-02",
            [],
        ),
    ],
)
def test_select_changes_only_the_lines_it_must(reported: Repo, cli, waivers, expected_tail):
    path = "registry/selections/labels.yaml"
    original = HAND_WRITTEN.replace("{waivers}\n", waivers + "\n" if waivers else "")
    reported.write(path, original)
    reason = "Keep the rules while the model's cost is reviewed"

    said = cli(reported, "select", "labels", "rules", "--reason", reason, "--approver", "Pat Lee")

    assert said.code == 0, said.err
    text = reported.read(path)
    changed = _changed_lines(original, text)
    removed = [line for line in changed if line.startswith("-")]
    added = [line for line in changed if line.startswith("+")]
    # The folded rationale stays folded, with the new reason; nothing else is removed.
    assert removed == [
        "-  The baseline, until a model",
        "-  has been evaluated.",
        *[line for line in expected_tail if line.startswith("-")],
    ]
    assert added[0] == f"+  {reason}"
    assert [line for line in added if line.startswith("+waivers")] == [
        line for line in expected_tail if line.startswith("+")
    ]
    assert "+  - candidate: rules" in added and "+    approver: Pat Lee" in added
    assert text.endswith("# End of file.\n")  # the waiver goes in its place, not at the end
    assert "task: labels   \n" in text and "spaces   \n" in text  # bytes kept as they were
    if waivers.startswith("waivers:\n"):
        assert text.index("an earlier waiver") < text.index("approver: Pat Lee")
    assert cli(reported, "check").code in (0, 1)  # the file still loads and validates


def test_select_says_what_the_rationale_it_replaced_said(reported: Repo, cli):
    path = "registry/selections/labels.yaml"
    # A hand-written rationale, with what a terminal would act on (an escape sequence).
    reported.write(
        path,
        reported.read(path).replace(
            "rationale: Baseline.",
            'rationale: "Baseline, \\e[2Jfor now.\\nAsk Dana before changing it."',
        ),
    )
    said = cli(reported, "select", "labels", "mini", "--reason", "mini wins on every slice")
    assert said.code == 0, said.err
    assert "labels: declared candidate is now mini" in said.out
    assert (
        'note: replaced the rationale, which read: "Baseline, \\u001b[2Jfor now.\\nAsk Dana '
        'before changing it."' in said.err
    )
    assert "\x1b" not in said.err
    # Declared again with the same reason, nothing is lost: nothing to say.
    again = cli(reported, "select", "labels", "mini", "--reason", "mini wins on every slice")
    assert again.code == 0, again.err
    assert "replaced" not in again.err


def test_select_with_an_approver_replaces_the_candidates_waiver_and_says_what_it_said(
    reported: Repo, cli
):
    path = "registry/selections/labels.yaml"
    reported.write(
        path,
        reported.read(path)
        + "waivers:\n"
        + "  - candidate: rules\n    reason: until the model is reviewed\n"
        + "    approver: Sam Doe\n    approver_login: samdoe\n    date: 2026-01-02\n"
        + "  # The model's own waiver, kept for the record.\n"
        + "  - candidate: mini\n    reason: cheaper\n    approver: Ann\n    date: 2026-01-03\n",
    )
    before = reported.read(path)
    reason = "the rules, while the model's cost is reviewed"

    said = cli(reported, "select", "labels", "rules", "--reason", reason, "--approver", "Pat Lee")

    assert said.code == 0, said.err
    assert (
        'note: replaced the waiver for rules, which read: reason "until the model is reviewed", '
        'approved by "Sam Doe" ("samdoe") on 2026-01-02' in said.err
    )
    assert 'note: replaced the rationale, which read: "Baseline."' in said.err
    text = reported.read(path)
    assert "until the model is reviewed" not in text and "samdoe" not in text
    # Only the waiver's own lines changed; the other waiver and its comment stay.
    changed = _changed_lines(before, text)
    assert [line for line in changed if line.startswith("-")] == [
        "-rationale: Baseline.",
        "-    reason: until the model is reviewed",
        "-    approver: Sam Doe",
        "-    approver_login: samdoe",
        "-    date: 2026-01-02",
    ]
    assert text.endswith(before[before.index("  # The model's own waiver") :])
    # The decision reads the new waiver: the declared candidate needs no other.
    assert cli(reported, "report").code == 0
    assert cli(reported, "check").code == 0
    assert "Pat Lee" in reported.read("reports/labels.md")
