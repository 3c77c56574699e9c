"""One request through a provider and the shared HTTP layer, as ``providers/fetch.py``
sends it (headers, then the provider's signature for each attempt), for provider tests."""

from __future__ import annotations

import asyncio
from functools import partial
from typing import Any

from evalreg.canonical import canonical_bytes
from evalreg.providers.base import Completion, get_provider, signer
from evalreg.providers.http import HttpLayer, Reply
from evalreg.providers.tools import Toolset
from evalreg.registry.schema import Pin

MESSAGES = [
    {"role": "system", "content": "Answer with JSON."},
    {"role": "user", "content": "Message: message 1"},
]


def pin_of(**fields: Any) -> Pin:
    """A pin from its YAML fields (``schema_version`` given)."""
    return Pin.model_validate({"schema_version": 1, **fields})


def send(
    pin: Pin, messages: list[dict[str, Any]] = MESSAGES, tools: Toolset | None = None
) -> Reply:
    """POST ``messages`` (declaring ``tools``) for ``pin``; raises ``ProviderError`` as a run
    would record it."""
    provider = get_provider(pin.provider)
    body = provider.body(pin, messages, None, tools)
    signed = signer(provider)

    async def post() -> Reply:
        async with HttpLayer() as http:
            return await http.post(
                "pin",
                pin.limits,
                provider.endpoint(pin),
                provider.headers(pin),
                canonical_bytes(body),
                provider.parse,
                sign=None if signed is None else partial(signed.sign, pin),
            )

    return asyncio.run(post())


def completion(
    pin: Pin, messages: list[dict[str, Any]] = MESSAGES, tools: Toolset | None = None
) -> Completion:
    return send(pin, messages, tools).completion
