"""Any OpenAI-compatible chat-completions endpoint: OpenAI, vLLM, Ollama, llama.cpp, LiteLLM."""

from __future__ import annotations

from typing import Any, ClassVar

from evalreg.providers.attachments import openai_chat
from evalreg.providers.base import Completion, Messages, ProviderError, api_key, register
from evalreg.registry.schema import Pin

DEFAULT_BASE_URL = "https://api.openai.com/v1"


@register("openai")
class OpenAIProvider:
    name: ClassVar[str]
    http: ClassVar[bool] = True

    def body(
        self, pin: Pin, messages: Messages, item_input: dict[str, Any] | None
    ) -> dict[str, Any]:
        return {
            "model": pin.model,
            "messages": chat_messages(messages),
            **pin.params,
            **pin.extra_params,
        }

    def endpoint(self, pin: Pin) -> str:
        return (pin.base_url or DEFAULT_BASE_URL).rstrip("/") + "/chat/completions"

    def headers(self, pin: Pin) -> dict[str, str]:
        key = api_key(pin)
        return {"authorization": f"Bearer {key}"} if key else {}

    def parse(self, data: Any) -> Completion:
        return parse_chat_completion(data)


def chat_messages(messages: Messages) -> Messages:
    """``messages`` with attachments in chat-completions content parts (OpenAI's, Azure's)."""
    return [
        {**m, "content": openai_chat(m["content"])} if isinstance(m["content"], list) else m
        for m in messages
    ]


def parse_chat_completion(data: Any) -> Completion:
    """Completion from a chat-completions response body (OpenAI's shape, Azure's too)."""
    try:
        choice = data["choices"][0]
        message = choice["message"]
        text = message.get("content")
        reason = choice.get("finish_reason")
        if text is None and message.get("tool_calls"):
            import json

            text = json.dumps(message["tool_calls"], sort_keys=True)
        elif text is None and reason == "content_filter":
            text = ""  # Azure withholds a filtered completion: an answer, empty, not an error
        if not isinstance(text, str):
            raise TypeError("content is not text")
        usage = data.get("usage") or {}
        details = usage.get("completion_tokens_details") or {}
        cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens")
        return Completion(
            text=text,
            model=data.get("model"),
            system_fingerprint=data.get("system_fingerprint"),
            input_tokens=int(usage.get("prompt_tokens") or 0),
            output_tokens=int(usage.get("completion_tokens") or 0),
            reasoning_tokens=int(details.get("reasoning_tokens") or 0),
            cached_input_tokens=int(cached or 0),
            finish_reason=reason if isinstance(reason, str) else None,
        )
    except (KeyError, IndexError, TypeError, AttributeError, ValueError) as exc:
        raise ProviderError(
            "malformed", f"response lacks choices[0].message: {exc}", retryable=True
        ) from None
