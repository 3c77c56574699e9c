"""The ``similar`` grader: cosine similarity of embeddings from a pinned embedding model,
bought through the loopback server's ``/v1/embeddings`` and stored like a judge's answers."""

from __future__ import annotations

import json

import pytest

from evalreg.graders.llm_judge import JudgeFailed, similarity_verdict
from evalreg.providers.embeddings import EMBEDDINGS, cosine

from conftest import RUBRIC, Repo, assert_refused

EMBEDDER = """\
schema_version: 1
provider: openai
model: text-embedding-3-small
base_url: {url}
api_key_env: OPENAI_API_KEY
price:
  input_per_mtok: 0.02
  as_of: 2026-11-01
"""

SIMILAR = """\
  - id: close
    description: Reads like the expected answer.
    grader:
      type: similar
      embedder: embedder
      threshold: 0.9
"""


def embeddings(server) -> list:
    return [r for r in server.requests if r.path == "/v1/embeddings"]


@pytest.fixture
def similar(live: Repo, server) -> Repo:
    live.write("registry/models/embedder.yaml", EMBEDDER.format(url=server.base_url))
    live.write("registry/rubrics/labels.yaml", RUBRIC.replace("levels:", SIMILAR + "levels:"))
    live.commit("a similarity criterion, on a pinned embedding model")
    return live


def test_a_run_buys_the_embeddings_once_and_grades_by_cosine(similar: Repo, cli, server):
    result = cli(similar, "run", "--candidate", "mini", "--no-push")
    assert result.code == 0, result.out + result.err
    asked = embeddings(server)
    # two outputs and two references: identical requests are bought once, as judges' are
    assert len(asked) == 2
    first = asked[0].body
    assert first["model"] == "text-embedding-3-small" and first["encoding_format"] == "float"
    output, expected = first["input"]
    assert json.loads(output)["label"] in "ab"
    assert json.loads(expected) in ({"label": "a"}, {"label": "b"})
    items = (similar.root / "reports/results/labels/mini.items.jsonl").read_text().splitlines()
    verdicts = [json.loads(line)["criteria"]["close"] for line in items]
    # the stand-in answers every label right: the same words, cosine 1
    assert [v["passed"] for v in verdicts] == [True] * 4
    assert all(v["detail"] == "cosine 1.000 ≥ 0.9" for v in verdicts)
    assert all(json.loads(line)["judge_cost_micro_usd"] == 0 for line in items)
    # graded again, offline: nothing is asked twice
    assert cli(similar, "run", "--candidate", "mini", "--no-push", "--offline").code == 0
    assert len(embeddings(server)) == 2
    similar.commit("results")
    reproduced = cli(similar, "reproduce", "HEAD")
    assert reproduced.code == 0, reproduced.out + reproduced.err
    assert len(embeddings(server)) == 2


def test_a_wrong_answer_is_far_from_the_reference(similar: Repo, cli, server):
    server.responder = lambda request: json.dumps({"label": "zebra crossing nearby"})
    assert cli(similar, "run", "--candidate", "mini", "--no-push").code == 0
    items = (similar.root / "reports/results/labels/mini.items.jsonl").read_text().splitlines()
    verdicts = [json.loads(line)["criteria"]["close"] for line in items]
    assert not any(v["passed"] for v in verdicts)
    assert all(v["detail"].startswith("cosine 0.") and "< 0.9" in v["detail"] for v in verdicts)


def test_the_embedder_must_be_an_openai_pin(similar: Repo, cli, server):
    similar.write(
        "registry/models/embedder.yaml",
        EMBEDDER.format(url="http://127.0.0.1:9")
        .replace("provider: openai", "provider: anthropic")
        .replace("price:", "params: {max_tokens: 64}\nprice:"),
    )
    assert_refused(
        similar,
        cli,
        "check",
        expect=("embedder 'embedder' is a 'anthropic' pin", "registry/rubrics/labels.yaml:"),
    )


def test_cosine_and_the_verdict_read_the_stored_vectors():
    assert cosine([1.0, 0.0], [1.0, 0.0]) == 1.0
    assert cosine([1.0, 0.0], [0.0, 2.0]) == 0.0
    assert cosine([0.0, 0.0], [1.0, 1.0]) == 0.0
    stored = json.dumps([[1.0, 0.0], [0.0, 1.0], [0.6, 0.8]])
    verdict = similarity_verdict(stored, 0.75)  # the closest reference counts
    assert (verdict.passed, verdict.score, verdict.reason) == (False, 0.6, "cosine 0.600 < 0.75")
    assert similarity_verdict(stored, 0.6).passed
    with pytest.raises(JudgeFailed, match="unreadable embeddings"):
        similarity_verdict("[[1.0]]", 0.5)


def test_an_embedding_answer_reads_as_vectors_in_the_order_sent():
    answer = {
        "object": "list",
        "data": [
            {"object": "embedding", "index": 1, "embedding": [0.0, 1.0]},
            {"object": "embedding", "index": 0, "embedding": [1.0, 0.0]},
        ],
        "model": "text-embedding-3-small",
        "usage": {"prompt_tokens": 7, "total_tokens": 7},
    }
    completion = EMBEDDINGS.parse(answer)
    assert json.loads(completion.text) == [[1.0, 0.0], [0.0, 1.0]]
    assert completion.input_tokens == 7
