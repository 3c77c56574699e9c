"""``evalreg drift`` on a real git + DVC repo, re-asking the loopback server."""

from __future__ import annotations

import json
from collections import Counter

from evalreg.canonical import canonical_bytes
from evalreg.compare.drift import (
    CellDrift,
    DriftReport,
    drift,
    drift_json,
    sample_keys,
)
from evalreg.graders.llm_judge import JUDGE_INSTRUCTIONS
from evalreg.report.drift import render_drift
from evalreg.store.segments import ResponseStore

from conftest import LIVE_KEY, Repo, label_of

MODEL = "gpt-4o-mini-2024-07-18"
MINI = "labels/mini"


def recorded(live: Repo, cli) -> ResponseStore:
    """Run every cell once against the server and commit the results; the store it wrote."""
    assert cli(live, "run", "--no-push").code == 0
    live.commit("results")
    return ResponseStore.open(live.root)


def mini(report: DriftReport) -> CellDrift:
    return next(c for c in report.cells if c.cell == MINI)


def test_an_unchanged_model_does_not_drift_and_the_store_is_untouched(live: Repo, cli, server):
    store = recorded(live, cli)
    before = live.snapshot()
    server.reset()

    report = drift(live.root)

    assert report.exit_code == 0
    cell = mini(report)
    assert (cell.population, len(cell.keys), cell.compared) == (4, 4, 4)
    assert (cell.exact, cell.same_level, cell.drifted) == (4, 4, False)
    assert not (cell.models or cell.fingerprints or cell.criteria or cell.errors)
    # Each recorded body went out byte for byte, and nothing was written anywhere.
    sent = sorted(r.raw for r in server.requests)
    assert sent == sorted(canonical_bytes(store.get(k)["request"]) for k in cell.keys)
    assert live.snapshot() == before
    assert live.git("status", "--porcelain") == ""
    assert "**No drift beyond the threshold in 1 cell asked.**" in render_drift(report)


def test_a_new_snapshot_under_the_same_name_is_reported(live: Repo, cli, server):
    recorded(live, cli)
    answered: list[str] = []

    def rolls_out_midway(request) -> str:
        answered.append(request.path)
        if len(answered) == 3:  # the provider switches snapshots half-way through the check
            server.fingerprint = "fp_new02"
            server.model_alias = {MODEL: "gpt-4o-mini-2025-02-01"}
        return label_of(request)

    server.responder = rolls_out_midway

    report = drift(live.root)

    cell = mini(report)
    assert cell.fingerprints == Counter({("fp_test01", "fp_new02"): 2})
    assert cell.models == Counter({(MODEL, "gpt-4o-mini-2025-02-01"): 2})
    assert (cell.same_level, cell.exact) == (4, 4)
    assert cell.reasons == ["the provider named a different model on 2 of 4 samples"]
    assert report.exit_code == 1
    markdown = render_drift(report)
    assert "- Returned model: `gpt-4o-mini-2024-07-18` → `gpt-4o-mini-2025-02-01` ×2" in markdown
    assert "- System fingerprint: `fp_test01` → `fp_new02` ×2" in markdown


def test_levels_that_flip_beyond_the_threshold_are_drift(live: Repo, cli, server):
    recorded(live, cli)

    def one_label_wrong(request) -> str:
        if request.body["messages"][-1]["content"].endswith("2"):
            return json.dumps({"label": "@admins | <b>see #12</b>"})
        return label_of(request)

    server.responder = one_label_wrong

    report = drift(live.root)

    cell = mini(report)
    assert (cell.compared, cell.same_level) == (4, 3)
    assert cell.levels == Counter({("correct", "acceptable"): 1})
    assert cell.criteria == Counter({"label": 1})
    assert report.exit_code == 1
    entry = json.loads(json.dumps(drift_json(report)))["cells"][0]
    assert (entry["cell"], entry["level_agreement_rate"]) == (MINI, 0.75)
    assert entry["level_changes"] == [{"from": "correct", "to": "acceptable", "count": 1}]
    assert render_drift(report) == FLIPPED_MARKDOWN
    # The same answers are within a looser threshold: reported, not drift.
    server.reset()
    lenient = drift(live.root, threshold=0.5)
    assert mini(lenient).levels == cell.levels
    assert (mini(lenient).drifted, lenient.exit_code) == (False, 0)


FLIPPED_MARKDOWN = """\
## evalreg: model drift

Re-asked up to 50 recorded requests a cell (seed 0) and compared each live response with the \
stored one. A cell drifts when the graded levels differ on more than 10.0% of its compared \
samples, or when the provider names a different model.

**🔻 Drift in 1 of 1 cell asked.**

| cell | pin | compared | same text | same level | model changes | fingerprint changes | \
not compared | drift |
|---|---|---|---|---|---|---|---|---|
| `labels/mini` | `mini` | 4 of 4 | 75.0% (30.1–95.4) | 75.0% (30.1–95.4) | 0 | 0 | 0 | \
🔻 drifted |

Skipped:

- `labels/rules`: a python pin runs code in this repository, whose source is part of the \
cell's fingerprint: it cannot drift under the same name

### `labels/mini`

- Drifted: levels differ on 25\\.0% of 4 compared samples \\(threshold 10\\.0%\\)
- Level changes: `correct` → `acceptable` ×1
- Criteria whose verdict differs: `label` ×1

| item | sample | stored level | live level | stored output | live output |
|---|---|---|---|---|---|
| `m-002` | 0 | `correct` | `acceptable` | \\{"label": "b"\\} | \
\\{"label": "\u200b@\u200badmins \\| &lt;b&gt;see \\#\u200b12&lt;/b&gt;"\\} |
"""


JUDGE_PIN = """\
schema_version: 1
provider: openai
model: judge-snapshot-2026-01-01
base_url: {url}
api_key_env: OPENAI_API_KEY
"""
JUDGE_CRITERION = """\
  - id: tone
    description: The answer is calm.
    grader:
      type: llm_judge
      judge: judge
      prompt_version: v1
      prompt: "Input: {{ input | tojson }} Answer: {{ output }}"
"""


def judging(answer):
    """A responder: the judge calls answers with an "a" calm; the model answers ``answer``."""

    def respond(request) -> str:
        if request.body["messages"][0]["content"] == JUDGE_INSTRUCTIONS:
            calm = '"a"' in request.body["messages"][1]["content"]
            return json.dumps({"score": 0.9 if calm else 0.2, "reason": "ok"})
        return answer(request)

    return respond


def b_becomes_a(request) -> str:
    recorded_answer = label_of(request)
    return json.dumps({"label": "a", "v": 2}) if '"b"' in recorded_answer else recorded_answer


def test_a_judged_criterion_grades_live_outputs_and_stores_nothing(live: Repo, cli, server):
    server.responder = judging(label_of)
    live.write("registry/models/judge.yaml", JUDGE_PIN.format(url=server.base_url))
    rubric = live.read("registry/rubrics/labels.yaml")
    live.write(
        "registry/rubrics/labels.yaml", rubric.replace("levels:", JUDGE_CRITERION + "levels:")
    )
    recorded(live, cli)
    before = live.snapshot()
    server.reset()
    server.responder = judging(b_becomes_a)

    cell = mini(drift(live.root))

    # Two answers went from "b" to "a": the label now fails them and the judge passes them.
    assert cell.criteria == Counter({"label": 2, "tone": 2})
    assert (cell.exact, cell.same_level, cell.drifted) == (2, 4, False)
    judged = [r for r in server.requests if r.body["messages"][0]["content"] == JUDGE_INSTRUCTIONS]
    assert len(judged) == 2  # the changed answers; unchanged ones replay the stored verdicts
    assert live.snapshot() == before


def test_the_same_seed_draws_the_same_sample(live: Repo, cli, server):
    recorded(live, cli)

    first = mini(drift(live.root, sample=2, seed=7))
    again = mini(drift(live.root, sample=2, seed=7))

    assert first.keys == again.keys
    assert len(first.keys) == 2 and first.compared == 2
    assert server.count() == 4 + 2 + 2


def test_the_sample_is_pinned_across_python_versions():
    keys = [f"{i:02d}" for i in range(10)]
    assert sample_keys(reversed(keys), 3, seed=0) == ["03", "05", "07"]
    assert sample_keys(keys, 3, seed=1) == ["00", "08", "09"]
    # A bigger sample keeps every key a smaller one drew.
    assert set(sample_keys(keys, 3, seed=0)) <= set(sample_keys(keys, 6, seed=0))
    assert sample_keys(keys, 50, seed=0) == keys


def test_a_registry_with_nothing_hosted_to_check_passes(repo: Repo):
    report = drift(repo.root)  # never run: the python baseline and a pending cell

    pending, baseline = report.cells
    assert pending.skipped == "no results yet: run evalreg run first"
    assert baseline.skipped is not None and baseline.skipped.startswith("a python pin")
    assert report.exit_code == 0
    assert "**Nothing to check:** no cell with results has a hosted model." in render_drift(report)


def test_a_missing_or_rejected_key_blocks_the_cell_and_never_reaches_the_report(
    live: Repo, cli, server, monkeypatch
):
    recorded(live, cli)
    accepted = drift(live.root)
    server.api_key = "sk-rotated-000000"  # the provider now rejects the key we send
    rejected = drift(live.root)
    monkeypatch.delenv("OPENAI_API_KEY")
    server.reset()
    missing = drift(live.root)

    # The first request is refused, so the other three are not sent (the pin's preflight).
    assert mini(rejected).errors == Counter({"auth 401": 1, "refused 401": 3})
    assert mini(rejected).blocked == "none of the 4 sampled requests was answered and graded"
    assert mini(missing).blocked == (
        f"environment variable OPENAI_API_KEY is not set: it holds the key for openai model {MODEL}"
    )
    assert server.count() == 0  # nothing is sent without a key
    # A check that could not run must not pass as "no drift".
    assert (accepted.exit_code, rejected.exit_code, missing.exit_code) == (0, 2, 2)
    markdown = render_drift(missing)
    assert "**⚠ 1 cell could not be checked:** see below." in markdown
    assert "- `labels/mini`: environment variable OPENAI\\_API\\_KEY is not set" in markdown
    for report in (accepted, rejected, missing):
        assert LIVE_KEY not in render_drift(report)
        assert LIVE_KEY not in json.dumps(drift_json(report))
        masked = LIVE_KEY[:3] + "****" + LIVE_KEY[-4:]  # how a provider echoes a bad key
        assert masked not in render_drift(report)
        assert masked not in json.dumps(drift_json(report))
