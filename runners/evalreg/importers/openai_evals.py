"""Import OpenAI evals samples (``input`` conversations, ``ideal`` answers) as a use case.

Samples become conversation items (the model writes the next assistant turn) graded
against ``expected.ideal``. The samples name no model, so the use case's candidates are
pins that already exist in the registry: an import invents no pin.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from evalreg.importers.base import (
    ImportLog,
    ImportProblem,
    ImportResult,
    NotMapped,
    check_name,
    read_text,
    require_pin,
    rubric_doc,
    selection_doc,
    to_plain,
)
from evalreg.importers.openai_modelgraded import Spec, read_spec
from evalreg.importers.templates import literal
from evalreg.importers.writer import Draft, write_draft
from evalreg.registry import schema

SOURCE = "OpenAI evals"
MAX_BAD_LINES = 20
_CRITERIA: dict[str, dict[str, Any]] = {
    "match": {
        "id": "match",
        "description": "The output, exactly as returned, starts with one of the sample's ideal "
        "answers (expected.ideal), as OpenAI evals' Match decides.",
        "grader": {
            "type": "exact",
            "expected_field": "ideal",
            "raw": True,
            "compare": "prefix",
            "match": "any",
        },
    },
    "includes": {
        "id": "includes",
        "description": "The output contains one of the sample's ideal answers (expected.ideal), "
        "case-sensitive, as OpenAI evals' Includes decides.",
        "grader": {
            "type": "contains",
            "expected_field": "ideal",
            "raw": True,
            "ignore_case": False,
            "match": "any",
        },
    },
    "fuzzy_match": {
        "id": "fuzzy_match",
        "description": "Once lower-cased, without punctuation, articles and extra spaces, the "
        "output contains one of the sample's ideal answers (expected.ideal) or is contained "
        "in it, as OpenAI evals' FuzzyMatch decides.",
        "grader": {
            "type": "normalized",
            "expected_field": "ideal",
            "form": "squad",
            "compare": "overlap",
            "match": "any",
        },
    },
    "json_match": {
        "id": "json_match",
        "description": "The output, parsed as one JSON document, equals one of the sample's "
        "ideal answers (expected.ideal) component by component, as OpenAI evals' JsonMatch "
        "decides (a missing key or a null never matches).",
        "grader": {
            "type": "exact",
            "expected_field": "ideal",
            "compare": "components",
            "match": "any",
        },
    },
}
"""The criterion each kind of eval (OpenAI evals' class) grades with."""
KINDS = tuple(_CRITERIA)
_OUTPUTS: dict[str, dict[str, str]] = {"json_match": {"parser": "json", "extract": "strict"}}
"""The task's output parser a kind needs (JsonMatch reads the whole output as JSON)."""
_FEW_SHOT = {"example_user": "user", "example_assistant": "assistant"}
"""OpenAI evals writes few-shot turns as system messages named for the role they play."""


def import_openai_evals(
    samples: Path,
    out_root: Path,
    *,
    name: str,
    pins: Sequence[str],
    kind: str = "match",
    modelgraded: Path | None = None,
    judge: str | None = None,
) -> ImportResult:
    """Write the registry files for the OpenAI evals samples file ``samples`` into ``out_root``.

    Args:
        samples: the eval's ``samples.jsonl``.
        out_root: the registry repository root.
        name: the id of the task, rubric, use case and eval set (``evalsets/<name>.jsonl``).
        pins: existing model pins to compare, one candidate each; the first is declared.
        kind: the eval class the samples were written for: ``match`` (the output starts
            with an ideal answer), ``includes`` (an ideal answer appears in the output),
            ``fuzzy_match``, ``json_match`` (the output, as JSON, equals an ideal one).
        modelgraded: an OpenAI evals model-graded spec file (``fact.yaml``, ...): its
            prompt grades instead of ``kind``, with ``judge`` as the grading model.
        judge: the existing pin that grades a model-graded spec.

    Raises:
        ImportProblem: a pin does not exist, the file is not JSONL, no sample maps, or the
            files cannot be written. Nothing is written then.
    """
    check_name(name)
    if kind not in KINDS:
        raise ImportProblem(f"--kind {kind}: expected one of {', '.join(KINDS)}")
    if not pins:
        raise ImportProblem(
            "samples name no model: give at least one existing pin to compare (--pin ID)"
        )
    for pin in pins:
        require_pin(out_root, pin, "--pin")
    if len(set(pins)) != len(pins):
        raise ImportProblem("--pin: each pin once")
    spec = _spec(modelgraded, judge, out_root)
    criterion = criterion_for(kind) if spec is None else spec.criterion
    label = kind if modelgraded is None else f"model-graded {modelgraded.stem}"
    log = ImportLog()
    rows = _rows(samples, log, spec, kind)
    if not rows:
        raise ImportProblem(
            f"{samples}: no sample maps to an eval item"
            + "".join(f"\n  {m}" for m in log.not_mapped)
        )
    system = _shared_system(rows, log)
    evalset = f"evalsets/{name}.jsonl"
    draft = Draft(f"Imported from OpenAI evals ({samples.name}); review before relying on it.")
    draft.add_yaml(
        "rubrics",
        name,
        rubric_doc(
            f"Answers to the OpenAI evals samples {samples.name} ({label}), checked against "
            + ("each sample's ideal answer." if spec is None else "a judge's choice."),
            [criterion],
        ),
    )
    prompt: dict[str, Any] = {"template": ""}  # every item is a conversation: no template
    if system is not None:
        prompt = {"system": literal(system), **prompt}
    description = (
        f"Imported from the OpenAI evals samples {samples.name} ({label}): each item is a "
        "conversation, and the model writes the next assistant turn."
    )
    draft.add_yaml(
        "tasks",
        name,
        {
            "schema_version": schema.SCHEMA_VERSION,
            "description": description,
            "evalset": evalset,
            "prompt": prompt,
            "rubric": name,
            **({"output": output_for(kind)} if spec is None and kind in _OUTPUTS else {}),
        },
    )
    candidates = [{"id": pin, "pin": pin} for pin in pins]
    draft.add_yaml("selections", name, selection_doc(f"{name} ({label})", name, candidates, SOURCE))
    draft.add_jsonl(evalset, rows)
    return log.result(write_draft(out_root, draft), evalset)


def _spec(modelgraded: Path | None, judge: str | None, out_root: Path) -> Spec | None:
    if modelgraded is None:
        if judge is not None:
            raise ImportProblem("--judge grades a model-graded spec: give --modelgraded SPEC")
        return None
    if judge is None:
        raise ImportProblem("a model-graded spec needs a judge model: --judge PIN")
    require_pin(out_root, judge, "--judge")
    return read_spec(modelgraded, judge)


def _rows(
    samples: Path, log: ImportLog, spec: Spec | None = None, kind: str = "match"
) -> list[dict[str, Any]]:
    """One item per sample that maps; a line that is not a JSON object is an error."""
    bad: list[str] = []
    rows: list[dict[str, Any]] = []
    for lineno, line in enumerate(read_text(samples).splitlines(), start=1):
        if not line.strip():
            continue
        try:
            sample = json.loads(line)
        except json.JSONDecodeError as exc:
            bad.append(f"line {lineno}: invalid JSON ({exc.msg} at column {exc.colno})")
            continue
        except (ValueError, RecursionError) as exc:  # an overlong integer; nesting too deep
            bad.append(f"line {lineno}: unreadable JSON ({exc or 'nested too deep'})")
            continue
        if not isinstance(sample, dict):
            bad.append(f"line {lineno}: expected a JSON object (one sample a line)")
            continue
        where = f"line {lineno}"
        try:
            messages = _messages(sample.get("input"), log)
            expected = (
                expected_for(sample.get("ideal"), kind) if spec is None else _read(sample, spec)
            )
        except NotMapped as exc:
            log.skip(where, f"{exc}; the sample is not imported")
            continue
        extra = {k: v for k, v in sample.items() if k not in ("input", "ideal")}
        rows.append(
            {
                "id": f"sample-{len(rows) + 1:03d}",
                "messages": messages,
                "expected": expected,
                "tags": ["imported"],
                "meta": {"source": where} | to_plain(extra),
            }
        )
    if bad:
        shown = "\n  ".join(bad[:MAX_BAD_LINES])
        raise ImportProblem(f"{samples}: not OpenAI evals samples (JSONL):\n  {shown}")
    return rows


def _read(sample: dict[str, Any], spec: Spec) -> dict[str, Any]:
    """What a model-graded spec's prompt reads from a sample besides its input."""
    missing = [f for f in spec.fields if f not in sample]
    if missing:
        raise NotMapped(f"the spec's prompt reads {', '.join(missing)}, which the sample lacks")
    return {f: to_plain(sample[f]) for f in spec.fields}


def criterion_for(kind: str) -> dict[str, Any]:
    """The rubric criterion that decides as OpenAI evals' class ``kind`` does."""
    return _CRITERIA[kind]


def output_for(kind: str) -> dict[str, str]:
    """The task's ``output`` for OpenAI evals' class ``kind`` (empty: the default, text)."""
    return dict(_OUTPUTS.get(kind, {}))


def expected_for(ideal: Any, kind: str = "match") -> dict[str, Any]:
    """A sample's ``expected``: its ideal answer, or the list of them when it gives several
    (every criterion accepts any one of them, as OpenAI evals does). For ``json_match``,
    the list of the JSON values the ideal answers spell, always a list (an ideal answer
    may itself be a JSON list).

    Raises:
        NotMapped: ``ideal`` is neither an answer nor a list of them (of JSON documents,
            for ``json_match``).
    """
    ideals = _ideals(ideal)
    if kind == "json_match":
        try:
            return {"ideal": [json.loads(i) for i in ideals]}
        except ValueError:
            raise NotMapped("an ideal answer is not a JSON document") from None
    return {"ideal": ideals[0] if len(ideals) == 1 else ideals}


def _messages(raw: Any, log: ImportLog) -> list[dict[str, str]]:
    if isinstance(raw, str):
        return [{"role": "user", "content": raw}]
    if not isinstance(raw, list) or not raw:
        raise NotMapped("'input' is neither a prompt nor a list of messages")
    out = []
    for message in raw:
        if not isinstance(message, dict) or not isinstance(message.get("content"), str):
            raise NotMapped("a message without text content")
        role, named = message.get("role"), message.get("name")
        if role == "system" and named in _FEW_SHOT:
            role = _FEW_SHOT[named]
            log.note(
                "few-shot turns (system messages named example_user / example_assistant) "
                "became user / assistant turns"
            )
        if role not in ("system", "user", "assistant"):
            raise NotMapped(f"a message with role {role!r}")
        out.append({"role": role, "content": message["content"]})
    if all(m["role"] == "system" for m in out):
        log.note(
            "conversations of system messages only became one user turn with their text "
            "(an evalreg conversation ends with a user turn)"
        )
        return [{"role": "user", "content": "\n\n".join(m["content"] for m in out)}]
    if out[-1]["role"] != "user":
        raise NotMapped("the conversation does not end with a user turn")
    return out


def _ideals(raw: Any) -> list[str]:
    values = raw if isinstance(raw, list) else [raw]
    if not values or not all(
        isinstance(v, (str, int, float)) and not isinstance(v, bool) for v in values
    ):
        raise NotMapped("'ideal' is neither an answer nor a list of answers")
    return [str(v) for v in values]


def _shared_system(rows: list[dict[str, Any]], log: ImportLog) -> str | None:
    """The system prompt every sample opens with, moved into the task (None: they differ)."""
    firsts = {
        row["messages"][0]["content"] if row["messages"][0]["role"] == "system" else None
        for row in rows
    }
    if len(firsts) != 1 or None in firsts:
        return None
    for row in rows:
        del row["messages"][0]
    log.note("every sample opens with the same system prompt: it is the task's system prompt")
    return str(next(iter(firsts)))
