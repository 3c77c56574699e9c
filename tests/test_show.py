"""`evalreg show ITEM`: one item's input, each candidate's request as sent, its stored output
and every recorded verdict, in the terminal and as JSON, at the working tree or a revision."""

from __future__ import annotations

import json

import pytest
from test_judges_human import MINI, judged_and_rated, records

from conftest import Repo, assert_refused

LONG_REASON = (
    "The answer names the queue in a calm, professional voice and says nothing a customer "
    "could read as blame, which is what the criterion asks for."
)


@pytest.fixture
def ran(live: Repo, cli) -> Repo:
    assert cli(live, "run").code == 0
    live.commit("results")
    return live


def shown_json(repo: Repo, cli, *args: str) -> list[dict]:
    result = cli(repo, "show", *args, "--json")
    assert result.code == 0, result.err
    return json.loads(result.out)


def test_show_prints_the_input_each_request_output_and_verdict(ran: Repo, cli):
    result = cli(ran, "show", "m-002")
    assert result.code == 0, result.err
    out = result.out
    assert "m-002  Message labelling (labels)" in out
    assert '"text": "message 2"' in out and '"label": "b"' in out  # input and expected
    assert "[system] Answer with JSON.\n  [user] Message: message 2" in out
    assert "the same messages as rules" in out  # the second candidate's request is the same
    # The declared candidate first; each stored output and each criterion's verdict.
    assert out.index("rules (fresh, declared)") < out.index("mini (fresh)")
    assert '{"label": "a"}' in out  # the rules baseline
    assert '{"label":"b"}' in out or '{"label": "b"}' in out  # the model
    mini = next(r for r in records(ran, MINI) if r["item"] == "m-002")
    assert mini["level"] == "correct"
    section = out[out.index("mini (fresh)") :]
    assert "correct, score 1;" in section
    assert "label*" in section and "passed" in section


def test_show_json_carries_the_request_exactly_as_sent_and_the_records(ran: Repo, cli, server):
    [view] = shown_json(ran, cli, "m-001", "--candidate", "mini")
    [cand] = view["candidates"]
    assert (cand["id"], cand["state"], cand["declared"]) == ("mini", "fresh", False)
    [sample] = cand["samples"]
    sent = next(
        r.body for r in server.requests if r.body["messages"][-1]["content"] == "Message: message 1"
    )
    assert sample["request"] == sent
    assert cand["messages"] == sent["messages"]
    recorded = next(r for r in records(ran, MINI) if r["item"] == "m-001")
    assert sample["key"] == recorded["key"]
    assert (sample["level"], sample["latency_ms"], sample["tokens"]) == (
        recorded["level"],
        recorded["latency_ms"],
        recorded["tokens"],
    )
    verdicts = {c["id"]: (c["verdict"], c["detail"]) for c in sample["criteria"]}
    assert verdicts == {
        cid: ("passed" if v["passed"] else "failed", v["detail"])
        for cid, v in recorded["criteria"].items()
    }
    assert sample["output"] == json.dumps({"label": "a"})  # what the server answered
    assert view["item"]["input"] == {"text": "message 1"}
    assert view["revision"] == "working tree"


def test_judge_reasons_are_shown_whole_with_each_raters_grade(live: Repo, cli, server, narrow):
    judged_and_rated(live, cli, server, LONG_REASON)
    [view] = shown_json(live, cli, "m-003", "--candidate", "mini")
    criteria = {c["id"]: c for c in view["candidates"][0]["samples"][0]["criteria"]}
    assert criteria["tone"]["detail"] == LONG_REASON[:80]  # what the record keeps
    assert criteria["tone"]["judge_reason"] == LONG_REASON  # read from the judge's response
    assert criteria["tone"]["judge"] == "judge"
    assert criteria["tone_human"]["human"] == {"alice": True, "bob": False}
    assert criteria["tone_human"]["verdict"] == "passed"  # the majority: a tie passes
    text = cli(live, "show", "m-003", "--candidate", "mini").out
    assert " ".join(text.split()).count(" ".join(LONG_REASON.split())) == 1
    assert "alice pass, bob fail" in text
    assert max(len(line) for line in text.splitlines()) <= 80


def test_show_reads_a_revision_as_it_was(ran: Repo, cli):
    results = ran.git("rev-parse", "HEAD").strip()
    task = ran.read("registry/tasks/labels.yaml")
    ran.write("registry/tasks/labels.yaml", task.replace("Answer with JSON.", "JSON only."))
    stale = cli(ran, "show", "m-001", "--candidate", "mini").out
    assert "mini (stale)" in stale
    assert "stale (changed: task): the outputs below answered the request recorded then" in (
        " ".join(stale.split())
    )
    assert cli(ran, "run").code == 0
    ran.commit("a shorter system prompt")
    [now] = shown_json(ran, cli, "m-001", "--candidate", "mini")
    [then] = shown_json(ran, cli, "m-001", "--candidate", "mini", "--rev", results)
    assert now["candidates"][0]["messages"][0]["content"] == "JSON only."
    assert then["candidates"][0]["messages"][0]["content"] == "Answer with JSON."
    assert then["revision"] == f"revision {results[:12]}"
    assert then["candidates"][0]["samples"][0]["request"]["messages"][0]["content"] == (
        "Answer with JSON."
    )
    assert now["candidates"][0]["samples"][0]["key"] != then["candidates"][0]["samples"][0]["key"]


def test_a_revision_without_results_is_refused(ran: Repo, cli):
    before = ran.git("rev-parse", "HEAD~1").strip()
    assert_refused(ran, cli, "show", "m-001", "--rev", before, expect=("no recorded results",))
    assert_refused(ran, cli, "show", "m-001", "--rev", "nope", expect=("unknown revision 'nope'",))


def test_pending_cells_show_the_request_they_would_send(live: Repo, cli):
    [view] = shown_json(live, cli, "m-000")
    assert [(c["id"], c["state"], c["samples"]) for c in view["candidates"]] == [
        ("rules", "pending", []),
        ("mini", "pending", []),
    ]
    assert view["candidates"][1]["messages"][-1] == {
        "role": "user",
        "content": "Message: message 0",
    }
    assert "No recorded samples (pending: never run)." in cli(live, "show", "m-000").out


def test_unknown_names_are_refused_with_what_exists(ran: Repo, cli):
    assert_refused(
        ran, cli, "show", "m-01", expect=("no item 'm-01' in evalsets/messages.jsonl", "m-001")
    )
    assert_refused(ran, cli, "show", "m-001", "--candidate", "maxi", expect=("one of mini, rules",))
    assert_refused(ran, cli, "show", "m-001", "--use-case", "nope", expect=("one of labels",))
    assert_refused(ran, cli, "show", "m-001", "--task", "nope", expect=("one of labels",))
