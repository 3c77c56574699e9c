"""Keyword routing rules: the non-AI baseline for the FAQ routing example."""

from __future__ import annotations

import json
from typing import Any

RULES = (
    ("billing", ("invoice", "refund", "charge", "payment", "price")),
    ("account", ("password", "login", "sign in", "email address", "delete my account")),
    ("technical", ("error", "crash", "bug", "not working", "slow")),
)


def route(request: dict[str, Any]) -> str:
    """Return ``{"intent": ...}`` for the question in the request's last user message."""
    text = request["messages"][-1]["content"].lower()
    for intent, words in RULES:
        if any(word in text for word in words):
            return json.dumps({"intent": intent})
    return json.dumps({"intent": "other"})
