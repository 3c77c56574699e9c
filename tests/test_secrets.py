"""Secrets reach no path: ``check`` refuses credentials in pins."""

from __future__ import annotations

import pytest

from conftest import Repo

CANARY = "sk-canary-7Qm2Zp9Lx4Vr8Tn3Wb6Y"
"""The OpenAI pin's key in these tests."""
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
