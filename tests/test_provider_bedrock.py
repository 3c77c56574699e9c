"""``provider: bedrock``: the Converse API, SigV4-signed from the AWS credential chain (checked
by the stand-in server with botocore) or sent with a Bedrock API key, through ``evalreg run``."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest

from evalreg import redaction
from evalreg.providers import get_provider
from evalreg.redaction import REDACTED
from evalreg.registry.schema import Pin

from conftest import Repo
from support.cloud_servers import BedrockServer, Request
from support.clouds import BEDROCK_MODEL, aws_environment, bedrock_pin
from support.runs import stored_records as stored

ACCESS_KEY = "AKIALOOPBACK7EXAMPLE"
SECRET_KEY = "wJalrXUtnFEMI-loopback-secret-9Qx2"
SESSION_TOKEN = "IQoJb3JpZ2luX2VjEloopback-session-4Tz8"
BEARER = "ABSKbedrock-api-key-loopback-6Wn1"
MODEL = BEDROCK_MODEL
PIN = "registry/models/mini.yaml"


def converse_label(request: Request) -> str:
    text = request.body["messages"][-1]["content"][0]["text"]
    return json.dumps({"label": "a" if text.endswith(("1", "3", "5")) else "b"})


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Credentials in the environment; no config files, profile or instance metadata."""
    aws_environment(monkeypatch, tmp_path)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
    return tmp_path


@pytest.fixture
def bedrock() -> Iterator[BedrockServer]:
    with BedrockServer(
        access_key=ACCESS_KEY, secret_key=SECRET_KEY, region="eu-west-1", responder=converse_label
    ) as srv:
        yield srv


@pytest.fixture
def on_bedrock(live: Repo, bedrock: BedrockServer, aws_env: Path) -> Repo:
    """The standard registry with its ``mini`` pin on the Bedrock stand-in."""
    live.write(PIN, bedrock_pin(bedrock.root_url))
    live.commit("mini on bedrock")
    return live


def files_holding(root: Path, *secrets: str) -> list[str]:
    return [
        str(path)
        for path in root.rglob("*")
        if path.is_file() and any(s.encode() in path.read_bytes() for s in secrets)
    ]


# ---------------------------------------------------------------- requests
def test_run_signs_converse_requests_the_server_verifies(on_bedrock: Repo, cli, bedrock):
    result = cli(on_bedrock, "run", "--candidate", "mini")
    assert result.code == 0, result.out + result.err
    assert len(bedrock.requests) == 4
    request = bedrock.requests[0]
    assert request.fault is None
    # The ARN is one path segment, ':' and '/' escaped, and signed as sent.
    assert request.path == (
        "/model/arn%3Aaws%3Abedrock%3Aeu-west-1%3A123456789012%3Ainference-profile"
        "%2Feu.anthropic.claude-haiku/converse"
    )
    assert bedrock.model_of(request) == MODEL
    assert request.headers["authorization"].startswith(f"AWS4-HMAC-SHA256 Credential={ACCESS_KEY}/")
    assert "/eu-west-1/bedrock/aws4_request" in request.headers["authorization"]
    assert request.body == {
        "messages": [
            {
                "role": "user",
                "content": [{"text": request.body["messages"][0]["content"][0]["text"]}],
            }
        ],
        "system": [{"text": "Answer with JSON."}],
        "inferenceConfig": {"maxTokens": 64, "temperature": 0, "stopSequences": ["\n\n"]},
        "additionalModelRequestFields": {"top_k": 5},
    }
    assert request.body["messages"][0]["content"][0]["text"].startswith("Message: message ")
    records = stored(on_bedrock)
    assert len(records) == 4
    response = records[0]["response"]
    assert response["finish_reason"] == "end_turn"
    assert response["usage"]["input_tokens"] > 0 and response["usage"]["output_tokens"] > 0
    # The signature lives in headers only: the stored request is the body and the URL.
    assert "AWS4-HMAC-SHA256" not in json.dumps(records)


def test_a_bad_signature_is_refused_by_the_server(on_bedrock: Repo, cli, bedrock):
    bedrock.secret_key = "not-the-secret-the-client-holds"
    result = cli(on_bedrock, "run", "--candidate", "mini")
    assert result.code == 1
    assert "auth" in result.out
    assert len(bedrock.requests) == 1  # refused, never retried; the pin's others not sent
    assert stored(on_bedrock) == []


def test_each_retry_is_signed_afresh(on_bedrock: Repo, cli, bedrock, monkeypatch):
    # A throttled request retried with its first signature would be refused as expired:
    # every attempt is signed when it is sent, with the time it is sent at.
    from evalreg.providers.bedrock import BedrockProvider

    bedrock.fail_matching("message 2", "throttling", times=1)
    on_bedrock.write(
        PIN, on_bedrock.read(PIN).replace("max_retries: 2", "max_retries: 2\n  concurrency: 1")
    )
    on_bedrock.commit("one at a time")
    signed: list[bytes] = []
    sign = BedrockProvider.sign

    def counting(self, pin, url, headers, content):  # type: ignore[no-untyped-def]
        signed.append(content)
        return sign(self, pin, url, headers, content)

    monkeypatch.setattr(BedrockProvider, "sign", counting)
    result = cli(on_bedrock, "run", "--candidate", "mini")
    assert result.code == 0, result.out + result.err
    assert len([c for c in signed if b"message 2" in c]) == 2
    tries = [r for r in bedrock.requests if "message 2" in r.raw.decode()]
    assert [r.fault for r in tries] == ["throttling", None]
    assert len(stored(on_bedrock)) == 4


def test_temporary_credentials_send_their_session_token(
    on_bedrock: Repo, cli, bedrock, monkeypatch
):
    monkeypatch.setenv("AWS_SESSION_TOKEN", SESSION_TOKEN)
    bedrock.session_token = SESSION_TOKEN
    assert cli(on_bedrock, "run", "--candidate", "mini").code == 0
    assert bedrock.requests[0].headers["x-amz-security-token"] == SESSION_TOKEN


def test_a_named_profile_of_the_shared_credentials_file_signs(
    on_bedrock: Repo, cli, bedrock, aws_env, monkeypatch
):
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    (aws_env / "aws-credentials").write_text(
        f"[audit]\naws_access_key_id = {ACCESS_KEY}\naws_secret_access_key = {SECRET_KEY}\n"
    )
    on_bedrock.write(
        PIN,
        on_bedrock.read(PIN).replace(
            "  region: eu-west-1\n", "  region: eu-west-1\n  profile: audit\n"
        ),
    )
    on_bedrock.commit("the audit profile")
    result = cli(on_bedrock, "run", "--candidate", "mini")
    assert result.code == 0, result.out + result.err
    assert len(stored(on_bedrock)) == 4


ROTATING = """\
import datetime, json, pathlib
count = pathlib.Path(__file__).with_suffix(".count")
n = int(count.read_text()) + 1 if count.exists() else 1
count.write_text(str(n))
# Inside botocore's advisory refresh window: new credentials for every signature.
expires = datetime.datetime.now(datetime.UTC) + datetime.timedelta(minutes=12)
print(json.dumps({
    "Version": 1,
    "AccessKeyId": f"ASIAROTATING{n:08d}",
    "SecretAccessKey": f"rotating-secret-{n:04d}-Lx4Vr8Tn3",
    "SessionToken": f"IQoJrotating-session-{n:04d}+Tz8=",
    "Expiration": expires.isoformat(),
}))
"""


def test_credentials_refreshed_by_the_chain_are_redacted_before_they_are_sent(aws_env, monkeypatch):
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    script = aws_env / "rotating.py"
    script.write_text(ROTATING)
    (aws_env / "aws-config").write_text(
        f"[profile rotating]\ncredential_process = {sys.executable} {script}\n"
    )
    pin = Pin.model_validate(
        {
            "schema_version": 1,
            "provider": "bedrock",
            "model": MODEL,
            "aws": {"region": "eu-west-1", "profile": "rotating"},
        }
    )
    provider = get_provider("bedrock")
    url = provider.endpoint(pin)
    sent = []
    for _ in range(3):
        signed = {k.lower(): v for k, v in provider.sign(pin, url, {}, b"{}").items()}
        token = signed["x-amz-security-token"]
        sent.append(token)
        n = int(token.removeprefix("IQoJrotating-session-")[:4])
        shown = redaction.redact(f"{signed['authorization']} {token} {quote(token, safe='')}")
        assert f"ASIAROTATING{n:08d}" not in shown and "rotating-session" not in shown
        assert redaction.redact(f"rotating-secret-{n:04d}-Lx4Vr8Tn3") == REDACTED
    assert len(set(sent)) == 3  # each signature made with credentials the chain refreshed


def test_no_aws_credentials_at_all_says_how_to_provide_them(on_bedrock: Repo, cli, monkeypatch):
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    result = cli(on_bedrock, "run", "--candidate", "mini")
    # The cell cannot run here: the run says why and fails, sending nothing (as for a
    # cell whose key is not set).
    assert result.code == 1, result.out + result.err
    assert "cannot run: " in result.err
    assert "no AWS credentials found for bedrock model" in result.err
    assert "Traceback" not in result.err


def test_a_bedrock_api_key_is_sent_as_a_bearer_token(on_bedrock: Repo, cli, bedrock, monkeypatch):
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    monkeypatch.setenv("AWS_BEARER_TOKEN_BEDROCK", BEARER)
    bedrock.api_key = BEARER
    on_bedrock.write(PIN, on_bedrock.read(PIN) + "api_key_env: AWS_BEARER_TOKEN_BEDROCK\n")
    on_bedrock.commit("an API key")
    result = cli(on_bedrock, "run", "--candidate", "mini")
    assert result.code == 0, result.out + result.err
    assert bedrock.requests[0].headers["authorization"] == f"Bearer {BEARER}"
    assert "x-amz-date" not in bedrock.requests[0].headers
    assert files_holding(on_bedrock.root, BEARER) == []


def test_a_refused_api_key_quoted_back_is_redacted(on_bedrock: Repo, cli, bedrock, monkeypatch):
    monkeypatch.setenv("AWS_BEARER_TOKEN_BEDROCK", BEARER)
    bedrock.api_key = "ABSK-the-key-the-server-expects-000"
    on_bedrock.write(PIN, on_bedrock.read(PIN) + "api_key_env: AWS_BEARER_TOKEN_BEDROCK\n")
    on_bedrock.commit("an API key")
    result = cli(on_bedrock, "run", "--candidate", "mini")
    assert result.code == 1
    assert "auth: HTTP 403: AccessDeniedException: Invalid API key: Bearer [redacted]" in result.err
    assert BEARER not in result.out + result.err
    assert files_holding(on_bedrock.root, BEARER) == []


def test_credentials_never_reach_disk(on_bedrock: Repo, cli, bedrock, monkeypatch):
    monkeypatch.setenv("AWS_SESSION_TOKEN", SESSION_TOKEN)
    bedrock.session_token = SESSION_TOKEN
    bedrock.fail_matching("message 1", "access_denied")
    bedrock.fail_next("throttling")
    result = cli(on_bedrock, "run", "--candidate", "mini")
    assert result.code == 1
    assert files_holding(on_bedrock.root, SECRET_KEY, SESSION_TOKEN, BEARER) == []
    for text in (result.out, result.err):
        assert SECRET_KEY not in text and SESSION_TOKEN not in text


# ---------------------------------------------------------------- responses
def test_usage_counts_cache_reads_as_input(on_bedrock: Repo, cli, bedrock):
    bedrock.cache_read_tokens = 2
    assert cli(on_bedrock, "run", "--candidate", "mini").code == 0
    usage = stored(on_bedrock)[0]["response"]["usage"]
    assert usage["cached_input_tokens"] == 2
    sent = bedrock.requests[0].body
    prompt = "Answer with JSON. " + sent["messages"][0]["content"][0]["text"]
    assert usage["input_tokens"] == max(1, len(prompt.split()) * 4 // 3)


@pytest.mark.parametrize("fault", ["guardrail", "content_filtered"])
def test_a_filtered_reply_is_stored_with_its_stop_reason(on_bedrock: Repo, cli, bedrock, fault):
    bedrock.fail_matching("message 1", fault)
    cli(on_bedrock, "run", "--candidate", "mini")
    records = stored(on_bedrock)
    assert len(records) == 4
    filtered = [r["response"] for r in records if r["response"]["text"] == ""]
    reason = "guardrail_intervened" if fault == "guardrail" else "content_filtered"
    assert [r["finish_reason"] for r in filtered] == [reason]


@pytest.mark.parametrize(
    ("fault", "kind", "shown"),
    [
        (
            "quota",
            "client 400",
            "ServiceQuotaExceededException: Your request exceeds the service quota",
        ),
        (
            "context_length",
            "client 400",
            "ValidationException: Input is too long for requested model.",
        ),
        ("access_denied", "auth 403", "AccessDeniedException: You don't have access to the model"),
        ("not_found", "client 404", "ResourceNotFoundException: Model not found."),
    ],
)
def test_errors_that_retrying_cannot_fix_are_sent_once(
    on_bedrock: Repo, cli, bedrock, fault, kind, shown
):
    bedrock.fail_matching("message 1", fault)
    result = cli(on_bedrock, "run", "--candidate", "mini")
    assert result.code == 1
    assert len([r for r in bedrock.requests if r.fault == fault]) == 1
    assert len(stored(on_bedrock)) == 3
    # The provider's own words name the cause.
    name, status = kind.split()
    assert f"labels/mini/m-001#0: {name}: HTTP {status}: {shown}" in result.err, result.err


@pytest.mark.parametrize("fault", ["throttling", "not_ready", "unavailable"])
def test_throttling_and_unavailable_models_are_retried(on_bedrock: Repo, cli, bedrock, fault):
    bedrock.fail_matching("message 1", fault, times=2)
    result = cli(on_bedrock, "run", "--candidate", "mini")
    assert result.code == 0, result.out + result.err
    assert len([r for r in bedrock.requests if r.fault == fault]) == 2
    assert len(stored(on_bedrock)) == 4


# ---------------------------------------------------------------- the pin
def test_the_endpoint_is_the_regional_runtime_and_the_body_has_no_credentials():
    pin = Pin.model_validate(
        {
            "schema_version": 1,
            "provider": "bedrock",
            "model": "anthropic.claude-3-haiku-20240307-v1:0",
            "aws": {"region": "ap-southeast-2"},
        }
    )
    provider = get_provider("bedrock")
    assert provider.endpoint(pin) == (
        "https://bedrock-runtime.ap-southeast-2.amazonaws.com/model/"
        "anthropic.claude-3-haiku-20240307-v1%3A0/converse"
    )


@pytest.mark.parametrize(
    ("edit", "fragment"),
    [
        ("aws:\n  region: eu-west-1\n", "a 'bedrock' pin needs 'aws: {region: <region>}'"),
        ("region: eu-west-1", "String should match pattern"),
        ("maxTokens: 64", "'max_tokens' is not a parameter evalreg knows for provider 'bedrock'"),
    ],
)
def test_a_bad_bedrock_pin_is_refused_at_load(repo: Repo, cli, edit, fragment):
    text = bedrock_pin("https://bedrock.example.test")
    replacement = {
        "aws:\n  region: eu-west-1\n": "",
        "region: eu-west-1": "region: Europe",
        "maxTokens: 64": "max_tokens: 64",
    }[edit]
    repo.write(PIN, text.replace(edit, replacement))
    repo.commit("a bad pin")
    result = cli(repo, "check")
    assert result.code == 2
    assert fragment in result.err, result.err
    assert "Traceback" not in result.err


def test_the_cost_estimate_reads_max_tokens_from_the_inference_config(on_bedrock: Repo, cli):
    def estimate() -> float:
        result = cli(on_bedrock, "run", "--candidate", "mini", "--dry-run")
        assert result.code == 0, result.out + result.err
        found = re.search(r"Estimated cost of missing responses: \$([0-9.]+)", result.out)
        assert found is not None, result.out
        return float(found[1])

    small = estimate()
    on_bedrock.write(PIN, on_bedrock.read(PIN).replace("maxTokens: 64", "maxTokens: 4000"))
    on_bedrock.commit("a longer answer allowed")
    # Four items, each estimated at its 4,000 output tokens at $4 a million.
    assert estimate() == pytest.approx(small + 4 * (4000 - 64) * 4.0 / 1e6, abs=1e-4)


def test_without_botocore_the_error_names_the_extra(on_bedrock: Repo, cli, monkeypatch):
    monkeypatch.setitem(sys.modules, "botocore.session", None)  # import fails, as uninstalled
    result = cli(on_bedrock, "run", "--candidate", "mini")
    # The cell cannot run here: the run says why and fails, sending nothing (as for a
    # cell whose key is not set).
    assert result.code == 1, result.out + result.err
    assert "cannot run: " in result.err
    assert "signing Bedrock requests needs botocore: pip install 'evalreg[aws]'" in result.err
    assert "Traceback" not in result.err


def test_without_credentials_a_bedrock_cell_stays_pending_and_fails_unless_allowed(
    on_bedrock: Repo, cli, bedrock, monkeypatch
):
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    result = cli(on_bedrock, "run")
    assert result.code == 1, result.out + result.err
    assert "labels/mini cannot run: no AWS credentials found for bedrock model" in result.err
    assert "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE" in result.err
    allowed = cli(on_bedrock, "run", "--allow-pending")
    assert allowed.code == 0, allowed.out + allowed.err
    assert "pending: no AWS credentials found for bedrock model" in allowed.out.replace("\n", " ")
    assert bedrock.requests == []
