"""A credential travels over TLS: ``check`` and ``run`` refuse a pin that would send one over
plain ``http://`` to another machine, unless the pin says ``allow_insecure_http: true`` (a
service inside a private network), which the report and the audit record then show."""

from __future__ import annotations

import pytest

from evalreg.audit.record import build_audit

from conftest import PIN_OPENAI, Repo, assert_refused

MINI = "registry/models/mini.yaml"
PRIVATE_URL = "http://10.20.30.40:8000/v1"


def _pin_at(repo: Repo, url: str, extra: str = "") -> None:
    repo.write(MINI, PIN_OPENAI.replace("https://api.openai.com/v1", url) + extra)


def _line_of(text: str, key: str) -> int:
    return next(n for n, line in enumerate(text.splitlines(), 1) if line.startswith(key))


def test_check_refuses_a_key_sent_over_http_to_another_host(repo: Repo, cli):
    _pin_at(repo, PRIVATE_URL)
    line = _line_of(repo.read(MINI), "base_url:")

    err = assert_refused(
        repo,
        cli,
        "check",
        expect=(
            f"{MINI}:{line}:11:",
            "OPENAI_API_KEY",
            "10.20.30.40",
            "clear text",
            "https://",
            "allow_insecure_http: true",
        ),
    )

    assert "private network" in err


BEDROCK_PIN = """\
schema_version: 1
provider: bedrock
model: anthropic.claude-test-v1:0
aws:
  region: eu-west-1
base_url: {url}
"""


def test_check_refuses_aws_credentials_signed_over_http_to_another_host(repo: Repo, cli):
    repo.write("registry/models/claude.yaml", BEDROCK_PIN.format(url="http://bedrock.corp.example"))

    assert_refused(
        repo,
        cli,
        "check",
        expect=("registry/models/claude.yaml:6:11:", "AWS credentials", "bedrock.corp.example"),
    )


AZURE_ENTRA_PIN = """\
schema_version: 1
provider: azure_openai
model: gpt-4o-mini
base_url: http://myresource.openai.azure.com
azure:
  endpoint: v1
  auth: entra
"""


def test_check_refuses_an_entra_token_sent_over_http(repo: Repo, cli):
    repo.write("registry/models/azure.yaml", AZURE_ENTRA_PIN)

    assert_refused(
        repo,
        cli,
        "check",
        expect=("registry/models/azure.yaml:4:11:", "Microsoft Entra ID token"),
    )


def test_check_accepts_https(repo: Repo, cli):
    _pin_at(repo, "https://10.20.30.40:8443/v1")

    result = cli(repo, "check")

    assert result.code == 0, result.err


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8000/v1",
        "http://127.8.9.10/v1",
        "http://localhost:8000/v1",
        "http://[::1]:8000/v1",
    ],
)
def test_check_accepts_http_to_this_machine(repo: Repo, cli, url: str):
    _pin_at(repo, url)

    result = cli(repo, "check")

    assert result.code == 0, result.err


def test_check_accepts_http_when_the_pin_allows_it(repo: Repo, cli):
    _pin_at(repo, PRIVATE_URL, "allow_insecure_http: true\n")

    result = cli(repo, "check")

    assert result.code == 0, result.err


def test_the_report_shows_a_credential_sent_in_clear_text(repo: Repo, cli):
    _pin_at(repo, PRIVATE_URL, "allow_insecure_http: true\n")

    assert cli(repo, "report").code == 0

    candidates = repo.read("reports/labels.md").split("## 4. Candidates\n", 1)[1]
    candidates = candidates.split("\n## ", 1)[0]
    assert "Credentials sent in clear text:" in candidates
    assert "`mini` sends the key in OPENAI" in candidates
    assert "over plain HTTP, unencrypted, to `10.20.30.40`" in candidates


def test_the_report_says_nothing_of_clear_text_for_pins_over_tls(repo: Repo, cli):
    assert cli(repo, "report").code == 0

    assert "clear text" not in repo.read("reports/labels.md")


def test_allowing_http_keeps_the_pins_results(live: Repo, cli):
    """The flag says how the key travels, not what the model answers: no result goes stale."""
    assert cli(live, "run", "--candidate", "mini").code == 0
    live.commit("results")
    live.write(MINI, live.read(MINI) + "allow_insecure_http: true\n")

    result = cli(live, "status")

    assert result.code == 0, result.err
    assert "stale" not in result.out


def test_the_audit_record_shows_a_pin_that_starts_sending_its_key_over_http(repo: Repo, cli):
    _pin_at(repo, PRIVATE_URL, "allow_insecure_http: true\n")
    sha = repo.commit("Serve mini from the private gateway (#21)")

    record = build_audit(repo.root, "HEAD", verify=False)

    [summary] = [f.summary for f in record.files if f.commit.sha == sha and f.kind == "pin"]
    assert summary == (
        f"`base_url` https://api.openai.com/v1 → {PRIVATE_URL}",
        "`allow_insecure_http` false → true",
    )
    result = cli(repo, "audit", "--no-verify")
    assert result.code == 0, result.err
    assert "\\`allow\\_insecure\\_http\\` false → true" in result.out


def test_run_refuses_before_any_request(live: Repo, cli, server):
    _pin_at(live, PRIVATE_URL)
    live.commit("mini behind a plain-HTTP gateway")

    assert_refused(live, cli, "run", expect=(f"{MINI}:", "clear text", "10.20.30.40"))

    assert server.requests == []
