"""Any OpenAI-compatible chat-completions endpoint: OpenAI, vLLM, Ollama, llama.cpp, LiteLLM."""

from __future__ import annotations

from typing import Any, ClassVar

from evalreg.providers.attachments import openai_chat
from evalreg.providers.base import Completion, Messages, ProviderError, api_key, register
from evalreg.providers.tools import Toolset, arguments_json, decoded, has_tool_turns
from evalreg.registry.schema import Pin

DEFAULT_BASE_URL = "https://api.openai.com/v1"


@register("openai")
class OpenAIProvider:
    name: ClassVar[str]
    http: ClassVar[bool] = True

    def body(
        self,
        pin: Pin,
        messages: Messages,
        item_input: dict[str, Any] | None,
        tools: Toolset | None = None,
    ) -> dict[str, Any]:
        return {
            "model": pin.model,
            "messages": chat_messages(messages),
            **chat_tools(tools),
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
    """Messages in chat completions' form: attachments as content parts, tool calls as
    ``function`` calls whose arguments are a JSON string; a tool result names its call by
    ``tool_call_id`` alone."""
    messages = [
        {**m, "content": openai_chat(m["content"])} if isinstance(m["content"], list) else m
        for m in messages
    ]
    if not has_tool_turns(messages):
        return messages
    out: Messages = []
    for m in messages:
        turn = {k: v for k, v in m.items() if k not in ("tool_calls", "name")}
        if "tool_calls" in m:
            turn["tool_calls"] = [
                {
                    "id": call["id"],
                    "type": "function",
                    "function": {
                        "name": call["name"],
                        "arguments": arguments_json(call["arguments"]),
                    },
                }
                for call in m["tool_calls"]
            ]
        out.append(turn)
    return out


def chat_tools(tools: Toolset | None) -> dict[str, Any]:
    """The ``tools`` and ``tool_choice`` of a chat-completions body (empty without tools)."""
    if tools is None:
        return {}
    out: dict[str, Any] = {
        "tools": [{"type": "function", "function": function} for function in tools.functions()]
    }
    if tools.choice in ("auto", "required", "none"):
        out["tool_choice"] = tools.choice
    elif tools.choice is not None:
        out["tool_choice"] = {"type": "function", "function": {"name": tools.choice}}
    return out


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
            tool_calls=tuple(
                decoded(call["function"]["name"], call["function"].get("arguments"), call.get("id"))
                for call in message.get("tool_calls") or ()
            ),
        )
    except (KeyError, IndexError, TypeError, AttributeError, ValueError) as exc:
        raise ProviderError(
            "malformed", f"response lacks choices[0].message: {exc}", retryable=True
        ) from None
