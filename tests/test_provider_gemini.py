"""``provider: gemini``: the Gemini API (the key in a header) and Vertex AI (application-default
credentials through google-auth, refreshed against a loopback token endpoint), through
``evalreg run``."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from evalreg import redaction
from evalreg.providers import get_provider
from evalreg.redaction import REDACTED
from evalreg.registry.schema import Pin

from conftest import Repo
from support.cloud_servers import GeminiServer, Request
from support.clouds import VERTEX, authorized_user_adc, gemini_pin, service_account_adc
from support.runs import stored_records as stored

API_KEY = "AIzaSy-loopback-gemini-key-3Hq7Vd"
PIN = "registry/models/mini.yaml"


def gemini_label(request: Request) -> str:
    text = request.body["contents"][-1]["parts"][0]["text"]
    return json.dumps({"label": "a" if text.endswith(("1", "3", "5")) else "b"})


@pytest.fixture
def gemini() -> Iterator[GeminiServer]:
    with GeminiServer(api_key=API_KEY, responder=gemini_label) as srv:
        yield srv


@pytest.fixture
def on_gemini(live: Repo, gemini: GeminiServer, monkeypatch) -> Repo:
    """The standard registry with its ``mini`` pin on the Gemini API stand-in."""
    monkeypatch.setenv("GEMINI_API_KEY", API_KEY)
    live.write(PIN, gemini_pin(gemini.root_url))
    live.commit("mini on gemini")
    return live


@pytest.fixture
def adc(gemini: GeminiServer, monkeypatch, tmp_path: Path) -> str:
    """Application-default credentials: a service account key file (outside the repository)
    whose tokens come from the stand-in's token endpoint. Returns the private key."""
    return service_account_adc(gemini, monkeypatch, tmp_path)


@pytest.fixture
def on_vertex(live: Repo, gemini: GeminiServer, adc: str) -> Repo:
    live.write(PIN, gemini_pin(gemini.root_url, VERTEX))
    live.commit("mini on vertex")
    return live


def files_holding(root: Path, *secrets: str) -> list[str]:
    return [
        str(path)
        for path in root.rglob("*")
        if path.is_file() and any(s.encode() in path.read_bytes() for s in secrets)
    ]


# ---------------------------------------------------------------- Gemini API
def test_run_sends_generate_content_with_the_key_in_a_header(on_gemini: Repo, cli, gemini):
    result = cli(on_gemini, "run", "--candidate", "mini")
    assert result.code == 0, result.out + result.err
    assert len(gemini.requests) == 4
    request = gemini.requests[0]
    assert request.path == "/v1beta/models/gemini-2.5-flash:generateContent"
    assert API_KEY not in request.path
    assert request.headers["x-goog-api-key"] == API_KEY
    text = request.body["contents"][0]["parts"][0]["text"]
    assert text.startswith("Message: message ")
    assert request.body == {
        "contents": [{"role": "user", "parts": [{"text": text}]}],
        "systemInstruction": {"parts": [{"text": "Answer with JSON."}]},
        "generationConfig": {
            "maxOutputTokens": 128,
            "temperature": 0,
            "topK": 8,
            "thinkingConfig": {"thinkingBudget": 256},
        },
        "safetySettings": [
            {"category": "HARM_CATEGORY_HARASSMENT", "threshold": "BLOCK_ONLY_HIGH"}
        ],
    }
    response = stored(on_gemini)[0]["response"]
    assert response["model"] == "gemini-2.5-flash-001"
    assert response["finish_reason"] == "STOP"


def test_thinking_and_cached_tokens_are_counted_and_thoughts_are_not_the_answer(
    on_gemini: Repo, cli, gemini
):
    gemini.thoughts_tokens = 40
    gemini.cached_tokens = 3
    assert cli(on_gemini, "run", "--candidate", "mini").code == 0
    response = stored(on_gemini)[0]["response"]
    assert "Thinking" not in response["text"]
    assert json.loads(response["text"])["label"] in ("a", "b")
    usage = response["usage"]
    answer_tokens = max(1, len(response["text"].split()) * 4 // 3)
    assert usage["reasoning_tokens"] == 40
    assert usage["output_tokens"] == answer_tokens + 40  # thinking is billed as output
    assert usage["cached_input_tokens"] == 3


@pytest.mark.parametrize(("fault", "reason"), [("safety", "SAFETY"), ("recitation", "RECITATION")])
def test_a_filtered_candidate_is_stored_with_its_finish_reason(
    on_gemini: Repo, cli, gemini, fault, reason
):
    gemini.fail_matching("message 1", fault)
    cli(on_gemini, "run", "--candidate", "mini")
    filtered = [r["response"] for r in stored(on_gemini) if r["response"]["text"] == ""]
    assert [r["finish_reason"] for r in filtered] == [reason]


def test_thinking_that_uses_up_the_budget_is_an_empty_answer_not_an_error(
    on_gemini: Repo, cli, gemini
):
    gemini.thoughts_tokens = 128
    gemini.fail_matching("message 1", "max_tokens")
    cli(on_gemini, "run", "--candidate", "mini")
    assert len([r for r in gemini.requests if r.fault == "max_tokens"]) == 1  # not retried
    empty = [r["response"] for r in stored(on_gemini) if r["response"]["text"] == ""]
    assert [(r["finish_reason"], r["usage"]["reasoning_tokens"]) for r in empty] == [
        ("MAX_TOKENS", 128)
    ]


def test_a_reply_without_candidates_or_a_block_reason_is_malformed_and_retried(
    on_gemini: Repo, cli, gemini
):
    gemini.fail_matching("message 1", "missing_fields", times=1)
    result = cli(on_gemini, "run", "--candidate", "mini")
    assert result.code == 0, result.out + result.err
    assert len([r for r in gemini.requests if "message 1" in r.raw.decode()]) == 2
    assert len(stored(on_gemini)) == 4


def test_a_blocked_prompt_is_stored_as_a_content_filter_outcome(on_gemini: Repo, cli, gemini):
    gemini.fail_matching("message 1", "prompt_blocked")
    cli(on_gemini, "run", "--candidate", "mini")
    records = stored(on_gemini)
    assert len(records) == 4
    blocked = [r["response"] for r in records if r["response"]["text"] == ""]
    assert [r["finish_reason"] for r in blocked] == ["prompt_blocked:SAFETY"]
    assert blocked[0]["usage"]["input_tokens"] > 0


@pytest.mark.parametrize(
    ("fault", "shown"),
    [
        ("invalid_argument", "client: HTTP 400: INVALID_ARGUMENT: Request contains an invalid"),
        ("context_length", "client: HTTP 400: INVALID_ARGUMENT: The input token count (1048577)"),
        ("permission_denied", "auth: HTTP 403: PERMISSION_DENIED: Permission denied on resource"),
        ("not_found", "client: HTTP 404: NOT_FOUND: models/gemini-9 is not found."),
    ],
)
def test_errors_that_retrying_cannot_fix_are_sent_once(on_gemini: Repo, cli, gemini, fault, shown):
    gemini.fail_matching("message 1", fault)
    result = cli(on_gemini, "run", "--candidate", "mini")
    assert result.code == 1
    assert len([r for r in gemini.requests if r.fault == fault]) == 1
    assert len(stored(on_gemini)) == 3
    assert f"labels/mini/m-001#0: {shown}" in result.err, result.err


@pytest.mark.parametrize("fault", ["resource_exhausted", "internal", "unavailable"])
def test_quota_and_server_errors_are_retried(on_gemini: Repo, cli, gemini, fault):
    gemini.fail_matching("message 1", fault, times=2)
    result = cli(on_gemini, "run", "--candidate", "mini")
    assert result.code == 0, result.out + result.err
    assert len([r for r in gemini.requests if r.fault == fault]) == 2
    assert len(stored(on_gemini)) == 4


def test_a_wrong_key_is_the_apis_own_message(on_gemini: Repo, cli, monkeypatch):
    monkeypatch.setenv("GEMINI_API_KEY", "AIzaSy-not-the-right-key-000000")
    result = cli(on_gemini, "run", "--candidate", "mini")
    assert result.code == 1
    assert "INVALID_ARGUMENT: API key not valid" in result.err
    assert "AIzaSy-not-the-right-key-000000" not in result.err + result.out


def test_the_key_never_reaches_disk(on_gemini: Repo, cli, gemini):
    gemini.fail_next("resource_exhausted")
    gemini.fail_matching("message 2", "permission_denied")
    assert cli(on_gemini, "run", "--candidate", "mini").code == 1
    assert files_holding(on_gemini.root, API_KEY) == []


# ---------------------------------------------------------------- Vertex AI
def test_vertex_uses_application_default_credentials(on_vertex: Repo, cli, gemini, adc):
    result = cli(on_vertex, "run", "--candidate", "mini")
    assert result.code == 0, result.out + result.err
    assert len(gemini.requests) == 4
    assert len(gemini.issued) == 1  # one token, reused while it is valid
    request = gemini.requests[0]
    assert request.path == (
        "/v1/projects/audit-project/locations/europe-west4/publishers/google/models/"
        "gemini-2.5-flash:generateContent"
    )
    assert request.headers["authorization"] == f"Bearer {gemini.issued[0]}"
    assert "x-goog-api-key" not in request.headers
    assert len(stored(on_vertex)) == 4
    assert files_holding(on_vertex.root, gemini.issued[0], adc.splitlines()[1]) == []


def test_a_token_about_to_expire_is_refreshed_before_the_next_attempt(on_vertex: Repo, cli, gemini):
    gemini.token_lifetime_s = 60  # inside google-auth's refresh margin: never valid for long
    on_vertex.write(
        PIN, on_vertex.read(PIN).replace("max_retries: 2", "max_retries: 2\n  concurrency: 1")
    )
    on_vertex.commit("one at a time")
    gemini.fail_next("unavailable")
    result = cli(on_vertex, "run", "--candidate", "mini")
    assert result.code == 0, result.out + result.err
    sent = [r.headers["authorization"].removeprefix("Bearer ") for r in gemini.requests]
    assert len(sent) == 5 and len(set(sent)) == 5  # the retry too carries a new token
    assert sent == gemini.issued


def test_a_users_refresh_token_and_client_secret_are_redacted_once_loaded(monkeypatch, tmp_path):
    user = authorized_user_adc(monkeypatch, tmp_path, "ya29.a0AfB_loaded-token-3Hq7", "loaded")
    pin = Pin.model_validate(
        {
            "schema_version": 1,
            "provider": "gemini",
            "model": "gemini-2.5-flash",
            "vertex": {"project": "audit-project", "location": "europe-west4"},
        }
    )
    assert get_provider("gemini").credentials_problem(pin) is None  # looked up, not sent
    # Before any refresh, whose error could quote what it sent to the token endpoint.
    for secret in (user["refresh_token"], user["client_secret"]):
        assert redaction.redact(f"sent {secret}") == f"sent {REDACTED}"


def test_no_application_default_credentials_says_how_to_get_them(
    on_vertex: Repo, cli, monkeypatch, tmp_path
):
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "missing.json"))
    result = cli(on_vertex, "run", "--candidate", "mini")
    # The cell cannot run here: the run says why and fails, sending nothing (as for a
    # cell whose key is not set).
    assert result.code == 1, result.out + result.err
    assert "cannot run: " in result.err
    assert "no Google application-default credentials for gemini model" in result.err
    assert "Traceback" not in result.err


def test_vertex_endpoints_by_location():
    provider = get_provider("gemini")

    def url(location: str) -> str:
        pin = Pin.model_validate(
            {
                "schema_version": 1,
                "provider": "gemini",
                "model": "gemini-2.5-pro",
                "vertex": {"project": "audit-project", "location": location},
            }
        )
        return provider.endpoint(pin)

    assert url("us-central1") == (
        "https://us-central1-aiplatform.googleapis.com/v1/projects/audit-project/locations/"
        "us-central1/publishers/google/models/gemini-2.5-pro:generateContent"
    )
    assert url("global").startswith("https://aiplatform.googleapis.com/v1/projects/audit-project/")


@pytest.mark.parametrize(
    ("old", "new", "fragment"),
    [
        ("api_key_env: GEMINI_API_KEY\n", "", "an HTTP pin needs 'api_key_env'"),
        ("api_key_env: GEMINI_API_KEY\n", VERTEX + "api_key_env: X\n", "remove 'api_key_env'"),
        ("topK: 8", "top_k: 8", "did you mean `topK`?"),
        ("temperature: 0", "temperature: 3", "temperature must be a number from 0 to 2"),
    ],
)
def test_a_bad_gemini_pin_is_refused_at_load(repo: Repo, cli, old, new, fragment):
    repo.write(PIN, gemini_pin("https://gemini.example.test").replace(old, new))
    repo.commit("a bad pin")
    result = cli(repo, "check")
    assert result.code == 2
    assert fragment in result.err, result.err
    assert "Traceback" not in result.err


@pytest.mark.parametrize("provider", ["openai", "python"])
def test_vertex_is_only_for_gemini_pins(provider):
    data = {
        "schema_version": 1,
        "provider": provider,
        "model": "gemini-2.5-pro",
        "api_key_env": "KEY",
        "callable": "registry/systems/rules.py:answer",
        "vertex": {"project": "audit-project", "location": "global"},
    }
    with pytest.raises(ValueError, match="'vertex' is only for provider 'gemini'"):
        Pin.model_validate(data)


def test_without_google_auth_the_error_names_the_extra(on_vertex: Repo, cli, monkeypatch):
    monkeypatch.setitem(sys.modules, "google.auth", None)  # import fails, as uninstalled
    result = cli(on_vertex, "run", "--candidate", "mini")
    # The cell cannot run here: the run says why and fails, sending nothing (as for a
    # cell whose key is not set).
    assert result.code == 1, result.out + result.err
    assert "cannot run: " in result.err
    assert "Vertex AI needs google-auth: pip install 'evalreg[google]'" in result.err
    assert "Traceback" not in result.err
