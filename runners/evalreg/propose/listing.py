"""The model lists providers publish, asked with the pins' own endpoints and credentials.

- OpenAI and OpenAI-compatible servers (``openai``, ``openai_responses``): ``GET
  {base_url}/models``, ``{"data": [{"id": ...}]}``; a server that pages it the way
  Anthropic does (``has_more``, ``last_id``) is followed to its last page.
- Anthropic: ``GET /v1/models?limit=1000`` and ``after_id`` while ``has_more``.
- The Gemini API: ``GET /v1beta/models?pageSize=1000`` and ``pageToken`` while a
  ``nextPageToken`` comes back; ids are read without their ``models/`` prefix.
- Amazon Bedrock (SigV4-signed, or a Bedrock API key): ``ListFoundationModels`` (``GET
  /foundation-models``, one page) for a model id, ``ListInferenceProfiles`` (``GET
  /inference-profiles``, ``maxResults`` and ``nextToken``) for a cross-region profile
  (``us.anthropic…``), at the pin region's control plane.

- Azure OpenAI: ``GET /openai/models?api-version=…`` at the resource, for a pin whose
  ``model`` is the model (``azure.deployment`` names its deployment). What it finds is
  reported, never made a branch: a newer model needs a deployment the team makes first,
  and a model the resource no longer offers for new deployments may still run in an
  existing one until its retirement date.

A pin whose provider publishes no list here (a Python callable, a team's ``http`` service,
a Vertex AI model, an Azure pin whose ``model`` is a deployment's name, a Bedrock model
ARN) is left out, and said to be.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from evalreg.canonical import loads_finite
from evalreg.providers.base import ProviderError
from evalreg.registry.schema import Limits, Pin

MAX_PAGES = 100
"""Pages followed in one list before it is called endless (100,000 models at 1,000 a page)."""


@dataclass(frozen=True)
class Source:
    """Where a pin's provider lists its models, and how a request there is made."""

    kind: str
    """``openai``, ``anthropic`` or ``gemini``: the list's shape."""
    url: str
    headers: Callable[[str], dict[str, str]]
    """The pin's own credentials for a request to a URL, made when asked (never stored;
    a SigV4 signature covers the URL and the time)."""
    who: str = ""
    """What names the credentials (the key's variable, the AWS or Azure settings; never a
    secret): pins at one URL asked with different keys may be shown different lists."""

    @property
    def key(self) -> tuple[str, str, str]:
        """Pins with the same key share one list (one set of requests)."""
        return (self.kind, self.url, self.who)


def _who(pin: Pin) -> str:
    return json.dumps(
        pin.model_dump(mode="json", include={"api_key_env", "azure", "aws", "vertex"}),
        sort_keys=True,
    )


def source(pin: Pin) -> Source | str:
    """Where ``pin``'s provider lists its models, or why it has no list here."""
    from evalreg.providers import get_provider

    provider = pin.provider
    if provider in ("openai", "openai_responses"):
        from evalreg.providers.openai import DEFAULT_BASE_URL

        base = (pin.base_url or DEFAULT_BASE_URL).rstrip("/")
        return Source(
            "openai", f"{base}/models", lambda _: get_provider("openai").headers(pin), _who(pin)
        )
    if provider == "anthropic":
        from evalreg.providers.anthropic import DEFAULT_BASE_URL as ANTHROPIC

        base = (pin.base_url or ANTHROPIC).rstrip("/")
        url = base + ("/models" if base.endswith("/v1") else "/v1/models")
        return Source("anthropic", url, lambda _: get_provider("anthropic").headers(pin), _who(pin))
    if provider == "gemini" and pin.vertex is None:
        from evalreg.providers.gemini import DEFAULT_BASE_URL as GEMINI

        base = (pin.base_url or GEMINI).rstrip("/")
        return Source(
            "gemini",
            f"{base}/v1beta/models",
            lambda _: get_provider("gemini").headers(pin),
            _who(pin),
        )
    if provider == "gemini":
        return "a Vertex AI model: Vertex AI's model garden is not listed here"
    if provider == "bedrock":
        return _bedrock(pin)
    if provider == "azure_openai":
        return _azure(pin)
    return f"a {provider} pin has no provider model list"


_PROFILE = re.compile(r"^(us|eu|apac|us-gov|jp|au|ca|global)\.")
"""Bedrock's cross-region inference profiles: a geography before the model id."""


def _bedrock(pin: Pin) -> Source | str:
    """Bedrock's lists: its foundation models, or its inference profiles for a pin that names
    one (``us.anthropic…``), at the control plane of the pin's region (or its base_url)."""
    from evalreg.providers import get_provider
    from evalreg.providers.bedrock import BedrockProvider

    model = pin.model or ""
    if model.startswith("arn:"):
        return "a model ARN (provisioned throughput or an application profile) is not listed"
    assert pin.aws is not None  # the schema requires it
    base = (pin.base_url or f"https://bedrock.{pin.aws.region}.amazonaws.com").rstrip("/")
    provider = get_provider("bedrock")
    assert isinstance(provider, BedrockProvider)

    def headers(url: str) -> dict[str, str]:
        return provider.signed(pin, "GET", url, provider.headers(pin))

    if _PROFILE.match(model):
        return Source("bedrock-profiles", f"{base}/inference-profiles", headers, _who(pin))
    return Source("bedrock", f"{base}/foundation-models", headers, _who(pin))


def _azure(pin: Pin) -> Source | str:
    """The models an Azure OpenAI resource offers (``GET /openai/models``), for a pin whose
    ``model`` is the model (a deployment endpoint with ``azure.deployment`` set); a pin
    whose ``model`` is a deployment's name says nothing a model list can answer."""
    from evalreg.providers import get_provider

    azure = pin.azure
    if azure is None or azure.endpoint != "deployment" or not azure.deployment:
        return "an Azure OpenAI pin whose model is a deployment's name, not a model's"
    base = (pin.base_url or "").rstrip("/")
    if base.endswith("/openai/v1") or base.endswith("/openai"):
        base = base.rsplit("/openai", 1)[0]
    version = quote(azure.api_version or "", safe="")
    provider = get_provider("azure_openai")

    def headers(url: str) -> dict[str, str]:
        sign = getattr(provider, "sign")  # noqa: B009 (Azure's Entra ID bearer, when used)
        return dict(sign(pin, url, provider.headers(pin), b""))

    return Source("azure", f"{base}/openai/models?api-version={version}", headers, _who(pin))


async def model_ids(source: Source, get: Callable[[str, dict[str, str]], Any]) -> list[str]:
    """Every model id ``source`` lists, following its pages; ``get`` awaits the body of a
    200 answer to a URL with headers (``HttpLayer.call``)."""
    ids: list[str] = []
    cursor: str | None = None
    for _ in range(MAX_PAGES):
        url = _page_url(source, cursor)
        page = _object(await get(url, source.headers(url)), url)
        found, cursor = _read_page(source.kind, page, url)
        ids += found
        if cursor is None:
            return ids
    raise ProviderError("client", f"{source.url} listed more than {MAX_PAGES} pages of models")


def _page_url(source: Source, cursor: str | None) -> str:
    if source.kind == "anthropic":
        url = f"{source.url}?limit=1000"
        return url + (f"&after_id={quote(cursor, safe='')}" if cursor else "")
    if source.kind == "gemini":
        url = f"{source.url}?pageSize=1000"
        return url + (f"&pageToken={quote(cursor, safe='')}" if cursor else "")
    if source.kind == "bedrock-profiles":
        url = f"{source.url}?maxResults=1000"
        return url + (f"&nextToken={quote(cursor, safe='')}" if cursor else "")
    if source.kind == "azure":
        return source.url  # one page
    return source.url + (f"?after={quote(cursor, safe='')}" if cursor else "")


def _object(body: bytes, url: str) -> dict[str, Any]:
    try:
        data = loads_finite(body.decode("utf-8-sig"))
    except (ValueError, RecursionError) as exc:
        raise ProviderError("malformed", f"{url} did not answer with JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ProviderError("malformed", f"{url} did not answer with a JSON object")
    return data


def _read_page(kind: str, page: dict[str, Any], url: str) -> tuple[list[str], str | None]:
    """The ids on one page, and the cursor of the next (None: the last page)."""
    if kind == "bedrock":
        entries, field = page.get("modelSummaries"), "modelId"
    elif kind == "bedrock-profiles":
        entries, field = page.get("inferenceProfileSummaries"), "inferenceProfileId"
    elif kind == "gemini":
        entries, field = page.get("models", []), "name"
    else:
        entries, field = page.get("data"), "id"
    if not isinstance(entries, list):
        raise ProviderError("malformed", f"{url} answered without a list of models")
    ids = []
    for entry in entries:
        name = entry.get(field) if isinstance(entry, dict) else None
        if not isinstance(name, str) or not name:
            raise ProviderError("malformed", f"{url} listed a model without an {field}")
        ids.append(name.removeprefix("models/") if kind == "gemini" else name)
    if kind in ("gemini", "bedrock-profiles"):
        token = page.get("nextPageToken" if kind == "gemini" else "nextToken")
        return ids, token if isinstance(token, str) and token else None
    if kind in ("bedrock", "azure"):
        return ids, None  # ListFoundationModels and Azure's list answer in one page
    if page.get("has_more") is True:
        last = page.get("last_id") or (ids[-1] if ids else None)
        if not isinstance(last, str) or not last:
            raise ProviderError("malformed", f"{url} said it has more but named no last id")
        return ids, last
    return ids, None


LIST_LIMITS = Limits(concurrency=4, timeout_s=60.0, max_retries=3, max_response_bytes=64 << 20)
"""A model list is small and asked rarely: a few retries, a minute each."""
