"""The routing service of the services guide (``docs/guides/services.md``): a team's own
JSON API, not a model API. It takes ``{"question", "conversation", "channel",
"max_routes"}`` with its key in ``X-Service-Key``, and answers the route it chose and how
sure it is, by keyword as the pages' models route."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from support.docs_models import SERVICES, routing
from support.llm_server import Request

SERVICE_KEY = "svc-example-not-a-real-key"


def route(request: Request) -> tuple[int, Any]:
    if request.headers.get("x-service-key") != SERVICE_KEY:
        return 401, {"detail": "unknown service key"}
    body = request.body or {}
    question = body.get("question")
    if not isinstance(question, str) or not isinstance(body.get("conversation"), list):
        return 422, {"detail": "question (text) and conversation (a list) are required"}
    asked = dataclasses.replace(request, body={"messages": [{"role": "user", "content": question}]})
    intent = json.loads(routing(asked))["intent"]
    confidence = 0.55 if intent == "other" else 0.92
    return 200, {
        "route": {"intent": intent, "confidence": confidence},
        "trace_id": f"t-{len(question):04d}",
        "model_version": "router-2026.11.3",
    }


SERVICES["/route"] = route
