"""Offline support-ticket triage with a multinomial naive-Bayes text classifier (stdlib only).

One model per output field (category, priority, needs_human) over the same features: lowercased
word unigrams and bigrams, character 4-grams of longer words (down-weighted; some robustness to
typos), the customer tier and channel, and a coarse bucket of the largest dollar amount
mentioned. Weights come from ``naive_bayes_weights.json`` next to this file, written by
``train_naive_bayes.py``, and are loaded once per process. Deterministic: same request, same
output. Conversation requests (no ``input``) are classified from the user turns, without tier.
"""

from __future__ import annotations

import json
import re
from functools import cache
from itertools import pairwise
from pathlib import Path
from typing import Any

WEIGHTS_PATH = Path(__file__).resolve().parent / "naive_bayes_weights.json"
FORMAT = "evalreg-naive-bayes/1"
SUMMARY_CHARS = 200
TIER_REPEAT = 3
AMOUNT_REPEAT = 2
AMOUNT_LIMIT = 500
FEATURE_WEIGHTS = {"c": 0.3}
"""Per-family weights by feature prefix (absent: 1.0); char 4-grams would otherwise dominate."""

WORD_RE = re.compile(r"[^\W_]+(?:'[^\W_]+)?")
AMOUNT_RE = re.compile(r"(?:\$|\busd\s?)(\d{1,3}(?:,\d{3})+|\d+)(?:\.\d{1,2})?", re.IGNORECASE)


def features(subject: str, body: str, tier: str | None, channel: str | None) -> list[str]:
    """The bag of features for one ticket (repeated features count more)."""
    text = f"{subject}\n{body}".lower()
    words = [re.sub(r"\d", "0", w) for w in WORD_RE.findall(text)]
    feats = [f"w:{w}" for w in words]
    feats += [f"b:{a}_{b}" for a, b in pairwise(words)]
    for word in words:
        if len(word) >= 5 and word.isalpha():
            padded = f"<{word}>"
            feats += [f"c:{padded[i:i + 4]}" for i in range(len(padded) - 3)]
    if tier:
        feats += [f"t:{tier}"] * TIER_REPEAT
    if channel:
        feats.append(f"ch:{channel}")
    amounts = [float(m.group(1).replace(",", "")) for m in AMOUNT_RE.finditer(text)]
    if amounts:
        bucket = "amt:gt500" if max(amounts) > AMOUNT_LIMIT else "amt:le500"
        feats += [bucket] * AMOUNT_REPEAT
    return feats


GREETING_LINE_RE = re.compile(
    r"^(hi|hello|hey|hiya|dear|good (morning|afternoon|evening)|to whom)\b[^.!?]{0,40}[,!.]?$",
    re.IGNORECASE,
)
LEADING_GREETING_RE = re.compile(
    r"^(hi|hello|hey|hiya)( again| there| team| all)?\b[!,.]?\s+(?=\S)", re.IGNORECASE
)
HEADER_LINE_RE = re.compile(r"^((name|e-?mail|company|from|phone)\s*:.*|contact form)$", re.I)
BODY_LABEL_RE = re.compile(r"^(message|details):\s*", re.IGNORECASE)
SENTENCE_RE = re.compile(r"^(.+?[.!?])(?=\s+[^\s\da-z]|$)")


def summarize(subject: str, body: str, limit: int = SUMMARY_CHARS) -> str:
    """First sentence of the ticket text (greetings and form fields skipped), else the subject."""
    lines = []
    for raw in body.splitlines():
        line = raw.strip()
        if BODY_LABEL_RE.match(line):
            line = BODY_LABEL_RE.sub("", line)
        elif HEADER_LINE_RE.match(line) or GREETING_LINE_RE.match(line):
            continue
        if line:
            lines.append(line)
    text = re.sub(r"\s+", " ", " ".join(lines)).strip()
    while LEADING_GREETING_RE.match(text):
        text = LEADING_GREETING_RE.sub("", text, count=1)
    text = text or subject.strip()
    if not text:
        return "Empty ticket with no subject or body."
    match = SENTENCE_RE.match(text)
    sentence = match.group(1) if match else text
    if len(sentence) > limit:
        sentence = sentence[: limit - 3].rsplit(" ", 1)[0] + "..."
    return sentence


@cache
def load_weights(path: str = str(WEIGHTS_PATH)) -> dict[str, Any]:
    """Read and check the weights file once per process."""
    data: dict[str, Any] = json.loads(Path(path).read_text(encoding="utf-8"))
    if data.get("format") != FORMAT:
        raise ValueError(f"{path}: expected format {FORMAT!r}, got {data.get('format')!r}")
    return data


def feature_weight(feat: str, weights: dict[str, float]) -> float:
    """Weight of one feature from its family prefix ("c:abcd" -> family "c")."""
    return weights.get(feat.split(":", 1)[0], 1.0)


def classify(model: dict[str, Any], feats: list[str], weights: dict[str, float]) -> str:
    """Most probable class under one field's model (ties go to the earlier class)."""
    classes: list[str] = model["classes"]
    scores = list(model["log_prior"])
    table: dict[str, list[float]] = model["log_likelihood"]
    for feat in feats:
        row = table.get(feat)
        if row is not None:
            w = feature_weight(feat, weights)
            for i, value in enumerate(row):
                scores[i] += w * value
    best = max(range(len(classes)), key=lambda i: (scores[i], -i))
    return classes[best]


def ticket_fields(request: dict[str, Any]) -> tuple[str, str, str | None, str | None, str]:
    """Subject, body, tier, channel and summary source text from a request."""
    raw = request.get("input")
    if isinstance(raw, dict):
        subject, body = str(raw.get("subject") or ""), str(raw.get("body") or "")
        tier, channel = raw.get("customer_tier"), raw.get("channel")
        return subject, body, tier, channel, body
    turns = [
        str(m.get("content") or "") for m in request.get("messages") or []
        if m.get("role") == "user"
    ]
    return "", "\n".join(turns), None, None, turns[-1] if turns else ""


def triage(request: dict[str, Any]) -> str:
    """Label one ticket; returns the JSON output string."""
    params = request.get("params") or {}
    weights = load_weights(str(params.get("weights_path") or WEIGHTS_PATH))
    subject, body, tier, channel, latest = ticket_fields(request)
    feats = features(subject, body, tier, channel)
    models, fw = weights["fields"], weights["feature_weights"]
    out = {
        "category": classify(models["category"], feats, fw),
        "priority": classify(models["priority"], feats, fw),
        "needs_human": classify(models["needs_human"], feats, fw) == "true",
        "summary": summarize(subject, latest, int(params.get("summary_chars", SUMMARY_CHARS))),
    }
    return json.dumps(out, ensure_ascii=False)
