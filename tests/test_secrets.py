"""Secrets reach no path: ``check`` refuses credentials in pins, and what the variables a
registry names hold, and every credential a provider resolves itself, is redacted from
everything evalreg stores, writes and prints."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from evalreg import redaction
from evalreg.providers.base import ProviderError
from evalreg.providers.http import HttpLayer
from evalreg.redaction import REDACTED, Redactor
from evalreg.registry.schema import Limits

from conftest import Repo
from support.cloud_servers import BedrockServer, GeminiServer
from support.clouds import (
    VERTEX,
    EntraTokens,
    authorized_user_adc,
    aws_environment,
    bedrock_pin,
    gemini_pin,
    service_account_adc,
)
from support.github_api import GitHubAPI
from support.leaks import leaks
from support.llm_server import LLMServer
from support.runs import everything_written

CANARY = "sk-canary-7Qm2Zp9Lx4Vr8Tn3Wb6Y"
"""The OpenAI pin's key in these tests."""
CANARY_2 = "ak-canary-Hd5Jf1Ks0Lq9Rt2Uv"
"""The Anthropic pin's key."""
PIN = "registry/models/mini.yaml"


def edit_pin(repo: Repo, old: str, new: str, message: str = "a pin with a credential") -> None:
    text = repo.read(PIN)
    assert old in text
    repo.write(PIN, text.replace(old, new))
    repo.commit(message)


def assert_refused(repo: Repo, cli, fragment: str) -> str:
    result = cli(repo, "check")
    assert result.code == 2, result.err
    assert fragment in result.err, result.err
    assert "name the environment variable holding the key in 'api_key_env'" in result.err
    assert CANARY not in result.out + result.err
    return result.err


# ---------------------------------------------------------------- check
@pytest.mark.parametrize("url", ["https://user:{key}@api.example.test/v1", "https://{key}@h.test"])
def test_check_refuses_credentials_in_the_base_url_user_info(repo, cli, url):
    edit_pin(repo, "https://api.openai.com/v1", url.format(key=CANARY))
    assert_refused(
        repo, cli, f"{PIN}:4:11: base_url: holds credentials (user-info before '@'): remove them"
    )


@pytest.mark.parametrize("name", ["api_key", "key", "token", "X-Api-Key", "access_token"])
def test_check_refuses_a_credential_in_the_base_url_query(repo, cli, name):
    edit_pin(repo, "openai.com/v1", f"openai.com/v1?region=eu&{name}={CANARY}")
    assert_refused(repo, cli, f"{PIN}:4:11: base_url: holds a credential in its query string")


@pytest.mark.parametrize(
    "name",
    [
        "api_key",
        "api-key",
        "apiKey",
        "APIKEY",
        "Authorization",
        "x-api-key",
        "token",
        "secret",
        "password",
        "bearer",
        "access_token",
    ],
)
def test_check_refuses_a_credential_named_param(repo, cli, name):
    edit_pin(repo, "  temperature: 0\n", f"  temperature: 0\n  {name}: {CANARY}\n")
    col = 2 + len(name) + 2 + 1
    assert_refused(repo, cli, f"{PIN}:8:{col}: params.{name}: params may not hold credentials")


@pytest.mark.parametrize(
    ("block", "where"),
    [
        ("  extra_headers:\n    Authorization: Bearer {key}\n", "9:20: params.extra_headers."),
        ("  default_headers:\n    X-API-Key: {key}\n", "9:16: params.default_headers."),
        ("  headers: {{Proxy-Authorization: '{key}'}}\n", "8:34: params.headers."),
        ("  metadata:\n    auth:\n      session_token: {key}\n", "10:22: params.metadata.auth."),
        ("  tools:\n    - type: x\n      api_key: {key}\n", "10:16: params.tools.0.api_key"),
    ],
)
def test_check_refuses_a_credential_nested_in_params(repo, cli, block, where):
    edit_pin(repo, "  temperature: 0\n", "  temperature: 0\n" + block.format(key=CANARY))
    assert_refused(repo, cli, f"{PIN}:{where}")


def test_check_allows_params_that_only_resemble_credentials(repo, cli):
    params = """\
  max_tokens: 256
  prompt_cache_key: labels-v1
  tools:
    - type: function
      function:
        name: sign_in
        parameters:
          type: object
          properties:
            password: {type: string}
            token: {type: string}
"""
    edit_pin(repo, "  temperature: 0\n", "  temperature: 0\n" + params)
    result = cli(repo, "check")
    assert result.code == 0, result.err


# ---------------------------------------------------------------- redaction
def test_a_redactor_replaces_a_value_and_its_encodings():
    r = Redactor([CANARY])
    basics = [base64.b64encode(f"{user}:{CANARY}".encode()).decode() for user in ("", "a", "ab")]
    texts = [CANARY, quote(CANARY, safe=""), base64.b64encode(CANARY.encode()).decode(), *basics]
    for text in texts:
        shown = r.text(f"Authorization: Basic {text}!")
        assert REDACTED in shown and shown.endswith("!")
        assert CANARY not in shown and text not in shown


def test_a_redactor_finds_a_value_as_json_escapes_it():
    key = 'pa"ss\\word-12345'
    line = json.dumps({"text": f"it was {key}"}).encode()
    redacted = Redactor([key]).data(line)
    assert json.loads(redacted) == {"text": f"it was {REDACTED}"}


def test_values_shorter_than_eight_characters_are_never_redacted():
    r = Redactor(["1234567", "true"])
    assert not r
    assert r.text("1234567 is true") == "1234567 is true"


def test_the_redactor_follows_what_the_watched_variables_hold(monkeypatch):
    redaction.watch(["EVALREG_TEST_SECRET"])
    monkeypatch.setenv("EVALREG_TEST_SECRET", CANARY)
    assert redaction.redact(f"key {CANARY}") == f"key {REDACTED}"
    monkeypatch.setenv("EVALREG_TEST_SECRET", CANARY_2)
    assert redaction.redact(f"{CANARY} {CANARY_2}") == f"{CANARY} {REDACTED}"
    monkeypatch.delenv("EVALREG_TEST_SECRET")
    assert redaction.redact(CANARY_2) == CANARY_2


def test_a_credential_resolved_at_run_time_is_redacted_from_then_on():
    token = "ya29.resolved-at-run-time-5Hq7Vd2Kx"
    assert redaction.redact(token) == token
    unchanged = redaction.current()
    assert redaction.current() is unchanged  # nothing changed: nothing rebuilt
    redaction.watch_value(token)
    assert redaction.redact(f"Bearer {token}") == f"Bearer {REDACTED}"
    watched = redaction.current()
    redaction.watch_value(token)  # a provider registers what it sends before each request
    assert redaction.current() is watched


def test_a_provider_error_is_redacted_before_it_is_cut(monkeypatch):
    redaction.watch(["EVALREG_TEST_SECRET"])
    monkeypatch.setenv("EVALREG_TEST_SECRET", CANARY)
    with LLMServer() as server:
        # The key would straddle the 200-character cut of the error detail.
        server.error_text = lambda r: "x" * 190 + r.headers["authorization"].split()[-1]
        server.fail_next("401")

        async def post() -> None:
            async with HttpLayer() as http:
                await http.post(
                    "p",
                    Limits(max_retries=0),
                    f"{server.base_url}/chat/completions",
                    {"authorization": f"Bearer {CANARY}"},
                    b'{"model":"m","messages":[{"role":"user","content":"hi"}]}',
                    lambda data: data,
                )

        with pytest.raises(ProviderError) as caught:
            asyncio.run(post())
    assert str(caught.value) == "HTTP 401: " + "x" * 190 + REDACTED
    assert CANARY[:8] not in str(caught.value)


# ---------------------------------------------------------------- the whole loop
ANTHROPIC_PIN = """\
schema_version: 1
provider: anthropic
model: claude-test-1
base_url: {url}
api_key_env: ANTHROPIC_API_KEY
price:
  input_per_mtok: 3
  output_per_mtok: 15
  as_of: 2026-01-01
"""


ITEM_2 = '"Message: message 2","role":"user"}],'
"""Where item 2's request body ends its messages (request bodies are canonical JSON)."""


def test_no_key_reaches_disk_the_terminal_or_the_comment(live: Repo, cli, server, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", CANARY)
    monkeypatch.setenv("ANTHROPIC_API_KEY", CANARY_2)
    live.write("registry/models/claude.yaml", ANTHROPIC_PIN.format(url=server.root_url))
    selection = live.read("registry/selections/labels.yaml")
    live.write(
        "registry/selections/labels.yaml",
        selection.replace("    pin: mini\n", "    pin: mini\n  - id: claude\n    pin: claude\n"),
    )
    live.commit("an anthropic candidate")
    echoed: list[str] = []
    quoted: list[str] = []
    flip = {"value": False}

    def echo(request) -> str:
        sent = request.headers.get("authorization") or request.headers.get("x-api-key", "")
        key = sent.removeprefix("Bearer ")
        echoed.append(key)
        text = request.body["messages"][-1]["content"]
        right = "a" if text.endswith(("1", "3", "5")) else "b"
        wrong = "b" if right == "a" else "a"
        label = wrong if flip["value"] and text.endswith(("0", "1")) else right
        basic = base64.b64encode(f"user:{key}".encode()).decode()
        return json.dumps({"label": label, "note": f"You sent {sent} (Basic {basic})"})

    def error_text(request) -> str:
        sent = request.headers.get("authorization") or request.headers.get("x-api-key", "")
        quoted.append(sent)
        return f"Incorrect API key provided: {sent}"

    server.api_key = None  # both pins' keys are accepted, and echoed
    server.responder = echo
    server.error_text = error_text
    printed: list[str] = []

    def run(*args: str, code: int | None = 0) -> str:
        result = cli(live, *args)
        printed.append(result.out + result.err)
        if code is not None:
            assert result.code == code, (args, result.out, result.err)
        return result.out + result.err

    # Not on a pin's first request, which would stop the pin (its preflight): on item 2's.
    server.fail_matching(ITEM_2 + '"model":"gpt-4o-mini', "401", times=1)
    server.fail_matching(ITEM_2 + '"model":"claude-test-1"', "401", times=1)
    server.fail_matching(ITEM_2 + '"model":"claude-test-1"', "500", times=1)
    first = run("run", code=1)  # a 401 is an error of its cell, retried by the next run
    assert f"Incorrect API key provided: Bearer {REDACTED}" in first
    assert f"Incorrect API key provided: {REDACTED}" in first
    run("report")
    live.commit("results on main")

    live.git("checkout", "-q", "-b", "warmer")
    flip["value"] = True
    edit_pin(live, "temperature: 0", "temperature: 0.9", "a warmer pin")
    server.fail_matching(ITEM_2 + '"model":"gpt-4o-mini', "401", times=1)
    run("run", code=1)
    run("report")
    head = live.commit("results of a warmer pin")

    diff_file = live.root.parent / "diff.json"
    run("diff", "main", "--format", "json", "-o", str(diff_file))
    markdown = run("diff", "main")
    run("status")
    run("check", code=None)
    run("reproduce", "HEAD")
    with monkeypatch.context() as keyless:  # the results hold no key to redact: CI agrees
        keyless.delenv("OPENAI_API_KEY")
        keyless.delenv("ANTHROPIC_API_KEY")
        run("reproduce", "HEAD")
    run("audit", "--no-verify")
    run("drift", "--sample", "2", code=None)
    with GitHubAPI(tokens={"ghs_secrettest0123456789": "github-actions[bot]"}) as gh:
        gh.add_pull(12, head)
        monkeypatch.setenv("GITHUB_TOKEN", "ghs_secrettest0123456789")
        monkeypatch.setenv("GITHUB_REPOSITORY", gh.repository)
        monkeypatch.setenv("GITHUB_API_URL", gh.url)
        monkeypatch.delenv("GITHUB_EVENT_PATH", raising=False)
        comment = run(
            "comment", "--diff", str(diff_file), "--pr", "12", "--head-sha", head, "--dry-run"
        )

    # The keys did reach the server and come back, in outputs and in error bodies, ...
    assert set(echoed) == {CANARY, CANARY_2}
    assert {f"Bearer {CANARY}", CANARY_2} <= set(quoted)
    # ... and what came back was stored, diffed and commented on, redacted.
    segments = list((live.root / "reports/store").glob("*.jsonl"))
    assert segments and all(REDACTED.encode() in p.read_bytes() for p in segments)
    assert f"You sent Bearer {REDACTED}" in diff_file.read_text()
    assert "You sent Bearer" in markdown and "You sent Bearer" in comment
    remote = list((live.root / "dvc-storage").rglob("*"))
    assert any(p.is_file() for p in remote)

    haystacks = [
        *everything_written(live.root),
        ("diff.json", diff_file.read_bytes()),
        ("printed", "".join(printed).encode()),
    ]
    assert leaks(haystacks, (CANARY, CANARY_2)) == []


# ---------------------------------------------------------------- credentials providers resolve
AZURE_ENTRA_PIN = """\
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


@dataclass
class Signed:
    """The ``mini`` pin on a provider that resolves its own credentials, the server it
    calls, and the credentials: ``carried`` those its requests carried (known once they
    are sent), ``held`` those resolved but sent elsewhere or not at all."""

    server: Any
    fault: str
    """An error of the server's API that a retry cannot fix, for item 2."""
    carried: Callable[[], list[str]]
    held: tuple[str, ...] = ()


def prompt_of(request: Any) -> str:
    if "contents" in request.body:  # Gemini
        return str(request.body["contents"][-1]["parts"][0]["text"])
    content = request.body["messages"][-1]["content"]
    return str(content if isinstance(content, str) else content[0]["text"])


def label(request: Any) -> str:
    return "a" if prompt_of(request).endswith(("1", "3", "5")) else "b"


def quoted(request: Any) -> str:
    """The credentials a request carried, as a gateway quoting them back writes them."""
    headers = ("authorization", "x-amz-security-token")
    sent = " ".join(request.headers[h] for h in headers if h in request.headers)
    basic = base64.b64encode(f"user:{sent}".encode()).decode()
    return f"{sent} (Basic {basic}; {quote(sent, safe='')})"


def on_bedrock(live: Repo, monkeypatch, tmp_path: Path, stack: ExitStack, profile: bool) -> Signed:
    """Temporary credentials from a profile of the shared credentials file, or from the
    environment variables."""
    where = "profile" if profile else "environment"
    access_key = f"ASIA{where.upper()}CANARY7Q2ZP9"[:20]
    secret_key = f"wJalrXUt/{where}+secret=Lx4Vr8Tn3Wb6Y"
    token = f"IQoJb3JpZ2luX2VjE+{where}/session=Tn3Wb6Y+Lq9Rt2Uv=="
    aws_environment(monkeypatch, tmp_path)
    server = stack.enter_context(
        BedrockServer(
            access_key=access_key, secret_key=secret_key, session_token=token, region="eu-west-1"
        )
    )
    pin = bedrock_pin(server.root_url)
    if profile:
        (tmp_path / "aws-credentials").write_text(
            f"[audit]\naws_access_key_id = {access_key}\naws_secret_access_key = {secret_key}\n"
            f"aws_session_token = {token}\n"
        )
        pin = pin.replace("  region: eu-west-1\n", "  region: eu-west-1\n  profile: audit\n")
    else:
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", access_key)
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", secret_key)
        monkeypatch.setenv("AWS_SESSION_TOKEN", token)
    live.write(PIN, pin)
    return Signed(server, "access_denied", lambda: [access_key, token], (secret_key,))


def on_vertex(live: Repo, monkeypatch, tmp_path: Path, stack: ExitStack) -> Signed:
    """Application-default credentials of a service account (its key file outside the
    repository), a new access token for every attempt."""
    server = stack.enter_context(GeminiServer())
    private_key = service_account_adc(server, monkeypatch, tmp_path)
    server.token_lifetime_s = 60  # inside google-auth's refresh margin
    live.write(PIN, gemini_pin(server.root_url, VERTEX))
    held = (private_key.splitlines()[1],)
    return Signed(server, "permission_denied", lambda: list(server.issued), held)


def on_vertex_user(live: Repo, monkeypatch, tmp_path: Path, stack: ExitStack) -> Signed:
    """A user's application-default credentials that still hold a valid access token."""
    server = stack.enter_context(GeminiServer())
    token = "ya29.a0AfB_user-canary-Hd5Jf1Ks0Lq9Rt2Uv"
    server.issued.append(token)
    user = authorized_user_adc(monkeypatch, tmp_path, token)
    live.write(PIN, gemini_pin(server.root_url, VERTEX))
    held = (user["client_secret"], user["refresh_token"])
    return Signed(server, "permission_denied", lambda: [token], held)


def on_entra(live: Repo, monkeypatch, server: LLMServer) -> Signed:
    """Microsoft Entra ID tokens from azure-identity, a new one for every attempt (each
    near its expiry at once)."""
    tokens = EntraTokens(server, lifetime=1, prefix="eyJ0eXAi.entra-canary-7Qm2Zp9L-")
    tokens.install(monkeypatch)
    live.write(PIN, AZURE_ENTRA_PIN.format(url=server.root_url))
    server.deployments = {"mini-prod": "gpt-4o-mini-2024-07-18"}

    def carried() -> list[str]:
        return [f"{tokens.prefix}{n:03d}.sig" for n in range(1, len(tokens.scopes) + 1)]

    return Signed(server, "401", carried)


@pytest.mark.parametrize(
    "where",
    ["bedrock-environment", "bedrock-profile", "vertex-adc", "vertex-user-adc", "azure-entra"],
)
def test_no_credential_a_provider_resolves_reaches_disk_or_the_terminal(
    live: Repo, cli, server, monkeypatch, tmp_path, where
):
    with ExitStack() as stack:
        if where.startswith("bedrock"):
            signed = on_bedrock(live, monkeypatch, tmp_path, stack, where.endswith("profile"))
        elif where == "vertex-adc":
            signed = on_vertex(live, monkeypatch, tmp_path, stack)
        elif where == "vertex-user-adc":
            signed = on_vertex_user(live, monkeypatch, tmp_path, stack)
        else:
            signed = on_entra(live, monkeypatch, server)
        live.commit(f"mini on {where}")
        signed.server.responder = lambda r: json.dumps({"label": label(r), "note": quoted(r)})
        signed.server.error_text = lambda r: f"Invalid credentials: {quoted(r)}"
        printed: list[str] = []

        def run(*args: str, code: int = 0) -> str:
            result = cli(live, *args)
            printed.append(result.out + result.err)
            assert result.code == code, (args, result.out, result.err)
            return result.out + result.err

        signed.server.fail_matching('"Message: message 2"', signed.fault, times=1)
        first = run("run", code=1)  # an error of its cell, retried by the next run
        assert "Invalid credentials: " in first and REDACTED in first
        run("run")
        run("report")
        live.commit("results")
        run("view", "--with-text")
        run("show", "m-002")
        run("status")
        carried = signed.carried()

    # The credentials did reach the server and come back, in answers and in an error, ...
    sent = " ".join(quoted(r) for r in signed.server.requests)
    assert carried and all(value in sent for value in carried)
    # ... and what came back was stored, reported and shown, redacted.
    segments = list((live.root / "reports/store").glob("*.jsonl"))
    assert segments and all(REDACTED.encode() in p.read_bytes() for p in segments)
    assert REDACTED in (live.root / "reports/explorer/labels.html").read_text()
    assert any(p.is_file() for p in (live.root / "dvc-storage").rglob("*"))
    haystacks = [*everything_written(live.root), ("printed", "".join(printed).encode())]
    assert leaks(haystacks, [*carried, *signed.held]) == []
