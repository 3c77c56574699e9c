"""OpenAI evals model-graded specs (``fact``, ``closedqa``, ...) as ``llm_judge`` criteria.

A spec (``evals/registry/modelgraded/<name>.yaml``) is a prompt with Python ``{field}``
placeholders, the choices the grading model picks from and each choice's score. Its
prompt becomes the judge prompt: the sampled answer is the graded output, the sample's
input its conversation, and every other field a value the importer copies into each
item's ``expected``. The judge answers with evalreg's verdict (a score in 0..1), so the
prompt ends by listing the choices and the score of each; the criterion passes on a
best-scoring choice.
"""

from __future__ import annotations

import string
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalreg.importers.base import ImportProblem, read_yaml, slug
from evalreg.importers.templates import literal

_DEFAULT_SCORES = {"fact": {"A": 1.0, "B": 1.0, "C": 1.0, "D": 0.0, "E": 1.0}}
"""Specs that score no choice themselves: ``fact`` counts its choices only; every choice
but (D), a disagreement with the expert answer, is consistent with it (as promptfoo's
``factuality`` assert decides)."""
_INPUT = (
    "{% if input | length == 1 and input[0].role == 'user' %}{{ input[0].content }}"
    "{% else %}{{ input }}{% endif %}"
)
"""The sample's input as OpenAI evals formats it: a prompt's text, or the conversation."""


@dataclass(frozen=True)
class Spec:
    """A model-graded spec as a criterion and the sample fields its prompt reads."""

    criterion: dict[str, Any]
    fields: tuple[str, ...]
    """Sample fields the prompt reads besides the input: copied into ``expected``."""


def read_spec(path: Path, judge: str) -> Spec:
    """The ``llm_judge`` criterion for the model-graded spec file ``path``, judged by ``judge``.

    Raises:
        ImportProblem: the file is not one model-graded spec, or its prompt or choices
            have no evalreg form.
    """
    data = read_yaml(path)
    if not isinstance(data, dict) or len(data) != 1:
        raise ImportProblem(f"{path}: expected one model-graded spec (a mapping of one name)")
    name, spec = next(iter(data.items()))
    where = f"{path}: spec {name!r}"
    if not isinstance(spec, dict) or not isinstance(spec.get("prompt"), str):
        raise ImportProblem(f"{where} has no 'prompt' text")
    io = spec.get("input_outputs") or {"input": "completion"}
    if not isinstance(io, dict) or len(io) != 1:
        raise ImportProblem(
            f"{where}: input_outputs {io!r}: one input and its completion are mapped "
            "(a spec comparing several completions is not)"
        )
    ((input_key, output_key),) = io.items()
    choices = _choices(spec.get("choice_strings"), where)
    scores = _scores(str(name), spec.get("choice_scores"), choices, where)
    prompt, fields = _prompt(spec["prompt"], str(input_key), str(output_key), where)
    low, high = min(scores.values()), max(scores.values())
    normal = {c: (s - low) / (high - low) for c, s in scores.items()}
    listed = ", ".join(f'"{c}" scores {_number(normal[c])}' for c in choices)
    best = ", ".join(f'"{c}"' for c in choices if normal[c] == 1.0)
    prompt += literal(
        f"\n\nPick exactly one of the choices above. Then reply with the JSON verdict; "
        f"its score is that of the choice you picked: {listed}."
    )
    ident = slug(str(name)) or "modelgraded"
    criterion = {
        "id": ident,
        "description": f"The judge picks a best choice ({best}) of the OpenAI evals "
        f"model-graded spec {name!r}.",
        "grader": {
            "type": "llm_judge",
            "judge": judge,
            "prompt": prompt,
            "prompt_version": f"openai-evals-{ident}"[:60] + "-1",
            "pass_threshold": 1.0,
        },
    }
    return Spec(criterion, fields)


def _choices(raw: Any, where: str) -> list[str]:
    choices = list(raw) if isinstance(raw, str) else raw
    if not isinstance(choices, list) or not choices or not all(isinstance(c, str) for c in choices):
        raise ImportProblem(f"{where}: choice_strings is not a list of choices")
    return [str(c) for c in choices]


def _scores(name: str, raw: Any, choices: list[str], where: str) -> dict[str, float]:
    if raw is None:
        raw = _DEFAULT_SCORES.get(name)
        if raw is None:
            raise ImportProblem(
                f"{where} scores no choice (choice_scores): OpenAI evals only counts its "
                "choices, so no choice passes; add choice_scores to the spec"
            )
    if raw == "from_strings":
        try:
            raw = {c: float(c) for c in choices}
        except ValueError:
            raise ImportProblem(
                f"{where}: choice_scores from_strings needs numeric choices"
            ) from None
    if not isinstance(raw, dict) or set(map(str, raw)) != set(choices):
        raise ImportProblem(f"{where}: choice_scores must score each of {choices}")
    scores: dict[str, float] = {}
    for choice, score in raw.items():
        if isinstance(score, bool) or not isinstance(score, (int, float)):
            raise ImportProblem(f"{where}: the score of {choice!r} is not a number")
        scores[str(choice)] = float(score)
    if len(set(scores.values())) < 2:
        raise ImportProblem(f"{where}: every choice scores the same, so none decides")
    return scores


def _prompt(text: str, input_key: str, output_key: str, where: str) -> tuple[str, tuple[str, ...]]:
    """The Python format string ``text`` as a Jinja2 template, and the other fields it reads."""
    out: list[str] = []
    fields: list[str] = []
    try:
        parts = list(string.Formatter().parse(text))
    except ValueError as exc:
        raise ImportProblem(f"{where}: its prompt is not a format string ({exc})") from None
    for literal_text, field, spec, conversion in parts:
        out.append(_plain(literal_text))
        if field is None:
            continue
        if spec or conversion or not field.isidentifier():
            raise ImportProblem(f"{where}: the placeholder {{{field}}} has no evalreg form")
        if field == input_key:
            out.append(_INPUT)
        elif field == output_key:
            out.append("{{ output }}")
        else:
            out.append(f'{{{{ expected["{field}"] }}}}')
            if field not in fields:
                fields.append(field)
    return "".join(out), tuple(fields)


def _plain(text: str) -> str:
    """Literal prompt text, safe beside the placeholders written around it."""
    if ("{" in text or "}" in text) and "endraw" not in text:
        return "{% raw %}" + text + "{% endraw %}"
    return literal(text)


def _number(value: float) -> str:
    return f"{value:g}"
