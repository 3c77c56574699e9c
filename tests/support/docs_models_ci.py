"""The models of the CI and drift guides (``docs/guides/ci.md``, ``docs/guides/drift.md``).

- ``llama-3.2-3b-instruct``, the smaller model a pull request proposes in the CI guide: it
  ignores instructions written into a question, and knows English keywords only, so the
  diff shows an item fixed and three regressions against the routing every other model does.
- ``router-latest``, a hosted alias the provider updates under the same name, for the drift
  guide: each stand-in server (one a page) answers it as every other model does for its
  first ``UPDATED_AFTER`` requests (the baseline run's 12 and a first drift check's 5), then
  in prose, which no longer parses as the task's JSON: every later check sees its levels
  change, whichever requests its sample draws.
"""

from __future__ import annotations

import json
from collections import Counter

from support.docs_models import ANSWERS, last_text, routing
from support.llm_server import Request

ENGLISH_ROUTES = (
    ("billing", ("invoice", "refund", "charge", "payment", "price")),
    ("account", ("password", "login", "sign in", "email address", "account")),
    ("technical", ("error", "crash", "bug", "not working", "slow", "upload")),
)


def small_model(request: Request) -> str:
    """Routing by English keywords, deaf to an instruction inside the question."""
    text = last_text(request).lower()
    for intent, words in ENGLISH_ROUTES:
        if any(word in text for word in words):
            return json.dumps({"intent": intent})
    return json.dumps({"intent": "other"})


UPDATED_AFTER = 17
_answered: Counter[str] = Counter()
"""Requests ``router-latest`` answered, per server (its ``Host``): one count a page."""


def updated_alias(request: Request) -> str:
    """Routing answers until the provider's update, then the same intent in prose."""
    host = request.headers.get("host", "")
    _answered[host] += 1
    answer = routing(request)
    if _answered[host] <= UPDATED_AFTER:
        return answer
    return f"Sure! This question is about {json.loads(answer)['intent']}."


ANSWERS["llama-3.2-3b-instruct"] = small_model
ANSWERS["router-latest"] = updated_alias
