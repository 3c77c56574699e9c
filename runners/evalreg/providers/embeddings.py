"""Embeddings through any OpenAI-compatible ``POST {base_url}/embeddings``: what the
``similar`` grader compares.

An embedding request is a request like any other: its exact body is stored under its key,
so a replay reads the vectors from the store and ``reproduce`` needs no network. The stored
response's text is the vectors, as JSON, in the order the texts were sent.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any, ClassVar

from evalreg.canonical import canonical_bytes
from evalreg.providers.base import Completion, ProviderError, key_scope
from evalreg.providers.fetch import Job, Request
from evalreg.providers.openai import DEFAULT_BASE_URL, OpenAIProvider
from evalreg.registry.schema import Pin


class EmbeddingsProvider(OpenAIProvider):
    """Not a pin's provider: how an ``openai`` pin is asked for embeddings (its key and
    base URL as for chat completions)."""

    name: ClassVar[str] = "openai_embeddings"

    def body(
        self, pin: Pin, texts: Any, item_input: Any = None, tools: Any = None
    ) -> dict[str, Any]:
        return {"model": pin.model, "input": list(texts), "encoding_format": "float"}

    def endpoint(self, pin: Pin) -> str:
        return (pin.base_url or DEFAULT_BASE_URL).rstrip("/") + "/embeddings"

    def parse(self, data: Any) -> Completion:
        try:
            rows = sorted(data["data"], key=lambda row: row["index"])
            vectors = [[float(x) for x in row["embedding"]] for row in rows]
            usage = data.get("usage") or {}
            tokens = int(usage.get("prompt_tokens") or usage.get("total_tokens") or 0)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ProviderError(
                "malformed", f"response lacks data[].embedding: {exc}", retryable=True
            ) from None
        if not vectors or any(not v or len(v) != len(vectors[0]) for v in vectors):
            raise ProviderError("malformed", "embeddings of different lengths", retryable=True)
        text = json.dumps(vectors, separators=(",", ":"))
        return Completion(text=text, model=data.get("model"), input_tokens=tokens)


EMBEDDINGS = EmbeddingsProvider()


def embedding_job(pin_id: str, pin: Pin, texts: Sequence[str], label: str) -> Job:
    """The request that embeds ``texts`` (one sample: embeddings are not sampled)."""
    body = EMBEDDINGS.body(pin, texts)
    request = Request(
        pin_id,
        pin,
        EMBEDDINGS,
        EMBEDDINGS.endpoint(pin),
        body,
        canonical_bytes(body),
        key_scope(EMBEDDINGS, pin),
    )
    return request.job(0, label)


def vectors(text: str) -> list[list[float]]:
    """The stored vectors of an embedding response."""
    data = json.loads(text)
    if not isinstance(data, list) or not all(isinstance(v, list) for v in data):
        raise ValueError("not a list of vectors")
    return [[float(x) for x in v] for v in data]


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """The cosine similarity of two vectors (0 when either is all zeros)."""
    dot = math.fsum(x * y for x, y in zip(a, b, strict=True))
    norm = math.sqrt(math.fsum(x * x for x in a)) * math.sqrt(math.fsum(y * y for y in b))
    return dot / norm if norm else 0.0
