"""Real loopback HTTP server speaking the OpenAI, Azure OpenAI and Anthropic APIs, for tests.

``LLMServer`` listens on ``127.0.0.1`` and answers ``POST /v1/chat/completions`` (OpenAI),
``POST /v1/responses`` (OpenAI's Responses API), ``POST /v1/messages`` (Anthropic) and Azure
OpenAI's ``POST /openai/deployments/{deployment}/chat/completions?api-version=...`` and
``POST /openai/v1/chat/completions`` with realistic, deterministic responses. Faults (rate limits,
server errors, timeouts, connection resets, malformed bodies) can be injected for the next N
requests, for requests whose body contains a substring, or for a seeded, body-determined fraction
of requests. Everything the server receives is recorded in ``LLMServer.requests``.

In-process use (the server runs on its own event loop in a background thread)::

    with LLMServer(latency=0.01, api_key="sk-test") as server:
        httpx.post(f"{server.base_url}/chat/completions", ...)
        server.fail_next("429", times=2, retry_after=0.1)

As a separate process (prints ``READY http://127.0.0.1:PORT`` once listening, serves until
SIGTERM or SIGINT)::

    python tests/support/llm_server.py --port 0 --latency 0.05 --api-key sk-test

Behaviour worth knowing:

* Faults are drawn only for ``POST`` requests to the endpoints, when the request arrives and
  before authentication and validation (like a gateway in front of the API). Precedence:
  ``fail_next`` queue, then ``fail_matching`` rules in the order added, then ``fail_randomly``.
* ``hold(after=N)`` answers N more endpoint requests, then holds every later one (received
  and recorded, its response not sent) until the ``Hold`` it returns is released; stopping
  the server releases it. A test catches a client mid-work so, for as long as it needs.
* As the real APIs, every request to OpenAI's and Anthropic's endpoints (batch routes too)
  needs a key, ``authorization: Bearer KEY`` or ``x-api-key: KEY``: one without is refused
  with the API's 401 (``api_key`` None takes any key, else only that one). Anthropic's also
  refuses, with its 400, a request without the ``anthropic-version`` header or
  ``max_tokens``. Azure's ``api-key`` is checked only when ``api_key`` or ``entra_tokens``
  is set.
* Answers are what the APIs send: they validate against the ``openai`` and ``anthropic``
  SDKs' response types (``tests/test_standin_sdk_types.py``), errors included; a Responses
  API answer echoes the request's settings (``tools``, ``tool_choice``, ``temperature``...)
  with the API's defaults for those not sent.
* ``latency`` is slept before every endpoint response, faulted or not. ``"timeout"`` sleeps
  ``delay`` seconds and then answers normally; ``"malformed"`` cuts the body in half;
  ``"missing_fields"`` drops ``choices`` (OpenAI) or ``content`` (Anthropic) from a 200.
* ``error_text``, when set, writes the message of every injected HTTP error (``"400"``,
  ``"401"``, ``"404"``, ``"405"``, ``"422"``, ``"429"``, ``"5xx"``) from the request, as
  providers that quote what they were sent do:
  ``server.error_text = lambda r: f"bad key {r.headers['authorization']}"``.
* A fault named by a status answers that status with the provider's error body for it:
  ``"400"`` a parameter the model does not take, ``"404"`` a model or deployment that does not
  exist, ``"405"`` a method the route does not take, ``"422"`` a body that does not validate
  (as FastAPI-based servers answer), ``"501"`` a feature the server lacks (as llama.cpp's
  server answers; the one error body not in OpenAI's shape, as llama.cpp sends it).
  ``"quota"`` is a spent credit: OpenAI's 429 ``insufficient_quota``, Anthropic's 400
  "credit balance is too low". ``fail_matching(MODEL, FAULT)`` answers a fault to every
  request of one pin (its model's name is in the body), ``fail_matching(TEXT, FAULT)`` to
  chosen items.
* Azure requests authenticate with the ``api-key`` header (``api_key``) or an Entra ID
  ``authorization: Bearer`` token in ``entra_tokens``; ``deployments`` maps each deployment
  to the model it serves (None: any name is a deployment of the model of that name).
* ``"content_filter"``, ``"context_length"`` and ``"403"`` answer with the provider's 400 or
  403 shape; ``"filtered"`` and ``"truncated"`` answer a 200 whose completion was withheld
  by the content filter or cut at the token limit (``finish_reason`` or, for the Responses
  API, ``status: incomplete``).
* ``stream: true`` is rejected with a 400: this server only speaks non-streaming responses.
* Bytes that do not parse as HTTP get a 400 and a closed connection and are not recorded.
* Batch APIs: OpenAI's ``POST /v1/files`` (multipart, purpose ``batch``), ``GET
  /v1/files/{id}/content``, ``POST /v1/batches``, ``GET /v1/batches[/{id}]`` and Anthropic's
  ``POST /v1/messages/batches``, ``GET /v1/messages/batches[/{id}[/results]]``. A batch ends
  on the poll after ``batch_polls`` polls, its requests answered as the live endpoints would
  (the responder included). ``batch_expire_after`` makes the next batch expire after that
  many answers; requests whose body contains a string in ``batch_errors_matching`` fail
  inside the batch; ``batch_create_errors`` refuses creations with a 500;
  ``hold_batch("create")`` and ``hold_batch("results")`` hold answers back until released
  (the batch exists, or its results are ready, meanwhile). ``batch_requests`` lists every
  request submitted in a batch (``custom_id`` set), ``batch_answered`` those answered: what
  was bought. Faults (``fail_next``...) are not drawn for these routes.
* Model lists: ``GET /v1/models`` lists ``models`` (every id answered for, in that order),
  in OpenAI's shape, or in Anthropic's (``limit``, ``after_id``, ``has_more``, ``last_id``)
  for a request with Anthropic's headers.

Only the standard library is used, so the file can run under any Python >= 3.11.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import math
import os
import re
import signal
import socket
import ssl
import struct
import sys
import threading
import time
import urllib.parse
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Literal

__all__ = ["FAULTS", "Hold", "LLMServer", "Request", "default_text", "estimate_tokens"]

ProtocolName = Literal["openai", "anthropic", "azure", "responses"]

#: Fault names accepted by ``fail_next``/``fail_matching``/``fail_randomly`` and their options.
FAULTS: dict[str, frozenset[str]] = {
    "400": frozenset(),
    "401": frozenset(),
    "403": frozenset(),
    "404": frozenset(),
    "405": frozenset(),
    "422": frozenset(),
    "429": frozenset({"retry_after"}),
    "500": frozenset(),
    "501": frozenset(),
    "502": frozenset(),
    "503": frozenset(),
    "529": frozenset(),
    "quota": frozenset(),
    "timeout": frozenset({"delay"}),
    "reset": frozenset(),
    "malformed": frozenset(),
    "missing_fields": frozenset(),
    "content_filter": frozenset(),
    "context_length": frozenset(),
    "filtered": frozenset(),
    "truncated": frozenset(),
}

_STATUS_FAULTS = frozenset(
    {"400", "401", "404", "405", "422", "429", "500", "501", "502", "503", "529"}
)
"""Faults answered with that HTTP status and the provider's error body for it."""

_FAULT_DEFAULTS: dict[str, dict[str, float]] = {
    "429": {"retry_after": 0.05},
    "timeout": {"delay": 5.0},
}

_BATCH_ROUTE = re.compile(
    r"^/v1/(files|files/[^/]+/content|batches|batches/[^/]+"
    r"|messages/batches|messages/batches/[^/]+|messages/batches/[^/]+/results)$"
)
_BATCH_ENDPOINTS = {"/v1/chat/completions": "openai", "/v1/responses": "responses"}
_OPENAI_PATH = "/v1/chat/completions"
_ANTHROPIC_PATH = "/v1/messages"
_RESPONSES_PATH = "/v1/responses"
_EMBEDDINGS_PATH = "/v1/embeddings"
_MODELS_PATH = "/v1/models"
EMBEDDING_DIMENSIONS = 64
_AZURE_V1_PATH = "/openai/v1/chat/completions"
_AZURE_DEPLOYMENT = re.compile(r"^/openai/deployments/([^/]+)/chat/completions$")
_API_VERSION = re.compile(r"^\d{4}-\d{2}-\d{2}(-preview)?$")
_MAX_HEADER_BYTES = 1 << 20
_MAX_BODY_BYTES = 64 << 20
_REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    413: "Content Too Large",
    422: "Unprocessable Content",
    429: "Too Many Requests",
    431: "Request Header Fields Too Large",
    500: "Internal Server Error",
    501: "Not Implemented",
    502: "Bad Gateway",
    503: "Service Unavailable",
    529: "Site Overloaded",
}
# Status line plus the headers every response carries, up to the Content-Length value.
_PREFIX = {
    code: b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\ncontent-length: "
    % (code, reason.encode())
    for code, reason in _REASONS.items()
}
_CONN_CLOSE = b"connection: close\r\n"
_CONN_KEEP = b"connection: keep-alive\r\n"
_CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
_LINGER_ZERO = struct.pack("ii", 1, 0)
_encode = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


@dataclass(slots=True)
class Request:
    """One HTTP request as received by the server.

    ``headers`` has lower-case names (repeated headers are joined with ``", "``), ``body`` is the
    parsed JSON object or ``None`` (empty, invalid or non-object JSON), ``raw`` is the exact body
    bytes, and ``fault`` names the fault injected into this request's response, if any.
    """

    path: str
    method: str
    headers: dict[str, str]
    body: dict[str, Any] | None
    raw: bytes
    protocol: ProtocolName
    fault: str | None = None
    query: str = ""
    """The request target's query string (Azure's ``api-version=...``), without ``?``."""
    custom_id: str | None = None
    """For a request inside a batch: the ``custom_id`` it was submitted under."""


class Hold:
    """Endpoint responses held back by ``LLMServer.hold``: ``waiting`` is how many requests
    wait now; ``release`` lets them (and every later one) be answered."""

    def __init__(self, server: LLMServer, after: int) -> None:
        self._server = server
        self._answered = 0
        self._after = after
        self._released = False
        self._event = asyncio.Event()  # bound to the server's loop when first awaited
        #: Requests held now (received, their response not sent).
        self.waiting = 0

    def _admit(self) -> bool:
        """Whether the next endpoint request is answered at once (the lock held)."""
        if self._released or self._answered < self._after:
            self._answered += 1
            return True
        return False

    async def wait(self) -> None:
        """Hold the calling request until ``release`` (on the server's loop)."""
        with self._server._lock:
            if self._released:
                return
            self.waiting += 1
        try:
            await self._event.wait()
        finally:
            with self._server._lock:
                self.waiting -= 1

    def release(self) -> None:
        """Answer the held requests now, and every later one at once; idempotent."""
        with self._server._lock:
            if self._released:
                return
            self._released = True
        loop = self._server._loop
        if loop is not None:
            with contextlib.suppress(RuntimeError):  # the loop has closed: nothing waits
                loop.call_soon_threadsafe(self._event.set)

    def __enter__(self) -> Hold:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


@dataclass(slots=True)
class _Fault:
    name: str
    opts: dict[str, float]


@dataclass(slots=True)
class _NextRule:
    fault: _Fault
    remaining: int


@dataclass(slots=True)
class _MatchRule:
    substring: str
    fault: _Fault
    remaining: int | None


@dataclass(slots=True)
class _RandomRule:
    fault: _Fault
    threshold: int
    seed: bytes
    per_attempt: bool
    seen: dict[bytes, int] = field(default_factory=dict)


class _BadRequest(Exception):
    """The bytes on the wire are not an HTTP/1.x request this server can parse."""

    def __init__(self, status: int = 400, message: str = "malformed HTTP request") -> None:
        super().__init__(message)
        self.status = status


def _make_fault(name: str, opts: dict[str, Any]) -> _Fault:
    if name not in FAULTS:
        raise ValueError(f"unknown fault {name!r}; expected one of {sorted(FAULTS)}")
    unknown = set(opts) - FAULTS[name]
    if unknown:
        raise TypeError(f"fault {name!r} does not take option(s) {sorted(unknown)}")
    merged = dict(_FAULT_DEFAULTS.get(name, {}))
    merged.update({key: float(value) for key, value in opts.items()})
    return _Fault(name, merged)


def _canonical_body(request: Request) -> bytes:
    """Bytes identifying a request body independently of key order and whitespace."""
    if request.body is None:
        return request.raw
    return json.dumps(
        request.body, sort_keys=True, separators=(",", ":"), ensure_ascii=False
    ).encode()


def _content_text(content: Any) -> str:
    """Plain text of a message ``content``: a string or a list of content parts/blocks."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [
            part["text"]
            for part in content
            if isinstance(part, dict) and isinstance(part.get("text"), str)
        ]
        return "\n".join(texts)
    return ""


def estimate_tokens(text: str) -> int:
    """Deterministic token estimate used for usage figures: ``words * 4 // 3``, at least 1."""
    return max(1, len(text.split()) * 4 // 3)


def default_text(messages: Any) -> str:
    """The reply the server gives when no responder is set: a JSON string fixed by ``messages``.

    ``{"echo": <first 40 chars of the last user message>, "n": <0..999 from a sha256>}``
    (for the Responses API, ``messages`` is the request's ``input``).
    """
    canonical = json.dumps(messages, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    digest = hashlib.sha256(canonical.encode()).digest()
    echo = ""
    if isinstance(messages, list):
        for message in reversed(messages):
            if isinstance(message, dict) and message.get("role") == "user":
                echo = _content_text(message.get("content"))
                break
    return json.dumps({"echo": echo[:40], "n": int.from_bytes(digest[:4], "big") % 1000})


def _prompt_text(body: dict[str, Any]) -> str:
    parts = [_content_text(body.get("system") or body.get("instructions"))]
    messages = body.get("messages", body.get("input"))
    if isinstance(messages, list):
        parts.extend(_content_text(m.get("content")) for m in messages if isinstance(m, dict))
    return "\n".join(parts)


def _arguments_string(arguments: Any) -> str:
    """Arguments as OpenAI's APIs send them: a JSON string (a string is sent as it is)."""
    return arguments if isinstance(arguments, str) else _encode(arguments)


def _response_tool(tool: Any) -> Any:
    """A request's tool as a response echoes it: a function's ``strict`` (true unless the
    request said otherwise), ``description`` and ``parameters`` written out."""
    if not isinstance(tool, dict) or tool.get("type") != "function":
        return tool
    return {
        "type": "function",
        "name": tool.get("name"),
        "description": tool.get("description"),
        "parameters": tool.get("parameters"),
        "strict": tool.get("strict", True),
    }


def _openai_error(
    message: str, type_: str, param: str | None = None, code: str | None = None
) -> dict[str, Any]:
    return {"error": {"message": message, "type": type_, "param": param, "code": code}}


def _anthropic_error(message: str, type_: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": type_, "message": message}}


def _azure_error(code: str, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message}}


_OPENAI_NO_KEY = (
    "You didn't provide an API key. You need to provide your API key in an Authorization header "
    "using Bearer auth (i.e. Authorization: Bearer YOUR_KEY), or as the password field (with "
    "blank username) if you're accessing the API from your browser and are prompted for a "
    "username and password. You can obtain an API key from "
    "https://platform.openai.com/account/api-keys."
)
_ANTHROPIC_NO_CREDIT = (
    "Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing "
    "to upgrade or purchase credits."
)
_AZURE_FILTERED_PROMPT = (
    "The response was filtered due to the prompt triggering Azure OpenAI's content management "
    "policy. Please modify your prompt and retry. To learn more about our content filtering "
    "policies please read our documentation: https://go.microsoft.com/fwlink/?linkid=2198766"
)
_CONTEXT_LENGTH = (
    "This model's maximum context length is 128000 tokens. However, your messages resulted in "
    "131072 tokens. Please reduce the length of the messages."
)
_FILTER_CLEAN = {
    category: {"filtered": False, "severity": "safe"}
    for category in ("hate", "self_harm", "sexual", "violence")
}


def _client_error_body(protocol: ProtocolName, fault: str) -> tuple[int, dict[str, Any]]:
    """Status and payload of an injected ``403``, ``content_filter`` or ``context_length``."""
    if fault == "403":
        if protocol == "anthropic":
            return 403, _anthropic_error(
                "Your API key does not have permission to use the specified resource.",
                "permission_error",
            )
        if protocol == "azure":
            return 403, _azure_error(
                "PermissionDenied", "Principal does not have access to API/Operation."
            )
        return 403, _openai_error(
            "You are not allowed to sample from this model", "invalid_request_error"
        )
    if fault == "context_length":
        if protocol == "anthropic":
            return 400, _anthropic_error(
                "prompt is too long: 213462 tokens > 200000 maximum", "invalid_request_error"
            )
        return 400, _openai_error(
            _CONTEXT_LENGTH, "invalid_request_error", "messages", "context_length_exceeded"
        )
    if protocol == "azure":
        payload = _openai_error(_AZURE_FILTERED_PROMPT, "invalid_request_error", "prompt")
        payload["error"].update(
            code="content_filter",
            status=400,
            innererror={
                "code": "ResponsibleAIPolicyViolation",
                "content_filter_result": {
                    **_FILTER_CLEAN,
                    "violence": {"filtered": True, "severity": "high"},
                },
            },
        )
        return 400, payload
    if protocol == "anthropic":
        return 400, _anthropic_error(
            "Output blocked by content filtering policy", "invalid_request_error"
        )
    return 400, _openai_error(
        "Invalid prompt: your prompt was flagged as potentially violating our usage policy.",
        "invalid_request_error",
        code="invalid_prompt",
    )


def _withheld(protocol: ProtocolName, fault: str, payload: dict[str, Any]) -> None:
    """Turn a 200 into one the content filter withheld (``filtered``) or the token limit
    cut (``truncated``), in place."""
    if protocol == "responses":
        reason = "content_filter" if fault == "filtered" else "max_output_tokens"
        payload["status"] = "incomplete"
        payload["incomplete_details"] = {"reason": reason}
        if fault == "filtered":
            payload["output"] = []
        return
    if protocol == "anthropic":
        payload["stop_reason"] = "refusal" if fault == "filtered" else "max_tokens"
        return
    choice = payload["choices"][0]
    choice["finish_reason"] = "content_filter" if fault == "filtered" else "length"
    if fault == "filtered":
        choice["message"]["content"] = None
        if protocol == "azure":
            choice["content_filter_results"] = {
                **_FILTER_CLEAN,
                "violence": {"filtered": True, "severity": "medium"},
            }


def _error_body(
    protocol: ProtocolName, status: int, request: Request | None = None
) -> dict[str, Any]:
    """Error payload for an injected HTTP error fault, in the provider's shape (``request``:
    the request it answers, for the errors that name its model or route)."""
    refusal = _refusal_body(protocol, status, request)
    if refusal is not None:
        return refusal
    if protocol == "azure":
        if status == 401:
            return _azure_error(
                "401",
                "Access denied due to invalid subscription key or wrong API endpoint. Make sure "
                "to provide a valid key for an active subscription and use a correct regional "
                "API endpoint for your resource.",
            )
        if status == 429:
            return _azure_error(
                "429",
                "Requests to the ChatCompletions_Create Operation under Azure OpenAI API "
                "version 2024-10-21 have exceeded token rate limit of your current OpenAI S0 "
                "pricing tier. Please retry after 1 second.",
            )
        return _azure_error(
            "InternalServerError", "The server had an error processing your request."
        )
    if protocol == "anthropic":
        if status == 401:
            return _anthropic_error("invalid x-api-key", "authentication_error")
        if status == 429:
            return _anthropic_error(
                "Number of request tokens has exceeded your per-minute rate limit.",
                "rate_limit_error",
            )
        if status == 529:
            return _anthropic_error("Overloaded", "overloaded_error")
        if status == 503:
            return _anthropic_error("Service unavailable", "api_error")
        return _anthropic_error("Internal server error", "api_error")
    if status == 401:
        return _openai_error(
            "Incorrect API key provided.", "invalid_request_error", code="invalid_api_key"
        )
    if status == 429:
        return _openai_error(
            "Rate limit reached for requests. Please try again later.",
            "requests",
            code="rate_limit_exceeded",
        )
    if status in (503, 529):
        return _openai_error(
            "The engine is currently overloaded, please try again later.", "server_error"
        )
    if status == 502:
        return _openai_error("Bad gateway.", "server_error")
    return _openai_error(
        "The server had an error while processing your request. Sorry about that!",
        "server_error",
    )


def _refusal_body(
    protocol: ProtocolName, status: int, request: Request | None
) -> dict[str, Any] | None:
    """The payload of an injected 400, 404, 405, 422 or 501 (None for another status): a
    parameter the model does not take, a model or route that does not exist, a method the
    route does not take, a body that does not validate, a feature the server lacks."""
    body = (request.body if request is not None else None) or {}
    model = body.get("model") if isinstance(body.get("model"), str) else "unknown"
    if status == 400:
        if protocol == "anthropic":
            return _anthropic_error(
                "top_k: Extra inputs are not permitted", "invalid_request_error"
            )
        return _openai_error(
            "Unsupported parameter: 'max_tokens' is not supported with this model. Use "
            "'max_completion_tokens' instead.",
            "invalid_request_error",
            "max_tokens",
            "unsupported_parameter",
        )
    if status == 404:
        if protocol == "anthropic":
            return _anthropic_error(f"model: {model}", "not_found_error")
        if protocol == "azure":
            return _azure_error(
                "DeploymentNotFound",
                "The API deployment for this resource does not exist. If you created the "
                "deployment within the last 5 minutes, please wait a moment and try again.",
            )
        return _openai_error(
            f"The model `{model}` does not exist or you do not have access to it.",
            "invalid_request_error",
            code="model_not_found",
        )
    if status == 405:
        if protocol == "anthropic":
            return _anthropic_error("Method Not Allowed", "invalid_request_error")
        if protocol == "azure":
            return _azure_error("405", "Method Not Allowed")
        route = (
            "POST /v1/chat/completions" if request is None else f"{request.method} {request.path}"
        )
        return _openai_error(f"Invalid method for URL ({route})", "invalid_request_error")
    if status == 422:
        # OpenAI-compatible servers built on FastAPI (vLLM, LiteLLM) validate bodies so.
        message = "Input should be a valid integer, unable to parse string as an integer"
        if protocol == "anthropic":
            return _anthropic_error(message, "invalid_request_error")
        return _openai_error(message, "BadRequestError", "max_tokens", "422")
    if status == 501:
        # llama.cpp's server, asked for what it was not started to do.
        message = "This server does not support this endpoint. Start it with `--jinja`"
        if protocol == "anthropic":
            return _anthropic_error(message, "api_error")
        if protocol == "azure":
            return _azure_error("NotImplemented", message)
        return {"error": {"code": 501, "message": message, "type": "not_supported_error"}}
    return None


def _embedding(text: str) -> list[float]:
    """A deterministic unit vector for ``text``: its lower-cased words, hashed."""
    vector = [0.0] * EMBEDDING_DIMENSIONS
    for word in re.findall(r"\w+", text.lower()):
        digest = hashlib.sha256(word.encode()).digest()
        vector[digest[0] % EMBEDDING_DIMENSIONS] += 1.0 if digest[1] % 2 else -1.0
    norm = math.sqrt(sum(x * x for x in vector)) or 1.0
    return [round(x / norm, 6) for x in vector]


def _seconds(value: float) -> str:
    text = f"{value:.3f}".rstrip("0").rstrip(".")
    return text or "0"


class LLMServer:
    """Loopback OpenAI/Anthropic-compatible HTTP/1.1 server with injectable faults.

    Use as a context manager (or call ``start``/``stop``). Attributes ``latency``, ``api_key``,
    ``responder``, ``error_text``, ``model_alias``, ``fingerprint``, ``reasoning_tokens``,
    ``cached_tokens``, ``entra_tokens`` and ``deployments`` may be changed while the server
    runs; each request reads them when it is handled.
    """

    def __init__(
        self,
        *,
        latency: float = 0.0,
        responder: Callable[[Request], str] | None = None,
        port: int = 0,
        api_key: str | None = None,
        model_alias: dict[str, str] | None = None,
        fingerprint: str = "fp_test01",
        host: str = "127.0.0.1",
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.latency = latency
        #: Serve HTTPS with this server-side context (None: plain HTTP).
        self.tls = tls
        self.responder = responder
        #: Tool calls to answer with, from the request: ``[{"name", "arguments"}]``, the
        #: arguments an object (or, for the OpenAI protocols, a string sent as it is); an
        #: empty list answers with text. Each protocol writes them in its own form.
        self.tool_caller: Callable[[Request], list[dict[str, Any]]] | None = None
        #: The message of injected HTTP errors, from the request (None: the provider's own).
        self.error_text: Callable[[Request], str] | None = None
        #: A team's own services at paths of their own, beside the model APIs: path ->
        #: (status, JSON answer) for a request (an ``http`` pin's endpoint).
        self.services: dict[str, Callable[[Request], tuple[int, Any]]] = {}
        self.api_key = api_key
        self.model_alias: dict[str, str] = dict(model_alias or {})
        #: The model ids ``GET /v1/models`` lists.
        self.models: list[str] = []
        self.fingerprint = fingerprint
        #: Reasoning tokens reported in OpenAI usage (included in ``completion_tokens``).
        self.reasoning_tokens = 0
        #: Cached input tokens reported in usage (part of the prompt's input tokens).
        self.cached_tokens = 0
        #: Entra ID bearer tokens Azure requests may carry instead of the ``api-key``.
        self.entra_tokens: set[str] = set()
        #: Azure deployment name -> the model it serves (None: every name is a deployment).
        self.deployments: dict[str, str] | None = None
        self.host = host
        self.port = port
        #: Every request received, in arrival order.
        self.requests: list[Request] = []
        #: Batch APIs: status polls a batch answers "in progress" before it ends.
        self.batch_polls = 2
        #: Batch creations answered with a 500 (nothing created) before one succeeds.
        self.batch_create_errors = 0
        #: Where Anthropic batches say their results are (None: this server's own URL).
        self.batch_results_base: str | None = None
        #: The next batch created expires after answering this many of its requests.
        self.batch_expire_after: int | None = None
        #: Requests inside batches whose body contains one of these fail (a server error).
        self.batch_errors_matching: list[str] = []
        #: Every request submitted inside a batch, in submission order (``custom_id`` set).
        self.batch_requests: list[Request] = []
        #: The requests batches answered (what was bought), in answering order.
        self.batch_answered: list[Request] = []
        self._files: dict[str, bytes] = {}
        self._batches: dict[str, dict[str, Any]] = {}
        #: Exceptions raised by ``responder`` (each also answered with a 500).
        self.errors: list[BaseException] = []
        #: Highest number of simultaneously open client connections seen.
        self.peak_connections = 0
        #: Number of client connections accepted so far.
        self.connections_opened = 0
        self._active_connections = 0
        self._lock = threading.Lock()
        self._next: deque[_NextRule] = deque()
        self._matching: list[_MatchRule] = []
        self._random: list[_RandomRule] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop_event: asyncio.Event | None = None
        self._thread: threading.Thread | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._holds: list[Hold] = []
        #: ``hold_batch``'s holds: on creations (the batch made first), on results' downloads.
        self._batch_holds: dict[str, list[Hold]] = {"create": [], "results": []}

    # -- lifecycle -------------------------------------------------------------------------

    @property
    def root_url(self) -> str:
        """``http://HOST:PORT`` (``https`` with ``tls``); Anthropic clients post to
        ``{root_url}/v1/messages``."""
        return f"{'https' if self.tls else 'http'}://{self.host}:{self.port}"

    @property
    def base_url(self) -> str:
        """OpenAI-style base URL, ``http://HOST:PORT/v1``."""
        return f"{self.root_url}/v1"

    def start(self) -> LLMServer:
        """Start serving on a background thread; returns once the socket is listening."""
        if self._thread is not None:
            raise RuntimeError("server already started")
        ready = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            try:
                asyncio.run(self._run(ready.set))
            except BaseException as exc:  # reported to the starting thread
                failure.append(exc)
            finally:
                ready.set()

        self._thread = threading.Thread(target=run, name="LLMServer", daemon=True)
        self._thread.start()
        ready.wait()
        if failure:
            self._thread.join()
            self._thread = None
            raise failure[0]
        return self

    def stop(self) -> None:
        """Release every hold, close the listener and every open connection, then join the
        server thread."""
        for hold in [*self._holds, *self._batch_holds["create"], *self._batch_holds["results"]]:
            hold.release()
        thread, loop, stop_event = self._thread, self._loop, self._stop_event
        if thread is None:
            return
        if loop is not None and stop_event is not None:
            with contextlib.suppress(RuntimeError):  # loop already closed
                loop.call_soon_threadsafe(stop_event.set)
        thread.join()
        self._thread = None

    def __enter__(self) -> LLMServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    async def _run(self, started: Callable[[], None]) -> None:
        """Serve on the running loop until ``_stop_event`` is set, then close everything."""
        self._loop = asyncio.get_running_loop()
        self._stop_event = asyncio.Event()
        server = await asyncio.start_server(
            self._handle,
            self.host,
            self.port,
            backlog=2048,
            limit=_MAX_HEADER_BYTES,
            ssl=self.tls,
        )
        self.port = server.sockets[0].getsockname()[1]
        started()
        try:
            await self._stop_event.wait()
        finally:
            server.close()
            for writer in list(self._writers):
                writer.transport.abort()
            tasks = list(self._tasks)
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await server.wait_closed()

    def _request_stop(self) -> None:
        if self._stop_event is not None:
            self._stop_event.set()

    # -- recorded requests and faults ------------------------------------------------------

    def count(self, predicate: Callable[[Request], bool] | None = None) -> int:
        """Number of requests received, or of those for which ``predicate`` is true."""
        with self._lock:
            snapshot = list(self.requests)
        if predicate is None:
            return len(snapshot)
        return sum(1 for request in snapshot if predicate(request))

    def hold(self, after: int = 0) -> Hold:
        """Answer ``after`` more endpoint requests, then hold every later one's response
        until the returned ``Hold`` is released (also a context manager that releases it):
        a client is caught mid-work, and cannot finish, for as long as a test needs."""
        hold = Hold(self, after)
        with self._lock:
            self._holds.append(hold)
        return hold

    def batch_held(self) -> int:
        """How many batch answers ``hold_batch``'s holds keep waiting now."""
        with self._lock:
            holds = [*self._batch_holds["create"], *self._batch_holds["results"]]
        return sum(hold.waiting for hold in holds)

    def hold_batch(self, what: Literal["create", "results"], after: int = 0) -> Hold:
        """Answer ``after`` more batch creations (``"create"``: each batch is made, then its
        answer held) or downloads of a batch's results (``"results"``: an output or error
        file, Anthropic's results), then hold every later one's answer until the returned
        ``Hold`` is released; ``waiting`` counts those held now."""
        hold = Hold(self, after)
        with self._lock:
            self._batch_holds[what].append(hold)
        return hold

    def fail_next(self, fault: str, times: int = 1, **opts: float) -> None:
        """Inject ``fault`` into the next ``times`` endpoint requests, after earlier queued ones."""
        rule = _NextRule(_make_fault(fault, opts), times)
        if times > 0:
            with self._lock:
                self._next.append(rule)

    def fail_matching(
        self, substring: str, fault: str, times: int | None = None, **opts: float
    ) -> None:
        """Inject ``fault`` into requests whose body contains ``substring`` (None: every time)."""
        rule = _MatchRule(substring, _make_fault(fault, opts), times)
        if times is None or times > 0:
            with self._lock:
                self._matching.append(rule)

    def fail_randomly(
        self, fault: str, rate: float, seed: int, *, per_attempt: bool = False, **opts: float
    ) -> None:
        """Inject ``fault`` into a seeded fraction ``rate`` of requests, chosen by body hash.

        The choice depends only on ``seed`` and the request body (canonical JSON, so key order
        and whitespace do not matter), never on arrival order: the same bodies fail on every run
        and on every server instance. With the default ``per_attempt=False`` a failing body fails
        on every retry too; with ``per_attempt=True`` the k-th arrival of a body draws again, so
        retries can succeed while reruns from a fresh server (or after ``reset``) still fail the
        same attempts.
        """
        if not 0.0 <= rate <= 1.0:
            raise ValueError("rate must be between 0 and 1")
        threshold = min(int(rate * 2**64), 2**64)
        rule = _RandomRule(_make_fault(fault, opts), threshold, str(seed).encode(), per_attempt)
        with self._lock:
            self._random.append(rule)

    def clear_faults(self) -> None:
        """Remove every pending fault rule."""
        with self._lock:
            self._next.clear()
            self._matching.clear()
            self._random.clear()

    def reset(self) -> None:
        """Forget recorded requests, responder errors and fault rules."""
        with self._lock:
            self.requests.clear()
            self.errors.clear()
            self._next.clear()
            self._matching.clear()
            self._random.clear()

    def _record(self, request: Request, draw_fault: bool) -> _Fault | None:
        """Append ``request`` and, for endpoint requests, draw the fault it gets (if any)."""
        with self._lock:
            fault = None
            if draw_fault and (self._next or self._matching or self._random):
                fault = self._draw_fault(request)
                if fault is not None:
                    request.fault = fault.name
            self.requests.append(request)
        return fault

    def _draw_fault(self, request: Request) -> _Fault | None:
        """Precedence: ``fail_next`` queue, then ``fail_matching`` rules, then ``fail_randomly``."""
        if self._next:
            next_rule = self._next[0]
            next_rule.remaining -= 1
            if next_rule.remaining <= 0:
                self._next.popleft()
            return next_rule.fault
        canonical: bytes | None = None
        if self._matching:
            text = request.raw.decode("utf-8", "replace")
            alternate: str | None = None
            for rule in self._matching:
                hit = rule.substring in text
                if not hit and request.body is not None:
                    if alternate is None:
                        canonical = _canonical_body(request)
                        alternate = canonical.decode()
                    hit = rule.substring in alternate
                if hit:
                    if rule.remaining is not None:
                        rule.remaining -= 1
                        if rule.remaining <= 0:
                            self._matching.remove(rule)
                    return rule.fault
        if self._random:
            if canonical is None:
                canonical = _canonical_body(request)
            for random_rule in self._random:
                key = random_rule.seed + b"\0" + canonical
                if random_rule.per_attempt:
                    body_id = hashlib.sha256(canonical).digest()
                    attempt = random_rule.seen.get(body_id, 0)
                    random_rule.seen[body_id] = attempt + 1
                    key += b"\0%d" % attempt
                draw = int.from_bytes(hashlib.sha256(key).digest()[:8], "big")
                if draw < random_rule.threshold:
                    return random_rule.fault
        return None

    # -- HTTP ------------------------------------------------------------------------------

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self._writers.add(writer)
        self._active_connections += 1
        self.connections_opened += 1
        if self._active_connections > self.peak_connections:
            self.peak_connections = self._active_connections
        try:
            while await self._serve_one(reader, writer):
                pass
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        except asyncio.CancelledError:
            # Only shutdown cancels connection tasks. Finishing normally keeps Python 3.11's
            # stream callback from logging the cancellation as an unhandled error.
            pass
        except asyncio.LimitOverrunError:
            self._send_error(writer, 431, "request headers too large")
        except _BadRequest as exc:
            self._send_error(writer, exc.status, str(exc))
        finally:
            self._active_connections -= 1
            self._writers.discard(writer)
            self._tasks.discard(task)
            if not writer.is_closing():
                writer.close()

    def _send_error(self, writer: asyncio.StreamWriter, status: int, message: str) -> None:
        if not writer.is_closing():
            data = _encode(_openai_error(message, "invalid_request_error")).encode()
            self._write(writer, status, data, keep_alive=False, http10=False)

    async def _serve_one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """Read and answer one request; returns whether the connection stays open."""
        head = await reader.readuntil(b"\r\n\r\n")
        head = head.lstrip(b"\r\n")
        if not head:
            return True
        lines = head[:-4].split(b"\r\n")
        parts = lines[0].split(b" ")
        if len(parts) != 3 or not parts[2].startswith(b"HTTP/1."):
            raise _BadRequest()
        method_b, target, version = parts
        headers: dict[str, str] = {}
        for line in lines[1:]:
            raw_name, sep, value = line.partition(b":")
            if not sep or not raw_name:
                raise _BadRequest()
            key = raw_name.strip().lower().decode("latin-1")
            text = value.strip().decode("latin-1")
            headers[key] = f"{headers[key]}, {text}" if key in headers else text

        http10 = version == b"HTTP/1.0"
        connection = headers.get("connection", "").lower()
        keep_alive = "keep-alive" in connection if http10 else "close" not in connection

        if headers.get("expect", "").lower() == "100-continue":
            writer.write(_CONTINUE)
        transfer = headers.get("transfer-encoding")
        if transfer is not None and "chunked" in transfer.lower():
            raw = await self._read_chunked(reader)
        else:
            length_text = headers.get("content-length")
            if length_text is None:
                raw = b""
            else:
                try:
                    length = int(length_text)
                except ValueError:
                    raise _BadRequest(message="invalid Content-Length") from None
                if length < 0:
                    raise _BadRequest(message="invalid Content-Length")
                if length > _MAX_BODY_BYTES:
                    raise _BadRequest(413, "request body too large")
                raw = await reader.readexactly(length) if length else b""

        body: dict[str, Any] | None = None
        parsed_ok = False
        if raw:
            try:
                parsed = json.loads(raw)
            except ValueError:
                pass
            else:
                if isinstance(parsed, dict):
                    body, parsed_ok = parsed, True

        path, _, query = target.decode("latin-1").partition("?")
        method = method_b.decode("latin-1")
        protocol: ProtocolName
        azure = path == _AZURE_V1_PATH or _AZURE_DEPLOYMENT.match(path) is not None
        endpoint = method == "POST" and (
            path in (_OPENAI_PATH, _ANTHROPIC_PATH, _RESPONSES_PATH) or azure
        )
        if azure or path.startswith("/openai/"):
            protocol = "azure"
        elif path == _RESPONSES_PATH:
            protocol = "responses"
        elif path == _ANTHROPIC_PATH or (
            path != _OPENAI_PATH and ("anthropic-version" in headers or "x-api-key" in headers)
        ):
            protocol = "anthropic"
        else:
            protocol = "openai"
        request = Request(path, method, headers, body, raw, protocol, query=query)
        fault = self._record(request, endpoint)

        if not endpoint and _BATCH_ROUTE.match(path):
            status, data = await self._answer_batch_api(request)
            if writer.is_closing():
                return False
            self._write(writer, status, data, keep_alive, http10)
            return keep_alive

        if method == "GET" and path == _MODELS_PATH:
            status, listed = self._answer_models(request)
            self._write(writer, status, _encode(listed).encode(), keep_alive, http10)
            return keep_alive

        if method == "POST" and path == _EMBEDDINGS_PATH:
            status, data = self._answer_embeddings(request)
            self._write(writer, status, _encode(data).encode(), keep_alive, http10)
            return keep_alive

        service = self.services.get(path)
        if not endpoint and service is not None:
            # A team's own service beside the model APIs (an ``http`` pin's endpoint).
            status, data = service(request)
            self._write(writer, status, _encode(data).encode(), keep_alive, http10)
            return keep_alive

        if not endpoint:
            if protocol == "anthropic":
                payload = _anthropic_error("Not Found", "not_found_error")
            elif protocol == "azure":
                payload = _azure_error("404", "Resource not found")
            else:
                payload = _openai_error(f"Invalid URL ({method} {path})", "invalid_request_error")
            self._write(writer, 404, _encode(payload).encode(), keep_alive, http10)
            return keep_alive

        for hold in self._held(self._holds):
            await hold.wait()
        if self.latency > 0:
            await asyncio.sleep(self.latency)

        extra = b""
        name = fault.name if fault is not None else None
        if name == "reset":
            sock = writer.get_extra_info("socket")
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_ZERO)
            writer.transport.abort()
            return False
        if name == "quota" and protocol == "anthropic":
            # Anthropic's answer when the account's credit is spent: a 400, not a 429.
            status, payload = 400, _anthropic_error(_ANTHROPIC_NO_CREDIT, "invalid_request_error")
        elif name == "quota":
            # OpenAI's answer when the account's credit is spent: a 429 that waiting won't fix.
            status = 429
            payload = _openai_error(
                "You exceeded your current quota, please check your plan and billing details.",
                "insufficient_quota",
                code="insufficient_quota",
            )
        elif name in _STATUS_FAULTS:
            assert fault is not None
            status = int(name)
            payload = _error_body(protocol, status, request)
            if self.error_text is not None:
                payload["error"]["message"] = self.error_text(request)
            if status == 429:
                retry_after = fault.opts["retry_after"]
                extra = b"retry-after: %s\r\n" % _seconds(retry_after).encode()
                if protocol != "anthropic":
                    extra += b"retry-after-ms: %d\r\n" % round(retry_after * 1000)
        elif name in ("403", "content_filter", "context_length"):
            status, payload = _client_error_body(protocol, name)
        else:
            if name == "timeout":
                assert fault is not None
                await asyncio.sleep(fault.opts["delay"])
            status, payload = self._answer(request, parsed_ok)
            if name == "missing_fields" and status == 200:
                missing = {"anthropic": "content", "responses": "output"}.get(protocol, "choices")
                payload.pop(missing, None)
            elif name in ("filtered", "truncated") and status == 200:
                _withheld(protocol, name, payload)
        data = _encode(payload).encode()
        if name == "malformed":
            data = data[: max(1, len(data) // 2)]
        if writer.is_closing():  # the client gave up (e.g. its timeout fired)
            return False
        self._write(writer, status, data, keep_alive, http10, extra)
        if writer.transport.get_write_buffer_size() > 1 << 16:
            await writer.drain()
        return keep_alive

    def _held(self, holds: list[Hold]) -> list[Hold]:
        """The holds an endpoint request waits for (each counts it once, as it arrives)."""
        with self._lock:
            return [hold for hold in list(holds) if not hold._admit()]

    @staticmethod
    async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
        chunks: list[bytes] = []
        total = 0
        while True:
            line = await reader.readuntil(b"\r\n")
            try:
                size = int(line.split(b";", 1)[0].strip(), 16)
            except ValueError:
                raise _BadRequest(message="invalid chunk size") from None
            if size == 0:
                while await reader.readuntil(b"\r\n") != b"\r\n":  # trailers
                    pass
                return b"".join(chunks)
            total += size
            if total > _MAX_BODY_BYTES:
                raise _BadRequest(413, "request body too large")
            chunks.append(await reader.readexactly(size))
            if await reader.readexactly(2) != b"\r\n":
                raise _BadRequest(message="invalid chunk terminator")

    @staticmethod
    def _write(
        writer: asyncio.StreamWriter,
        status: int,
        data: bytes,
        keep_alive: bool,
        http10: bool,
        extra: bytes = b"",
    ) -> None:
        if not keep_alive:
            connection = _CONN_CLOSE
        elif http10:
            connection = _CONN_KEEP
        else:
            connection = b""
        writer.write(
            b"".join((_PREFIX[status], b"%d\r\n" % len(data), extra, connection, b"\r\n", data))
        )
        if not keep_alive:
            writer.close()

    # -- API semantics ---------------------------------------------------------------------

    def _answer(self, request: Request, parsed_ok: bool) -> tuple[int, dict[str, Any]]:
        """Authenticate, validate and answer an endpoint request (no faults involved)."""
        if request.protocol == "openai":
            return self._answer_openai(request, parsed_ok)
        if request.protocol == "azure":
            return self._answer_azure(request, parsed_ok)
        if request.protocol == "responses":
            return self._answer_responses(request, parsed_ok)
        return self._answer_anthropic(request, parsed_ok)

    def _text(self, request: Request, body: dict[str, Any]) -> str | None:
        if self.responder is None:
            return default_text(body["input" if request.protocol == "responses" else "messages"])
        try:
            text = self.responder(request)
            if not isinstance(text, str):
                raise TypeError(f"responder returned {type(text).__name__}, expected str")
        except Exception as exc:
            with self._lock:
                self.errors.append(exc)
            return None
        return text

    def _answer_embeddings(self, request: Request) -> tuple[int, dict[str, Any]]:
        """OpenAI's ``/v1/embeddings``: each input text as a bag of its words, hashed into
        ``EMBEDDING_DIMENSIONS`` dimensions, so texts sharing words are close."""
        problem = self._bearer_problem(request)
        if problem is not None:
            return 401, problem
        body = request.body or {}
        texts = body.get("input")
        if isinstance(texts, str):
            texts = [texts]
        if not isinstance(texts, list) or not texts or not isinstance(body.get("model"), str):
            return 400, _openai_error("'input' and 'model' are required", "invalid_request_error")
        data = [
            {"object": "embedding", "index": i, "embedding": _embedding(str(text))}
            for i, text in enumerate(texts)
        ]
        tokens = sum(estimate_tokens(str(text)) for text in texts)
        return 200, {
            "object": "list",
            "data": data,
            "model": body["model"],
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }

    def _bearer_problem(self, request: Request) -> dict[str, Any] | None:
        """OpenAI's 401 body for a missing or wrong ``authorization`` header, or None.

        As the real API, a request without a key is refused whatever ``api_key`` is; with
        ``api_key`` None any key is taken, else only that one."""
        auth = request.headers.get("authorization", "")
        scheme, _, key = auth.partition(" ")
        key = key.strip()
        if scheme.lower() != "bearer" or not key:
            return _openai_error(_OPENAI_NO_KEY, "invalid_request_error")
        if self.api_key is not None and key != self.api_key:
            shown = key[:3] + "*" * 4 + key[-4:]
            return _openai_error(
                f"Incorrect API key provided: {shown}. You can find your API key at "
                "https://platform.openai.com/account/api-keys.",
                "invalid_request_error",
                code="invalid_api_key",
            )
        return None

    def _answer_azure(self, request: Request, parsed_ok: bool) -> tuple[int, dict[str, Any]]:
        if self.api_key is not None or self.entra_tokens:
            auth = request.headers.get("authorization", "")
            if auth:
                scheme, _, token = auth.partition(" ")
                if scheme.lower() != "bearer" or token.strip() not in self.entra_tokens:
                    return 401, _azure_error(
                        "401",
                        "Unauthorized. Access token is missing, invalid, audience is incorrect "
                        "(https://cognitiveservices.azure.com), or have expired.",
                    )
            elif request.headers.get("api-key") != self.api_key or self.api_key is None:
                return 401, _error_body("azure", 401)
        deployment = _AZURE_DEPLOYMENT.match(request.path)
        if deployment is not None:
            version = dict(
                part.partition("=")[::2] for part in request.query.split("&") if part
            ).get("api-version")
            if version is None:
                return 404, _azure_error("404", "Resource not found")
            if not _API_VERSION.match(version):
                return 400, _azure_error("BadRequest", "API version not supported")
        body = request.body
        if not parsed_ok or body is None:
            return 400, _openai_error(
                "We could not parse the JSON body of your request.", "invalid_request_error"
            )
        if deployment is not None:
            name = deployment.group(1)
            model = name if self.deployments is None else self.deployments.get(name)
        else:
            name = body.get("model")
            if not isinstance(name, str) or not name:
                return 400, _openai_error(
                    "Missing required parameter: 'model'.", "invalid_request_error", "model"
                )
            model = name if self.deployments is None else self.deployments.get(name)
        if model is None:
            return 404, _azure_error(
                "DeploymentNotFound",
                "The API deployment for this resource does not exist. If you created the "
                "deployment within the last 5 minutes, please wait a moment and try again.",
            )
        status, payload = self._chat(request, body, model)
        if status == 200:
            payload["prompt_filter_results"] = [
                {"prompt_index": 0, "content_filter_results": dict(_FILTER_CLEAN)}
            ]
            payload["choices"][0]["content_filter_results"] = dict(_FILTER_CLEAN)
        return status, payload

    def _answer_responses(self, request: Request, parsed_ok: bool) -> tuple[int, dict[str, Any]]:
        problem = self._bearer_problem(request)
        if problem is not None:
            return 401, problem
        body = request.body
        if not parsed_ok or body is None:
            return 400, _openai_error(
                "We could not parse the JSON body of your request.", "invalid_request_error"
            )
        model = body.get("model")
        if not isinstance(model, str) or not model:
            return 400, _openai_error(
                "Missing required parameter: 'model'.", "invalid_request_error", "model"
            )
        turns = body.get("input")
        if not isinstance(turns, list | str) or not turns:
            return 400, _openai_error(
                "Missing required parameter: 'input'.", "invalid_request_error", "input"
            )
        for name in ("messages", "max_tokens", "reasoning_effort"):
            if name in body:
                return 400, _openai_error(
                    f"Unsupported parameter: '{name}'.", "invalid_request_error", name
                )
        if body.get("stream"):
            return 400, _openai_error(
                "Streaming is not supported by this test server.", "invalid_request_error", "stream"
            )
        text = self._text(request, body)
        if text is None:
            return 500, _openai_error(f"responder failed: {self.errors[-1]!r}", "server_error")
        input_tokens = estimate_tokens(_prompt_text(body))
        output_tokens = estimate_tokens(text) + self.reasoning_tokens
        output: list[dict[str, Any]] = []
        if self.reasoning_tokens:
            output.append({"id": "rs_" + os.urandom(8).hex(), "type": "reasoning", "summary": []})
        calls = self.tool_caller(request) if self.tool_caller is not None else []
        if text or not calls:
            output.append(
                {
                    "id": "msg_" + os.urandom(8).hex(),
                    "type": "message",
                    "status": "completed",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": text, "annotations": []}],
                }
            )
        output.extend(
            {
                "id": "fc_" + os.urandom(8).hex(),
                "type": "function_call",
                "status": "completed",
                "call_id": f"call_{i}",
                "name": call["name"],
                "arguments": _arguments_string(call["arguments"]),
            }
            for i, call in enumerate(calls)
        )
        reasoning = body.get("reasoning")
        if not isinstance(reasoning, dict):
            reasoning = {}
        return 200, {
            "id": "resp_" + os.urandom(12).hex(),
            "object": "response",
            "created_at": int(time.time()),
            "status": "completed",
            "error": None,
            "incomplete_details": None,
            "instructions": body.get("instructions"),
            "max_output_tokens": body.get("max_output_tokens"),
            "model": self.model_alias.get(model, model),
            "output": output,
            # The request's settings, echoed with the API's defaults for those not sent.
            "parallel_tool_calls": body.get("parallel_tool_calls", True),
            "previous_response_id": body.get("previous_response_id"),
            "reasoning": {"effort": reasoning.get("effort"), "summary": reasoning.get("summary")},
            "store": body.get("store", True),
            "temperature": body.get("temperature", 1.0),
            "text": body.get("text") or {"format": {"type": "text"}},
            "tool_choice": body.get("tool_choice", "auto"),
            "tools": [_response_tool(tool) for tool in body.get("tools") or []],
            "top_p": body.get("top_p", 1.0),
            "truncation": body.get("truncation", "disabled"),
            "user": body.get("user"),
            "metadata": body.get("metadata") or {},
            "usage": {
                "input_tokens": input_tokens,
                "input_tokens_details": {
                    "cached_tokens": min(self.cached_tokens, input_tokens),
                    "cache_write_tokens": 0,
                },
                "output_tokens": output_tokens,
                "output_tokens_details": {"reasoning_tokens": self.reasoning_tokens},
                "total_tokens": input_tokens + output_tokens,
            },
        }

    def _answer_openai(self, request: Request, parsed_ok: bool) -> tuple[int, dict[str, Any]]:
        problem = self._bearer_problem(request)
        if problem is not None:
            return 401, problem
        body = request.body
        if not parsed_ok or body is None:
            return 400, _openai_error(
                "We could not parse the JSON body of your request. (HINT: This likely means you "
                "aren't using your HTTP library correctly.)",
                "invalid_request_error",
            )
        model = body.get("model")
        if not isinstance(model, str) or not model:
            return 400, _openai_error("you must provide a model parameter", "invalid_request_error")
        return self._chat(request, body, model)

    def _chat(
        self, request: Request, body: dict[str, Any], model: str
    ) -> tuple[int, dict[str, Any]]:
        """A chat completion of ``model`` (OpenAI's, or an Azure deployment's)."""
        messages = body.get("messages")
        if messages is None:
            return 400, _openai_error(
                "Missing required parameter: 'messages'.",
                "invalid_request_error",
                param="messages",
                code="missing_required_parameter",
            )
        if not isinstance(messages, list) or not messages:
            return 400, _openai_error(
                "Invalid 'messages': empty array. Expected an array with minimum length 1, but "
                "got an empty array instead.",
                "invalid_request_error",
                param="messages",
                code="empty_array",
            )
        if body.get("stream"):
            return 400, _openai_error(
                "Streaming is not supported by this test server.",
                "invalid_request_error",
                param="stream",
            )
        text = self._text(request, body)
        if text is None:
            return 500, _openai_error(f"responder failed: {self.errors[-1]!r}", "server_error")
        prompt_tokens = estimate_tokens(_prompt_text(body))
        completion_tokens = estimate_tokens(text) + self.reasoning_tokens
        message: dict[str, Any] = {"role": "assistant", "content": text, "refusal": None}
        calls = self.tool_caller(request) if self.tool_caller is not None else []
        if calls:
            message["content"] = text or None
            message["tool_calls"] = [
                {
                    "id": f"call_{i}",
                    "type": "function",
                    "function": {
                        "name": call["name"],
                        "arguments": _arguments_string(call["arguments"]),
                    },
                }
                for i, call in enumerate(calls)
            ]
        return 200, {
            "id": "chatcmpl-" + os.urandom(12).hex(),
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.model_alias.get(model, model),
            "system_fingerprint": self.fingerprint,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": None,
                    "finish_reason": "tool_calls" if calls else "stop",
                }
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
                "prompt_tokens_details": {"cached_tokens": min(self.cached_tokens, prompt_tokens)},
                "completion_tokens_details": {"reasoning_tokens": self.reasoning_tokens},
            },
        }

    def _answer_anthropic(self, request: Request, parsed_ok: bool) -> tuple[int, dict[str, Any]]:
        status, problem = self._anthropic_auth(request)
        if problem is not None:
            return status, problem
        body = request.body
        if not parsed_ok or body is None:
            return 400, _anthropic_error(
                "There was an issue with your request body: it is not a valid JSON object.",
                "invalid_request_error",
            )
        for name in ("model", "messages", "max_tokens"):
            if name not in body:
                return 400, _anthropic_error(f"{name}: Field required", "invalid_request_error")
        model = body["model"]
        messages = body["messages"]
        if not isinstance(model, str) or not model:
            return 400, _anthropic_error(
                "model: Input should be a valid string", "invalid_request_error"
            )
        if not isinstance(messages, list) or not messages:
            return 400, _anthropic_error(
                "messages: at least one message is required", "invalid_request_error"
            )
        max_tokens = body["max_tokens"]
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            return 400, _anthropic_error(
                "max_tokens: Input should be a valid integer greater than or equal to 1",
                "invalid_request_error",
            )
        if body.get("stream"):
            return 400, _anthropic_error(
                "stream: streaming is not supported by this test server", "invalid_request_error"
            )
        text = self._text(request, body)
        if text is None:
            return 500, _anthropic_error(f"responder failed: {self.errors[-1]!r}", "api_error")
        calls = self.tool_caller(request) if self.tool_caller is not None else []
        content: list[dict[str, Any]] = (
            [{"type": "text", "text": text}] if text or not calls else []
        )
        content.extend(
            {
                "type": "tool_use",
                "id": f"toolu_{i}",
                "name": call["name"],
                "input": call["arguments"],
            }
            for i, call in enumerate(calls)
        )
        return 200, {
            "id": "msg_" + os.urandom(12).hex(),
            "type": "message",
            "role": "assistant",
            "model": self.model_alias.get(model, model),
            "content": content,
            "stop_reason": "tool_use" if calls else "end_turn",
            "stop_sequence": None,
            "usage": {
                "input_tokens": estimate_tokens(_prompt_text(body)),
                "output_tokens": estimate_tokens(text),
            },
        }

    # -- batch APIs: OpenAI's Files and Batches, Anthropic's Message Batches ------------

    async def _answer_batch_api(self, request: Request) -> tuple[int, bytes]:
        """A call to a batch API route: create, poll, upload or download."""
        anthropic = request.path.startswith("/v1/messages/")
        if anthropic:
            status, problem = self._anthropic_auth(request)
        else:
            status, problem = 401, self._bearer_problem(request)
        if problem is not None:
            return status, _encode(problem).encode()
        parts = request.path.split("/")[2:]
        if anthropic:
            parts = parts[1:]  # after "messages"
        try:
            if request.method == "POST" and parts == ["files"]:
                result: dict[str, Any] | bytes = self._upload(request)
            elif request.method == "GET" and len(parts) == 3 and parts[0] == "files":
                result = self._files[parts[1]]
                for hold in self._held(self._batch_holds["results"]):
                    await hold.wait()
            elif request.method == "POST" and parts == ["batches"]:
                with self._lock:
                    refuse = self.batch_create_errors > 0
                    self.batch_create_errors -= refuse
                if refuse:
                    return 500, _encode(_error_body(request.protocol, 500)).encode()
                result = self._create_batch(request, anthropic)
                for hold in self._held(self._batch_holds["create"]):
                    await hold.wait()
            elif request.method == "GET" and parts == ["batches"]:
                result = self._list_batches(request.query, anthropic)
            elif request.method == "GET" and len(parts) == 2 and parts[0] == "batches":
                result = self._poll_batch(parts[1])
            elif request.method == "GET" and len(parts) == 3 and anthropic:
                result = self._batches[parts[1]]["results"]
                for hold in self._held(self._batch_holds["results"]):
                    await hold.wait()
            else:
                raise KeyError(request.path)
        except KeyError:
            payload = (
                _anthropic_error("Not Found", "not_found_error")
                if anthropic
                else _openai_error(f"No such object: {request.path}", "invalid_request_error")
            )
            return 404, _encode(payload).encode()
        except ValueError as exc:
            payload = (
                _anthropic_error(str(exc), "invalid_request_error")
                if anthropic
                else _openai_error(str(exc), "invalid_request_error")
            )
            return 400, _encode(payload).encode()
        return 200, result if isinstance(result, bytes) else _encode(result).encode()

    def _answer_models(self, request: Request) -> tuple[int, dict[str, Any]]:
        """``GET /v1/models``: OpenAI's list, or Anthropic's page of it."""
        if request.protocol == "anthropic":
            status, problem = self._anthropic_auth(request)
            if problem is not None:
                return status, problem
            query = {k: v[-1] for k, v in urllib.parse.parse_qs(request.query).items()}
            ids = self.models
            after = query.get("after_id")
            start = ids.index(after) + 1 if after in ids else 0
            chunk = ids[start : start + int(query.get("limit", "20"))]
            return 200, {
                "data": [
                    {
                        "id": i,
                        "type": "model",
                        "display_name": i,
                        "created_at": "2026-01-01T00:00:00Z",
                    }
                    for i in chunk
                ],
                "has_more": start + len(chunk) < len(ids),
                "first_id": chunk[0] if chunk else None,
                "last_id": chunk[-1] if chunk else None,
            }
        problem = self._bearer_problem(request)
        if problem is not None:
            return 401, problem
        return 200, {
            "object": "list",
            "data": [
                {"id": i, "object": "model", "created": 1767225600, "owned_by": "system"}
                for i in self.models
            ],
        }

    def _anthropic_auth(self, request: Request) -> tuple[int, dict[str, Any] | None]:
        """Anthropic's 401 for a missing or wrong ``x-api-key`` (a key is always needed; with
        ``api_key`` None any key is taken), its 400 without ``anthropic-version``."""
        key = request.headers.get("x-api-key")
        if not key:
            return 401, _anthropic_error("x-api-key header is required", "authentication_error")
        if self.api_key is not None and key != self.api_key:
            return 401, _anthropic_error("invalid x-api-key", "authentication_error")
        if "anthropic-version" not in request.headers:
            return 400, _anthropic_error(
                "anthropic-version: header is required", "invalid_request_error"
            )
        return 200, None

    def _upload(self, request: Request) -> dict[str, Any]:
        match = re.search(r"boundary=([^;\s]+)", request.headers.get("content-type", ""))
        if match is None:
            raise ValueError("expected a multipart/form-data body")
        fields: dict[str, bytes] = {}
        for part in request.raw.split(b"--" + match.group(1).encode())[1:-1]:
            head, _, content = part.strip(b"\r\n").partition(b"\r\n\r\n")
            name = re.search(rb'name="([^"]+)"', head)
            if name is not None:
                fields[name.group(1).decode()] = content
        if fields.get("purpose") != b"batch" or "file" not in fields:
            raise ValueError("expected purpose=batch and a file")
        file_id = "file-" + os.urandom(12).hex()
        with self._lock:
            self._files[file_id] = fields["file"]
        return {
            "id": file_id,
            "object": "file",
            "bytes": len(fields["file"]),
            "created_at": int(time.time()),
            "filename": "batch.jsonl",
            "purpose": "batch",
            "status": "processed",
            "status_details": None,
        }

    def _create_batch(self, request: Request, anthropic: bool) -> dict[str, Any]:
        body = request.body
        if body is None:
            raise ValueError("the body is not a JSON object")
        items: list[Request] = []
        if anthropic:
            for entry in body.get("requests") or []:
                params = entry["params"]
                raw = _encode(params).encode()
                items.append(
                    Request(
                        _ANTHROPIC_PATH,
                        "POST",
                        request.headers,
                        params,
                        raw,
                        "anthropic",
                        custom_id=entry["custom_id"],
                    )
                )
        else:
            endpoint = body.get("endpoint")
            if endpoint not in _BATCH_ENDPOINTS or body.get("completion_window") != "24h":
                raise ValueError("unsupported endpoint or completion_window")
            for line in self._files[body["input_file_id"]].splitlines():
                entry = json.loads(line)
                if entry.get("method") != "POST" or entry.get("url") != endpoint:
                    raise ValueError(f"line {entry.get('custom_id')}: method or url differs")
                item_body = entry["body"]
                items.append(
                    Request(
                        endpoint,
                        "POST",
                        request.headers,
                        item_body,
                        _encode(item_body).encode(),
                        _BATCH_ENDPOINTS[endpoint],
                        custom_id=entry["custom_id"],
                    )
                )
        ids = [item.custom_id for item in items]
        if not items or len(set(ids)) != len(ids):
            raise ValueError("a batch needs requests with unique custom_id values")
        now = int(time.time())
        batch_id = ("msgbatch_" if anthropic else "batch_") + os.urandom(12).hex()
        with self._lock:
            expire_after, self.batch_expire_after = self.batch_expire_after, None
            self.batch_requests.extend(items)
            state: dict[str, Any] = {
                "items": items,
                "polls": 0,
                "anthropic": anthropic,
                "expire_after": expire_after,
                "created_at": now,
            }
            if anthropic:
                state["object"] = {
                    "id": batch_id,
                    "type": "message_batch",
                    "processing_status": "in_progress",
                    "request_counts": {
                        "processing": len(items),
                        "succeeded": 0,
                        "errored": 0,
                        "canceled": 0,
                        "expired": 0,
                    },
                    "ended_at": None,
                    "created_at": _iso_time(now),
                    "expires_at": _iso_time(now + 86400),
                    "cancel_initiated_at": None,
                    "results_url": None,
                }
            else:
                state["object"] = {
                    "id": batch_id,
                    "object": "batch",
                    "endpoint": body["endpoint"],
                    "errors": None,
                    "input_file_id": body["input_file_id"],
                    "completion_window": "24h",
                    "status": "validating",
                    "output_file_id": None,
                    "error_file_id": None,
                    "created_at": now,
                    "expires_at": now + 86400,
                    "request_counts": {"total": len(items), "completed": 0, "failed": 0},
                    "metadata": body.get("metadata"),
                }
            self._batches[batch_id] = state
            return dict(state["object"])

    def _list_batches(self, query: str, anthropic: bool) -> dict[str, Any]:
        """OpenAI's ``GET /v1/batches`` (cursor ``after``) or Anthropic's ``GET
        /v1/messages/batches`` (cursor ``after_id``): newest first, a page at a time."""
        params = dict(part.partition("=")[::2] for part in query.split("&") if part)
        limit = int(params.get("limit") or 20)
        with self._lock:
            listed = [
                dict(b["object"])
                for b in reversed(self._batches.values())
                if b["anthropic"] == anthropic
            ]
        cursor = params.get("after_id" if anthropic else "after")
        if cursor:
            ids = [b["id"] for b in listed]
            listed = listed[ids.index(cursor) + 1 :]
        page = listed[:limit]
        return {
            **({} if anthropic else {"object": "list"}),
            "data": page,
            "first_id": page[0]["id"] if page else None,
            "last_id": page[-1]["id"] if page else None,
            "has_more": len(listed) > limit,
        }

    def _poll_batch(self, batch_id: str) -> dict[str, Any]:
        with self._lock:
            state = self._batches[batch_id]
            state["polls"] += 1
            ended = "results" in state
            due = not ended and state["polls"] > self.batch_polls
        if due:
            self._run_batch(batch_id, state)
        elif not ended and not state["anthropic"]:
            state["object"]["status"] = "in_progress"
        if state["anthropic"] and "results" in state:
            base = self.batch_results_base or self.root_url
            state["object"]["results_url"] = f"{base}/v1/messages/batches/{batch_id}/results"
        return dict(state["object"])

    def _run_batch(self, batch_id: str, state: dict[str, Any]) -> None:
        """Answer a batch's requests (as the live endpoints would) and end it."""
        anthropic = state["anthropic"]
        expire_after = state["expire_after"]
        outputs: list[bytes] = []
        failures: list[bytes] = []
        counts = {"succeeded": 0, "errored": 0, "expired": 0}
        for n, item in enumerate(state["items"]):
            if expire_after is not None and n >= expire_after:
                counts["expired"] += 1
                line: dict[str, Any] = (
                    {"custom_id": item.custom_id, "result": {"type": "expired"}}
                    if anthropic
                    else {
                        "id": "batch_req_" + os.urandom(8).hex(),
                        "custom_id": item.custom_id,
                        "response": None,
                        "error": {
                            "code": "batch_expired",
                            "message": "This request could not be executed before the "
                            "completion window expired.",
                        },
                    }
                )
                (outputs if anthropic else failures).append(_encode(line).encode())
                continue
            failing = any(s in item.raw.decode() for s in self.batch_errors_matching)
            if failing:
                status, payload = 500, _error_body(item.protocol, 500)
            else:
                status, payload = self._answer(item, True)
            if status == 200:
                counts["succeeded"] += 1
                with self._lock:
                    self.batch_answered.append(item)
            else:
                counts["errored"] += 1
            if anthropic:
                result = (
                    {"type": "succeeded", "message": payload}
                    if status == 200
                    else {"type": "errored", "error": payload}
                )
                outputs.append(_encode({"custom_id": item.custom_id, "result": result}).encode())
            else:
                line = {
                    "id": "batch_req_" + os.urandom(8).hex(),
                    "custom_id": item.custom_id,
                    "response": {
                        "status_code": status,
                        "request_id": "req_" + os.urandom(8).hex(),
                        "body": payload,
                    },
                    "error": None,
                }
                (outputs if status == 200 else failures).append(_encode(line).encode())
        obj = state["object"]
        with self._lock:
            if anthropic:
                state["results"] = b"".join(x + b"\n" for x in outputs)
                obj["processing_status"] = "ended"
                obj["ended_at"] = _iso_time(int(time.time()))
                obj["request_counts"] = {"processing": 0, "canceled": 0, **counts}
            else:
                state["results"] = b""
                for name, lines in (("output_file_id", outputs), ("error_file_id", failures)):
                    if lines:
                        file_id = "file-" + os.urandom(12).hex()
                        self._files[file_id] = b"".join(x + b"\n" for x in lines)
                        obj[name] = file_id
                obj["status"] = "expired" if counts["expired"] else "completed"
                obj["request_counts"] = {
                    "total": len(state["items"]),
                    "completed": counts["succeeded"],
                    "failed": counts["errored"] + counts["expired"],
                }


def _iso_time(seconds: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def main(argv: list[str] | None = None) -> int:
    """Command-line entry: serve until SIGTERM/SIGINT after printing ``READY <root_url>``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--latency", type=float, default=0.0)
    parser.add_argument("--api-key", default=None)
    args = parser.parse_args(argv)
    server = LLMServer(latency=args.latency, port=args.port, api_key=args.api_key, host=args.host)

    def ready() -> None:
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, server._request_stop)
        sys.stdout.write(f"READY {server.root_url}\n")
        sys.stdout.flush()

    asyncio.run(server._run(ready))
    return 0


if __name__ == "__main__":
    sys.exit(main())
