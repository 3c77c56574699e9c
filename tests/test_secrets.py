"""Secrets reach no path: ``check`` refuses credentials in pins, and what the variables a
registry names hold is redacted from everything evalreg stores, writes and prints."""

from __future__ import annotations

import asyncio
import base64
import json
from urllib.parse import quote

import pytest

from evalreg import redaction
from evalreg.providers.base import ProviderError
from evalreg.providers.http import HttpLayer
from evalreg.redaction import REDACTED, Redactor
from evalreg.registry.schema import Limits

from conftest import Repo
from support.github_api import GitHubAPI
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


def forms(key: str) -> list[bytes]:
    """The key as it was sent and as the server echoed it."""
    return [
        key.encode(),
        base64.b64encode(key.encode()),
        base64.b64encode(f"user:{key}".encode()),
    ]


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
    leaks = [
        (where, form)
        for key in (CANARY, CANARY_2)
        for form in forms(key)
        for where, data in haystacks
        if form in data
    ]
    assert leaks == []
