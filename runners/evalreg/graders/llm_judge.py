"""LLM-as-judge: build the judge's request for a graded output and read its stored verdict.

A judge is a pinned model (there is no default judge). Its requests are made and stored
like any other response, so judged results replay offline and reproduce exactly. A judge
that cannot answer (no stored response, an unparseable verdict) is a grading *error* for
that sample, never a failed item.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from evalreg.providers import get_provider
from evalreg.providers.base import Completion, Provider
from evalreg.providers.fetch import Job, make_job
from evalreg.providers.pricing import cost_micro_usd
from evalreg.registry import schema
from evalreg.store.segments import StoredRecords
from evalreg.templating import RenderError, render

JUDGE_INSTRUCTIONS = (
    "You grade one response against one criterion. Judge only what the criterion asks. "
    'Reply with a JSON object and nothing else: {"score": <number from 0 to 1>, '
    '"reason": "<one sentence>"}.'
)


class JudgeFailed(Exception):
    """The judge gave no usable verdict for this output.

    ``cost_micro_usd`` is what its stored response cost, when it answered (unparseably);
    ``unanswered`` says the store has no response and this run does not know why.
    """

    def __init__(self, message: str, cost_micro_usd: int = 0, *, unanswered: bool = False) -> None:
        super().__init__(message)
        self.cost_micro_usd = cost_micro_usd
        self.unanswered = unanswered


@dataclass(frozen=True)
class JudgeVerdict:
    passed: bool
    score: float
    reason: str
    cost_micro_usd: int = 0
    """What the judge's response cost at the judge pin's price."""


class Judges:
    """Judge requests and verdicts for one registry version and its response store."""

    def __init__(self, pins: dict[str, schema.Pin], store: StoredRecords | None) -> None:
        self.pins = pins
        self.store = store
        self._providers: dict[str, Provider] = {}
        self.failed: dict[str, str] = {}
        """Why each judge request this run could not buy has no response, by store key
        ("HTTP 500 after 3 attempts"): what a sample's error then says."""

    def _provider(self, name: str) -> Provider:
        if name not in self._providers:
            self._providers[name] = get_provider(name)
        return self._providers[name]

    def job(
        self,
        criterion: schema.Criterion,
        item: schema.Item,
        output: str,
        label: str,
        tool_calls: Sequence[Mapping[str, Any]] = (),
    ) -> Job:
        """The judge's exact request for ``output`` and the ``tool_calls`` it came with (as
        stored): deterministic, so it is found again. A prompt that does not name
        ``tool_calls`` renders the same whatever they are. For a ``similar`` criterion, the
        embedding model's request for the output and the references."""
        config = criterion.grader
        if isinstance(config, schema.SimilarGrader):
            from evalreg.providers.embeddings import embedding_job

            texts = [output, *references(config, item)]
            label = f"{label}/embed:{criterion.id}"
            return embedding_job(config.embedder, self.pins[config.embedder], texts, label)
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
                    "tool_calls": [_judged(call) for call in tool_calls],
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
        self,
        criterion: schema.Criterion,
        item: schema.Item,
        output: str,
        label: str,
        tool_calls: Sequence[Mapping[str, Any]] = (),
    ) -> JudgeVerdict:
        config = criterion.grader
        pin_id = schema.grading_pin(config)
        assert pin_id is not None
        who = (
            f"embedder {pin_id}" if isinstance(config, schema.SimilarGrader) else f"judge {pin_id}"
        )
        job = self.job(criterion, item, output, label, tool_calls)
        stored = self.store.get(job.key) if self.store is not None else None
        if stored is None:
            cause = self.failed.get(job.key)
            if cause is not None:
                raise JudgeFailed(f"{who}: {cause}")
            raise JudgeFailed(f"no stored answer from {who}", unanswered=True)
        completion = Completion.from_record(stored["response"])
        cost = cost_micro_usd(self.pins[pin_id].price, completion)
        try:
            if isinstance(config, schema.SimilarGrader):
                verdict = similarity_verdict(completion.text, config.threshold)
            else:
                assert isinstance(config, schema.JudgeGrader)
                verdict = parse_verdict(completion.text, config.pass_threshold)
        except JudgeFailed as exc:
            raise JudgeFailed(str(exc), cost) from None
        return dataclasses.replace(verdict, cost_micro_usd=cost)


def references(config: schema.SimilarGrader, item: schema.Item) -> list[str]:
    """The texts a ``similar`` criterion compares the output with: its ``value``, or the
    item's expected value (its ``expected_field``), text or a list of texts."""
    from evalreg.graders.base import Ungradable, as_text, expected

    try:
        given: Any = config.value
        if given is None:
            given = expected(item, config.expected_field)
    except Ungradable as exc:
        raise JudgeFailed(str(exc)) from None
    texts = [as_text(t) for t in (given if isinstance(given, list) else [given])]
    if not texts or not all(texts):
        raise JudgeFailed("no reference text to compare with")
    return texts


def similarity_verdict(text: str, threshold: float) -> JudgeVerdict:
    """The closest reference's cosine similarity to the output, from the stored vectors
    (the output's first, then each reference's)."""
    from evalreg.providers.embeddings import cosine, vectors

    try:
        output, *refs = vectors(text)
    except ValueError as exc:
        raise JudgeFailed(f"unreadable embeddings: {exc}") from None
    if not refs:
        raise JudgeFailed("unreadable embeddings: no reference vector")
    best = max(cosine(output, ref) for ref in refs)
    # promptfoo's comparison, to its last bit: a similarity within an epsilon below passes
    passed = best >= threshold - sys.float_info.epsilon
    sign = "≥" if passed else "<"
    return JudgeVerdict(passed, max(0.0, best), f"cosine {best:.3f} {sign} {threshold:g}")


def _judged(call: Mapping[str, Any]) -> dict[str, Any]:
    """What a judge is shown of a stored tool call: its name and arguments (and why they
    did not parse), not the provider's call id."""
    shown = {"name": call.get("name"), "arguments": call.get("arguments")}
    if call.get("error") is not None:
        shown["error"] = call["error"]
    return shown


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
