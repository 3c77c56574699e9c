"""promptfoo asserts as rubric criteria: each assert becomes a check, checks become criteria.

An assert common to every test, with one value, becomes a criterion with that value. One
whose value differs per test becomes one criterion reading the value from each item's
``expected`` (under the criterion's id), when its grader can; otherwise one criterion per
distinct value. A criterion that not every test asserts applies only to the items tagged
``assert-<criterion id>``.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from jsonschema import SchemaError
from jsonschema.validators import validator_for

from evalreg.importers import js_regex
from evalreg.importers.base import IdPool, ImportLog, NotMapped
from evalreg.importers.templates import literal
from evalreg.templating import RenderError, render

Slot = Literal["value", "pattern", "schema", "rubric"]
"""Where an assert's value goes: grader ``value`` (or ``expected_field``), a regex
``pattern``, a JSON ``schema``, or the rubric an LLM judge grades against."""
Parser = Literal["text", "json"]

JUDGE_PROMPT = (
    "Grade the output against the rubric.\n\nRubric: {rubric}\n\nOutput:\n{{{{ output }}}}\n"
)
JUDGE_PROMPT_VERSION = "promptfoo-llm-rubric-1"
FACTUALITY_PROMPT = (
    "Compare the factual content of the output with the reference answer. Ignore style, "
    "grammar and punctuation.\n\nReference answer: {rubric}\n\nOutput:\n{{{{ output }}}}\n\n"
    "Decide which holds: (A) the output is a subset of the reference and consistent with it; "
    "(B) it is a superset, consistent with it; (C) it has the same details; (D) it disagrees "
    "with the reference; (E) they differ in ways that do not matter for factuality. Score 0 "
    "for (D) and 1 otherwise.\n"
)
"""The judge prompt of promptfoo's ``factuality`` assert, which passes every choice but (D)."""
CLOSEDQA_PROMPT = (
    "Does the output meet the criterion?\n\nCriterion: {rubric}\n\nOutput:\n{{{{ output }}}}\n\n"
    "Score 1 if it meets the criterion and 0 if it does not.\n"
)
"""The judge prompt of promptfoo's ``model-graded-closedqa`` assert (a yes or no)."""
_JUDGED = {
    "llm-rubric": (JUDGE_PROMPT, None, JUDGE_PROMPT_VERSION),
    "factuality": (
        FACTUALITY_PROMPT,
        "The output agrees with the reference answer {v}",
        "promptfoo-factuality-1",
    ),
    "model-graded-closedqa": (
        CLOSEDQA_PROMPT,
        "The output meets the criterion {v}",
        "promptfoo-closedqa-1",
    ),
}
"""Asserts a judge grades: its prompt, its description (None: the rubric is the
description) and the prompt's version."""
SLICE_PREFIX = "assert-"
_KEYS = frozenset({"type", "value", "threshold", "weight", "metric", "provider"})
_NEEDS_CODE = frozenset({"javascript", "python", "ruby", "webhook"})
_WHY = {
    "cost": "gate the selection on cost_per_item_usd instead",
    "latency": "gate the selection on latency_p95_ms instead",
}

ROUGE_NOTE = (
    "rouge-n is graded by Google's rouge-score (ROUGE-1, whose words are runs of the letters "
    "a-z and digits), not promptfoo's js-rouge (which counts punctuation and every letter): "
    "measured on 360 rouge-n asserts and outputs (evalreg's fidelity corpus), the decisions "
    "differ in 5, the scores by up to 0.29; review each rouge-n threshold"
)
"""The review note of an imported ``rouge-n`` assert; the test of the corpus checks its
figures."""
BLEU_NOTE = (
    "bleu is graded by sacrebleu's sentence BLEU, lower-cased and split at spaces as "
    "promptfoo's is; but promptfoo gives an n-gram order with no match a precision of 1e-7 "
    "where sacrebleu counts half a match (a quarter at the next such order), and counts the "
    "matches of the one reference matching most where sacrebleu counts each n-gram in any "
    "reference: measured on 432 bleu asserts and outputs (evalreg's fidelity corpus), the "
    "decisions differ in 4, the scores by up to 0.57; review each bleu threshold"
)
"""The review note of an imported ``bleu`` assert; the test of the corpus checks its
figures."""

JudgeFor = Callable[..., str]
"""The pin that grades: ``judge(provider spec)`` a judge's, ``judge(spec, embedding=True)``
an embedding model's (a spec of None: the test's or the default)."""
"""The judge pin for an assert's ``provider`` (None: the test's grader); raises NotMapped."""


@dataclass(frozen=True)
class Check:
    """One promptfoo assert on one test, as an evalreg grader with its value."""

    type: str
    """The promptfoo type, for descriptions and messages."""
    stem: str
    """The criterion id stem; asserts with the same stem and grader form one criterion."""
    grader: dict[str, Any]
    """The grader config, without the part that holds the value."""
    slot: Slot
    value: Any
    shown: str
    """The value as a description quotes it."""
    where: str
    parser: Parser | None = None
    """The output parser the check needs, if it needs one."""
    merge: bool = False
    """Several on one test join into one list of needles (contains, not-contains)."""
    weight: float = 1.0
    prompt: str = JUDGE_PROMPT
    """For a judged check: the judge prompt, ``{rubric}`` where the value goes."""
    describe: str | None = None
    """For a judged check: its description, ``{v}`` the value (None: the value itself)."""
    note: str | None = None
    """What the review list says when the check is imported: how evalreg's metric differs
    from promptfoo's."""


@dataclass
class Criteria:
    """A rubric's criteria and what they add to each item."""

    criteria: list[dict[str, Any]]
    expected: list[dict[str, Any]]
    """Per item: criterion id -> the value that item is graded against."""
    tags: list[list[str]]
    """Per item: the ``assert-<id>`` slices of criteria only some items have."""
    parser: Parser


@dataclass
class _Group:
    check: Check
    values: dict[int, Any] = field(default_factory=dict)
    """Item index -> the value that item's assert (or merged asserts) gives."""
    shown: dict[str, str] = field(default_factory=dict)
    """Value as canonical JSON -> how a description quotes it."""
    wheres: list[str] = field(default_factory=list)


def to_check(raw: Any, where: str, variables: dict[str, Any], judge_for: JudgeFor) -> Check:
    """The check one assert makes, its value rendered with the test's vars.

    Raises:
        NotMapped: the assert has no evalreg grader, or cannot be read.
    """
    if not isinstance(raw, dict) or not isinstance(raw.get("type"), str):
        raise NotMapped("an assert needs a 'type'")
    extra = sorted(set(raw) - _KEYS)
    if extra:
        raise NotMapped(f"{', '.join(extra)} {'is' if len(extra) == 1 else 'are'} not supported")
    kind: str = raw["type"]
    negated = kind.startswith("not-")
    base = kind.removeprefix("not-")
    if base in _NEEDS_CODE:
        raise NotMapped(f"{kind} asserts run code; rewrite it as a 'python' grader")
    if base in _WHY:
        raise NotMapped(_WHY[base])
    if base not in _MAKERS:
        raise NotMapped(f"assert type {kind!r} has no evalreg grader")
    weight = raw.get("weight", 1)
    if isinstance(weight, bool) or not isinstance(weight, (int, float)) or weight <= 0:
        raise NotMapped(f"weight {weight!r}: evalreg weights are positive numbers")
    value = _rendered(raw.get("value"), variables)
    check = _MAKERS[base](kind, negated, value, raw, judge_for)
    return dataclasses.replace(check, where=where, weight=float(weight))


def build_criteria(checks: Sequence[Sequence[Check]], log: ImportLog) -> Criteria:
    """Criteria for ``checks`` (one list per item), their per-item values and slice tags."""
    groups = _groups(checks)
    count = len(checks)
    parser: Parser = "json" if any(g.check.parser == "json" for g in groups) else "text"
    if parser == "json":
        log.note(
            "an equals assert compares the output as JSON, so the task parses it as one "
            "JSON document (output: {parser: json, extract: strict}), as promptfoo's "
            "JSON.parse does; text criteria read the raw output"
        )
    out = Criteria([], [{} for _ in checks], [[] for _ in checks], parser)
    ids = IdPool()
    for group in groups:
        if group.check.note is not None:
            log.note(group.check.note)
        if group.check.slot in ("value", "rubric") and len(_distinct(group.values)) > 1:
            _per_item(group, ids.claim(group.check.stem), out, count)
        else:
            for members in _distinct(group.values).values():
                cid = ids.claim(group.check.stem)
                _fixed(group, cid, members, out, count)
    return out


def _groups(checks: Sequence[Sequence[Check]]) -> list[_Group]:
    groups: dict[tuple[str, str, int], _Group] = {}
    for item, item_checks in enumerate(checks):
        seen: dict[tuple[str, str], int] = {}
        for check in item_checks:
            shape = (check.stem, json.dumps([check.grader, check.weight], sort_keys=True))
            nth = 0 if check.merge else seen.get(shape, 0)
            seen[shape] = nth + 1
            group = groups.setdefault((*shape, nth), _Group(check))
            group.wheres.append(check.where)
            if check.merge:
                group.values.setdefault(item, []).extend(check.value)
            else:
                group.values[item] = check.value
                group.shown[_canonical(check.value)] = check.shown
    for group in groups.values():
        if group.check.merge:  # one needle is written as text, several as a list
            group.values = {i: v[0] if len(v) == 1 else v for i, v in group.values.items()}
    return list(groups.values())


def _distinct(values: dict[int, Any]) -> dict[str, list[int]]:
    """Items by value (as canonical JSON), in first-seen order."""
    out: dict[str, list[int]] = {}
    for item, value in values.items():
        out.setdefault(_canonical(value), []).append(item)
    return out


def _fixed(group: _Group, cid: str, members: list[int], out: Criteria, count: int) -> None:
    check = group.check
    value = group.values[members[0]]
    grader = dict(check.grader)
    if check.slot == "rubric" and check.describe is None:
        description = str(value)
        grader["prompt"] = check.prompt.format(rubric="{{ criterion }}")
    elif check.slot == "rubric" and check.describe is not None:
        description = check.describe.format(v=_shown(value)) + f" (promptfoo {check.type})."
        grader["prompt"] = check.prompt.format(rubric=literal(str(value)))
    else:
        if value is not None:
            grader[check.slot] = value
        shown = _needles(check, value) if check.merge else group.shown[_canonical(value)]
        description = _DESCRIBE[check.stem].format(v=shown) + f" (promptfoo {check.type})."
    out.criteria.append(_criterion(cid, description, grader, check, members, count, out))


def _per_item(group: _Group, cid: str, out: Criteria, count: int) -> None:
    check = group.check
    grader = dict(check.grader)
    where = f"expected.{cid}"
    if check.slot == "rubric":
        shown = f"the test's value in {where}"
        description = (
            f"The output meets the test's rubric in {where}"
            if check.describe is None
            else check.describe.format(v=shown)
        ) + f" (promptfoo {check.type})."
        grader["prompt"] = check.prompt.format(rubric=f'{{{{ expected["{cid}"] }}}}')
    else:
        grader["expected_field"] = cid
        description = _DESCRIBE[check.stem].format(v=f"the test's value in {where}")
        description += f" (promptfoo {check.type})."
    for item, value in group.values.items():
        out.expected[item][cid] = value
    members = list(group.values)
    out.criteria.append(_criterion(cid, description, grader, check, members, count, out))


def _criterion(
    cid: str,
    description: str,
    grader: dict[str, Any],
    check: Check,
    members: list[int],
    count: int,
    out: Criteria,
) -> dict[str, Any]:
    criterion: dict[str, Any] = {"id": cid, "description": description, "grader": grader}
    if check.weight != 1.0:
        criterion["weight"] = check.weight
    if len(members) < count:
        tag = SLICE_PREFIX + cid
        criterion["slices"] = [tag]
        for item in members:
            out.tags[item].append(tag)
    return criterion


def _rendered(value: Any, variables: dict[str, Any]) -> Any:
    """``value`` with Nunjucks placeholders filled from the test's vars, as promptfoo does."""
    if isinstance(value, list):
        return [_rendered(v, variables) for v in value]
    if not isinstance(value, str):
        return value
    if value.startswith("file://"):
        raise NotMapped("a value read from a file is not supported")
    if not any(mark in value for mark in ("{{", "{%", "{#")):
        return value
    try:
        return render(value, variables)
    except RenderError as exc:
        raise NotMapped(f"its value does not render with the test's vars ({exc})") from None


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def _needles(check: Check, needles: str | list[str]) -> str:
    """Needles as a description lists them: one quoted, or several after 'each of'/'any of'."""
    if isinstance(needles, str):
        return _shown(needles)
    joined = ", ".join(_shown(n) for n in needles)
    return ("any of " if check.grader["type"] == "not_contains" else "each of ") + joined


def _shown(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= 120 else text[:117] + "..."


def _text(value: Any, kind: str) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int, float)) or value == "":
        raise NotMapped(f"{kind} needs a text value")
    return _js_string(value)


def _string(value: Any, kind: str) -> str:
    """A value promptfoo requires to be a string that is not empty (it throws otherwise)."""
    if not isinstance(value, str) or value == "":
        raise NotMapped(f"{kind} needs a text value: promptfoo refuses {_refused(value)}")
    return value


def _refused(value: Any) -> str:
    """What a value that is not a text is, as a message names it."""
    if value == "":
        return "an empty string"
    if value is None:
        return "an assert without a value"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (int, float)):
        return "a number"
    return "a list" if isinstance(value, list) else "an object"


def _js_string(value: str | float) -> str:
    """A value as JavaScript's ``String()`` writes it (``1.0`` is ``"1"``, ``True`` ``"true"``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e21:
        return str(int(value))
    return str(value)


def _texts(value: Any, kind: str) -> list[str]:
    if isinstance(value, str):
        value = _comma_separated(value, kind)
    if not isinstance(value, list) or not value:
        raise NotMapped(f"{kind} needs a list of texts")
    return [_text(v, kind) for v in value]


def _comma_separated(text: str, kind: str) -> list[str]:
    """A comma-separated list as promptfoo splits one: unquoted fields trimmed, double-quoted
    fields kept as written (``\"`` or ``""`` for a quote inside)."""
    fields: list[str] = []
    i = 0
    while i < len(text):
        while i < len(text) and (text[i].isspace() or text[i] == ","):
            i += 1
        if i >= len(text):
            break
        if text[i] != '"':
            end = text.find(",", i)
            end = len(text) if end < 0 else end
            fields.append(text[i:end].strip())
            i = end
            continue
        field, i, closed = "", i + 1, False
        while i < len(text):
            if text[i] == "\\" and text[i + 1 : i + 2] in ('"', "\\"):
                field, i = field + text[i + 1], i + 2
            elif text[i : i + 2] == '""':
                field, i = field + '"', i + 2
            elif text[i] == '"':
                i, closed = i + 1, True
                break
            else:
                field, i = field + text[i], i + 1
        while i < len(text) and text[i].isspace():
            i += 1
        if not closed or (i < len(text) and text[i] != ","):
            raise NotMapped(f"{kind}: its quoted list {text!r} does not parse")
        fields.append(field)
    return fields


def js_pattern(pattern: str) -> str:
    """A JavaScript regular expression, as promptfoo's ``new RegExp(pattern)`` reads it, as
    the Python one that decides the same in a ``regex`` grader with ``ascii`` and ``utf16``.

    Raises:
        NotMapped: the pattern is not valid JavaScript, or Python cannot express it.
    """
    return js_regex.to_python(pattern)


# ---------------------------------------------------------------- one maker per assert type
Maker = Callable[[str, bool, Any, dict[str, Any], JudgeFor], Check]
_RAW: dict[str, Any] = {"raw": True}
"""promptfoo compares the output exactly as the model returned it."""


def _equals(kind: str, negated: bool, value: Any, raw: dict[str, Any], judge: JudgeFor) -> Check:
    if isinstance(value, (dict, list)):
        if negated:
            raise NotMapped("not-equals with a JSON value has no evalreg grader")
        return Check(kind, "equals", {"type": "exact"}, "value", value, _shown(value), "", "json")
    text = _js_string(value) if isinstance(value, (str, int, float)) else _text(value, kind)
    if negated:
        pattern = r"\A" + re.escape(text) + r"\Z"
        grader = {"type": "regex", "must_match": False} | _RAW
        return Check(kind, kind, grader, "pattern", pattern, _shown(text), "")
    return Check(kind, kind, {"type": "exact"} | _RAW, "value", text, _shown(text), "")


def _contains(kind: str, negated: bool, value: Any, raw: dict[str, Any], judge: JudgeFor) -> Check:
    folded = kind.removeprefix("not-").startswith("i")
    several = kind.endswith(("-all", "-any"))
    needles = _texts(value, kind) if several else [_text(value, kind)]
    grader: dict[str, Any] = {"type": "not_contains" if negated else "contains"} | _RAW
    grader |= {"ignore_case": True, "case": "lower"} if folded else {"ignore_case": False}
    if kind.endswith("-all" if negated else "-any"):
        # One needle is enough to pass (or, negated, to be absent): these do not merge.
        grader["match"] = "any" if not negated else "all"
        return Check(kind, kind, grader, "value", needles, _shown(needles), "")
    stem = ("not-" if negated else "") + ("icontains" if folded else "contains")
    return Check(kind, stem, grader, "value", needles, "", "", merge=True)


def _regex(kind: str, negated: bool, value: Any, raw: dict[str, Any], judge: JudgeFor) -> Check:
    pattern = _string(value, kind)
    grader: dict[str, Any] = {"type": "regex", "ascii": True, "utf16": True} | _RAW
    grader |= {"must_match": False} if negated else {}
    return Check(kind, kind, grader, "pattern", js_pattern(pattern), _shown(pattern), "")


def _starts_with(
    kind: str, negated: bool, value: Any, raw: dict[str, Any], judge: JudgeFor
) -> Check:
    text = _string(value, kind)
    grader: dict[str, Any] = {"type": "regex"} | _RAW | ({"must_match": False} if negated else {})
    return Check(kind, kind, grader, "pattern", r"\A" + re.escape(text), _shown(text), "")


def _json(kind: str, negated: bool, value: Any, raw: dict[str, Any], judge: JudgeFor) -> Check:
    if negated:
        raise NotMapped(f"{kind} has no evalreg grader")
    schema = _schema(value)
    shown = "" if schema is None else f" matching the schema {_shown(schema)}"
    parse = "strict" if kind == "is-json" else "embedded"
    grader = {"type": "json_schema", "parse": parse}
    return Check(kind, kind, grader, "schema", {} if schema is None else schema, shown, "")


def _judged(kind: str, negated: bool, value: Any, raw: dict[str, Any], judge: JudgeFor) -> Check:
    if negated:
        raise NotMapped(f"{kind} has no evalreg grader")
    rubric = _text(value, kind)
    base = "factuality" if kind == "model-graded-factuality" else kind
    prompt, describe, version = _JUDGED[base]
    grader: dict[str, Any] = {
        "type": "llm_judge",
        "judge": judge(raw.get("provider")),
        "prompt_version": version,
    }
    if raw.get("threshold") is not None:
        threshold = _threshold(raw["threshold"])
        if not 0 <= threshold <= 1:
            raise NotMapped(f"threshold {threshold:g}: a judge's pass threshold is in 0..1")
        grader["pass_threshold"] = threshold
    return Check(
        kind, base, grader, "rubric", rubric, _shown(rubric), "", prompt=prompt, describe=describe
    )


def _levenshtein(
    kind: str, negated: bool, value: Any, raw: dict[str, Any], judge: JudgeFor
) -> Check:
    if negated:
        raise NotMapped(f"{kind} has no evalreg grader")
    reference = _reference(value, kind)
    threshold = _threshold(raw.get("threshold"), 5)
    if threshold < 0:
        raise NotMapped(
            f"threshold {threshold:g}: no edit distance is below 0, so promptfoo fails every output"
        )
    # promptfoo counts edits in JavaScript's UTF-16 code units
    most = math.floor(threshold)
    grader = {"type": "levenshtein"} | _RAW | {"utf16": True, "max_distance": most}
    return Check(kind, kind, grader, "value", reference, _shown(reference), "")


def _similar(kind: str, negated: bool, value: Any, raw: dict[str, Any], judge: JudgeFor) -> Check:
    if negated:
        raise NotMapped(f"{kind} has no evalreg grader")
    metric = kind.partition(":")[2] or "cosine"
    if metric != "cosine":
        raise NotMapped(
            f"{kind}: evalreg's similar grader compares by cosine similarity, not by {metric}"
        )
    several = isinstance(value, list) and value and all(isinstance(v, str) for v in value)
    if not several and not isinstance(value, str):
        raise NotMapped(f"{kind} needs a text value or a list of them")
    threshold = _threshold(raw.get("threshold"), 0.75)
    if not -1 <= threshold <= 1:
        every = "fails" if threshold > 1 else "passes"
        raise NotMapped(
            f"threshold {threshold:g}: a cosine similarity is in -1..1, so promptfoo {every} "
            "every output"
        )
    grader: dict[str, Any] = {
        "type": "similar",
        "embedder": judge(raw.get("provider"), embedding=True),
    }
    if threshold != 0.75:
        grader["threshold"] = threshold
    return Check(kind, "similar", grader, "value", value, _shown(value), "")


def _rouge(kind: str, negated: bool, value: Any, raw: dict[str, Any], judge: JudgeFor) -> Check:
    if negated:
        raise NotMapped(f"{kind} has no evalreg grader")
    reference = _reference(value, kind)
    grader = {"type": "rouge"} | _RAW | {"variant": "rouge1"}
    grader["threshold"] = _score_threshold(raw, 0.75, kind)
    return Check(kind, kind, grader, "value", reference, _shown(reference), "", note=ROUGE_NOTE)


def _bleu(kind: str, negated: bool, value: Any, raw: dict[str, Any], judge: JudgeFor) -> Check:
    if negated:
        raise NotMapped(f"{kind} has no evalreg grader")
    several = isinstance(value, list) and value and all(isinstance(v, str) for v in value)
    if not several and not isinstance(value, str):
        refused = "an empty list" if value == [] else _refused(value)
        raise NotMapped(f"{kind} needs a text or a list of texts: promptfoo refuses {refused}")
    # promptfoo lower-cases both texts and splits them at whitespace, as these options do
    grader = {"type": "bleu"} | _RAW | {"tokenize": "none", "ignore_case": True}
    grader["threshold"] = _score_threshold(raw, 0.5, kind)
    return Check(kind, kind, grader, "value", value, _shown(value), "", note=BLEU_NOTE)


def _reference(value: Any, kind: str) -> str:
    """The text a similarity assert compares with: promptfoo takes any string, even empty."""
    if not isinstance(value, str):
        raise NotMapped(f"{kind} needs a text value: promptfoo refuses {_refused(value)}")
    return value


def _threshold(threshold: Any, default: float | None = None) -> float:
    """An assert's ``threshold`` as a number; absent (None), promptfoo's ``default``.

    Raises:
        NotMapped: it is not a finite number.
    """
    if threshold is None and default is not None:
        return default
    if (
        isinstance(threshold, bool)
        or not isinstance(threshold, (int, float))
        or not math.isfinite(threshold)
    ):
        raise NotMapped(f"threshold {threshold!r} is not a number")
    return float(threshold)


def _score_threshold(raw: dict[str, Any], default: float, kind: str) -> float:
    """The threshold of an assert whose score is in 0..1 (absent: promptfoo's ``default``).

    Raises:
        NotMapped: it is not a number, or it is outside 0..1, where it decides nothing.
    """
    threshold = _threshold(raw.get("threshold"), default)
    if not 0 <= threshold <= 1:
        every = "fails" if threshold > 1 else "passes"
        raise NotMapped(
            f"threshold {threshold:g}: a {kind} score is in 0..1, so promptfoo {every} every output"
        )
    return threshold


def _schema(value: Any) -> dict[str, Any] | None:
    """The JSON schema an ``is-json`` value gives (None: any JSON)."""
    if value is None or value == "" or value is True:
        return None
    if isinstance(value, str):
        from ruamel.yaml import YAML
        from ruamel.yaml.error import YAMLError

        try:
            value = YAML(typ="safe", pure=True).load(value)
        except YAMLError:
            raise NotMapped("its schema is not YAML or JSON") from None
    if not isinstance(value, dict):
        raise NotMapped("its schema is not a JSON schema object")
    try:
        validator_for(value).check_schema(value)
    except SchemaError as exc:
        raise NotMapped(f"its schema is not a valid JSON schema ({exc.message})") from None
    return value


_MAKERS: dict[str, Maker] = {
    "equals": _equals,
    "contains": _contains,
    "icontains": _contains,
    "contains-all": _contains,
    "icontains-all": _contains,
    "contains-any": _contains,
    "icontains-any": _contains,
    "regex": _regex,
    "starts-with": _starts_with,
    "is-json": _json,
    "contains-json": _json,
    "llm-rubric": _judged,
    "factuality": _judged,
    "model-graded-factuality": _judged,
    "model-graded-closedqa": _judged,
    "levenshtein": _levenshtein,
    "similar": _similar,
    "similar:cosine": _similar,
    "similar:dot": _similar,
    "similar:euclidean": _similar,
    "rouge-n": _rouge,
    "bleu": _bleu,
}
_DESCRIBE = {
    "equals": "The output is exactly {v}",
    "not-equals": "The output is not exactly {v}",
    "contains": "The output contains {v}",
    "icontains": "The output contains {v}, ignoring case",
    "not-contains": "The output does not contain {v}",
    "not-icontains": "The output does not contain {v}, ignoring case",
    "contains-any": "The output contains at least one of {v}",
    "icontains-any": "The output contains at least one of {v}, ignoring case",
    "not-contains-all": "The output does not contain every one of {v}",
    "not-icontains-all": "The output does not contain every one of {v}, ignoring case",
    "regex": "The output matches the regular expression {v}",
    "not-regex": "The output does not match the regular expression {v}",
    "starts-with": "The output starts with {v}",
    "not-starts-with": "The output does not start with {v}",
    "is-json": "The output is valid JSON{v}",
    "contains-json": "The output contains valid JSON{v}",
    "levenshtein": "The output is within the allowed edit distance of {v}",
    "similar": "The output means nearly what {v} means (cosine similarity of embeddings)",
    "rouge-n": "The output shares enough words with {v} (ROUGE-1)",
    "bleu": "The output shares enough runs of words with {v} (BLEU)",
}
"""Criterion descriptions by check stem; ``{v}`` is the quoted value or where it is kept."""
