"""LLM-as-judge: build the judge's request for a graded output and read its stored verdict.

A judge is a pinned model (there is no default judge). Its requests are made and stored
like any other response, so judged results replay offline and reproduce exactly. A judge
that cannot answer (no stored response, an unparseable verdict) is a grading *error* for
that sample, never a failed item.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from evalreg.providers import get_provider
from evalreg.providers.base import Provider
from evalreg.providers.fetch import Job, make_job
from evalreg.registry import schema
from evalreg.store.segments import ResponseStore
from evalreg.templating import RenderError, render

JUDGE_INSTRUCTIONS = (
    "You grade one response against one criterion. Judge only what the criterion asks. "
    'Reply with a JSON object and nothing else: {"score": <number from 0 to 1>, '
    '"reason": "<one sentence>"}.'
)


class JudgeFailed(Exception):
    """The judge gave no usable verdict for this output."""


@dataclass(frozen=True)
class JudgeVerdict:
    passed: bool
    score: float
    reason: str


class Judges:
    """Judge requests and verdicts for one registry version and its response store."""

    def __init__(self, pins: dict[str, schema.Pin], store: ResponseStore | None) -> None:
        self.pins = pins
        self.store = store
        self._providers: dict[str, Provider] = {}

    def _provider(self, name: str) -> Provider:
        if name not in self._providers:
            self._providers[name] = get_provider(name)
        return self._providers[name]

    def job(self, criterion: schema.Criterion, item: schema.Item, output: str, label: str) -> Job:
        """The judge's exact request for ``output``: deterministic, so it is found again."""
        config = criterion.grader
        assert isinstance(config, schema.JudgeGrader)
        pin = self.pins[config.judge]
        subject: Any = (
            item.input if item.input is not None else [m.model_dump() for m in item.messages or []]
        )
        try:
            prompt = render(
                config.prompt,
                {
                    "input": subject,
                    "output": output,
                    "expected": item.expected,
                    "criterion": criterion.description,
                },
            )
        except RenderError as exc:
            raise JudgeFailed(f"the judge prompt cannot be rendered: {exc}") from None
        messages = [
            {"role": "system", "content": JUDGE_INSTRUCTIONS},
            {"role": "user", "content": prompt},
        ]
        return make_job(
            config.judge,
            pin,
            self._provider(pin.provider),
            messages,
            None,
            0,
            f"{label}/judge:{criterion.id}",
        )

    def verdict(
        self, criterion: schema.Criterion, item: schema.Item, output: str, label: str
    ) -> JudgeVerdict:
        config = criterion.grader
        assert isinstance(config, schema.JudgeGrader)
        job = self.job(criterion, item, output, label)
        stored = self.store.get(job.key) if self.store is not None else None
        if stored is None:
            raise JudgeFailed(f"no stored verdict from judge {config.judge}")
        return parse_verdict(stored["response"]["text"], config.pass_threshold)


def parse_verdict(text: str, threshold: float) -> JudgeVerdict:
    """``{"score": 0..1, "reason": ...}`` (also ``pass``/``verdict`` forms) from a judge."""
    from evalreg.graders.parsing import parse_output

    parsed = parse_output(text, schema.Output(parser="json"))
    data = parsed.value
    if parsed.error is not None or not isinstance(data, dict):
        raise JudgeFailed(f"unparseable verdict: {parsed.error or 'not a JSON object'}")
    score: Any = data.get("score")
    if score is None and isinstance(data.get("pass"), bool):
        score = 1.0 if data["pass"] else 0.0
    if score is None and isinstance(data.get("verdict"), str):
        score = {"pass": 1.0, "fail": 0.0}.get(data["verdict"].strip().lower())
    if isinstance(score, bool) or not isinstance(score, (int, float)) or not 0 <= score <= 1:
        raise JudgeFailed(f"verdict has no score between 0 and 1: {json.dumps(data)[:120]}")
    reason = data.get("reason")
    return JudgeVerdict(
        float(score) >= threshold, float(score), reason if isinstance(reason, str) else ""
    )
