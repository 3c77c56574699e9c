"""Anthropic's Messages API."""

from __future__ import annotations

from typing import Any, ClassVar

from evalreg.providers.attachments import anthropic
from evalreg.providers.base import Completion, Messages, ProviderError, api_key, register
from evalreg.providers.tools import Toolset, decoded, has_tool_turns
from evalreg.registry.schema import Pin

DEFAULT_BASE_URL = "https://api.anthropic.com"
API_VERSION = "2023-06-01"
"""The ``anthropic-version`` every request carries (the API refuses a request without one).
``2026-10-21``, the newer version, refuses ``temperature``, ``top_p`` and ``top_k`` even at
their defaults; ``2023-06-01`` is still served and passes them to the models that take them."""
DEFAULT_MAX_TOKENS = 1024


@register("anthropic")
class AnthropicProvider:
    name: ClassVar[str]
    http: ClassVar[bool] = True

    def body(
        self,
        pin: Pin,
        messages: Messages,
        item_input: dict[str, Any] | None,
        tools: Toolset | None = None,
    ) -> dict[str, Any]:
        system = "\n\n".join(m["content"] for m in messages if m["role"] == "system")
        turns = [
            {**m, "content": anthropic(m["content"])} if isinstance(m["content"], list) else m
            for m in messages
            if m["role"] != "system"
        ]
        if has_tool_turns(turns):
            turns = _tool_turns(turns)
        body: dict[str, Any] = {"model": pin.model, "messages": turns}
        if system:
            body["system"] = system
        body.update(_tools(tools))
        body.update(pin.params)
        body.update(pin.extra_params)
        body.setdefault("max_tokens", DEFAULT_MAX_TOKENS)
        return body

    def endpoint(self, pin: Pin) -> str:
        base = (pin.base_url or DEFAULT_BASE_URL).rstrip("/")
        return base + ("/messages" if base.endswith("/v1") else "/v1/messages")

    def headers(self, pin: Pin) -> dict[str, str]:
        return {"x-api-key": api_key(pin), "anthropic-version": API_VERSION}

    def parse(self, data: Any) -> Completion:
        try:
            blocks = data["content"]
            text = "".join(b["text"] for b in blocks if b.get("type") == "text")
            calls = tuple(
                decoded(b["name"], b.get("input"), b.get("id"))
                for b in blocks
                if b.get("type") == "tool_use"
            )
            if not blocks:
                raise ValueError("no content blocks")
            usage = data.get("usage") or {}
            # Anthropic counts cached and cache-written input apart from ``input_tokens``.
            cached = int(usage.get("cache_read_input_tokens") or 0)
            written = int(usage.get("cache_creation_input_tokens") or 0)
            reason = data.get("stop_reason")
            return Completion(
                text=text,
                model=data.get("model"),
                system_fingerprint=None,
                input_tokens=int(usage.get("input_tokens") or 0) + cached + written,
                output_tokens=int(usage.get("output_tokens") or 0),
                reasoning_tokens=0,
                cached_input_tokens=cached,
                finish_reason=reason if isinstance(reason, str) else None,
                tool_calls=calls,
            )
        except (KeyError, TypeError, AttributeError, ValueError) as exc:
            raise ProviderError(
                "malformed", f"response lacks text content: {exc}", retryable=True
            ) from None


def _tool_turns(turns: Messages) -> Messages:
    """A conversation with tool turns in the Messages API's form: an assistant's calls as
    ``tool_use`` blocks, each result a ``tool_result`` block of a user turn; consecutive
    user-side turns (results, then a question) become one user turn, as the API requires."""
    out: Messages = []
    for m in turns:
        if m["role"] == "tool":
            role = "user"
            blocks = [
                {"type": "tool_result", "tool_use_id": m["tool_call_id"], "content": m["content"]}
            ]
        else:
            role = m["role"]
            content = m["content"]  # text, or blocks already (a turn with attachments)
            blocks = (
                list(content)
                if isinstance(content, list)
                else [{"type": "text", "text": content}]
                if content
                else []
            )
            blocks.extend(
                {"type": "tool_use", "id": c["id"], "name": c["name"], "input": c["arguments"]}
                for c in m.get("tool_calls") or ()
            )
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})
    return out


_CHOICES = {"auto": {"type": "auto"}, "required": {"type": "any"}, "none": {"type": "none"}}


def _tools(tools: Toolset | None) -> dict[str, Any]:
    """The ``tools`` and ``tool_choice`` of a Messages body (empty without tools)."""
    if tools is None:
        return {}
    out: dict[str, Any] = {"tools": tools.functions("input_schema")}
    if tools.choice is not None:
        out["tool_choice"] = _CHOICES.get(tools.choice) or {"type": "tool", "name": tools.choice}
    return out
