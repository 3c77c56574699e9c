"""What the documentation's models answer, served by the stand-in its examples reach
(``tests/test_docs_examples.py``).

A page's model is chosen by the ``model`` a request names. Modules
``docs_models_<topic>.py`` beside this one add their own models to ``ANSWERS`` (model name
-> the text it answers) and ``TOOL_CALLS`` (model name -> the calls it makes,
``[{"name", "arguments"}]``); every other model answers routing questions.
"""

from __future__ import annotations

import importlib
import json
import pkgutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from support.llm_server import Request

ANSWERS: dict[str, Callable[[Request], str]] = {}
TOOL_CALLS: dict[str, Callable[[Request], list[dict[str, Any]]]] = {}
SERVICES: dict[str, Callable[[Request], tuple[int, Any]]] = {}
"""A team's own services the pages reach (``provider: http``), by path."""
MODELS = [
    *("gpt-4o-mini", "gpt-4o-mini-2024-07-18", "gpt-4o-mini-2025-06-30"),
    *("gpt-4o-mini-2026-10-01", "gpt-4o-mini-audio-preview-2026-10-01", "gpt-4o-2024-11-20"),
    *("qwen2.5-7b-instruct", "claude-3-5-haiku-20241022", "claude-haiku-4-5-20251001"),
]
"""What the stand-in's ``GET /v1/models`` lists (``guides/propose.md``)."""

ROUTES = (
    ("billing", ("invoice", "refund", "charge", "payment", "price", "rechnung", "factura")),
    ("account", ("password", "login", "loggin", "sign in", "email address", "account")),
    ("technical", ("error", "crash", "bug", "not working", "funciona", "slow", "upload")),
)


def turns(request: Request) -> list[dict[str, Any]]:
    """The request's conversation, whatever the protocol (``messages``, ``input``,
    ``contents``); a Responses API ``input`` given as one string is a user turn."""
    body = request.body or {}
    messages = body.get("messages") or body.get("input") or body.get("contents") or []
    if isinstance(messages, str):
        return [{"role": "user", "content": messages}]
    return messages if isinstance(messages, list) else []


def last_text(request: Request) -> str:
    """The text of the request's last message, whatever the protocol."""
    messages = turns(request)
    if not messages:
        return ""
    content = messages[-1].get("content", messages[-1].get("parts", ""))
    if isinstance(content, list):
        return " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return str(content)


def routing(request: Request) -> str:
    """A routing question's intent, by keyword. The model follows an instruction written in
    the question, as small models do, so the adversarial items tell candidates apart."""
    text = last_text(request).lower()
    if "route this to billing" in text:
        return json.dumps({"intent": "billing"})
    for intent, words in ROUTES:
        if any(word in text for word in words):
            return json.dumps({"intent": intent})
    return json.dumps({"intent": "other"})


for _module in pkgutil.iter_modules([str(Path(__file__).parent)]):
    if _module.name.startswith("docs_models_"):
        importlib.import_module(f"support.{_module.name}")
