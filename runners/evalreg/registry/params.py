"""The request parameters each provider's API documents, with the values each accepts.

A pin's ``params`` may hold only these, so a misspelt or mistyped one is a load error
instead of a request the endpoint silently ignores (or rejects mid-run); a parameter
evalreg does not know is sent only from ``extra_params``, where the pin says so. The
tables live here, not in ``providers/``, because the schema checks them at load time and
providers import the schema.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from typing import Any

Check = Callable[[Any], bool]
"""Whether a value is acceptable; paired below with the words that say what is."""


def _number(low: float, high: float) -> tuple[Check, str]:
    def check(value: Any) -> bool:
        return (
            isinstance(value, int | float) and not isinstance(value, bool) and low <= value <= high
        )

    return check, f"a number from {low:g} to {high:g}"


def _integer(low: int, what: str) -> tuple[Check, str]:
    def check(value: Any) -> bool:
        return isinstance(value, int) and not isinstance(value, bool) and value >= low

    return check, what


def _of(kind: type, what: str) -> tuple[Check, str]:
    def check(value: Any) -> bool:
        # YAML's true is a bool, and a bool is an int: only ``kind: bool`` accepts one.
        return isinstance(value, kind) and (kind is bool or not isinstance(value, bool))

    return check, what


def _one_of(*choices: str) -> tuple[Check, str]:
    return (lambda value: value in choices), "one of " + ", ".join(repr(c) for c in choices)


def _strings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


_POSITIVE = _integer(1, "a positive integer")
_INTEGER = _integer(-(1 << 63), "an integer")
_OBJECT = _of(dict, "an object (a mapping)")
_LIST = _of(list, "a list")
_BOOL = _of(bool, "true or false")
_TEXT = _of(str, "text")
_STOP: tuple[Check, str] = (
    lambda value: isinstance(value, str) or _strings(value),
    "text or a list of texts",
)
_TOOL_CHOICE: tuple[Check, str] = (
    lambda value: isinstance(value, str | dict),
    "text (like 'auto') or an object",
)

_EFFORT = _one_of("none", "minimal", "low", "medium", "high", "xhigh")

OPENAI_CHAT: Mapping[str, tuple[Check, str]] = {
    "audio": _OBJECT,
    "frequency_penalty": _number(-2, 2),
    "logit_bias": _OBJECT,
    "logprobs": _BOOL,
    "max_completion_tokens": _POSITIVE,
    "max_tokens": _POSITIVE,
    "metadata": _OBJECT,
    "modalities": (_strings, "a list of texts"),
    "parallel_tool_calls": _BOOL,
    "prediction": _OBJECT,
    "presence_penalty": _number(-2, 2),
    "prompt_cache_key": _TEXT,
    "reasoning_effort": _EFFORT,
    "response_format": _OBJECT,
    "safety_identifier": _TEXT,
    "seed": _INTEGER,
    "service_tier": _one_of("auto", "default", "flex", "scale", "priority"),
    "stop": _STOP,
    "store": _BOOL,
    "temperature": _number(0, 2),
    "tool_choice": _TOOL_CHOICE,
    "tools": _LIST,
    "top_logprobs": (lambda v: _INTEGER[0](v) and 0 <= v <= 20, "an integer from 0 to 20"),
    "top_p": _number(0, 1),
    "user": _TEXT,
    "verbosity": _one_of("low", "medium", "high"),
    "web_search_options": _OBJECT,
}
"""OpenAI's Chat Completions API (what ``provider: openai`` sends)."""

ANTHROPIC_MESSAGES: Mapping[str, tuple[Check, str]] = {
    "max_tokens": _POSITIVE,
    "metadata": _OBJECT,
    "service_tier": _one_of("auto", "standard_only"),
    "stop_sequences": (_strings, "a list of texts"),
    "temperature": _number(0, 1),
    "thinking": _OBJECT,
    "tool_choice": _OBJECT,
    "tools": _LIST,
    "top_k": _POSITIVE,
    "top_p": _number(0, 1),
}
"""Anthropic's Messages API (what ``provider: anthropic`` sends)."""

OPENAI_RESPONSES: Mapping[str, tuple[Check, str]] = {
    "include": (_strings, "a list of texts"),
    "max_output_tokens": _POSITIVE,
    "max_tokens": _POSITIVE,
    "max_tool_calls": _POSITIVE,
    "metadata": _OBJECT,
    "parallel_tool_calls": _BOOL,
    "prompt_cache_key": _TEXT,
    "reasoning": _OBJECT,
    "reasoning_effort": _EFFORT,
    "safety_identifier": _TEXT,
    "service_tier": _one_of("auto", "default", "flex", "scale", "priority"),
    "store": _BOOL,
    "temperature": _number(0, 2),
    "text": _OBJECT,
    "tool_choice": _TOOL_CHOICE,
    "tools": _LIST,
    "top_logprobs": (lambda v: _INTEGER[0](v) and 0 <= v <= 20, "an integer from 0 to 20"),
    "top_p": _number(0, 1),
    "truncation": _one_of("auto", "disabled"),
    "user": _TEXT,
}
"""OpenAI's Responses API (what ``provider: openai_responses`` sends), plus the chat
names ``max_tokens`` and ``reasoning_effort``, sent as ``RESPONSES_RENAMED`` says."""

RESPONSES_RENAMED: Mapping[str, str] = {
    "max_tokens": "max_output_tokens",
    "reasoning_effort": "reasoning",
}
"""A chat-completions name the Responses API spells differently, and its Responses name
(``reasoning_effort: low`` is sent as ``reasoning: {effort: low}``)."""

BEDROCK_INFERENCE = frozenset({"maxTokens", "temperature", "topP", "stopSequences"})
"""The Converse API's ``inferenceConfig`` fields; its other params are top-level fields."""

BEDROCK_CONVERSE: Mapping[str, tuple[Check, str]] = {
    "maxTokens": _POSITIVE,
    "temperature": _number(0, 1),
    "topP": _number(0, 1),
    "stopSequences": (_strings, "a list of texts"),
    "guardrailConfig": _OBJECT,
    "performanceConfig": _OBJECT,
    "requestMetadata": _OBJECT,
    "toolConfig": _OBJECT,
}
"""Amazon Bedrock's Converse API (what ``provider: bedrock`` sends); a model's own fields
(Anthropic's ``top_k``, say) go under ``extra_params``, sent as
``additionalModelRequestFields``."""

GEMINI_GENERATION = frozenset(
    {
        "candidateCount",
        "frequencyPenalty",
        "maxOutputTokens",
        "presencePenalty",
        "responseMimeType",
        "responseSchema",
        "seed",
        "stopSequences",
        "temperature",
        "thinkingConfig",
        "topK",
        "topP",
    }
)
"""The ``generationConfig`` fields of ``generateContent``; its other params are top-level."""

GEMINI_GENERATE: Mapping[str, tuple[Check, str]] = {
    "cachedContent": _TEXT,
    "candidateCount": _POSITIVE,
    "frequencyPenalty": _number(-2, 2),
    "maxOutputTokens": _POSITIVE,
    "presencePenalty": _number(-2, 2),
    "responseMimeType": _TEXT,
    "responseSchema": _OBJECT,
    "safetySettings": _LIST,
    "seed": _INTEGER,
    "stopSequences": (_strings, "a list of texts"),
    "temperature": _number(0, 2),
    "thinkingConfig": _OBJECT,
    "toolConfig": _OBJECT,
    "tools": _LIST,
    "topK": _POSITIVE,
    "topP": _number(0, 1),
}
"""Google's ``generateContent`` (Gemini API and Vertex AI: what ``provider: gemini`` sends)."""

KNOWN: Mapping[str, Mapping[str, tuple[Check, str]]] = {
    "openai": OPENAI_CHAT,
    "azure_openai": OPENAI_CHAT,
    "anthropic": ANTHROPIC_MESSAGES,
    "openai_responses": OPENAI_RESPONSES,
    "bedrock": BEDROCK_CONVERSE,
    "gemini": GEMINI_GENERATE,
}
"""Per provider, its well-known params. A provider without an entry (``python``: the params
are the callable's own) takes any params."""

PASS_THROUGH = "extra_params"
"""The pin key whose parameters are sent as given, unchecked."""


def param_problem(provider: str, name: str, value: Any) -> str | None:
    """What is wrong with ``params[name] = value`` for ``provider``, or None."""
    known = KNOWN.get(provider)
    if known is None:
        return None
    spec = known.get(name)
    if spec is None:
        # Compared without case and underscores: ``top_k`` for Gemini's ``topK`` is a near miss.
        folded = {_fold(known_name): known_name for known_name in known}
        close = difflib.get_close_matches(_fold(name), list(folded), n=1, cutoff=0.6)
        hint = f"did you mean `{folded[close[0]]}`? " if close else ""
        return (
            f"{name!r} is not a parameter evalreg knows for provider {provider!r}: {hint}"
            f"(a parameter your endpoint takes that evalreg does not know goes under "
            f"`{PASS_THROUGH}:`, which is sent unchecked)"
        )
    check, what = spec
    if not check(value):
        return f"{name} must be {what}, not {_shown(value)}"
    return None


def renamed_twice(provider: str, params: Mapping[str, Any]) -> tuple[str, str] | None:
    """A chat name and its Responses name both in ``params`` (one value would be lost)."""
    if provider != "openai_responses":
        return None
    for chat, native in RESPONSES_RENAMED.items():
        if chat in params and native in params:
            return chat, native
    return None


def _fold(name: str) -> str:
    return name.replace("_", "").casefold()


def _shown(value: Any) -> str:
    text = repr(value)
    kind = type(value).__name__
    return f"{text[:40]}{'...' if len(text) > 40 else ''} ({kind})"
