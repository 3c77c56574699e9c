"""What a diff's verdicts may claim: results that moved without a cause are flagged, the
policy's recommendation is computed from summaries alone, and a change of the rubric is
never headlined as a change of the model. Real repos, real DVC, a loopback model server."""

from __future__ import annotations

import json
import shutil

import pytest
from test_diff_comment import round_trips

from evalreg.compare.diff_document import diff_document
from evalreg.report.diff_markdown import diff_markdown

from conftest import Repo, items_jsonl

EVALSET = "evalsets/messages.jsonl"
SUMMARY = "reports/results/labels/rules.json"
LAXER = ("  correct: {require: all}", "  correct: {require: [valid_json]}")


def _cell(data: dict, cid: str) -> dict:
    return next(c for c in data["cells"] if c["id"] == cid)


def _row(text: str, cid: str) -> str:
    """The cells table's row of ``cid`` (escaped slashes read back as slashes)."""
    return next(
        line for line in text.replace("\\/", "/").splitlines() if line.startswith(f"| {cid} |")
    )


def _as_a_fork(repo: Repo) -> None:
    """Leave only what a fork's pull request has: git, without any DVC data."""
    shutil.rmtree(repo.root / ".dvc" / "cache")
    shutil.rmtree(repo.root / "dvc-storage", ignore_errors=True)
    for path in list(repo.root.rglob("*.jsonl")):
        if path.with_name(path.name + ".dvc").exists():
            path.unlink()


def _diff(repo: Repo, cli) -> tuple[dict, str]:
    result = cli(repo, "diff", "main", "--format", "json")
    assert result.code == 0, result.err
    round_trips(result.out)
    data = json.loads(result.out)
    return data, diff_markdown(diff_document(result.out))


@pytest.fixture
def on_main(live: Repo, cli) -> Repo:
    """Twenty items (enough for a test to call a difference), results committed on main,
    and a branch checked out for the pull request."""
    live.write(EVALSET, items_jsonl(20))
    assert cli(live, "evalset", "add", str(live.root / EVALSET)).code == 0
    assert cli(live, "run").code == 0, "run on main"
    live.commit("results on main")
    live.git("checkout", "-q", "-b", "pr")
    return live


def _perfect(summary: dict) -> dict:
    """The summary as someone would edit it by hand to claim 100 %."""
    for totals in [summary["totals"], *summary["slices"].values()]:
        graded = totals["graded"]
        totals["levels"] = {"acceptable": 0, "correct": graded, "unacceptable": 0}
    return summary


# ---------------------------------------------------------------- results without a cause
def test_a_summary_edited_to_full_marks_under_the_same_fingerprint_is_flagged(on_main, cli):
    summary = json.loads(on_main.read(SUMMARY))
    on_main.write(SUMMARY, json.dumps(_perfect(summary), indent=2, sort_keys=True) + "\n")
    on_main.commit("rules: 100 %")

    data, text = _diff(on_main, cli)
    rules = _cell(data, "labels/rules")
    assert rules["status"] == "changed without a cause"
    assert rules["unexplained"] == ["slices", "totals"]
    assert rules["fingerprint_changes"] == []
    assert _cell(data, "labels/mini")["unexplained"] == []
    assert "Results changed without a cause:** labels/rules." in text.replace("\\/", "/")
    assert "🚨 results changed without a cause" in _row(text, "labels/rules")
    assert "identical results" not in _row(text, "labels/rules")

    # The same edit seen from a fork, where only the summaries can be read.
    _as_a_fork(on_main)
    data, text = _diff(on_main, cli)
    assert data["mode"] == "summaries"
    rules = _cell(data, "labels/rules")
    assert rules["status"] == "changed without a cause"
    assert rules["unexplained"] == ["slices", "totals"]
    assert rules["overall"]["head"]["pass_rate"] == 1.0
    row = _row(text, "labels/rules")
    assert row.startswith("| labels/rules | changed without a cause | 50.0% → 100.0% |")
    assert "🚨 results changed without a cause" in row and "identical" not in row


def test_results_that_moved_with_their_fingerprint_are_not_flagged(on_main, cli):
    on_main.write(
        "registry/rubrics/labels.yaml", on_main.read("registry/rubrics/labels.yaml").replace(*LAXER)
    )
    assert cli(on_main, "run").code == 0
    on_main.commit("a laxer rubric")
    data, text = _diff(on_main, cli)
    assert all(c["unexplained"] == [] for c in data["cells"])
    assert "without a cause" not in text


# ---------------------------------------------------------------- the policy, from summaries
def test_the_summaries_only_diff_computes_the_recommendation_on_each_side(on_main, cli, server):
    # Base: the model labels 16 of 20 right and is recommended. Head: it answers "b" to
    # everything, fails the gate on "common", and the rules baseline is recommended.
    server.responder = lambda request: json.dumps({"label": "b"})
    pin = "registry/models/mini.yaml"
    on_main.write(pin, on_main.read(pin).replace("temperature: 0", "temperature: 0.9"))
    assert cli(on_main, "run").code == 0
    on_main.commit("a warmer pin")
    full, _ = _diff(on_main, cli)
    assert full["selections"][0]["recommended"] == ["mini", "rules"]

    _as_a_fork(on_main)
    data, text = _diff(on_main, cli)
    assert data["mode"] == "summaries"
    # One sample an item and no clusters: the summaries give the full diff's decision.
    assert data["selections"] == full["selections"]
    assert data["selections"][0]["gates"]  # the model's gate on "common" went from pass to fail
    assert (
        "| Message labelling | rules → rules (unchanged) | mini → rules | no | unchanged |" in text
    )


# ---------------------------------------------------------------- the ruler and the model
def test_a_pr_that_only_loosens_the_rubric_shows_the_ruler_and_no_better(on_main, cli):
    on_main.write(
        "registry/rubrics/labels.yaml", on_main.read("registry/rubrics/labels.yaml").replace(*LAXER)
    )
    assert cli(on_main, "run").code == 0
    on_main.commit("a laxer rubric")
    data, text = _diff(on_main, cli)

    rules = _cell(data, "labels/rules")
    assert rules["ruler_changed"] is True
    # Head against base is significant (10 items flip on 20) but is all the ruler's doing.
    assert next(s for s in rules["slices"] if s["slice"] == "all")["verdict"] == "better"
    cf = rules["counterfactual"]
    assert (cf["ruler"], cf["model"]) == (0.5, 0.0)
    assert {s["verdict"] for s in cf["model_slices"]} == {"no detectable difference"}
    row = _row(text, "labels/rules")
    assert "ruler: +50.0 pts, model: +0.0 pts (no detectable difference" in row
    assert "✅ better" not in text
    assert data["selections"][0]["ruler_changed"] is True
    assert "| no | ⚠ rubric/graders changed |" in text


def test_a_pr_that_changes_rubric_and_model_separates_them(on_main, cli, server):
    def broken(request) -> str:  # the new model breaks its JSON on items ending 0, 2, 4, 6
        text = request.body["messages"][-1]["content"]
        return "not json" if text.endswith(("0", "2", "4", "6")) else json.dumps({"label": "a"})

    server.responder = broken
    pin = "registry/models/mini.yaml"
    on_main.write(pin, on_main.read(pin).replace("temperature: 0", "temperature: 0.9"))
    on_main.write(
        "registry/rubrics/labels.yaml", on_main.read("registry/rubrics/labels.yaml").replace(*LAXER)
    )
    assert cli(on_main, "run").code == 0
    on_main.commit("a laxer rubric and a warmer pin")
    data, text = _diff(on_main, cli)

    mini = _cell(data, "labels/mini")
    assert mini["fingerprint_changes"] == ["pin", "rubric"]
    cf = mini["counterfactual"]
    # Base 16/20; the base's responses under the laxer rubric 20/20; head 12/20.
    assert (cf["base"], cf["base_regraded"], cf["head"]) == (0.8, 1.0, 0.6)
    assert cf["ruler"] == pytest.approx(0.2) and cf["model"] == pytest.approx(-0.4)
    assert next(s for s in cf["model_slices"] if s["slice"] == "all")["verdict"] == "worse"
    assert "ruler: +20.0 pts, model: -40.0 pts (🔻 worse)" in _row(text, "labels/mini")
    assert "not the model's alone (rubric changed)" in text


def test_without_the_responses_a_rubric_change_is_not_attributable(on_main, cli):
    on_main.write(
        "registry/rubrics/labels.yaml", on_main.read("registry/rubrics/labels.yaml").replace(*LAXER)
    )
    assert cli(on_main, "run").code == 0
    on_main.commit("a laxer rubric")
    _as_a_fork(on_main)
    data, text = _diff(on_main, cli)
    rules = _cell(data, "labels/rules")
    assert rules["ruler_changed"] is True and rules["counterfactual"] is None
    assert "not attributable" in _row(text, "labels/rules")
    assert "| no | ⚠ rubric/graders changed |" in text


def test_the_verdicts_render_from_any_valid_document():
    """The comment job renders a diff made by the pull request's own job: whatever sits
    in the fields these verdicts read, the document is refused, or it renders as
    Markdown, never a crash."""
    from test_diff_comment import _diff_data, _documents

    model = {
        "slice": "all",
        "n": 20,
        "diff": -0.4,
        "lo": -0.6,
        "hi": -0.2,
        "only_base": 8,
        "only_head": 0,
        "p_adjusted": 0.01,
        "verdict": "worse",
        "mde": 0.3,
    }
    common = {"fingerprint_changes": ["rubric"], "overall": {"base": None, "head": None}}
    data = {
        **_diff_data(),
        "cells": [
            {"id": "t/a", "status": "changed without a cause", "unexplained": ["totals"], **common},
            {
                "id": "t/b",
                "status": "compared",
                "ruler_changed": True,
                "slices": [dict(model, verdict="better")],
                "counterfactual": {
                    "base": 0.6,
                    "base_regraded": 0.8,
                    "head": 0.4,
                    "ruler": 0.2,
                    "model": -0.4,
                    "model_slices": [model],
                },
                **common,
            },
            {
                "id": "t/c",
                "status": "compared",
                "ruler_changed": True,
                "counterfactual": None,
                **common,
            },
        ],
    }
    assert "model: -40.0 pts (🔻 worse)" in diff_markdown(diff_document(json.dumps(data)))
    strange = [None, "x", -1.5, 10**400, float("nan"), True, [], {}, [1], {"a": 1}]
    valid, refused = _documents(data, strange)
    assert valid and refused
    for document in valid:
        assert isinstance(diff_markdown(document), str)


@pytest.mark.parametrize("fork", [False, True], ids=["with data", "summaries only"])
def test_the_diff_says_what_changed_in_the_pin_and_the_prompt(on_main: Repo, cli, fork):
    pin, task = "registry/models/mini.yaml", "registry/tasks/labels.yaml"
    on_main.write(pin, on_main.read(pin).replace("temperature: 0", "temperature: 0.2"))
    on_main.write(
        task, on_main.read(task).replace("system: Answer with JSON.", "system: Reply in JSON.")
    )
    assert cli(on_main, "run").code == 0
    on_main.commit("warmer model, reworded system prompt")
    if fork:
        _as_a_fork(on_main)

    data, text = _diff(on_main, cli)

    assert _cell(data, "labels/mini")["config_changes"] == [
        {"what": "pin.params.temperature", "base": 0, "head": 0.2},
        {"what": "prompt.system", "base": "Answer with JSON.", "head": "Reply in JSON."},
    ]
    # The python baseline's pin did not change; its prompt did.
    assert [c["what"] for c in _cell(data, "labels/rules")["config_changes"]] == ["prompt.system"]
    assert "### What changed in the configuration" in text
    line = next(x for x in text.splitlines() if x.startswith("- labels/mini:"))
    shown = line.replace("\\", "")  # as GitHub renders the escaped text
    assert "pin.params.temperature: 0 → 0.2" in shown
    assert "prompt.system: “Answer with JSON.” → “Reply in JSON.”" in shown


def test_a_diff_without_configuration_changes_has_no_such_section(on_main: Repo, cli):
    on_main.write(EVALSET, items_jsonl(21))
    assert cli(on_main, "evalset", "add", str(on_main.root / EVALSET)).code == 0
    assert cli(on_main, "run").code == 0
    on_main.commit("one more item")

    data, text = _diff(on_main, cli)

    assert all("config_changes" not in c for c in data["cells"])
    assert "What changed in the configuration" not in text
