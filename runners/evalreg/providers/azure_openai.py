"""Azure OpenAI: chat completions on a resource's deployment (with ``api-version``) or on
its OpenAI-compatible v1 endpoint, with an ``api-key`` or Microsoft Entra ID tokens."""

from __future__ import annotations

import threading
import time
from typing import Any, ClassVar, Protocol
from urllib.parse import quote

from evalreg import redaction
from evalreg.errors import UsageError
from evalreg.providers.base import Completion, Messages, api_key, register
from evalreg.providers.openai import chat_messages, chat_tools, parse_chat_completion
from evalreg.providers.tools import Toolset
from evalreg.registry.schema import Azure, Pin

ENTRA_SCOPE = "https://cognitiveservices.azure.com/.default"
REFRESH_BEFORE_S = 300.0
"""A cached Entra ID token is replaced this long before it expires, so no attempt is sent
with a token that lapses in flight."""


_ENVIRONMENT_SECRETS = (
    "AZURE_CLIENT_SECRET",
    "AZURE_CLIENT_CERTIFICATE_PASSWORD",
    "AZURE_PASSWORD",
)
"""The variables azure-identity's environment credential reads secrets from."""


class _AccessToken(Protocol):
    @property
    def token(self) -> str: ...

    @property
    def expires_on(self) -> int: ...


class _Credential(Protocol):
    def get_token(self, *scopes: str) -> _AccessToken: ...


class EntraTokens:
    """Bearer tokens for Azure OpenAI from ``azure-identity``'s ``DefaultAzureCredential``
    (environment, workload identity, managed identity, Azure CLI...), made on first use
    and cached until ``REFRESH_BEFORE_S`` before they expire. Tokens live only in memory,
    and are redacted like keys from whatever a server quotes back."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._credential: _Credential | None = None
        self._token: tuple[str, float] | None = None

    def token(self) -> str:
        with self._lock:
            now = time.time()
            if self._token is None or self._token[1] - now <= REFRESH_BEFORE_S:
                credential = self._credential or self._make_credential()
                self._credential = credential
                try:
                    got = credential.get_token(ENTRA_SCOPE)
                except Exception as exc:  # azure.core's ClientAuthenticationError and kin
                    first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
                    raise UsageError(
                        f"no Microsoft Entra ID token for Azure OpenAI ({type(exc).__name__}"
                        f"{': ' + first[:300] if first else ''}): sign in (az login), or set "
                        "the AZURE_CLIENT_ID/AZURE_TENANT_ID/AZURE_CLIENT_SECRET variables or "
                        "a managed identity"
                    ) from None
                redaction.watch_value(got.token)  # a server may quote it back
                self._token = (got.token, float(got.expires_on))
            return self._token[0]

    @staticmethod
    def _make_credential() -> _Credential:
        try:
            from azure.identity import DefaultAzureCredential
        except ImportError:
            raise UsageError(
                "an Azure OpenAI pin with 'auth: entra' needs azure-identity: "
                "pip install 'evalreg[azure]'"
            ) from None
        # A service principal's secret or a certificate's password, where the credential
        # reads one from the environment: a credential the run holds, redacted like a key.
        redaction.watch(_ENVIRONMENT_SECRETS)
        credential: _Credential = DefaultAzureCredential()
        return credential


@register("azure_openai")
class AzureOpenAIProvider:
    name: ClassVar[str]
    http: ClassVar[bool] = True

    def __init__(self) -> None:
        self._entra = EntraTokens()

    def body(
        self,
        pin: Pin,
        messages: Messages,
        item_input: dict[str, Any] | None,
        tools: Toolset | None = None,
    ) -> dict[str, Any]:
        # A deployment URL names the model; the v1 endpoint takes the deployment as 'model'.
        named = {"model": pin.model} if _azure(pin).endpoint == "v1" else {}
        return {
            **named,
            "messages": chat_messages(messages),
            **chat_tools(tools),
            **pin.params,
            **pin.extra_params,
        }

    def endpoint(self, pin: Pin) -> str:
        azure = _azure(pin)
        base = (pin.base_url or "").rstrip("/")
        if base.endswith("/openai/v1") or base.endswith("/openai"):
            base = base.rsplit("/openai", 1)[0]
        if azure.endpoint == "v1":
            return f"{base}/openai/v1/chat/completions"
        deployment = quote(azure.deployment or pin.model or "", safe="")
        return (
            f"{base}/openai/deployments/{deployment}/chat/completions"
            f"?api-version={quote(azure.api_version or '', safe='')}"
        )

    def headers(self, pin: Pin) -> dict[str, str]:
        if _azure(pin).auth == "entra":
            return {}
        return {"api-key": api_key(pin)}

    def sign(self, pin: Pin, url: str, headers: dict[str, str], content: bytes) -> dict[str, str]:
        if _azure(pin).auth != "entra":
            return headers
        return {**headers, "authorization": f"Bearer {self._entra.token()}"}

    def parse(self, data: Any) -> Completion:
        return parse_chat_completion(data)


def _azure(pin: Pin) -> Azure:
    if pin.azure is None:  # the schema requires it of an azure_openai pin
        raise UsageError(f"pin for {pin.model} has no 'azure:' settings")
    return pin.azure
