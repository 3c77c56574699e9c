"""LLM-as-judge and human grades, end to end on a real repo and a loopback model server."""

from __future__ import annotations

import json

import pytest

from evalreg.graders.llm_judge import JUDGE_INSTRUCTIONS, JudgeFailed, parse_verdict

from conftest import LIVE_KEY, Repo, label_of

MINI = "reports/results/labels/mini"
JUDGE_PIN = """\
schema_version: 1
provider: openai
model: judge-snapshot-2026-01-01
base_url: {url}
api_key_env: OPENAI_API_KEY
params:
  temperature: 0
price:
  input_per_mtok: 1.0
  output_per_mtok: 2.0
  as_of: 2026-01-01
"""
JUDGE_CRITERION = """\
  - id: tone
    description: The answer is calm and professional.
    grader:
      type: llm_judge
      judge: judge
      prompt_version: v1
      prompt: |
        Input: {{ input | tojson }}
        Answer: {{ output }}
        Criterion: {{ criterion }}
"""


def judge_or_label(request) -> str:
    if request.body["messages"][0]["content"] == JUDGE_INSTRUCTIONS:
        answer = request.body["messages"][1]["content"]
        if "message 2" in answer:
            return "I refuse to grade this."
        return json.dumps({"score": 0.9 if '"a"' in answer else 0.2, "reason": "ok"})
    return label_of(request)


@pytest.fixture
def judged(live: Repo, server) -> Repo:
    server.responder = judge_or_label
    live.write("registry/models/judge.yaml", JUDGE_PIN.format(url=server.base_url))
    live.write(
        "registry/rubrics/labels.yaml",
        live.read("registry/rubrics/labels.yaml").replace("levels:", JUDGE_CRITERION + "levels:"),
    )
    live.commit("a judged criterion")
    return live


def records(repo: Repo, prefix: str) -> list[dict]:
    return [json.loads(x) for x in repo.read(prefix + ".items.jsonl").splitlines()]


def judged_and_rated(repo: Repo, cli, server, reason: str) -> Repo:
    """``repo`` run with a judge criterion that gives ``reason`` for every response, then
    a human criterion that two raters graded (pass, fail) for item m-003 of ``mini``."""

    def judge(request) -> str:
        if request.body["messages"][0]["content"] == JUDGE_INSTRUCTIONS:
            return json.dumps({"score": 0.9, "reason": reason})
        return label_of(request)

    server.responder = judge
    repo.write("registry/models/judge.yaml", JUDGE_PIN.format(url=server.base_url))
    repo.write(
        "registry/rubrics/labels.yaml",
        repo.read("registry/rubrics/labels.yaml").replace("levels:", JUDGE_CRITERION + "levels:"),
    )
    assert cli(repo, "run").code == 0
    key = next(r["key"] for r in records(repo, MINI) if r["item"] == "m-003")
    repo.write("grades/tone.csv", f"key,alice,bob\n{key},pass,fail\n")
    repo.write(
        "registry/rubrics/labels.yaml",
        repo.read("registry/rubrics/labels.yaml").replace(
            "levels:",
            "  - id: tone_human\n    description: Humans agree the tone is right.\n"
            "    grader:\n      type: human\n      file: grades/tone.csv\n"
            "levels:",
        ),
    )
    assert cli(repo, "run", "--offline").code == 0
    return repo


def test_judge_verdicts_are_bought_stored_and_replayed(judged: Repo, cli, server):
    assert cli(judged, "run").code == 1  # one judge verdict is unusable: an error, see below
    judge_requests = [
        r for r in server.requests if r.body["messages"][0]["content"] == JUDGE_INSTRUCTIONS
    ]
    # 4 items x 2 candidates, but where both answered alike the judge is asked once.
    assert len(judge_requests) == 6
    assert {r.body["model"] for r in judge_requests} == {"judge-snapshot-2026-01-01"}
    mini = records(judged, MINI)
    assert mini[1]["criteria"]["tone"] == {"passed": True, "score": 0.9, "detail": "ok"}
    assert mini[0]["criteria"]["tone"]["passed"] is False  # label "b": the judge scores 0.2
    judged.commit("judged results")
    count = server.count()
    assert cli(judged, "run", "--force", "--offline").code == 1
    assert server.count() == count  # judge verdicts replay from the store


def test_a_judge_failure_is_an_error_not_a_failed_item(judged: Repo, cli):
    cli(judged, "run")
    broken = [r for r in records(judged, MINI) if r["item"] == "m-002"]
    assert broken[0]["error"].startswith("judge: unparseable verdict")
    assert broken[0]["level"] is None
    totals = json.loads(judged.read(MINI + ".json"))["totals"]
    assert totals["errors"] == 1 and totals["graded"] == 3


def test_the_judge_prompt_is_part_of_the_fingerprint(judged: Repo, cli):
    cli(judged, "run")
    judged.commit("results")
    judged.write(
        "registry/rubrics/labels.yaml",
        judged.read("registry/rubrics/labels.yaml").replace(
            "prompt_version: v1", "prompt_version: v2"
        ),
    )
    states = {c["cell"]: c["reasons"] for c in json.loads(cli(judged, "status", "--json").out)}
    assert any("changed: rubric" in r for r in states["labels/mini"])


def test_human_grades_calibrate_the_judge_and_can_be_gated(judged: Repo, cli):
    cli(judged, "run")
    rows = ["key,alice,bob"]
    for r in records(judged, MINI) + records(judged, "reports/results/labels/rules"):
        if r["error"] is None:
            human = "pass" if r["criteria"]["tone"]["passed"] else "fail"
            other = human if r["item"] != "m-003" else ("fail" if human == "pass" else "pass")
            rows.append(f"{r['key']},{human},{other}")
    judged.write("grades/tone.csv", "\n".join(rows) + "\n")
    judged.write(
        "registry/rubrics/labels.yaml",
        judged.read("registry/rubrics/labels.yaml").replace(
            "levels:",
            "  - id: tone_human\n    description: Humans agree the tone is right.\n"
            "    grader:\n      type: human\n      file: grades/tone.csv\n"
            "      calibrates: tone\n      min_raters: 2\n"
            "levels:",
        ),
    )
    judged.write(
        "registry/selections/labels.yaml",
        judged.read("registry/selections/labels.yaml").replace(
            "  gates:\n",
            "  gates:\n    - metric: judge_human_agreement\n      min: 0.5\n",
        ),
    )
    assert cli(judged, "run", "--offline", "--force").code == 1  # the judge error remains
    assert cli(judged, "report").code == 0
    page = judged.read("reports/labels.md")
    assert "### Judge calibration" in page and "Cohen's kappa" in page
    assert "Agreement among the human raters of `grades/tone.csv`" in page
    mini = records(judged, MINI)
    assert mini[1]["criteria"]["tone_human"]["detail"] == "human majority"


def test_check_rejects_unknown_judge_prompt_variables_and_bad_calibration(judged: Repo, cli):
    judged.write(
        "registry/rubrics/labels.yaml",
        judged.read("registry/rubrics/labels.yaml")
        .replace("{{ criterion }}", "{{ secret }}")
        .replace(
            "levels:",
            "  - id: h\n    description: d\n    grader:\n      type: human\n"
            "      file: registry/models/judge.yaml\n      calibrates: label\nlevels:",
        ),
    )
    result = cli(judged, "check")
    assert result.code == 2
    assert "judge prompt uses secret; it may use criterion, expected, input, output" in result.err
    assert "calibrates 'label', which is not an llm_judge criterion of this rubric" in result.err


@pytest.mark.parametrize(
    ("text", "passed", "score"),
    [
        ('{"score": 0.7, "reason": "fine"}', True, 0.7),
        ('```json\n{"pass": false}\n```', False, 0.0),
        ('Verdict: {"verdict": "PASS"}', True, 1.0),
    ],
)
def test_verdict_forms(text, passed, score):
    v = parse_verdict(text, 0.5)
    assert (v.passed, v.score) == (passed, score)


@pytest.mark.parametrize("text", ["yes", '{"score": 7}', '{"reason": "no score"}', "[1]"])
def test_unusable_verdicts_raise(text):
    with pytest.raises(JudgeFailed):
        parse_verdict(text, 0.5)


def test_the_judge_key_never_reaches_disk(judged: Repo, cli):
    cli(judged, "run")
    secret = LIVE_KEY.encode()
    assert [p for p in judged.root.rglob("*") if p.is_file() and secret in p.read_bytes()] == []


def test_a_grades_line_nested_too_deep_is_named_not_a_traceback():
    from evalreg.errors import RegistryError
    from evalreg.graders.human import parse_grades

    data = b'{"key": "k", "ada": "pass"}\n{"key": ' + b"[" * 5000 + b"]" * 5000 + b"}\n"
    with pytest.raises(RegistryError) as caught:
        parse_grades(data, "grades/tone.jsonl")
    assert caught.value.findings[0].render() == (
        "grades/tone.jsonl:2: invalid JSON: nested too deep to read"
    )
