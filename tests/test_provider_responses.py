"""OpenAI Responses API pins: the request (instructions, input, renamed params), the
parsed output, usage (reasoning and cached tokens) and finish reasons, over loopback."""

from __future__ import annotations

import json

import pytest

from evalreg.providers.base import ProviderError

from conftest import LIVE_KEY, Repo, assert_refused
from support.llm_server import LLMServer, estimate_tokens
from support.provider_calls import completion, pin_of

PIN = "registry/models/mini.yaml"
RESPONSES_PIN = """\
schema_version: 1
provider: openai_responses
model: o4-mini-2025-04-16
base_url: {url}
api_key_env: OPENAI_API_KEY
params:
  max_tokens: 256
  reasoning_effort: low
  top_p: 1
price:
  input_per_mtok: 1.1
  cached_input_per_mtok: 0.275
  output_per_mtok: 4.4
  as_of: 2026-01-01
"""


def label_of_input(request) -> str:
    text = request.body["input"][-1]["content"]
    return json.dumps({"label": "a" if text.endswith(("1", "3", "5")) else "b"})


@pytest.fixture
def server(server_port: int):
    # On the session's port: the shared registry's pins point there.
    with LLMServer(api_key=LIVE_KEY, responder=label_of_input, port=server_port) as srv:
        yield srv


def test_a_responses_pin_runs_end_to_end_and_its_usage_is_priced(live, cli, server):
    live.write(PIN, RESPONSES_PIN.format(url=server.base_url))
    live.commit("the mini pin on the Responses API")
    server.reasoning_tokens = 7
    server.cached_tokens = 4
    result = cli(live, "run")
    assert result.code == 0, result.out + result.err
    sent = [r for r in server.requests if r.protocol == "responses"]
    assert len(sent) == 4
    for request in sent:
        assert request.path == "/v1/responses"
        assert request.headers["authorization"] == f"Bearer {LIVE_KEY}"
        body = request.body
        assert body is not None
        assert body["model"] == "o4-mini-2025-04-16"
        assert body["instructions"] == "Answer with JSON."
        assert body["input"] == [{"role": "user", "content": body["input"][0]["content"]}]
        assert body["input"][0]["content"].startswith("Message: message ")
        assert body["max_output_tokens"] == 256
        assert body["reasoning"] == {"effort": "low"}
        assert body["store"] is False and body["top_p"] == 1
        assert not {"messages", "max_tokens", "reasoning_effort", "system"} & set(body)
    records = []
    for segment in (live.root / "reports/store").glob("*.jsonl"):
        records += [json.loads(line) for line in segment.read_text().splitlines()]
    records = [r for r in records if r.get("provider") == "openai_responses"]
    assert len(records) == 4
    for record in records:
        response = record["response"]
        assert response["finish_reason"] == "completed"
        assert response["model"] == "o4-mini-2025-04-16"
        usage = response["usage"]
        assert usage["reasoning_tokens"] == 7 and usage["cached_input_tokens"] == 4
        assert usage["output_tokens"] == 7 + estimate_tokens(response["text"])
        assert json.loads(response["text"])["label"] in ("a", "b")
    items = []
    for path in (live.root / "reports/results").rglob("*.jsonl"):
        items += [json.loads(line) for line in path.read_text().splitlines()]
    by_key = {r["key"]: r["response"]["usage"] for r in records}
    priced = [item for item in items if item["key"] in by_key]
    assert len(priced) == 4
    for item in priced:
        usage = by_key[item["key"]]
        # The cached input at 0.275/M, the rest of the input at 1.1/M, the output at 4.4/M.
        expected = (usage["input_tokens"] - 4) * 1.1 + 4 * 0.275 + usage["output_tokens"] * 4.4
        assert item["cost_micro_usd"] == round(expected) > 0


# ---------------------------------------------------------------- parsing
@pytest.fixture
def responses_server():
    with LLMServer(api_key=LIVE_KEY) as srv:
        yield srv


@pytest.fixture
def pin(responses_server, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", LIVE_KEY)
    return pin_of(
        provider="openai_responses",
        model="gpt-5-mini-2025-08-07",
        base_url=responses_server.base_url,
        api_key_env="OPENAI_API_KEY",
        limits={"max_retries": 1},
    )


def test_reasoning_and_cached_tokens_are_read_from_their_details(responses_server, pin):
    responses_server.reasoning_tokens = 64
    responses_server.cached_tokens = 3
    got = completion(pin)
    assert (got.reasoning_tokens, got.cached_input_tokens) == (64, 3)
    assert got.output_tokens == 64 + len(got.text.split()) * 4 // 3
    assert got.finish_reason == "completed" and got.system_fingerprint is None
    assert json.loads(got.text)["echo"] == "Message: message 1"


def test_a_response_cut_at_max_output_tokens_keeps_its_text(responses_server, pin):
    responses_server.fail_next("truncated")
    got = completion(pin)
    assert got.finish_reason == "max_output_tokens" and got.text.startswith('{"echo"')


def test_a_response_the_content_filter_stopped_is_an_empty_answer_with_that_reason(
    responses_server, pin
):
    responses_server.fail_next("filtered")
    got = completion(pin)
    assert (got.text, got.finish_reason) == ("", "content_filter")
    assert len(responses_server.requests) == 1


def test_a_response_without_output_is_malformed_and_retried(responses_server, pin):
    responses_server.fail_next("missing_fields", times=2)
    with pytest.raises(ProviderError) as caught:
        completion(pin)
    assert (caught.value.kind, caught.value.attempts) == ("malformed", 2)
    assert "output" in str(caught.value)


@pytest.mark.parametrize(
    ("fault", "kind", "status", "message"),
    [
        ("context_length", "client", 400, "maximum context length"),
        ("content_filter", "client", 400, "flagged as potentially violating our usage policy"),
        ("401", "auth", 401, "Incorrect API key provided."),
    ],
)
def test_an_error_a_retry_cannot_fix_is_sent_once(
    responses_server, pin, fault, kind, status, message
):
    responses_server.fail_next(fault)
    with pytest.raises(ProviderError) as caught:
        completion(pin)
    error = caught.value
    assert (error.kind, error.status, error.attempts) == (kind, status, 1)
    assert message in str(error)


def test_throttling_is_retried_after_what_the_server_says(responses_server, pin):
    responses_server.fail_next("429", retry_after=0.05)
    got = completion(pin)
    assert got.finish_reason == "completed"
    assert [r.fault for r in responses_server.requests] == ["429", None]


def test_a_failed_response_is_a_server_error_retried(responses_server, pin):
    failed = {
        "status": "failed",
        "error": {"code": "server_error", "message": "The model failed to respond."},
        "output": [],
    }
    with pytest.raises(ProviderError) as caught:
        pin_provider_parse(failed)
    assert caught.value.kind == "server" and caught.value.retryable
    assert "server_error: The model failed to respond." in str(caught.value)


def test_tool_calls_without_text_are_the_answer_as_json():
    call = {"type": "function_call", "name": "route", "arguments": '{"queue":"a"}', "call_id": "c1"}
    got = pin_provider_parse({"status": "completed", "output": [call], "model": "m"})
    assert json.loads(got.text) == [call]


def pin_provider_parse(data: dict):
    from evalreg.providers.base import get_provider

    return get_provider("openai_responses").parse(data)


# ---------------------------------------------------------------- params
def edit(repo: Repo, text: str) -> None:
    repo.write(PIN, text)
    repo.commit("a responses pin")


def test_a_chat_name_and_its_responses_name_together_are_refused(repo, cli):
    text = RESPONSES_PIN.format(url="https://api.openai.com/v1")
    edit(repo, text.replace("  top_p: 1\n", "  top_p: 1\n  reasoning: {effort: high}\n"))
    assert_refused(
        repo,
        cli,
        "check",
        expect=(f"{PIN}:8:21: params.reasoning_effort: 'reasoning_effort' is sent as 'reasoning'",),
    )


def test_a_chat_only_param_is_refused_with_a_hint(repo, cli):
    text = RESPONSES_PIN.format(url="https://api.openai.com/v1")
    edit(repo, text.replace("  top_p: 1\n", "  max_completion_tokens: 5\n"))
    assert_refused(
        repo,
        cli,
        "check",
        expect=("'max_completion_tokens' is not a parameter evalreg knows for provider",),
    )
