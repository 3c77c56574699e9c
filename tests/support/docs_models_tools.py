"""The tool-calling model of the tool-calls guide (``docs/guides/tool-calls.md``): a small
model that acts on refund requests with the guide's tools, ``lookup_order``, ``refund`` and
``escalate``.

It reads the conversation the way the guide's items write it, in any protocol's messages:
a refund request with an amount gets ``refund``, a question about an order ``lookup_order``
(the order id lower-cased, as models do), a thank-you no call at all, and a conversation
that ends with an order's total from ``lookup_order`` refunds half of it and, one call too
many, escalates as well.
"""

from __future__ import annotations

import json
import re
from typing import Any

from support.docs_models import ANSWERS, TOOL_CALLS, last_text, turns
from support.llm_server import Request

TOOLS_MODEL = "functionary-small-v3.2"
ORDER = re.compile(r"\b[A-Z]-\d+\b")
AMOUNT = re.compile(r"(\d+(?:\.\d+)?) ?(?:euros?|EUR|€)")


def calls(request: Request) -> list[dict[str, Any]]:
    conversation_turns = turns(request)
    conversation = json.dumps(conversation_turns)
    orders = ORDER.findall(conversation)
    total = re.search(r'\\"total\\": ?(\d+(?:\.\d+)?)', conversation)
    if conversation_turns and conversation_turns[-1].get("role") == "tool" and total and orders:
        return [
            {"name": "refund", "arguments": {"order": orders[0], "amount": float(total[1]) / 2}},
            {"name": "escalate", "arguments": {}},
        ]
    text = last_text(request)
    amount = AMOUNT.search(text)
    if "refund" in text.lower() and orders and amount:
        return [{"name": "refund", "arguments": {"order": orders[0], "amount": float(amount[1])}}]
    if "where is" in text.lower() and orders:
        return [{"name": "lookup_order", "arguments": {"order": orders[0].lower()}}]
    return []


def answer(request: Request) -> str:
    """The text beside the calls: none when the model calls a tool."""
    return "" if calls(request) else "You're welcome: have a good day!"


ANSWERS[TOOLS_MODEL] = answer
TOOL_CALLS[TOOLS_MODEL] = calls
