"""The provider contract, its error type and the registry of providers by name."""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Protocol, cast, runtime_checkable

from evalreg.errors import UsageError
from evalreg.providers.tools import ToolCall, Toolset
from evalreg.redaction import redact
from evalreg.registry.schema import Pin

Messages = list[dict[str, Any]]
"""Chat turns: a role and a content, text or (a turn with attachments) a list of content
parts (``providers.attachments``); tool turns as ``providers.tools`` says."""


@dataclass(frozen=True)
class Completion:
    """What a provider returned for one request, as stored in the response store."""

    text: str
    model: str | None = None
    system_fingerprint: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    cached_input_tokens: int = 0
    """Input tokens the provider served from its prompt cache (part of ``input_tokens``)."""
    finish_reason: str | None = None
    """Why the model stopped, in the provider's own words (``stop``, ``length``,
    ``end_turn``, ``content_filter``...)."""
    batch: bool = False
    """Bought through a batch API, so priced at the pin's batch prices."""
    tool_calls: tuple[ToolCall, ...] = ()
    """The tool calls the model made, in its order."""

    def as_record(self) -> dict[str, Any]:
        usage = {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "reasoning_tokens": self.reasoning_tokens,
        }
        # Written only when known, so records of providers that report neither keep their bytes.
        if self.cached_input_tokens:
            usage["cached_input_tokens"] = self.cached_input_tokens
        record: dict[str, Any] = {
            "text": self.text,
            "model": self.model,
            "system_fingerprint": self.system_fingerprint,
            "usage": usage,
        }
        if self.finish_reason is not None:
            record["finish_reason"] = self.finish_reason
        if self.batch:
            record["batch"] = True
        if self.tool_calls:
            record["tool_calls"] = [call.as_record() for call in self.tool_calls]
        return record

    @classmethod
    def from_record(cls, data: dict[str, Any]) -> Completion:
        usage = data.get("usage") or _NO_USAGE
        calls = data.get("tool_calls")
        # Positional, in field order (no keyword matching): this runs for every stored
        # response graded.
        return cls(
            data["text"],
            data.get("model"),
            data.get("system_fingerprint"),
            int(usage.get("input_tokens", 0)),
            int(usage.get("output_tokens", 0)),
            int(usage.get("reasoning_tokens", 0)),
            int(usage.get("cached_input_tokens", 0)),
            data.get("finish_reason"),
            data.get("batch") is True,
            tuple(ToolCall.from_record(c) for c in calls) if calls else (),
        )


_NO_USAGE: dict[str, Any] = {}
"""The usage of a stored response that records none (read, never written)."""


class ProviderError(Exception):
    """A request that produced no model output: counted and logged, never stored.

    ``kind`` is one of: rate_limited, server, timeout, connection, malformed, too_large (a
    body longer than the pin's ``limits.max_response_bytes``), client, auth, system (a
    ``python`` callable raised), unreachable (not sent: the pin's endpoint refused its last
    connections, ``http.UNREACHABLE_AFTER`` of them), quota (the account's quota or budget
    is spent: not retried), refused (not sent: an earlier answer refused every request of
    the pin, see ``http.refuses_pin`` and ``http.REFUSED_AFTER``). The message is redacted
    here, once: a provider may quote the key it was sent (a 401 body, a URL in a connection
    error).
    """

    def __init__(
        self,
        kind: str,
        message: str,
        *,
        status: int | None = None,
        retryable: bool = False,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(redact(message))
        self.kind = kind
        self.status = status
        self.retryable = retryable
        self.retry_after = retry_after
        self.attempts = 1
        """Requests sent before giving up (the HTTP layer's retries included)."""
        self.item_cause = False
        """A 400 or 422 whose answer names a cause in the request's content (a content
        filter, a prompt too long): never counted towards stopping the pin."""

    def summary(self) -> str:
        status = f" {self.status}" if self.status is not None else ""
        return f"{self.kind}{status}: {self}"


class Provider(Protocol):
    """How one API family is spoken. HTTP providers are driven by the shared HTTP layer."""

    name: ClassVar[str]
    http: ClassVar[bool]

    def body(
        self,
        pin: Pin,
        messages: Messages,
        item_input: dict[str, Any] | None,
        tools: Toolset | None = None,
    ) -> dict[str, Any]:
        """The exact request body for ``messages`` (system message first, if any), declaring
        ``tools`` when given."""
        ...

    def endpoint(self, pin: Pin) -> str:
        """The URL the body is posted to (for ``python``, a stable identifier)."""
        ...

    def headers(self, pin: Pin) -> dict[str, str]:
        """Request headers, with the key read from the environment now, at call time."""
        ...

    def parse(self, data: Any) -> Completion:
        """Completion from a response body; ``ProviderError('malformed')`` if it has none."""
        ...


@runtime_checkable
class Signer(Protocol):
    """What a provider whose requests carry a per-request signature or short-lived token
    offers besides ``headers`` (AWS SigV4, Entra ID or Google access tokens): the headers
    to send for one attempt, computed from the exact URL and body. The HTTP layer calls it
    before every attempt, so a retry is signed afresh; nothing it returns is stored."""

    def sign(self, pin: Pin, url: str, headers: dict[str, str], content: bytes) -> dict[str, str]:
        """``headers`` with the signature or token added."""
        ...


def signer(provider: Provider) -> Signer | None:
    """The provider's signer, if its requests are signed per request."""
    return cast(Signer, provider) if _signs(type(provider)) else None


@functools.cache
def _signs(cls: type[Any]) -> bool:
    # Asked before every request: a check against a protocol walks its members each time.
    return issubclass(cls, Signer)


_PROVIDERS: dict[str, type[Any]] = {}
_MODULES = {
    "openai": "openai",
    "anthropic": "anthropic",
    "python": "python",
    "azure_openai": "azure_openai",
    "openai_responses": "openai_responses",
    "bedrock": "bedrock",
    "gemini": "gemini",
    "http": "service",
}


def register(name: str) -> Callable[[type[Any]], type[Any]]:
    """Class decorator: make a provider available under ``provider: <name>``."""

    def decorate(cls: type[Any]) -> type[Any]:
        cls.name = name
        _PROVIDERS[name] = cls
        return cls

    return decorate


def get_provider(name: str, root: Path | None = None) -> Provider:
    """A provider instance; ``root`` is the repository (``python`` loads callables from it)."""
    if name not in _PROVIDERS and name in _MODULES:
        importlib.import_module(f"evalreg.providers.{_MODULES[name]}")
    try:
        cls = _PROVIDERS[name]
    except KeyError:
        raise ValueError(f"unknown provider {name!r}") from None
    provider: Provider = cls(root) if name == "python" else cls()
    return provider


def key_scope(provider: Provider, pin: Pin) -> str:
    """What a request's store key holds besides its body and sample: the endpoint, or what
    else decides the answer for a provider that says (an ``http`` pin's version)."""
    scope = getattr(provider, "scope", None)
    return str(scope(pin)) if callable(scope) else provider.endpoint(pin)


def http_method(provider: Provider, pin: Pin) -> str:
    """The HTTP method of the pin's requests (POST unless its provider says)."""
    method = getattr(provider, "method", None)
    return str(method(pin)) if callable(method) else "POST"


def output_cap(body: dict[str, Any]) -> int | None:
    """The most output tokens a request body allows, wherever its API puts the limit."""
    if not isinstance(body, dict):  # an ``http`` pin's body may be any JSON value
        return None
    nested = (body.get("inferenceConfig"), body.get("generationConfig"))
    for holder, name in (
        (body, "max_tokens"),
        (body, "max_completion_tokens"),
        (body, "max_output_tokens"),
        (nested[0], "maxTokens"),
        (nested[1], "maxOutputTokens"),
    ):
        value = holder.get(name) if isinstance(holder, dict) else None
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def all_providers(root: Path | None = None) -> dict[str, Provider]:
    """One instance of every provider, by name (``root`` as for ``get_provider``)."""
    return {name: get_provider(name, root) for name in _MODULES}


def credentials_problem(provider: Provider, pin: Pin) -> str | None:
    """Why ``pin``'s requests cannot be authenticated here, or None: the variable holding its
    key is not set, or (a provider that signs with a credential chain: SigV4, Vertex AI's
    application-default credentials, Entra ID) no credentials are found. It looks, never
    sends: a cell it blocks stays *pending*, as one without its key does."""
    import os

    if pin.api_key_env:
        return None if os.environ.get(pin.api_key_env) else f"{pin.api_key_env} is not set"
    check = getattr(provider, "credentials_problem", None)
    problem: str | None = check(pin) if callable(check) else None
    return problem


def api_key(pin: Pin) -> str:
    """The pin's key, from the environment variable it names (read at call time)."""
    import os

    if pin.api_key_env is None:
        return ""
    value = os.environ.get(pin.api_key_env)
    if not value:
        raise UsageError(
            f"environment variable {pin.api_key_env} is not set: it holds the key for "
            f"{pin.provider} model {pin.model}"
        )
    return value
