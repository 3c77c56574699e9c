"""OpenAI's Responses API (``POST /v1/responses``), the API newer reasoning models are
served on."""

from __future__ import annotations

from typing import Any, ClassVar

from evalreg.providers.attachments import openai_responses
from evalreg.providers.base import Completion, Messages, ProviderError, api_key, register
from evalreg.providers.openai import DEFAULT_BASE_URL
from evalreg.providers.tools import Toolset, arguments_json, decoded, has_tool_turns
from evalreg.registry.params import RESPONSES_RENAMED
from evalreg.registry.schema import Pin


@register("openai_responses")
class OpenAIResponsesProvider:
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
        turns = (
            _input_items(messages)
            if has_tool_turns(messages)
            else [
                {"role": m["role"], "content": _content(m["content"])}
                for m in messages
                if m["role"] != "system"
            ]
        )
        # Stateless like chat completions: OpenAI keeps no copy unless the pin asks for one.
        body: dict[str, Any] = {"model": pin.model, "store": False}
        if system:
            body["instructions"] = system
        body["input"] = turns
        body.update(_tools(tools))
        for name, value in pin.params.items():
            if name == "reasoning_effort":
                body["reasoning"] = {"effort": value}
            else:
                body[RESPONSES_RENAMED.get(name, name)] = value
        body.update(pin.extra_params)
        return body

    def endpoint(self, pin: Pin) -> str:
        return (pin.base_url or DEFAULT_BASE_URL).rstrip("/") + "/responses"

    def headers(self, pin: Pin) -> dict[str, str]:
        key = api_key(pin)
        return {"authorization": f"Bearer {key}"} if key else {}

    def parse(self, data: Any) -> Completion:
        try:
            status = data.get("status")
            if status == "failed":
                error = data.get("error") or {}
                raise ProviderError(
                    "server",
                    f"the response failed: {error.get('code')}: {error.get('message')}",
                    retryable=True,
                )
            items = data["output"]
            if not isinstance(items, list):
                raise TypeError("output is not a list")
            texts = [
                part["text"]
                for item in items
                if item.get("type") == "message"
                for part in item.get("content") or []
                if part.get("type") == "output_text"
            ]
            calls = [item for item in items if item.get("type") == "function_call"]
            if texts or not calls:
                text = "".join(texts)
            else:
                import json

                text = json.dumps(calls, sort_keys=True)
            if not text and status == "completed":
                raise ValueError("no output_text in a completed response")
            usage = data.get("usage") or {}
            cached = (usage.get("input_tokens_details") or {}).get("cached_tokens")
            reasoning = (usage.get("output_tokens_details") or {}).get("reasoning_tokens")
            reason = (data.get("incomplete_details") or {}).get("reason") or status
            return Completion(
                text=text,
                model=data.get("model"),
                system_fingerprint=None,
                input_tokens=int(usage.get("input_tokens") or 0),
                output_tokens=int(usage.get("output_tokens") or 0),
                reasoning_tokens=int(reasoning or 0),
                cached_input_tokens=int(cached or 0),
                finish_reason=reason if isinstance(reason, str) else None,
                tool_calls=tuple(
                    decoded(call["name"], call.get("arguments"), call.get("call_id"))
                    for call in calls
                ),
            )
        except (KeyError, TypeError, AttributeError, ValueError) as exc:
            raise ProviderError(
                "malformed", f"response lacks output[].content[].output_text: {exc}", retryable=True
            ) from None


def _content(content: str | list[dict[str, Any]]) -> str | list[dict[str, Any]]:
    """A turn's content as the Responses API takes it: its text, or its input parts.

    An ``input_image`` carries no ``detail``: the API then reads the image at ``auto``, its
    documented default (the SDK's request type marks the field required; the API does not).
    """
    return openai_responses(content) if isinstance(content, list) else content


def _input_items(messages: Messages) -> list[dict[str, Any]]:
    """A conversation with tool turns as Responses input items: each call a
    ``function_call`` item, each result a ``function_call_output`` naming its call."""
    items: list[dict[str, Any]] = []
    for m in messages:
        if m["role"] == "system":
            continue
        if m["role"] == "tool":
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": m["tool_call_id"],
                    "output": m["content"],
                }
            )
            continue
        if m["content"] or "tool_calls" not in m:
            items.append({"role": m["role"], "content": _content(m["content"])})
        items.extend(
            {
                "type": "function_call",
                "call_id": call["id"],
                "name": call["name"],
                "arguments": arguments_json(call["arguments"]),
            }
            for call in m.get("tool_calls") or ()
        )
    return items


def _tools(tools: Toolset | None) -> dict[str, Any]:
    """The ``tools`` and ``tool_choice`` of a Responses body (empty without tools).

    A function carries no ``strict``: the API then makes its schema strict where it can
    (every property required, no other property allowed) and calls it best-effort where it
    cannot. ``strict: false`` would call every tool best-effort, as chat completions do, but
    would also be a new request for every stored cell with tools.
    """
    if tools is None:
        return {}
    out: dict[str, Any] = {
        "tools": [{"type": "function", **function} for function in tools.functions()]
    }
    if tools.choice in ("auto", "required", "none"):
        out["tool_choice"] = tools.choice
    elif tools.choice is not None:
        out["tool_choice"] = {"type": "function", "name": tools.choice}
    return out
