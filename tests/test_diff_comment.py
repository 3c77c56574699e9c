"""`evalreg diff` and `evalreg comment`, end to end: real repos, a loopback model server and a
GitHub-API stand-in over HTTP."""

from __future__ import annotations

import functools
import json
import shutil
from pathlib import Path

import jsonschema
import pytest
from markdown_it import MarkdownIt

from evalreg.cli import main
from evalreg.compare.diff_document import InvalidDiff, diff_document
from evalreg.report.diff_markdown import COMMENT_MARKER
from evalreg.report.diff_markdown import diff_markdown as render
from evalreg.report.reference import DIFF_SCHEMA_PATH
from evalreg.report.terminal import print_diff
from evalreg.text.escape import COMMENT_LIMIT, json_text

from conftest import Repo, replace_tree, template_from_live
from support.github_api import GitHubAPI
from support.llm_server import LLMServer

BOT = "github-actions[bot]"
TOKEN = "ghs_difftest0123456789"
HOSTILE = "<img src=x onerror=alert(1)> @octocat acme/registry#1 ![p](https://evil.test/p.png)"


def diff_markdown(data: dict) -> str:
    """The Markdown of the diff document ``data``, validated as the comment job does."""
    return render(diff_document(json.dumps(data)))


def md_tokens(text: str):
    return MarkdownIt("commonmark").enable("table").parse(text)


def worse(request) -> str:
    """The warmer pin's model: "b" for items 0-3, so wrong on items 1 and 3 (hostile text on 1)."""
    text = request.body["messages"][-1]["content"]
    label = "b" if text.endswith(("0", "1", "2", "3")) else "a"
    if text.endswith("1"):
        return json.dumps({"label": "b", "note": HOSTILE})
    return json.dumps({"label": label})


def _branch(live: Repo, server: LLMServer) -> None:
    assert main(["-C", str(live.root), "run"]) == 0
    live.commit("results on main")
    server.responder = worse
    live.git("checkout", "-q", "-b", "cheaper-model")
    live.write(
        "registry/models/mini.yaml",
        live.read("registry/models/mini.yaml").replace("temperature: 0", "temperature: 0.9"),
    )
    assert main(["-C", str(live.root), "run"]) == 0
    live.commit("a warmer pin")


@pytest.fixture(scope="module")
def branch_template(tmp_path_factory, live_template: Path, server_port: int) -> Path:
    """``branch``'s repository, built once for the module (two runs)."""
    return template_from_live(tmp_path_factory, live_template, server_port, _branch)


@pytest.fixture
def branch(live: Repo, server, branch_template: Path) -> Repo:
    """Results on main; a branch whose pin change makes the model worse on two items (this
    test's own copy; the server answers as the warmer pin's model)."""
    server.responder = worse
    return replace_tree(live, branch_template)


def test_diff_reports_flips_regressions_first_and_honest_verdicts(branch: Repo, cli):
    result = cli(branch, "diff", "main", "--format", "json")
    assert result.code == 0, result.err
    round_trips(result.out)
    data = json.loads(result.out)
    mini = next(c for c in data["cells"] if c["id"] == "labels/mini")
    assert mini["status"] == "compared"
    assert mini["fingerprint_changes"] == ["pin"]
    assert [f["item"] for f in mini["flips"]["regressions"]] == ["m-001", "m-003"]
    assert mini["flips"]["regressions"][0]["head_output"].startswith('{"label": "b"')
    # BASE's output is read from BASE's store, by the key in BASE's items file.
    base_output = mini["flips"]["regressions"][0]["base_output"]
    assert base_output is not None and not base_output.startswith('{"label": "b"')
    overall = next(s for s in mini["slices"] if s["slice"] == "all")
    assert overall["verdict"] == "no detectable difference"  # 4 items cannot show it
    # 4 items: the test run cannot detect any difference, and the diff says so.
    assert overall["mde"] is None
    assert overall["mde_note"] == "too few items to detect any difference"
    assert overall["family"] == "primary" and overall["level"] == pytest.approx(0.05)
    text = diff_markdown(data)
    assert "no detectable difference (too few items to detect any difference)" in text
    assert "the primary test" in text and "Holm-corrected" in text
    rules = next(c for c in data["cells"] if c["id"] == "labels/rules")
    assert rules["status"] == "unchanged"  # the same items file on both sides
    assert rules["flips"]["regressions_total"] == 0
    assert data["warnings"] == []
    assert "| labels/rules | unchanged |" in diff_markdown(data).replace("\\/", "/")


def test_diff_markdown_escapes_model_output_and_parses(branch: Repo, cli):
    text = cli(branch, "diff", "main").out
    assert "## evalreg: eval diff" in text
    assert "<img" not in text and "@octocat" not in text and "registry#1" not in text
    tokens = md_tokens(text)
    assert any(t.type == "table_open" for t in tokens)
    children = [c for t in tokens if t.children for c in t.children]
    assert not [c for c in children if c.type in ("image", "link_open")]
    html = [t.content for t in tokens if t.type in ("html_block", "html_inline")]
    assert all(h.strip().startswith(("<details>", "</details>")) for h in html)


def test_a_rubric_change_gets_a_counterfactual_and_a_loud_warning(branch: Repo, cli):
    branch.write(
        "registry/rubrics/labels.yaml",
        branch.read("registry/rubrics/labels.yaml").replace(
            "  correct: {require: all}", "  correct: {require: [valid_json]}"
        ),
    )
    assert cli(branch, "run").code == 0
    branch.commit("a laxer rubric")
    out = cli(branch, "diff", "main", "--format", "json").out
    round_trips(out)
    data = json.loads(out)
    mini = next(c for c in data["cells"] if c["id"] == "labels/mini")
    cf = mini["counterfactual"]
    assert cf["base"] == 1.0 and cf["head"] == 1.0
    assert cf["ruler"] == 0.0 and cf["model"] == 0.0
    rules = next(c for c in data["cells"] if c["id"] == "labels/rules")
    assert rules["counterfactual"]["ruler"] == 0.5  # the laxer rubric alone lifts the rules
    assert "The rubric of labels/mini changed" in " ".join(data["warnings"])
    assert "Evidence changed" in diff_markdown(data)


def test_diff_against_the_merge_base_not_the_moving_tip(branch: Repo, cli):
    branch.git("checkout", "-q", "main")
    branch.write("notes.txt", "unrelated work on main")
    tip = branch.commit("main moves on")
    branch.git("checkout", "-q", "cheaper-model")
    data = json.loads(cli(branch, "diff", "main", "--format", "json").out)
    assert data["base"]["rev"] != tip
    assert data["base"]["rev"] == branch.git("merge-base", "main", "HEAD").strip()


def test_the_markdown_always_fits_the_comment_limit():
    flips = [
        {
            "item": f"item-{i}",
            "tags": ["common"],
            "base_level": "correct",
            "head_level": "unacceptable",
            "failed_criteria": ["label"],
            "input": "x" * 300,
            "base_output": "y" * 300,
            "head_output": "`" * 300,
        }
        for i in range(20)
    ]
    cell = {
        "id": "t/c",
        "status": "compared",
        "fingerprint_changes": ["pin"],
        "unexplained": [],
        "ruler_changed": False,
        "overall": {"base": {}, "head": {}},
        "slices": [
            {
                "slice": f"s{i}",
                "n": 10,
                "diff": -0.1,
                "lo": -0.2,
                "hi": 0.0,
                "only_base": 1,
                "only_head": 0,
                "p_adjusted": 0.5,
                "verdict": "no detectable difference",
                "mde": 0.3,
            }
            for i in range(50)
        ],
        "flips": {
            "regressions_total": 500,
            "improvements_total": 0,
            "regressions": flips,
            "improvements": [],
            "changed_items": {"count": 0, "ids": []},
            "added_items": 0,
            "removed_items": 0,
        },
    }
    data = {
        **_diff_data(),
        "snippets": True,
        "warnings": [],
        "selections": [],
        "cells": [dict(cell, id=f"t/c{i}") for i in range(60)],
    }
    text = diff_markdown(data)
    assert len(text) <= COMMENT_LIMIT - 200
    assert "cut to fit" in text
    assert text.count("<details>") == text.count("</details>")
    assert text.count("\n```") % 2 == 0


# ---------------------------------------------------------------- the sticky comment
@pytest.fixture
def github(branch: Repo, monkeypatch, tmp_path):
    with GitHubAPI(tokens={TOKEN: BOT}) as gh:
        head = branch.git("rev-parse", "HEAD").strip()
        gh.add_pull(12, head)
        monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
        monkeypatch.setenv("GITHUB_REPOSITORY", gh.repository)
        monkeypatch.setenv("GITHUB_API_URL", gh.url)
        monkeypatch.delenv("GITHUB_EVENT_PATH", raising=False)
        yield gh, head


def test_comment_is_created_then_updated_in_place(branch: Repo, cli, github, tmp_path):
    gh, head = github
    diff_file = tmp_path / "diff.json"
    assert cli(branch, "diff", "main", "--format", "json", "-o", str(diff_file)).code == 0
    first = cli(branch, "comment", "--diff", str(diff_file), "--pr", "12", "--head-sha", head)
    assert first.code == 0, first.err
    assert "created comment on #12" in first.out
    [comment] = gh.comments(12)
    assert comment.body.startswith(COMMENT_MARKER)
    assert "<img" not in comment.body

    second = cli(branch, "comment", "--diff", str(diff_file), "--pr", "12", "--head-sha", head)
    assert "unchanged comment on #12" in second.out
    data = json.loads(diff_file.read_text())
    data["warnings"] = ["something new"]
    diff_file.write_text(json.dumps(data))
    third = cli(branch, "comment", "--diff", str(diff_file), "--pr", "12", "--head-sha", head)
    assert "updated comment on #12" in third.out
    assert len(gh.comments(12)) == 1


def test_a_dry_run_prints_the_exact_body_offline_without_a_token(
    branch: Repo, cli, github, tmp_path, monkeypatch
):
    gh, head = github
    diff_file = tmp_path / "diff.json"
    assert cli(branch, "diff", "main", "--format", "json", "-o", str(diff_file)).code == 0
    args = ("comment", "--diff", str(diff_file), "--pr", "12", "--head-sha", head)
    with monkeypatch.context() as offline:
        for name in ("GITHUB_TOKEN", "GITHUB_REPOSITORY", "GITHUB_API_URL", "GITHUB_EVENT_PATH"):
            offline.delenv(name, raising=False)
        dry = cli(branch, *args, "--dry-run")
        rendered = cli(branch, "diff", "main", "--format", "comment")
    assert dry.code == 0, dry.err
    assert gh.requests == []  # nothing asked of GitHub, with or without a token
    assert cli(branch, *args).code == 0
    [posted] = gh.comments(12)
    assert dry.out == posted.body  # the same bytes, the sticky marker first
    assert dry.out.startswith(COMMENT_MARKER + "\n")
    assert rendered.code == 0 and rendered.out == posted.body


def test_the_sticky_comment_is_found_on_page_two_past_a_fake_marker(
    branch: Repo, cli, github, tmp_path
):
    gh, head = github
    diff_file = tmp_path / "diff.json"
    cli(branch, "diff", "main", "--format", "json", "-o", str(diff_file))
    cli(branch, "comment", "--diff", str(diff_file), "--pr", "12", "--head-sha", head)
    for i in range(120):
        gh.add_comment(12, f"review note {i}", login="someone")
    gh.add_comment(12, COMMENT_MARKER + " I am not the bot", login="mallory")
    data = json.loads(diff_file.read_text())
    data["warnings"] = ["second push"]
    diff_file.write_text(json.dumps(data))
    result = cli(branch, "comment", "--diff", str(diff_file), "--pr", "12", "--head-sha", head)
    assert "updated comment on #12" in result.out
    ours = [c for c in gh.comments(12) if c.login == BOT]
    assert len(ours) == 1 and "second push" in ours[0].body
    assert next(c for c in gh.comments(12) if c.login == "mallory").body.endswith("not the bot")


def test_comments_that_do_not_start_with_the_marker_or_are_not_the_bots_stay_untouched(
    branch: Repo, cli, github, tmp_path
):
    gh, head = github
    quoting = gh.add_comment(12, f"The PR body reads:\n> {COMMENT_MARKER}", login=BOT)
    human = gh.add_comment(12, f"{COMMENT_MARKER}\nmy own notes", login="alice")
    diff_file = tmp_path / "diff.json"
    assert cli(branch, "diff", "main", "--format", "json", "-o", str(diff_file)).code == 0
    result = cli(branch, "comment", "--diff", str(diff_file), "--pr", "12", "--head-sha", head)
    assert "created comment on #12" in result.out
    first, second, ours = gh.comments(12)
    assert (first.body, second.body) == (quoting.body, human.body)
    assert ours.login == BOT and ours.body.startswith(COMMENT_MARKER)
    assert [w.method for w in gh.writes()] == ["POST"]


def test_a_rate_limit_is_waited_out(branch: Repo, cli, github, tmp_path):
    gh, head = github
    diff_file = tmp_path / "diff.json"
    cli(branch, "diff", "main", "--format", "json", "-o", str(diff_file))
    gh.rate_limit_next(1, status=403, retry_after=1)
    result = cli(branch, "comment", "--diff", str(diff_file), "--pr", "12", "--head-sha", head)
    assert result.code == 0, result.err
    assert len(gh.comments(12)) == 1


def test_a_moved_head_is_not_commented(branch: Repo, cli, github, tmp_path):
    gh, head = github
    gh.add_pull(12, "f" * 40)
    diff_file = tmp_path / "diff.json"
    cli(branch, "diff", "main", "--format", "json", "-o", str(diff_file))
    result = cli(branch, "comment", "--diff", str(diff_file), "--pr", "12", "--head-sha", head)
    assert result.code == 0
    assert "has moved past" in result.out
    assert gh.writes() == []


def test_the_pr_is_resolved_from_the_head_sha(branch: Repo, cli, github, tmp_path):
    gh, head = github
    diff_file = tmp_path / "diff.json"
    cli(branch, "diff", "main", "--format", "json", "-o", str(diff_file))
    result = cli(branch, "comment", "--diff", str(diff_file), "--pr", "0", "--head-sha", head)
    assert result.code == 0, result.err
    assert len(gh.comments(12)) == 1


def test_a_forged_diff_file_is_refused(branch: Repo, cli, github, tmp_path):
    gh, head = github
    bad = tmp_path / "diff.json"
    bad.write_text('["not", "a", "diff"]')
    result = cli(branch, "comment", "--diff", str(bad), "--pr", "12", "--head-sha", head)
    assert result.code == 2
    assert "not an evalreg diff" in result.err
    assert gh.writes() == []


def test_redacted_fields_never_reach_the_diff(branch: Repo, cli):
    branch.write(
        "registry/tasks/labels.yaml",
        branch.read("registry/tasks/labels.yaml") + "redact: [input.text, output.note]\n",
    )
    states = {c["cell"]: c["state"] for c in json.loads(cli(branch, "status", "--json").out)}
    assert set(states.values()) == {"fresh"}  # redaction is display only
    data = json.loads(cli(branch, "diff", "main", "--format", "json").out)
    mini = next(c for c in data["cells"] if c["id"] == "labels/mini")
    flip = mini["flips"]["regressions"][0]
    assert flip["input"] == '{"text": "[redacted]"}'
    assert "onerror" not in flip["head_output"] and "[redacted]" in flip["head_output"]


def _diff_data() -> dict:
    flip = {
        "item": "m-001",
        "tags": ["common"],
        "base_level": "correct",
        "head_level": "unacceptable",
        "failed_criteria": ["label"],
        "input": "x",
        "base_output": "y",
        "head_output": "z",
    }
    return {
        "schema_version": 1,
        "base": {
            "label": "main",
            "rev": "a" * 40,
            "commit": "a" * 40,
            "subject": "s",
            "merge_base": True,
        },
        "head": {
            "label": "pr",
            "rev": None,
            "commit": "b" * 40,
            "subject": "t",
            "uncommitted": True,
        },
        "reproduction": {"status": "failed", "reason": "r"},
        "check": {
            "ok": False,
            "exit_code": 1,
            "findings": [{"path": "p", "line": 2, "col": 1, "message": "m", "severity": "finding"}],
            "remote": None,
        },
        "remote_objects": {
            "remote": "r",
            "checked": 3,
            "missing": [{"path": "p", "md5": "m"}],
            "error": None,
        },
        "dvc_remote": {
            "base": {"default": "a", "remotes": {"a": "u"}},
            "head": {"default": "b", "remotes": {"b": "v"}},
            "changed": True,
        },
        "data_unavailable": ["evalsets/x.jsonl"],
        "snippets": False,
        "warnings": ["w"],
        "selections": [
            {
                "id": "s",
                "use_case": "u",
                "declared": ["a", "b"],
                "recommended": ["a", None],
                "waiver": [False, True],
                "waivers": [None, {"candidate": "b", "approver": "x", "date": "d", "reason": "y"}],
                "policy_changed": True,
                "ruler_changed": False,
                "gates": [{"candidate": "a", "gate": "g", "before": "pass", "after": "fail"}],
            }
        ],
        "cells": [
            {
                "id": "t/c",
                "status": "compared",
                "fingerprint_changes": ["pin"],
                "unexplained": [],
                "ruler_changed": True,
                "overall": {"base": {"pass_rate": 0.5}, "head": {"pass_rate": 0.4}},
                "slices": [
                    {
                        "slice": "all",
                        "n": 10,
                        "diff": -0.1,
                        "lo": -0.2,
                        "hi": 0.0,
                        "only_base": 1,
                        "only_head": 0,
                        "p_adjusted": 0.5,
                        "verdict": "worse",
                        "mde": 0.3,
                    }
                ],
                "flips": {
                    "regressions_total": 1,
                    "improvements_total": 0,
                    "regressions": [flip],
                    "improvements": [],
                    "changed_items": {"count": 1, "ids": ["m-009"]},
                    "added_items": 2,
                    "removed_items": 1,
                },
                "counterfactual": {
                    "base": 0.5,
                    "base_regraded": 0.6,
                    "head": 0.4,
                    "ruler": 0.1,
                    "model": -0.2,
                    "model_slices": [],
                },
            }
        ],
    }


def _paths(value, path=()):
    yield path
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _paths(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _paths(v, (*path, i))


def _replaced(data, path, new):
    if not path:
        return new
    out = json.loads(json.dumps(data))
    node = out
    for step in path[:-1]:
        node = node[step]
    node[path[-1]] = new
    return out


def _documents(data: dict, strange: list) -> tuple[list, int]:
    """Each of ``strange`` in each place of ``data``: the documents that validate, and how
    many were refused (each with a message naming where)."""
    valid, refused = [], 0
    for path in list(_paths(data))[1:]:  # the top level is checked to be an object first
        for value in strange:
            try:
                valid.append(diff_document(json.dumps(_replaced(data, path, value))))
            except InvalidDiff as exc:
                assert str(exc) and "Traceback" not in str(exc)
                refused += 1
    return valid, refused


def test_any_json_in_any_place_is_refused_or_rendered():
    """The comment job renders a diff made by the pull request's own job: whatever value
    sits wherever in it, the document is refused with a message, or it validates and
    renders as Markdown within the limit, never a crash."""
    data = _diff_data()
    assert diff_markdown(data)
    strange = [None, "x", -1.5, 10**400, float("nan"), True, [], {}, [1], {"a": 1}]
    valid, refused = _documents(data, strange)
    assert refused and valid
    for document in valid:
        text = render(document)
        assert isinstance(text, str) and len(text) <= 65_536


def test_the_terminal_view_takes_any_valid_document(capsys, narrow):
    valid, _ = _documents(_diff_data(), [None, "x", 10**400, float("nan"), True, [], {}, [1]])
    for document in valid:
        print_diff(document)
    assert "Cells" in capsys.readouterr().out


def test_a_fork_without_the_dvc_data_gets_a_diff_of_the_summaries(branch: Repo, cli):
    full = json.loads(cli(branch, "diff", "main", "--format", "json").out)
    # A fork's pull request cannot read the team's remote: no eval set, record or response.
    shutil.rmtree(branch.root / ".dvc" / "cache")
    shutil.rmtree(branch.root / "dvc-storage")
    for path in list(branch.root.rglob("*.jsonl")):
        if path.with_name(path.name + ".dvc").exists() and path.name != "messages.jsonl":
            path.unlink()
    # With the eval set but no records or responses: the full, paired diff without snippets.
    result = cli(branch, "diff", "main", "--format", "json")
    assert result.code == 0, result.err
    paired_only = json.loads(result.out)
    assert "mode" not in paired_only
    mini = next(c for c in paired_only["cells"] if c["id"] == "labels/mini")
    assert [f["item"] for f in mini["flips"]["regressions"]] == ["m-001", "m-003"]
    assert mini["flips"]["regressions"][0]["head_output"] is None
    # Without the eval set either: the diff of the committed summaries.
    (branch.root / "evalsets/messages.jsonl").unlink()
    result = cli(branch, "diff", "main", "--format", "json")
    assert result.code == 0, result.err
    round_trips(result.out)
    data = json.loads(result.out)
    assert data["mode"] == "summaries"
    # The data is unreadable here, which is not a change of the evidence.
    assert "evalsets/messages.jsonl" in data["data_unavailable"]
    assert data["warnings"] == []
    mini = next(c for c in data["cells"] if c["id"] == "labels/mini")
    assert mini["status"] == "compared" and mini["fingerprint_changes"] == ["pin"]
    assert "flips" not in mini
    rules = next(c for c in data["cells"] if c["id"] == "labels/rules")
    assert rules["status"] == "unchanged"
    every = next(s for s in mini["slices"] if s["slice"] == "all")
    assert every["verdict"] == "untested" and every["p_adjusted"] is None
    # One sample an item: the per-sample rates are the item rates of the full diff.
    paired = next(c for c in full["cells"] if c["id"] == "labels/mini")
    assert mini["overall"] == {
        side: {k: v for k, v in paired["overall"][side].items() if k in mini["overall"][side]}
        for side in ("base", "head")
    }
    assert every["diff"] == pytest.approx(
        paired["overall"]["head"]["pass_rate"] - paired["overall"]["base"]["pass_rate"]
    )
    assert every["lo"] <= every["diff"] <= every["hi"]
    assert data["selections"][0]["declared"] == full["selections"][0]["declared"]
    text = cli(branch, "diff", "main").out
    assert "Compared from the committed summaries only" in text
    assert "Data not readable here" in text and "Evidence changed" not in text
    assert "not tested (summaries only)" in text
    assert any(t.type == "table_open" for t in md_tokens(text))


# ---------------------------------------------------------------- the whole decision
@functools.cache
def _diff_schema() -> jsonschema.Draft202012Validator:
    path = Path(__file__).resolve().parents[1] / DIFF_SCHEMA_PATH
    return jsonschema.Draft202012Validator(json.loads(path.read_text(encoding="utf-8")))


def round_trips(text: str) -> None:
    """The document ``evalreg diff --format json`` wrote validates against the models and
    the committed schema, and the models hold all of it: written back from them, it is the
    same bytes."""
    document = diff_document(text)
    assert json_text(document.model_dump(exclude_unset=True)) + "\n" == text
    assert [e.message for e in _diff_schema().iter_errors(json.loads(text))] == []


def _diff_json(cli, repo: Repo, *args: str) -> dict:
    result = cli(repo, "diff", "main", *args, "--format", "json")
    assert result.code == 0, result.err
    round_trips(result.out)
    return json.loads(result.out)


def _visible_summaries(markdown: str) -> list[str]:
    """The text GitHub shows on each ``<details>`` line: rendered as HTML, tags removed."""
    import html
    import re

    rendered = MarkdownIt("commonmark").enable("table").render(markdown)
    return [
        html.unescape(re.sub(r"<[^>]+>", "", found))
        for found in re.findall(r"<summary>(.*?)</summary>", rendered, flags=re.S)
    ]


def test_a_failed_check_is_stated_in_the_comment_with_its_message(branch: Repo, cli, tmp_path):
    # The warmer pin lost the lead: declaring it needs a waiver, and there is none.
    branch.write(
        "registry/selections/labels.yaml",
        branch.read("registry/selections/labels.yaml").replace("selected: rules", "selected: mini"),
    )
    branch.commit("declare the cheaper model, without a waiver")
    check = cli(branch, "check", "--json")
    assert check.code == 1, check.out
    (tmp_path / "check.json").write_text(check.out)
    data = _diff_json(cli, branch, "--check", str(tmp_path / "check.json"))
    assert data["check"]["ok"] is False and data["check"]["exit_code"] == 1
    [finding] = [f for f in data["check"]["findings"] if f["severity"] == "finding"]
    assert "add a waiver" in finding["message"]
    text = diff_markdown(data)
    assert "`evalreg check` failed** (exit 1)" in text
    assert "registry/selections/labels.yaml:" in text.replace("\\", "")
    assert "add a waiver for it" in text
    assert text.index("evalreg check` failed") < text.index("### Cells")


def test_check_output_that_is_not_check_output_is_refused(branch: Repo, cli, tmp_path):
    (tmp_path / "check.json").write_text('{"ok": true}')
    result = cli(branch, "diff", "main", "--check", str(tmp_path / "check.json"))
    assert result.code == 2 and "not the output of `evalreg check --json`" in result.err
    assert "Traceback" not in result.err


def test_a_waiver_shows_approver_reason_and_date(branch: Repo, cli):
    result = cli(
        branch, "select", "labels", "mini", "--reason", "cheaper at volume", "--approver", "Dana"
    )
    assert result.code == 0, result.err
    branch.commit("declare the warmer pin, waived")
    data = _diff_json(cli, branch)
    waiver = data["selections"][0]["waivers"][1]
    assert waiver["approver"] == "Dana" and waiver["reason"] == "cheaper at volume"
    assert waiver["candidate"] == "mini" and len(waiver["date"]) == 10
    text = diff_markdown(data)
    date = waiver["date"].replace("-", "\\-")
    assert f"mini approved by Dana on {date}: cheaper at volume" in text


def test_the_header_names_the_commits_compared_not_the_working_tree(branch: Repo, cli):
    base = branch.git("merge-base", "main", "HEAD").strip()
    head = branch.git("rev-parse", "HEAD").strip()
    data = _diff_json(cli, branch)
    assert data["base"]["commit"] == base and data["base"]["subject"] == "results on main"
    assert data["head"]["commit"] == head and data["head"]["subject"] == "a warmer pin"
    assert data["head"]["uncommitted"] is False
    text = diff_markdown(data)
    assert f"base `{base[:12]}` “results on main” (the merge-base with main)" in text
    assert f"head `{head[:12]}` “a warmer pin”." in text
    assert "working tree" not in text
    branch.write("registry/selections/labels.yaml", branch.read("registry/selections/labels.yaml"))
    branch.write("notes.txt", "not committed yet")
    text = diff_markdown(_diff_json(cli, branch))
    assert "plus uncommitted changes in the working tree" in text
    committed = diff_markdown(_diff_json(cli, branch, "HEAD"))
    assert "working tree" not in committed


def test_details_summaries_show_no_backslashes_on_github():
    data = _diff_data()
    data["cells"][0]["id"] = "route-v2.1/gpt-4.1-mini_(eu) <b>x</b> @octocat"
    text = diff_markdown(data)
    [summary] = _visible_summaries(text)
    assert "\\" not in summary
    assert summary.replace("\u200b", "") == (
        "route-v2.1/gpt-4.1-mini_(eu) <b>x</b> @octocat: 1 regressions, 0 improvements"
    )
    assert "@octocat" not in summary  # a zero-width space keeps it from pinging


def test_unreproduced_numbers_are_the_prs_claims_never_identical(branch: Repo, cli):
    text = cli(branch, "diff", "main").out
    assert "Not reproduced: these numbers are the pull request's own claims" in text
    assert text.index("Not reproduced") < text.index("### Cells")
    assert "identical results" not in text
    assert "| labels/rules | unchanged |" in text.replace("\\/", "/")
    failed = _diff_json(
        cli, branch, "--reproduction", "failed", "--reproduction-reason", "responses missing"
    )
    assert failed["reproduction"] == {"status": "failed", "reason": "responses missing"}
    text = diff_markdown(failed)
    assert "could not be reproduced here (responses missing)" in text
    assert "identical results" not in text
    reproduced = _diff_json(cli, branch, "--reproduction", "reproduced")
    assert reproduced["reproduction"] == {"status": "reproduced", "reason": ""}
    text = diff_markdown(reproduced)
    assert "Not reproduced" not in text and "identical results" in text
    assert _diff_json(cli, branch)["reproduction"] == {
        "status": "not_attempted",
        "reason": "evalreg diff was not told whether these results were reproduced",
    }


def test_a_changed_dvc_remote_is_named_in_the_diff_and_the_comment(branch: Repo, cli):
    assert _diff_json(cli, branch)["dvc_remote"]["changed"] is False
    config = branch.read(".dvc/config")
    branch.write(
        ".dvc/config",
        config
        + "['remote \"elsewhere\"']\n    url = https://bot:hunter2secret@dvc.evil.test/store\n",
    )
    branch.write(
        ".dvc/config", branch.read(".dvc/config").replace("remote = storage", "remote = elsewhere")
    )
    branch.commit("read the data from elsewhere")
    data = _diff_json(cli, branch)
    change = data["dvc_remote"]
    assert change["changed"] is True
    assert (change["base"]["default"], change["head"]["default"]) == ("storage", "elsewhere")
    assert change["head"]["remotes"]["elsewhere"] == "https://bot:[redacted]@dvc.evil.test/store"
    text = diff_markdown(data)
    assert "The DVC remote configuration changed" in text
    assert "default remote storage → elsewhere" in text
    assert "hunter2secret" not in text and "hunter2secret" not in json.dumps(data)
    assert text.index("DVC remote configuration changed") < text.index("### Cells")


def test_check_remote_finds_objects_the_remote_lacks_and_the_comment_says_so(
    branch: Repo, cli, tmp_path
):
    ok = cli(branch, "check", "--remote", "--json")
    remote = json.loads(ok.out)["remote"]
    assert remote["missing"] == [] and remote["checked"] >= 3 and remote["error"] is None
    # A results file whose object never reached the team's remote.
    [pointer] = sorted(branch.root.glob("reports/results/labels/mini.items.jsonl.dvc"))
    md5 = next(
        line.split(":")[1].strip() for line in pointer.read_text().splitlines() if "md5" in line
    )
    for found in (branch.root / "dvc-storage").rglob(md5[2:]):
        found.unlink()
    result = cli(branch, "check", "--remote", "--json")
    assert result.code == 1
    checked = json.loads(result.out)
    [missing] = checked["remote"]["missing"]
    assert (missing["path"], missing["md5"]) == ("reports/results/labels/mini.items.jsonl.dvc", md5)
    assert missing["introduced"]["commit"] == branch.git("rev-parse", "HEAD").strip()
    assert any(f"its DVC object (md5 {md5}) is not" in f["message"] for f in checked["findings"])
    plain = cli(branch, "check")
    assert "is not on the" not in plain.out  # only asked for
    (tmp_path / "check.json").write_text(result.out)
    data = _diff_json(cli, branch, "--check", str(tmp_path / "check.json"))
    assert data["remote_objects"]["missing"][0]["md5"] == md5
    text = diff_markdown(data)
    assert "are not on the team's remote" in text
    assert "A maintainer must run `evalreg run` (and push) before merging" in text


def test_check_remote_fails_when_the_remote_cannot_be_read(branch: Repo, cli):
    config = branch.read(".dvc/config")
    branch.write(".dvc/config", config.replace("remote = storage", "remote = nowhere"))
    result = cli(branch, "check", "--remote", "--json")
    assert result.code == 1
    data = json.loads(result.out)
    assert data["remote"]["error"] and data["remote"]["missing"] == []
    assert any("cannot tell whether" in f["message"] for f in data["findings"])


def test_a_registry_can_keep_snippets_out_of_comments(branch: Repo, cli):
    full = _diff_json(cli, branch)
    assert full["snippets"] is True
    mini = next(c for c in full["cells"] if c["id"] == "labels/mini")
    assert mini["flips"]["regressions"][0]["input"] is not None
    branch.write("registry/evalreg.yaml", "schema_version: 1\nprivacy:\n  snippets: false\n")
    data = _diff_json(cli, branch)
    assert data["snippets"] is False
    mini = next(c for c in data["cells"] if c["id"] == "labels/mini")
    flip = mini["flips"]["regressions"][0]
    assert flip["item"] == "m-001"
    assert (flip["input"], flip["base_output"], flip["head_output"]) == (None, None, None)
    text = diff_markdown(data)
    assert "Item text and model output are not shown" in text
    assert "| head output |" not in text and "onerror" not in text


def test_the_settings_file_is_strict(branch: Repo, cli):
    branch.write("registry/evalreg.yaml", "schema_version: 1\nprivacy:\n  snipets: false\n")
    result = cli(branch, "check")
    assert result.code == 2
    assert "registry/evalreg.yaml:3" in result.err and "Traceback" not in result.err


def test_init_can_turn_snippets_off_and_says_how_otherwise(cli, tmp_path):
    from evalreg.registry.loader import load_registry

    result = cli(None, "init", str(tmp_path / "private"), "--no-snippets")
    assert result.code == 0, result.err
    assert load_registry(tmp_path / "private").settings.privacy.snippets is False
    assert cli(tmp_path / "private", "check").code == 0
    result = cli(None, "init", str(tmp_path / "open"))
    assert result.code == 0, result.err
    assert "`privacy: {snippets: false}`" in result.out and "--no-snippets" in result.out
    assert load_registry(tmp_path / "open").settings.privacy.snippets is True


def test_the_posted_comment_states_the_check_and_the_reproduction(
    branch: Repo, cli, github, tmp_path
):
    gh, head = github
    branch.write(
        "registry/selections/labels.yaml",
        branch.read("registry/selections/labels.yaml").replace("selected: rules", "selected: mini"),
    )
    check = cli(branch, "check", "--json")
    (tmp_path / "check.json").write_text(check.out)
    diff_file = tmp_path / "diff.json"
    made = cli(
        branch,
        "diff",
        "main",
        "--format",
        "json",
        "-o",
        str(diff_file),
        "--check",
        str(tmp_path / "check.json"),
        "--reproduction",
        "not_attempted",
        "--reproduction-reason",
        "a fork cannot read the DVC remote",
    )
    assert made.code == 0, made.err
    result = cli(branch, "comment", "--diff", str(diff_file), "--pr", "12", "--head-sha", head)
    assert result.code == 0, result.err
    [comment] = gh.comments(12)
    body = comment.body
    assert (
        body.index("Not reproduced") < body.index("evalreg check` failed") < body.index("### Cells")
    )
    assert "a fork cannot read the DVC remote" in body and "add a waiver for it" in body
    assert "identical results" not in body


def test_the_terminal_view_fits_80_columns_a_row_per_cell(branch: Repo, cli, narrow):
    result = cli(branch, "diff", "main", "--format", "terminal")
    assert result.code == 0, result.err
    assert [line for line in result.out.splitlines() if len(line) > 80] == []
    rows = {line.split()[0]: line.split() for line in result.out.splitlines() if line.strip()}
    assert rows["mini"][1:5] == ["compared", "100.0%", "→", "50.0%"]
    assert rows["mini"][5] == "2/0"
    assert "Cells of labels" in result.out
    flips = " ".join(result.out.split())
    assert "Regressions of labels/mini (2): m-001 correct → acceptable, m-003 correct → " in flips
    assert "<img" not in result.out and "onerror" not in result.out  # no item text here
    # Piped (not a terminal), the same command writes the comment's Markdown.
    assert cli(branch, "diff", "main").out.startswith("## evalreg: eval diff")
