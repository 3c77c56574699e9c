"""The one HTTP layer every HTTP provider shares: client, timeouts, retries, rate limits.

Retries (tenacity) cover 429, 5xx, timeouts, connection errors and malformed bodies, with
exponential backoff and jitter, honouring ``Retry-After``. Per-pin concurrency is a
semaphore; requests- and tokens-per-minute are leaky buckets (aiolimiter).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any

import httpx
from aiolimiter import AsyncLimiter
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential_jitter,
)

from evalreg.providers.base import Completion, ProviderError
from evalreg.registry.schema import Limits

MAX_RETRY_AFTER_S = 120.0


@dataclass(frozen=True)
class Backoff:
    """Exponential backoff with jitter between retries (seconds)."""

    initial: float = 0.5
    maximum: float = 30.0
    jitter: float = 0.5


@dataclass(frozen=True)
class Reply:
    completion: Completion
    latency_ms: int
    attempts: int


class HttpLayer:
    """Sends request bodies for all pins of a run over one pooled ``httpx.AsyncClient``."""

    def __init__(
        self,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        backoff: Backoff | None = None,
        max_connections: int = 512,
    ) -> None:
        self._client = httpx.AsyncClient(
            transport=transport,
            limits=httpx.Limits(
                max_connections=max_connections, max_keepalive_connections=max_connections
            ),
            timeout=httpx.Timeout(120.0, connect=15.0),
            follow_redirects=False,
            trust_env=True,
        )
        b = backoff or Backoff()
        self._exponential = wait_exponential_jitter(
            multiplier=b.initial, max=b.maximum, jitter=b.jitter
        )
        self._gates: dict[
            str, tuple[asyncio.Semaphore, AsyncLimiter | None, AsyncLimiter | None]
        ] = {}

    async def aclose(self) -> None:
        await self._client.aclose()

    async def __aenter__(self) -> HttpLayer:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def _gate(
        self, pin_id: str, limits: Limits
    ) -> tuple[asyncio.Semaphore, AsyncLimiter | None, AsyncLimiter | None]:
        if pin_id not in self._gates:
            rpm = (
                AsyncLimiter(limits.requests_per_minute, 60) if limits.requests_per_minute else None
            )
            tpm = AsyncLimiter(limits.tokens_per_minute, 60) if limits.tokens_per_minute else None
            self._gates[pin_id] = (asyncio.Semaphore(limits.concurrency), rpm, tpm)
        return self._gates[pin_id]

    async def post(
        self,
        pin_id: str,
        limits: Limits,
        url: str,
        headers: dict[str, str],
        content: bytes,
        parse: Callable[[Any], Completion],
        *,
        estimated_tokens: int = 0,
    ) -> Reply:
        """POST ``content`` (already-serialised JSON) and parse the reply, retrying as needed.

        Raises ``ProviderError`` once retries are exhausted or the error is not retryable.
        """
        semaphore, rpm, tpm = self._gate(pin_id, limits)
        retrying = AsyncRetrying(
            stop=stop_after_attempt(limits.max_retries + 1),
            wait=self._wait,
            retry=retry_if_exception(lambda e: isinstance(e, ProviderError) and e.retryable),
            reraise=True,
        )
        timeout = httpx.Timeout(limits.timeout_s, connect=min(15.0, limits.timeout_s))
        send_headers = {"content-type": "application/json", **headers}
        attempts = 0
        async for attempt in retrying:
            with attempt:
                attempts += 1
                if rpm is not None:
                    await rpm.acquire()
                if tpm is not None and estimated_tokens:
                    await tpm.acquire(min(estimated_tokens, tpm.max_rate))
                async with semaphore:
                    started = time.perf_counter()
                    response = await self._send(url, send_headers, content, timeout)
                    latency_ms = round((time.perf_counter() - started) * 1000)
                completion = parse(_json_of(response))
                return Reply(completion, latency_ms, attempts)
        raise AssertionError("unreachable: tenacity reraises the last error")

    async def _send(
        self, url: str, headers: dict[str, str], content: bytes, timeout: httpx.Timeout
    ) -> httpx.Response:
        try:
            response = await self._client.post(
                url, content=content, headers=headers, timeout=timeout
            )
        except httpx.TimeoutException as exc:
            raise ProviderError(
                "timeout", f"{type(exc).__name__} after {timeout.read}s", retryable=True
            ) from None
        except httpx.TransportError as exc:
            raise ProviderError(
                "connection", f"{type(exc).__name__}: {exc}", retryable=True
            ) from None
        status = response.status_code
        if status == 200:
            return response
        detail = _error_detail(response)
        if status == 429:
            raise ProviderError(
                "rate_limited",
                detail,
                status=status,
                retryable=True,
                retry_after=retry_after(response.headers),
            )
        if status >= 500:
            raise ProviderError(
                "server",
                detail,
                status=status,
                retryable=True,
                retry_after=retry_after(response.headers),
            )
        if status in (401, 403):
            raise ProviderError("auth", detail, status=status)
        if status == 408:
            raise ProviderError("timeout", detail, status=status, retryable=True)
        raise ProviderError("client", detail, status=status)

    def _wait(self, state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome is not None else None
        if isinstance(exc, ProviderError) and exc.retry_after is not None:
            return min(exc.retry_after, MAX_RETRY_AFTER_S)
        return float(self._exponential(state))


def _json_of(response: httpx.Response) -> Any:
    try:
        return json.loads(response.content)
    except ValueError as exc:
        raise ProviderError(
            "malformed", f"response is not JSON: {exc}", status=200, retryable=True
        ) from None


def _error_detail(response: httpx.Response) -> str:
    """A short, single-line description of an error response (the body is untrusted)."""
    try:
        data = response.json()
        err = data.get("error") if isinstance(data, dict) else None
        message = err.get("message") if isinstance(err, dict) else None
    except ValueError:
        message = None
    text = str(message) if message else response.reason_phrase or "error"
    text = " ".join(text.split())
    return f"HTTP {response.status_code}: {text[:200]}"


def retry_after(headers: httpx.Headers) -> float | None:
    """Seconds to wait from ``retry-after-ms``, ``Retry-After`` (seconds or HTTP date)."""
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())
