"""Azure OpenAI pins: deployment and v1 URLs, the api-key header, Entra ID tokens from the
real azure-identity (its credential's ``get_token`` stood in for), and Azure's error shapes,
against the loopback server."""

from __future__ import annotations

import json
import time

import azure.identity
import pytest
from azure.core.credentials import AccessToken
from azure.core.exceptions import ClientAuthenticationError

from evalreg import redaction
from evalreg.providers import azure_openai
from evalreg.providers.base import ProviderError
from evalreg.redaction import REDACTED

from conftest import Repo, assert_refused
from support.clouds import EntraTokens
from support.llm_server import LLMServer
from support.provider_calls import completion, pin_of, send
from support.runs import everything_written
from support.runs import stored_records as stored

AZURE_KEY = "az-canary-3f9Kq2Lm8Np5Rs1Tv7Wx"
PIN = "registry/models/mini.yaml"
DEPLOYMENT_PIN = """\
schema_version: 1
provider: azure_openai
model: gpt-4o-mini-2024-07-18
base_url: {url}
api_key_env: AZURE_OPENAI_API_KEY
azure:
  deployment: mini-prod
  api_version: 2024-10-21
params:
  temperature: 0
price:
  input_per_mtok: 0.15
  output_per_mtok: 0.6
  as_of: 2026-01-01
"""
ENTRA_PIN = """\
schema_version: 1
provider: azure_openai
model: mini-prod
base_url: {url}
azure:
  endpoint: v1
  auth: entra
params:
  temperature: 0
"""


def azure_live(live: Repo, server: LLMServer, pin: str) -> Repo:
    live.write(PIN, pin.format(url=server.root_url))
    live.commit("the mini pin on Azure OpenAI")
    server.deployments = {"mini-prod": "gpt-4o-mini-2024-07-18"}
    return live


@pytest.fixture
def entra(monkeypatch, server):
    return EntraTokens(server, lifetime=3600).install(monkeypatch)


# ---------------------------------------------------------------- end to end
def test_a_deployment_pin_runs_with_the_api_key_and_no_key_is_written(
    live, cli, server, monkeypatch
):
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", AZURE_KEY)
    server.api_key = AZURE_KEY
    repo = azure_live(live, server, DEPLOYMENT_PIN)
    result = cli(repo, "run")
    assert result.code == 0, result.out + result.err
    sent = [r for r in server.requests if r.protocol == "azure"]
    assert len(sent) == 4
    for request in sent:
        assert request.path == "/openai/deployments/mini-prod/chat/completions"
        assert request.query == "api-version=2024-10-21"
        assert request.headers["api-key"] == AZURE_KEY
        assert "authorization" not in request.headers
        assert request.body is not None and "model" not in request.body
        assert request.body["temperature"] == 0
        assert request.body["messages"][0] == {"role": "system", "content": "Answer with JSON."}
    records = [r for r in stored(repo) if r.get("provider") == "azure_openai"]
    assert len(records) == 4
    for record in records:
        assert record["endpoint"] == (
            f"{server.root_url}/openai/deployments/mini-prod/chat/completions"
            "?api-version=2024-10-21"
        )
        assert record["response"]["model"] == "gpt-4o-mini-2024-07-18"
        assert record["response"]["finish_reason"] == "stop"
    assert cli(repo, "report").code == 0
    repo.commit("results")
    assert not [name for name, data in everything_written(repo.root) if AZURE_KEY.encode() in data]


def test_an_entra_pin_on_the_v1_endpoint_signs_every_request_with_one_cached_token(
    live, cli, server, entra
):
    server.api_key = AZURE_KEY  # a request without a valid token or key is refused

    def echo(request) -> str:  # a model that quotes the token it was sent
        text = request.body["messages"][-1]["content"]
        label = "a" if text.endswith(("1", "3", "5")) else "b"
        return json.dumps({"label": label, "note": request.headers["authorization"]})

    server.responder = echo
    repo = azure_live(live, server, ENTRA_PIN)
    result = cli(repo, "run")
    assert result.code == 0, result.out + result.err
    sent = [r for r in server.requests if r.protocol == "azure"]
    assert len(sent) == 4
    for request in sent:
        assert request.path == "/openai/v1/chat/completions" and request.query == ""
        assert request.body is not None and request.body["model"] == "mini-prod"
        assert request.headers["authorization"] == "Bearer eyJ0eXAi.entra-token-001.sig"
        assert "api-key" not in request.headers
    assert entra.scopes == [("https://cognitiveservices.azure.com/.default",)]
    assert "site-packages" in azure.identity.__file__  # the real library, not a stand-in
    records = [r for r in stored(repo) if r.get("provider") == "azure_openai"]
    assert [json.loads(r["response"]["text"])["note"] for r in records] == ["Bearer [redacted]"] * 4
    assert cli(repo, "report").code == 0
    repo.commit("results")
    written = everything_written(repo.root)
    assert not [name for name, data in written if b"entra-token-" in data]


def test_entra_without_a_credential_stops_the_run_with_what_to_do(live, cli, server, monkeypatch):
    def refuse(credential: object, *scopes: str, **_: object) -> AccessToken:
        raise ClientAuthenticationError("DefaultAzureCredential failed to retrieve a token")

    monkeypatch.setattr(azure.identity.DefaultAzureCredential, "get_token", refuse)
    repo = azure_live(live, server, ENTRA_PIN)
    result = cli(repo, "run")
    assert result.code == 2, result.out + result.err
    assert "Traceback" not in result.err
    assert "no Microsoft Entra ID token for Azure OpenAI (ClientAuthenticationError" in result.err
    assert "az login" in result.err
    assert not [r for r in server.requests if r.protocol == "azure"]


# ---------------------------------------------------------------- signing each attempt
@pytest.fixture
def azure_server():
    with LLMServer(api_key=AZURE_KEY) as srv:
        srv.deployments = {"mini-prod": "gpt-4o-mini-2024-07-18"}
        yield srv


def entra_pin(server: LLMServer, **limits: object):
    return pin_of(
        provider="azure_openai",
        model="mini-prod",
        base_url=server.root_url,
        azure={"endpoint": "v1", "auth": "entra"},
        limits=limits,
    )


def test_a_retry_is_signed_afresh_with_a_new_token_once_the_old_one_nears_expiry(
    azure_server, monkeypatch
):
    EntraTokens(azure_server, lifetime=azure_openai.REFRESH_BEFORE_S - 1).install(monkeypatch)
    azure_server.fail_next("500")
    azure_server.fail_next("429", retry_after=0.01)
    reply = send(entra_pin(azure_server))
    assert reply.attempts == 3
    sent = [r.headers["authorization"] for r in azure_server.requests]
    assert sent == [f"Bearer eyJ0eXAi.entra-token-{n:03d}.sig" for n in (1, 2, 3)]


def test_a_service_principals_secret_in_the_environment_is_redacted_with_its_tokens(
    azure_server, monkeypatch
):
    secret = "Xy8Q~service-principal-secret-4Tz8Wb6Y"
    monkeypatch.setenv("AZURE_CLIENT_SECRET", secret)
    EntraTokens(azure_server, lifetime=3600).install(monkeypatch)
    send(entra_pin(azure_server))
    token = azure_server.requests[0].headers["authorization"].removeprefix("Bearer ")
    assert redaction.redact(f"{secret} {token}") == f"{REDACTED} {REDACTED}"


def test_a_token_still_fresh_is_reused_across_retries(azure_server, monkeypatch):
    tokens = EntraTokens(azure_server, lifetime=3600).install(monkeypatch)
    azure_server.fail_next("503")
    assert send(entra_pin(azure_server)).attempts == 2
    assert {r.headers["authorization"] for r in azure_server.requests} == {
        "Bearer eyJ0eXAi.entra-token-001.sig"
    }
    assert len(tokens.scopes) == 1


def test_a_revoked_token_is_an_auth_error_not_retried(azure_server, monkeypatch):
    tokens = EntraTokens(azure_server, lifetime=3600).install(monkeypatch)
    send(entra_pin(azure_server))
    tokens.accepted = False  # the principal lost its role: no token of it is accepted
    azure_server.entra_tokens.clear()
    with pytest.raises(ProviderError) as caught:
        send(entra_pin(azure_server))
    assert (caught.value.kind, caught.value.status, caught.value.attempts) == ("auth", 401, 1)
    assert "Access token is missing, invalid, audience is incorrect" in str(caught.value)


# ---------------------------------------------------------------- error shapes
def key_pin(server: LLMServer, deployment: str = "mini-prod"):
    return pin_of(
        provider="azure_openai",
        model="gpt-4o-mini-2024-07-18",
        base_url=server.root_url,
        api_key_env="AZURE_OPENAI_API_KEY",
        azure={"deployment": deployment, "api_version": "2024-10-21"},
        limits={"max_retries": 2},
    )


@pytest.fixture
def keyed(azure_server, monkeypatch):
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", AZURE_KEY)
    return azure_server


def test_a_throttled_request_waits_the_retry_after_ms_azure_sends_and_succeeds(keyed):
    keyed.fail_next("429", retry_after=0.2)
    started = time.monotonic()
    reply = send(key_pin(keyed))
    assert reply.attempts == 2 and time.monotonic() - started >= 0.2
    first = keyed.requests[0]
    assert first.fault == "429"
    assert reply.completion.model == "gpt-4o-mini-2024-07-18"


def test_throttling_past_the_retries_is_rate_limited_with_azures_message(keyed):
    keyed.fail_next("429", times=3, retry_after=0.01)
    with pytest.raises(ProviderError) as caught:
        send(key_pin(keyed))
    error = caught.value
    assert (error.kind, error.status, error.attempts) == ("rate_limited", 429, 3)
    assert "exceeded token rate limit" in str(error)


@pytest.mark.parametrize(
    ("fault", "kind", "status", "message"),
    [
        ("content_filter", "client", 400, "triggering Azure OpenAI's content management policy"),
        ("context_length", "client", 400, "maximum context length is 128000 tokens"),
        ("401", "auth", 401, "Access denied due to invalid subscription key"),
        ("403", "auth", 403, "Principal does not have access to API/Operation."),
    ],
)
def test_an_error_that_a_retry_cannot_fix_is_sent_once(keyed, fault, kind, status, message):
    keyed.fail_next(fault)
    with pytest.raises(ProviderError) as caught:
        send(key_pin(keyed))
    error = caught.value
    assert (error.kind, error.status, error.retryable, error.attempts) == (kind, status, False, 1)
    assert message in str(error)
    assert len(keyed.requests) == 1


def test_an_unknown_deployment_is_a_client_error_naming_it(keyed):
    with pytest.raises(ProviderError) as caught:
        send(key_pin(keyed, deployment="no-such-deployment"))
    error = caught.value
    assert (error.kind, error.status, error.attempts) == ("client", 404, 1)
    assert "The API deployment for this resource does not exist" in str(error)
    assert keyed.requests[0].path == "/openai/deployments/no-such-deployment/chat/completions"


def test_a_wrong_key_is_refused_by_the_server_as_an_auth_error(keyed, monkeypatch):
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", "az-wrong-key-000000")
    with pytest.raises(ProviderError) as caught:
        send(key_pin(keyed))
    assert (caught.value.kind, caught.value.status) == ("auth", 401)


def test_a_completion_the_content_filter_withheld_is_an_answer_with_that_finish_reason(keyed):
    keyed.fail_next("filtered")
    got = completion(key_pin(keyed))
    assert (got.text, got.finish_reason) == ("", "content_filter")
    assert got.model == "gpt-4o-mini-2024-07-18" and got.output_tokens > 0
    assert len(keyed.requests) == 1


def test_a_cut_completion_keeps_its_text_and_says_length(keyed):
    keyed.fail_next("truncated")
    keyed.cached_tokens = 2
    got = completion(key_pin(keyed))
    assert got.finish_reason == "length" and got.text.startswith('{"echo"')
    assert got.cached_input_tokens == 2


# ---------------------------------------------------------------- the pin's schema
def edit(repo: Repo, text: str) -> None:
    repo.write(PIN, text)
    repo.commit("an azure pin")


def test_azure_settings_on_an_openai_pin_are_refused_where_they_are(repo, cli):
    edit(repo, repo.read(PIN) + "azure:\n  api_version: 2024-10-21\n")
    assert_refused(
        repo,
        cli,
        "check",
        expect=(f"{PIN}:13:3: azure: 'azure' is only for provider 'azure_openai'",),
    )


def test_an_entra_pin_takes_no_api_key_env(repo, cli):
    text = ENTRA_PIN.format(url="https://res.openai.azure.com").replace(
        "azure:\n", "api_key_env: AZURE_OPENAI_API_KEY\nazure:\n"
    )
    edit(repo, text)
    assert_refused(repo, cli, "check", expect=(f"{PIN}:5:14: api_key_env: 'auth: entra' takes no",))


@pytest.mark.parametrize(
    ("old", "new", "expect"),
    [
        ("  api_version: 2024-10-21\n", "", "the deployment endpoint needs 'api_version'"),
        ("  deployment: mini-prod\n", "  endpoint: v1\n", "the v1 endpoint takes no 'api_version'"),
        ("api_key_env: AZURE_OPENAI_API_KEY\n", "", "an HTTP pin needs 'api_key_env'"),
        ("base_url: {url}\n", "", "an 'azure_openai' pin needs 'base_url'"),
        ("  api_version: 2024-10-21\n", "  api_version: latest\n", "should match pattern"),
    ],
)
def test_an_azure_pin_missing_what_its_endpoint_needs_is_refused(repo, cli, old, new, expect):
    assert old in DEPLOYMENT_PIN
    edit(repo, DEPLOYMENT_PIN.replace(old, new).format(url="https://res.openai.azure.com"))
    assert_refused(repo, cli, "check", expect=(PIN, expect))
