"""Pins on the cloud providers' stand-ins and the credentials their providers resolve: an
AWS environment cut off from the machine's, Google application-default credentials whose
tokens come from a ``GeminiServer``, and Microsoft Entra ID tokens from azure-identity's
``DefaultAzureCredential`` (its ``get_token`` stood in for)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import azure.identity
import pytest
from azure.core.credentials import AccessToken
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from support.cloud_servers import GeminiServer
from support.llm_server import LLMServer

BEDROCK_MODEL = "arn:aws:bedrock:eu-west-1:123456789012:inference-profile/eu.anthropic.claude-haiku"
SERVICE_ACCOUNT = "evals@audit-project.iam.gserviceaccount.com"
VERTEX = "vertex:\n  project: audit-project\n  location: europe-west4\n"
"""What makes a ``gemini_pin`` a Vertex AI pin (in place of its ``api_key_env``)."""


def bedrock_pin(base_url: str, extra: str = "") -> str:
    return f"""\
schema_version: 1
provider: bedrock
model: {BEDROCK_MODEL}
aws:
  region: eu-west-1
base_url: {base_url}
params:
  maxTokens: 64
  temperature: 0
  stopSequences: ["\\n\\n"]
extra_params:
  top_k: 5
limits:
  max_retries: 2
price:
  input_per_mtok: 0.8
  output_per_mtok: 4.0
  as_of: 2026-11-01
{extra}"""


def gemini_pin(base_url: str, auth: str = "api_key_env: GEMINI_API_KEY\n") -> str:
    return f"""\
schema_version: 1
provider: gemini
model: gemini-2.5-flash
base_url: {base_url}
{auth}params:
  maxOutputTokens: 128
  temperature: 0
  topK: 8
  thinkingConfig:
    thinkingBudget: 256
  safetySettings:
    - category: HARM_CATEGORY_HARASSMENT
      threshold: BLOCK_ONLY_HIGH
limits:
  max_retries: 2
price:
  input_per_mtok: 0.3
  output_per_mtok: 2.5
  as_of: 2026-11-01
"""


def aws_environment(monkeypatch: pytest.MonkeyPatch, directory: Path) -> None:
    """No credentials, profile, config file or instance metadata from the machine: the
    shared config and credentials files are ``aws-config`` and ``aws-credentials`` in
    ``directory`` (not written)."""
    for name in (
        "AWS_PROFILE",
        "AWS_DEFAULT_PROFILE",
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_ROLE_ARN",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(directory / "aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(directory / "aws-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


def service_account_adc(
    server: GeminiServer, monkeypatch: pytest.MonkeyPatch, directory: Path
) -> str:
    """Application-default credentials: a service account key file in ``directory`` whose
    tokens come from ``server``'s token endpoint. Returns the private key."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    public = (
        key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )
    server.service_account = (SERVICE_ACCOUNT, public)
    path = directory / "adc.json"
    path.write_text(
        json.dumps(
            {
                "type": "service_account",
                "project_id": "audit-project",
                "private_key_id": "loopback1",
                "private_key": private,
                "client_email": SERVICE_ACCOUNT,
                "client_id": "1234567890",
                "token_uri": f"{server.root_url}/token",
            }
        )
    )
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(path))
    monkeypatch.setenv("NO_GCE_CHECK", "True")
    return private


def authorized_user_adc(
    monkeypatch: pytest.MonkeyPatch, directory: Path, token: str, tag: str = "canary"
) -> dict[str, str]:
    """A user's application-default credentials (``gcloud auth application-default
    login``) in ``directory``, holding ``token`` valid for years: sent as it is, never
    refreshed. Returns what the file holds (``tag`` makes its secrets this test's own)."""
    user = {
        "type": "authorized_user",
        "client_id": "764086051850-loopback.apps.googleusercontent.com",
        "client_secret": f"GOCSPX-{tag}-Wb6Y7Qm2Zp9L",
        "refresh_token": f"1//0g{tag}-refresh-Lx4Vr8Tn3Wb6Y",
        "token": token,
        "expiry": "2099-01-01T00:00:00Z",
    }
    path = directory / "adc.json"
    path.write_text(json.dumps(user))
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(path))
    monkeypatch.setenv("NO_GCE_CHECK", "True")
    return user


class EntraTokens:
    """Stands in for ``DefaultAzureCredential.get_token``: numbered tokens (``prefix`` and
    the number), each valid for ``lifetime`` seconds, accepted by the server while
    ``accepted``."""

    def __init__(
        self, server: LLMServer, lifetime: float, prefix: str = "eyJ0eXAi.entra-token-"
    ) -> None:
        self.server, self.lifetime, self.prefix = server, lifetime, prefix
        self.scopes: list[tuple[str, ...]] = []
        self.accepted = True

    def install(self, monkeypatch: pytest.MonkeyPatch) -> EntraTokens:
        def get_token(credential: object, *scopes: str, **_: object) -> AccessToken:
            assert isinstance(credential, azure.identity.DefaultAzureCredential)
            self.scopes.append(scopes)
            token = f"{self.prefix}{len(self.scopes):03d}.sig"
            if self.accepted:
                self.server.entra_tokens.add(token)
            return AccessToken(token, int(time.time() + self.lifetime))

        monkeypatch.setattr(azure.identity.DefaultAzureCredential, "get_token", get_token)
        return self
