"""A registry the way a team grows one, not the shipped example: several use cases sharing
tasks and pins, hosted pins of five providers (some pending for want of credentials), three
eval sets (one multi-turn, one attaching files), an LLM judge, a waiver, and cells fresh,
stale and never run, on real git and DVC, bought from the loopback model server.

``build_team_registry`` writes and runs it once (a session's template); ``TeamVariant``
describes a randomised change of it (use cases added or dropped, candidates renamed or given
prompt variants, results removed) that ``apply_variant`` writes and commits, so a property
test can fuzz every command over registries ``evalreg check`` accepts.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field

from evalreg import dvcrepo

from conftest import Repo
from support.llm_server import LLMServer, Request

KEY = "sk-team-registry-41c9"
KEYED = {"OPENAI_API_KEY": KEY, "ANTHROPIC_API_KEY": KEY}
"""The credentials this team has: its OpenAI and Anthropic pins can be bought."""
UNSET = (
    "AZURE_OPENAI_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_PROFILE",
)
"""The credentials nobody here has: their pins' cells stay pending."""
NO_CLOUD = {
    # No instance-metadata lookups for credentials that are not there (they would wait
    # for a network this machine does not have).
    "AWS_EC2_METADATA_DISABLED": "true",
    "AWS_CONFIG_FILE": "/nonexistent/aws-config",
    "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent/aws-credentials",
    "NO_GCE_CHECK": "true",
    "GCE_METADATA_HOST": "127.0.0.1:9",
    "CLOUDSDK_CONFIG": "/nonexistent/gcloud",
}

QUEUES = ("billing", "account", "technical", "other")
SLICES = ("common", "messy", "edge", "adversarial")
WRONG_EVERY = 5
"""The stand-in's hosted models answer one ticket in this many wrongly (by the ticket's
hash), so rates, intervals and comparisons have something to say."""


# ---------------------------------------------------------------- eval sets
def tickets(n: int = 24) -> str:
    rows = []
    for i in range(n):
        queue = QUEUES[i % len(QUEUES)]
        rows.append(
            {
                "id": f"t-{i:03d}",
                "input": {
                    "subject": f"Ticket {i}",
                    "body": f"Customer {i % 7} writes about a {queue} matter, case {i}.",
                },
                "expected": {"queue": queue},
                "tags": [SLICES[i % len(SLICES)], *(["regression"] if i % 6 == 0 else [])],
                **({"cluster": f"thread-{i // 3}"} if i < 12 else {}),
            }
        )
    return "".join(json.dumps(r, sort_keys=True) + "\n" for r in rows)


def chats(n: int = 12) -> str:
    rows = []
    for i in range(n):
        topic = ("refund", "delivery", "password")[i % 3]
        rows.append(
            {
                "id": f"c-{i:03d}",
                "messages": [
                    {"role": "user", "content": f"Hello, I have a question ({i})."},
                    {"role": "assistant", "content": "Of course, what is it about?"},
                    {"role": "user", "content": f"It is about my {topic}."},
                ],
                "expected": {"topic": topic},
                "tags": ["common" if i % 2 else "follow-up"],
            }
        )
    return "".join(json.dumps(r, sort_keys=True) + "\n" for r in rows)


def receipts(n: int = 8) -> str:
    rows = []
    for i in range(n):
        rows.append(
            {
                "id": f"r-{i:03d}",
                "input": {"source": f"supplier {i % 3}"},
                "expected": {"total": 10.0 * (1 + i % 3)},
                "attachments": [
                    {"path": "evalsets/receipts/scan.png" if i % 2 else "evalsets/receipts/a.pdf"}
                ],
                "tags": ["scan" if i % 2 else "pdf"],
            }
        )
    return "".join(json.dumps(r, sort_keys=True) + "\n" for r in rows)


def png() -> bytes:
    """A 4-pixel-square grey PNG."""
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )

    raw = b"".join(b"\x00" + bytes([200]) * 4 for _ in range(4))
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", 4, 4, 8, 0, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(raw, 9))
        + chunk(b"IEND", b"")
    )


PDF = b"%PDF-1.4\n1 0 obj\n<< /Type /Catalog >>\nendobj\ntrailer\n<< /Root 1 0 R >>\n%%EOF\n"


# ---------------------------------------------------------------- registry files
def _price(inp: float, out: float) -> str:
    return f"price:\n  input_per_mtok: {inp}\n  output_per_mtok: {out}\n  as_of: 2026-11-01\n"


def pins(url: str) -> dict[str, str]:
    """Nine pins: two local baselines, four hosted ones the team has keys for (one a judge),
    and three whose credentials nobody here has."""
    root = url.removesuffix("/v1")
    return {
        "rules": "schema_version: 1\nprovider: python\nmodel: rules-2026.11\n"
        "callable: registry/systems/rules.py:triage\nprice:\n  per_call: 0.0\n"
        "  as_of: 2026-11-01\n",
        "echo": "schema_version: 1\nprovider: python\nmodel: echo-1\n"
        "callable: registry/systems/rules.py:echo\nprice:\n  per_call: 0.000001\n"
        "  as_of: 2026-11-01\n",
        "mini": f"schema_version: 1\nprovider: openai\nmodel: gpt-4o-mini-2024-07-18\n"
        f"base_url: {url}\napi_key_env: OPENAI_API_KEY\nparams:\n  temperature: 0\n"
        + _price(0.15, 0.6),
        "mini-warm": f"schema_version: 1\nprovider: openai\nmodel: gpt-4o-mini-2024-07-18\n"
        f"base_url: {url}\napi_key_env: OPENAI_API_KEY\nparams:\n  temperature: 0.7\n"
        f"  seed: 7\n" + _price(0.15, 0.6),
        "haiku": f"schema_version: 1\nprovider: anthropic\nmodel: claude-3-5-haiku-20241022\n"
        f"base_url: {root}\napi_key_env: ANTHROPIC_API_KEY\nparams:\n  temperature: 0\n"
        f"  max_tokens: 200\n" + _price(0.8, 4.0),
        "judge": f"schema_version: 1\nprovider: openai\nmodel: gpt-4o-2024-08-06\n"
        f"base_url: {url}\napi_key_env: OPENAI_API_KEY\nparams:\n  temperature: 0\n"
        + _price(2.5, 10.0),
        "azure-mini": "schema_version: 1\nprovider: azure_openai\nmodel: gpt-4o-mini-2024-07-18\n"
        "base_url: https://contoso-eu.openai.azure.com\napi_key_env: AZURE_OPENAI_API_KEY\n"
        "azure:\n  deployment: triage-mini\n  api_version: 2024-10-21\nparams:\n"
        "  temperature: 0\n" + _price(0.165, 0.66),
        "bedrock-haiku": "schema_version: 1\nprovider: bedrock\n"
        "model: us.anthropic.claude-3-5-haiku-20241022-v1:0\naws:\n  region: us-east-1\n"
        "params:\n  maxTokens: 200\n  temperature: 0\n" + _price(0.8, 4.0),
        "gemini-flash": "schema_version: 1\nprovider: gemini\nmodel: gemini-2.5-flash\n"
        "api_key_env: GEMINI_API_KEY\nparams:\n  temperature: 0\n" + _price(0.3, 2.5),
    }


SYSTEM = '''\
"""The support team's keyword rules, and an echo for the receipts."""
import json

RULES = (("billing", "billing"), ("account", "account"), ("technical", "technical"))


def triage(request):
    text = request["messages"][-1]["content"].lower()
    for queue, word in RULES:
        if word in text and "case 1" not in text:
            return json.dumps({"queue": queue})
    return json.dumps({"queue": "other"})


def echo(request):
    return json.dumps({"total": 10.0})
'''

RUBRICS = {
    "queue": """\
schema_version: 1
description: The ticket lands in the right queue, as valid JSON.
version: "3"
criteria:
  - id: valid_json
    description: The answer parses as JSON with a queue.
    critical: true
    grader: {type: json_schema}
  - id: queue
    description: The queue is the expected one.
    critical: true
    grader: {type: field_exact, field: queue}
levels:
  correct: {require: all}
  acceptable: {require: [valid_json]}
""",
    "reply": """\
schema_version: 1
description: The reply names the customer's topic and stays courteous.
version: "1"
criteria:
  - id: topic
    description: The reply names the topic.
    critical: true
    grader: {type: contains, expected_field: topic}
  - id: courteous
    description: The reply is calm and courteous.
    grader:
      type: llm_judge
      judge: judge
      prompt_version: v2
      prompt: |
        Conversation: {{ input | tojson }}
        Reply: {{ output }}
        Criterion: {{ criterion }}
levels:
  correct: {require: all}
  acceptable: {require: [topic]}
""",
    "receipt": """\
schema_version: 1
description: The receipt's total is read to the cent.
version: "1"
criteria:
  - id: valid_json
    description: The answer parses as JSON.
    critical: true
    grader: {type: json_schema}
  - id: total
    description: The total is right.
    critical: true
    grader: {type: field_numeric, field: total, tolerance: 0.01}
levels:
  correct: {require: all}
""",
}

_QUEUE_SCHEMA = """\
output:
  parser: json
  schema:
    type: object
    required: [queue]
    properties:
      queue: {enum: [billing, account, technical, other]}
"""
TASKS = {
    "triage": f"""\
schema_version: 1
description: Route a support ticket to its queue.
evalset: evalsets/tickets.jsonl
prompt:
  system: Reply with one JSON object naming the queue.
  template: "Subject: {{{{ subject }}}}\\n{{{{ body }}}}"
{_QUEUE_SCHEMA}rubric: queue
repeats: 1
monthly_volume: 30000
failure_modes:
  - id: misrouted
    description: The ticket waits in the wrong queue.
    cost_usd: 3.5
    detected_by: [queue]
""",
    "triage-brief": f"""\
schema_version: 1
description: Route a ticket from its body alone, twice (samples disagree at temperature).
evalset: evalsets/tickets.jsonl
prompt:
  system: Queue only, as JSON.
  template: "{{{{ body }}}}"
{_QUEUE_SCHEMA}rubric: queue
repeats: 2
monthly_volume: 5000
""",
    "chat-reply": """\
schema_version: 1
description: Write the next turn of a support chat.
evalset: evalsets/chats.jsonl
prompt:
  system: You are a courteous support agent. Name the customer's topic in your reply.
  template: The conversation so far.
output:
  parser: text
rubric: reply
repeats: 1
monthly_volume: 12000
""",
    "receipt-total": """\
schema_version: 1
description: Read a receipt's total from its scan or PDF.
evalset: evalsets/receipts.jsonl
prompt:
  system: 'Reply with JSON {"total": <number>}.'
  template: "From {{ source }}:\\n{{ attachment(0) }}"
output:
  parser: json
  schema:
    type: object
    required: [total]
    properties:
      total: {type: number}
rubric: receipt
repeats: 1
monthly_volume: 800
""",
}

_POLICY = """\
policy:
  gates:
    - metric: pass_rate
      slice: {slice}
      min: {floor}
  objective:
    lexicographic:
      - maximize: pass_rate
      - minimize: cost_per_item_usd
"""


@dataclass(frozen=True)
class UseCase:
    """One selection file: ``candidates`` as (candidate id, pin id, prompt variant or None)."""

    ident: str
    task: str
    candidates: tuple[tuple[str, str, str | None], ...]
    selected: str
    gate_slice: str = "all"
    floor: float = 0.5
    waiver: bool = False

    def yaml(self) -> str:
        lines = [
            "schema_version: 1",
            f"use_case: {self.ident.replace('-', ' ').capitalize()} ({self.task})",
            f"task: {self.task}",
            "candidates:",
        ]
        for cid, pin, variant in self.candidates:
            lines += [f"  - id: {cid}", f"    pin: {pin}"]
            if variant is not None:
                lines += ["    prompt:", f"      system: {json.dumps(variant)}"]
        text = "\n".join(lines) + "\n"
        text += _POLICY.format(slice=self.gate_slice, floor=self.floor)
        text += f"selected: {self.selected}\nrationale: Chosen by the team on {self.ident}.\n"
        if self.waiver:
            text += (
                "waivers:\n"
                f"  - candidate: {self.selected}\n"
                "    reason: Kept while the contract runs; the model is cheaper to run later.\n"
                "    approver: Dana Reviewer\n"
                "    approver_login: dana-reviewer\n"
                "    date: 2026-11-20\n"
            )
        return text


USE_CASES = (
    UseCase(
        "triage-eu",
        "triage",
        (("rules", "rules", None), ("mini", "mini", None), ("azure-mini", "azure-mini", None)),
        "rules",
        gate_slice="common",
        waiver=True,
    ),
    UseCase(
        "triage-us",
        "triage",
        (
            ("rules", "rules", None),
            ("mini", "mini", None),
            ("haiku", "haiku", None),
            ("bedrock-haiku", "bedrock-haiku", None),
        ),
        "mini",
    ),
    UseCase(
        "triage-mobile",
        "triage-brief",
        (
            ("mini-terse", "mini", "Answer with the JSON object only."),
            ("mini-warm", "mini-warm", None),
            ("gemini-flash", "gemini-flash", None),
        ),
        "mini-terse",
        gate_slice="edge",
        floor=0.3,
    ),
    UseCase(
        "chat-support",
        "chat-reply",
        (("mini", "mini", None), ("haiku", "haiku", None), ("azure-mini", "azure-mini", None)),
        "haiku",
    ),
    UseCase(
        "receipts",
        "receipt-total",
        (("echo", "echo", None), ("haiku", "haiku", None), ("gemini-flash", "gemini-flash", None)),
        "haiku",
        floor=0.2,
    ),
)


# ---------------------------------------------------------------- the stand-in's answers
def _text(request: Request) -> str:
    body = request.body or {}
    parts: list[str] = []
    system = body.get("system")
    parts.append(system if isinstance(system, str) else json.dumps(system))
    for message in body.get("messages") or []:
        content = message.get("content") if isinstance(message, dict) else None
        parts.append(content if isinstance(content, str) else json.dumps(content))
    return "\n".join(parts)


def answer(request: Request) -> str:
    """What the stand-in's models answer: the right queue for most tickets, a judge's
    verdict, a chat reply naming the topic, a receipt's total."""
    text = _text(request)
    if "Criterion:" in text:
        return json.dumps({"score": 0.2 if "delivery" in text else 0.9, "reason": "tone"})
    wrong = int(hashlib.sha256(text.encode()).hexdigest(), 16) % WRONG_EVERY == 0
    for queue in QUEUES:
        if f"a {queue} matter" in text:
            return json.dumps({"queue": "other" if wrong else queue})
    for topic in ("refund", "delivery", "password"):
        if f"my {topic}" in text:
            return f"Thank you: I can help with your {topic if not wrong else 'question'}."
    for supplier in range(3):
        if f"From supplier {supplier}" in text:
            return json.dumps({"total": 10.0 * (1 + supplier) + (1.0 if wrong else 0.0)})
    return json.dumps({"queue": "other"})


# ---------------------------------------------------------------- building
def write_registry(repo: Repo, url: str, use_cases: tuple[UseCase, ...] = USE_CASES) -> None:
    for pin, text in pins(url).items():
        repo.write(f"registry/models/{pin}.yaml", text)
    repo.write("registry/systems/rules.py", SYSTEM)
    for rubric, text in RUBRICS.items():
        repo.write(f"registry/rubrics/{rubric}.yaml", text)
    for task, text in TASKS.items():
        repo.write(f"registry/tasks/{task}.yaml", text)
    for uc in use_cases:
        repo.write(f"registry/selections/{uc.ident}.yaml", uc.yaml())


def team_environment(base: Mapping[str, str]) -> dict[str, str]:
    """``base`` with the team's keys set and the others' unset."""
    env = {k: v for k, v in base.items() if k not in UNSET}
    return {**env, **KEYED, **NO_CLOUD}


def _cli(repo: Repo, *args: str) -> int:
    # In-process: the build is a session's fixture, and DVC is imported once.
    from evalreg.cli import main

    return main(["-C", str(repo.root), *args])


def build_team_registry(repo: Repo, server: LLMServer) -> dict[str, str]:
    """Write the team's registry in the new git repository ``repo``, track its eval sets with
    DVC (in-repository remote), buy and grade every cell it has credentials for, write its
    report, then change one pin so one cell is stale. Returns the commits by name: ``start``
    (registry, no results), ``results`` (run and report), ``head`` (a pin edited after).

    Run in ``team_environment`` (the caller sets it), with ``server`` on the port the pins
    name."""
    repo.root.mkdir(parents=True)
    repo.git("init", "-q", "-b", "main")
    write_registry(repo, server.base_url)
    repo.write("evalsets/tickets.jsonl", tickets())
    repo.write("evalsets/chats.jsonl", chats())
    repo.write("evalsets/receipts.jsonl", receipts())
    repo.write("evalsets/receipts/scan.png", png())
    repo.write("evalsets/receipts/a.pdf", PDF)
    dvcrepo.init(repo.root, remote=None)
    for name in ("tickets", "chats", "receipts"):
        assert _cli(repo, "evalset", "add", f"evalsets/{name}.jsonl") == 0
    commits = {"start": repo.commit("the team's registry, before any result")}
    server.responder = answer
    _cli(repo, "run")  # exits 1: the cells nobody has keys for stay pending
    assert _cli(repo, "report") == 0
    commits["results"] = repo.commit("results and report")
    repo.write(
        "registry/models/mini-warm.yaml",
        repo.read("registry/models/mini-warm.yaml").replace("seed: 7", "seed: 8"),
    )
    commits["head"] = repo.commit("mini-warm: another seed (its cell is stale until run)")
    return commits


# ---------------------------------------------------------------- variants
@dataclass(frozen=True)
class TeamVariant:
    """A change of the team registry a property test draws: use cases dropped and added,
    some cells' committed results removed, and the declared candidates moved."""

    drop: frozenset[str] = frozenset()
    added: tuple[UseCase, ...] = ()
    unrecorded: frozenset[str] = frozenset()
    """Cells (``task/candidate``) whose committed results are removed."""
    redeclare: Mapping[str, str] = field(default_factory=dict)

    def use_cases(self) -> tuple[UseCase, ...]:
        kept = tuple(
            UseCase(
                uc.ident,
                uc.task,
                uc.candidates,
                self.redeclare.get(uc.ident, uc.selected),
                uc.gate_slice,
                uc.floor,
                uc.waiver and uc.ident not in self.redeclare,
            )
            for uc in USE_CASES
            if uc.ident not in self.drop
        )
        return kept + self.added


def apply_variant(repo: Repo, variant: TeamVariant) -> str:
    """Rewrite ``repo``'s selections as ``variant`` says, remove the results it names, and
    commit; returns the commit."""
    for path in (repo.root / "registry/selections").glob("*.yaml"):
        path.unlink()
    for uc in variant.use_cases():
        repo.write(f"registry/selections/{uc.ident}.yaml", uc.yaml())
    for cell in variant.unrecorded:
        for path in (repo.root / "reports/results").glob(f"{cell}*"):
            path.unlink()
        for path in (repo.root / "reports/metrics").glob(f"{cell}*"):
            path.unlink()
    repo.git("add", "-A")
    repo.git("commit", "-q", "--allow-empty", "-m", "a variant of the team's registry")
    return repo.git("rev-parse", "HEAD").strip()


def pinned_candidates() -> Iterator[tuple[str, str]]:
    """(pin, task) pairs a drawn candidate can be, from the pins' kinds: the receipts need
    a model that reads attachments, the tickets anything."""
    for pin in (
        "rules",
        "mini",
        "mini-warm",
        "haiku",
        "azure-mini",
        "bedrock-haiku",
        "gemini-flash",
    ):
        for task in ("triage", "triage-brief"):
            yield pin, task
    for pin in ("mini", "haiku", "azure-mini"):
        yield pin, "chat-reply"
    for pin in ("echo", "haiku", "gemini-flash"):
        yield pin, "receipt-total"


@contextmanager
def serving(port: int) -> Iterator[LLMServer]:
    with LLMServer(api_key=KEY, responder=answer, port=port) as srv:
        yield srv
