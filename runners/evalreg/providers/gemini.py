"""Google's ``generateContent``: the Gemini API (an API key) and Vertex AI (a project and
location, application-default credentials).

The Gemini API key goes in the ``x-goog-api-key`` header, never in the URL (the URL is
part of what is stored). A Vertex AI pin authenticates with application-default
credentials through ``google-auth`` (the ``google`` extra): ``gcloud auth
application-default login``, ``GOOGLE_APPLICATION_CREDENTIALS``, workload identity or the
metadata server; the access token is refreshed, when it is about to expire, before an
attempt and sent in its ``authorization`` header only, and redacted like a key
(``redaction.watch_value``).
"""

from __future__ import annotations

import threading
from typing import Any, ClassVar

from evalreg import redaction
from evalreg.errors import UsageError
from evalreg.providers.attachments import gemini
from evalreg.providers.base import Completion, Messages, ProviderError, api_key, register
from evalreg.providers.tools import Toolset, decoded, has_tool_turns
from evalreg.registry.params import GEMINI_GENERATION
from evalreg.registry.schema import Pin

DEFAULT_BASE_URL = "https://generativelanguage.googleapis.com"
SCOPES = ["https://www.googleapis.com/auth/cloud-platform"]


@register("gemini")
class GeminiProvider:
    name: ClassVar[str]
    http: ClassVar[bool] = True

    def __init__(self) -> None:
        self._credentials: Any = None
        self._lock = threading.Lock()

    def body(
        self,
        pin: Pin,
        messages: Messages,
        item_input: dict[str, Any] | None,
        tools: Toolset | None = None,
    ) -> dict[str, Any]:
        system = [{"text": m["content"]} for m in messages if m["role"] == "system"]
        contents = (
            _tool_contents(messages)
            if has_tool_turns(messages)
            else [
                {
                    "role": "model" if m["role"] == "assistant" else "user",
                    "parts": _parts(m["content"]),
                }
                for m in messages
                if m["role"] != "system"
            ]
        )
        body: dict[str, Any] = {"contents": contents}
        if system:
            body["systemInstruction"] = {"parts": system}
        body.update(_tools(tools))
        generation = {k: v for k, v in pin.params.items() if k in GEMINI_GENERATION}
        if generation:
            body["generationConfig"] = generation
        body.update((k, v) for k, v in pin.params.items() if k not in GEMINI_GENERATION)
        body.update(pin.extra_params)
        return body

    def endpoint(self, pin: Pin) -> str:
        vertex = pin.vertex
        if vertex is None:
            base = (pin.base_url or DEFAULT_BASE_URL).rstrip("/")
            # v1beta, not v1: v1 lacks the ``-latest`` aliases and some preview models.
            # The URL is part of each stored request's key.
            return f"{base}/v1beta/models/{pin.model}:generateContent"
        host = (
            "aiplatform.googleapis.com"
            if vertex.location == "global"
            else f"{vertex.location}-aiplatform.googleapis.com"
        )
        base = (pin.base_url or f"https://{host}").rstrip("/")
        return (
            f"{base}/v1/projects/{vertex.project}/locations/{vertex.location}"
            f"/publishers/google/models/{pin.model}:generateContent"
        )

    def headers(self, pin: Pin) -> dict[str, str]:
        if pin.vertex is None:
            return {"x-goog-api-key": api_key(pin)}
        self._adc(pin)  # fail before the run if there are no credentials at all
        return {}

    def credentials_problem(self, pin: Pin) -> str | None:
        """Why Vertex AI requests cannot carry a token here (no google-auth, no
        application-default credentials), or None."""
        if pin.vertex is None:
            return None
        try:
            self._adc(pin)
        except UsageError as exc:
            return str(exc)
        return None

    def sign(self, pin: Pin, url: str, headers: dict[str, str], content: bytes) -> dict[str, str]:
        """``headers`` with a current Vertex AI access token (refreshed when near expiry)."""
        if pin.vertex is None:
            return headers
        credentials = self._adc(pin)
        with self._lock:
            if not credentials.valid:
                from google.auth.exceptions import GoogleAuthError
                from google.auth.transport.requests import Request

                try:
                    # Blocking, about once an hour: every other attempt reuses the token.
                    credentials.refresh(Request())
                except GoogleAuthError as exc:
                    raise ProviderError(
                        "auth", f"refreshing Google credentials failed: {exc}"
                    ) from None
            # Each new access token, before the request that carries it: a server may
            # quote it back.
            redaction.watch_value(credentials.token)
            signed = dict(headers)
            # The bearer token, and the quota project of user credentials where one is set.
            credentials.apply(signed)
        return signed

    def _adc(self, pin: Pin) -> Any:
        """The application-default credentials (looked up once a run)."""
        with self._lock:
            if self._credentials is not None:
                return self._credentials
            try:
                import google.auth
                from google.auth.exceptions import DefaultCredentialsError
            except ImportError:
                raise UsageError(
                    "Vertex AI needs google-auth: pip install 'evalreg[google]'"
                ) from None
            try:
                credentials, _project = google.auth.default(scopes=SCOPES)
            except DefaultCredentialsError as exc:
                raise UsageError(
                    f"no Google application-default credentials for gemini model "
                    f"{pin.model}: run `gcloud auth application-default login` or set "
                    f"GOOGLE_APPLICATION_CREDENTIALS ({exc})"
                ) from None
            # A user's refresh token and client secret, where the credentials hold them:
            # watched before any refresh, whose error may quote what it sent.
            for name in ("refresh_token", "client_secret"):
                value = getattr(credentials, name, None)
                redaction.watch_value(value if isinstance(value, str) else None)
            self._credentials = credentials
            return credentials

    def parse(self, data: Any) -> Completion:
        try:
            usage = data.get("usageMetadata") or {}
            thoughts = int(usage.get("thoughtsTokenCount") or 0)
            common: dict[str, Any] = {
                "model": data.get("modelVersion")
                if isinstance(data.get("modelVersion"), str)
                else None,
                "input_tokens": int(usage.get("promptTokenCount") or 0),
                # Thinking is billed as output: counted in both, like OpenAI's reasoning.
                "output_tokens": int(usage.get("candidatesTokenCount") or 0) + thoughts,
                "reasoning_tokens": thoughts,
                "cached_input_tokens": int(usage.get("cachedContentTokenCount") or 0),
            }
            candidates = data.get("candidates")
            if not candidates:
                blocked = (data.get("promptFeedback") or {}).get("blockReason")
                if isinstance(blocked, str):
                    # The prompt itself was refused: an outcome of the model, stored.
                    return Completion(text="", finish_reason=f"prompt_blocked:{blocked}", **common)
                raise ValueError("no candidates")
            candidate = candidates[0]
            reason = candidate.get("finishReason")
            parts = (candidate.get("content") or {}).get("parts") or []
            texts = [p["text"] for p in parts if "text" in p and not p.get("thought")]
            if not all(isinstance(t, str) for t in texts):
                raise TypeError("a text part is not text")
            calls = tuple(
                decoded(
                    p["functionCall"]["name"],
                    p["functionCall"].get("args", {}),
                    p["functionCall"].get("id"),
                )
                for p in parts
                if "functionCall" in p
            )
            # No text with a finish reason is an answer: a content filter's (SAFETY,
            # RECITATION...) or a budget thinking used up (MAX_TOKENS).
            if not texts and not calls and not isinstance(reason, str):
                raise ValueError("no text parts and no finish reason")
            return Completion(
                text="".join(texts),
                finish_reason=reason if isinstance(reason, str) else None,
                tool_calls=calls,
                **common,
            )
        except (KeyError, IndexError, TypeError, AttributeError, ValueError) as exc:
            raise ProviderError(
                "malformed",
                f"response lacks candidates[0].content.parts text: {exc}",
                retryable=True,
            ) from None


def _tool_contents(messages: Messages) -> list[dict[str, Any]]:
    """A conversation with tool turns as ``contents``: an assistant's calls as
    ``functionCall`` parts of a model turn, each result a ``functionResponse`` part (its
    ``output``) of a user turn; consecutive turns of one role become one turn."""
    contents: list[dict[str, Any]] = []
    for m in messages:
        if m["role"] == "system":
            continue
        if m["role"] == "tool":
            role = "user"
            parts: list[dict[str, Any]] = [
                {"functionResponse": {"name": m["name"], "response": {"output": m["content"]}}}
            ]
        else:
            role = "model" if m["role"] == "assistant" else "user"
            parts = _parts(m["content"]) if m["content"] else []
            parts.extend(
                {"functionCall": {"name": c["name"], "args": c["arguments"]}}
                for c in m.get("tool_calls") or ()
            )
        if contents and contents[-1]["role"] == role:
            contents[-1]["parts"].extend(parts)
        else:
            contents.append({"role": role, "parts": parts})
    return contents


def _parts(content: str | list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A turn's content as Gemini parts: its text, or its parts with attachments."""
    return gemini(content) if isinstance(content, list) else [{"text": content}]


_MODES = {"auto": "AUTO", "required": "ANY", "none": "NONE"}


def _tools(tools: Toolset | None) -> dict[str, Any]:
    """The ``tools`` (function declarations) and ``toolConfig`` of a body (empty without)."""
    if tools is None:
        return {}
    out: dict[str, Any] = {"tools": [{"functionDeclarations": tools.functions()}]}
    if tools.choice in _MODES:
        out["toolConfig"] = {"functionCallingConfig": {"mode": _MODES[tools.choice]}}
    elif tools.choice is not None:
        out["toolConfig"] = {
            "functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": [tools.choice]}
        }
    return out
