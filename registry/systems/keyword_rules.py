"""Offline support-ticket triage with a keyword/regex rules table: the non-AI baseline.

This is the kind of router a support team writes by hand before trying models: each category
has a list of English keyword patterns, the category with the most matching patterns wins (ties
go to the earlier row), and priority and needs_human come from a few more pattern lists plus
the customer tier and the largest dollar amount mentioned. It is honest but naive: it does not
see through typos or other languages, and any keyword in the text counts, including keywords
inside quoted e-mails, pasted logs or instructions aimed at the triage system.
"""

from __future__ import annotations

import json
import re
from typing import Any

SUMMARY_CHARS = 200
REFUND_LIMIT = 500


def _rx(*patterns: str) -> tuple[re.Pattern[str], ...]:
    return tuple(re.compile(p, re.IGNORECASE) for p in patterns)


# Order matters: on equal scores the earlier category wins.
CATEGORY_RULES: tuple[tuple[str, tuple[re.Pattern[str], ...]], ...] = (
    ("security", _rx(
        r"\bhack(ed|er|ing)?\b", r"\bbreach", r"\bphish", r"\bvulnerab", r"\bexploit",
        r"\bunauthori[sz]ed\b", r"\bsuspicious\b", r"\bcompromised?\b", r"\bfraud",
        r"\bxss\b", r"\bsql injection\b", r"\bleak(ed|s)?\b", r"\bscam\b", r"\bsecurity\b",
        r"\bwasn'?t me\b", r"\bnot me\b", r"\b(signed|logged) in(to)?\b.*\b(not|wasn'?t) me\b",
        r"\b(api key|token) (leaked|exposed)\b",
    )),
    ("billing", _rx(
        r"\brefund", r"\bcharged?\b", r"\binvoices?\b", r"\bbilling\b", r"\bbilled\b",
        r"\bpayments?\b", r"\bcredit card\b", r"\bsubscription\b", r"\breceipts?\b",
        r"\bpric(e|es|ing)\b", r"\bdiscount", r"\brenewal\b", r"\bvat\b", r"\bchargeback\b",
        r"\bovercharg", r"\bmoney back\b",
    )),
    ("shipping", _rx(
        r"\bship(ping|ped|ment|s)?\b", r"\bpackage\b", r"\bdeliver(y|ed)\b", r"\btracking\b",
        r"\bcourier\b", r"\bparcel\b", r"\border (number|#)", r"\bcustoms\b", r"\barrived?\b",
        r"\b(ups|dhl|fedex|usps|dpd)\b", r"\bmy order\b",
    )),
    ("account", _rx(
        r"\bpassword\b", r"\blog ?in\b", r"\bsign ?in\b", r"\blocked out\b", r"\busername\b",
        r"\b2fa\b", r"\btwo-factor\b", r"\bprofile\b", r"\bdelete my account\b",
        r"\bgdpr\b", r"\bpersonal data\b", r"\bowner(ship)?\b", r"\badmin\b",
        r"\bauthenticator\b", r"\bverification code\b", r"\bemail address\b",
    )),
    ("technical", _rx(
        r"\berror\b", r"\bbug\b", r"\bcrash", r"\bdown\b", r"\boutage\b", r"\bnot working\b",
        r"\bbroken\b", r"\bapi\b", r"\btime[sd]? ?out\b", r"\b50[0234]\b", r"\bslow\b",
        r"\bsync", r"\bwebhook", r"\bintegration\b", r"\bimport\b", r"\bexport\b",
        r"\bapp\b", r"\bload(ing)?\b", r"\bhow (do|can) i\b", r"\bpair", r"\bfreez",
        r"\bcsv\b", r"\bdashboard\b", r"\breports?\b",
    )),
    ("feature_request", _rx(
        r"\bfeature\b", r"\bwould be (great|nice|awesome)\b", r"\bplease add\b",
        r"\bsuggest(ion)?\b", r"\broadmap\b", r"\bany plans\b", r"\bwish\b", r"\+1\b",
        r"\bwould love\b",
    )),
    ("other", _rx(
        r"\bpartnership\b", r"\breseller\b", r"\bpress\b", r"\bjournalist\b",
        r"\bjob\b", r"\bhiring\b", r"\bcareers?\b", r"\bunsubscribe\b",
    )),
)

URGENT = _rx(
    r"\burgent\b", r"\basap\b", r"\bemergency\b", r"\bimmediately\b", r"\bright now\b",
    r"\bcritical\b", r"\bhacked\b", r"\bbreach\b", r"\bwasn'?t me\b", r"\bnot me\b",
)
OUTAGE = _rx(
    r"\bdown\b", r"\boutage\b", r"\bnot loading\b", r"\bunreachable\b", r"\bnobody can\b",
    r"\beveryone\b",
)
HIGH = _rx(
    r"\blawyer\b", r"\battorney\b", r"\blegal\b", r"\bchargeback\b", r"\bsue\b", r"\bcourt\b",
    r"\bcan'?t work\b", r"\bblocked\b", r"\bnot working\b", r"\bnot renew",
)
LOW = _rx(
    r"\bhow (do|can|to)\b", r"\bis it possible\b", r"\bquestion\b", r"\bfeature\b",
    r"\bsuggest", r"\bwould be (great|nice)\b", r"\bcopy of\b", r"\bwondering\b",
)
HUMAN = _rx(
    r"\blawyer\b", r"\battorney\b", r"\blegal\b", r"\bchargeback\b", r"\bsue\b", r"\bcourt\b",
    r"\bgdpr\b", r"\b(speak|talk) to (a |your )?(manager|supervisor|human|person|someone)\b",
    r"\bnot renew", r"\bowner(ship)?\b", r"\b2fa\b", r"\btwo-factor\b",
)
AMOUNT_RE = re.compile(r"\$\s?(\d{1,3}(?:,\d{3})+|\d+)(?:\.\d{1,2})?")


def _hits(patterns: tuple[re.Pattern[str], ...], text: str) -> int:
    return sum(1 for p in patterns if p.search(text))


def categorize(text: str) -> str:
    """Category with the most matching patterns; 'other' when nothing matches."""
    best, best_score = "other", 0
    for category, patterns in CATEGORY_RULES:
        score = _hits(patterns, text)
        if score > best_score:
            best, best_score = category, score
    return best


def max_amount(text: str) -> float:
    """Largest '$1,234'-style amount in the text (0 when none)."""
    return max((float(m.group(1).replace(",", "")) for m in AMOUNT_RE.finditer(text)), default=0)


def prioritize(text: str, category: str, tier: str | None) -> str:
    """Priority from urgency keywords, outage words for enterprise, and low-intent phrases."""
    if _hits(URGENT, text) or (tier == "enterprise" and _hits(OUTAGE, text)):
        return "urgent"
    if category == "security" or _hits(HIGH, text) or max_amount(text) > REFUND_LIMIT:
        return "high"
    if _hits(LOW, text) or category in ("feature_request", "other"):
        return "low"
    return "medium"


def needs_human(text: str, category: str, priority: str) -> bool:
    """Escalate security, legal words, big amounts and anything urgent."""
    return (
        category == "security"
        or priority == "urgent"
        or bool(_hits(HUMAN, text))
        or ("refund" in text.lower() and max_amount(text) > REFUND_LIMIT)
    )


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


def triage(request: dict[str, Any]) -> str:
    """Label one ticket; returns the JSON output string."""
    params = request.get("params") or {}
    raw = request.get("input")
    if isinstance(raw, dict):
        subject, body = str(raw.get("subject") or ""), str(raw.get("body") or "")
        tier = raw.get("customer_tier")
        latest = body
    else:
        turns = [
            str(m.get("content") or "") for m in request.get("messages") or []
            if m.get("role") == "user"
        ]
        subject, body, tier = "", "\n".join(turns), None
        latest = turns[-1] if turns else ""
    text = f"{subject}\n{body}"
    category = categorize(text)
    priority = prioritize(text, category, tier)
    out = {
        "category": category,
        "priority": priority,
        "needs_human": needs_human(text, category, priority),
        "summary": summarize(subject, latest, int(params.get("summary_chars", SUMMARY_CHARS))),
    }
    return json.dumps(out, ensure_ascii=False)
