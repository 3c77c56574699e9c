"""Generate the importer fidelity corpus: the source tools' own decisions on fixed outputs.

Each row is one criterion as the source tool writes it, one model output, and the decision
the source tool itself reached. ``tests/test_importer_fidelity.py`` imports every row's
criterion with evalreg's importer, grades the output with evalreg's grader and requires
the same decision.

- promptfoo rows: promptfoo 0.121.20's ``assertions.runAssertion`` (its own assertion code)
  run by Node on each (assert, output) pair.
- OpenAI evals rows: the decision functions of its basic eval classes, read from a checkout
  of github.com/openai/evals (commit 4bfc1f58, "Remove incontext_rl suite ..."): ``Match``
  (``evals.api.record_and_check_match``), ``Includes`` (``evals.elsuite.utils.get_answer``),
  ``FuzzyMatch`` (``evals.elsuite.utils.fuzzy_match``) and ``JsonMatch``
  (``evals.elsuite.basic.json_match.json_match`` after ``json.loads``). The functions are
  taken from the source files by name and run as they are; importing the ``evals``
  package itself would need its model clients.

Regenerate (Node 20 and Python 3.11+)::

    mkdir -p /tmp/pf && cd /tmp/pf && npm init -y && npm install promptfoo@0.121.20
    git clone https://github.com/openai/evals /tmp/openai-evals
    git -C /tmp/openai-evals checkout 4bfc1f58
    .venv/bin/python tests/support/fidelity_corpus.py --promptfoo /tmp/pf \\
        --openai-evals /tmp/openai-evals --out tests/data/importers/fidelity

The output is deterministic: the same tool versions give the same bytes.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import string
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

PROMPTFOO_VERSION = "0.121.20"
OPENAI_EVALS_COMMIT = "4bfc1f58"

# ------------------------------------------------------------------ outputs the asserts meet
_TEXT_OUTPUTS = [
    "Paris",
    "Paris\n",
    " Paris",
    "paris",
    "PARIS",
    "The capital is Paris.",
    "",
    "   ",
    "Straße",
    "STRASSE",
    "strasse",
    "İstanbul",
    "istanbul",
    "café",
    "cafe\u0301",
    "ＡＢＣ",
    "line one\nline two\n",
    "line one\r\nline two",
    "Answer: 42",
    "Answer: ٤٢",
    "42",
    "42.0",
    " algorithm and data",
    "the algorithm",
    "yes",
    "Yes, of course.",
    "No.",
    "time.",
    "tab\there",
    "naïve résumé",
    "emoji 🙂 ok",
    "end$",
    "a.b",
    "ends with newline\n",
    "\u00a0nbsp",
    "true",
    "1",
    "costs 1.5 euros",
]
_JSON_OUTPUTS = [
    '{"color": "yellow"}',
    '{"color":"yellow"}',
    ' {"color": "yellow"}\n',
    '{"color": "yellow", "size": 3}',
    'Here it is: {"color": "yellow"}',
    '```json\n{"color": "yellow"}\n```',
    '{"color": "Yellow"}',
    '{"size": 3, "color": "yellow"}',
    '{"size": 3.0}',
    '{"size": "3"}',
    '{"ok": true}',
    '{"ok": 1}',
    "[1, 2, 3]",
    "[3, 2, 1]",
    "null",
    "42",
    '"text"',
    "{'color': 'yellow'}",
    '{"color": "yellow",}',
    '{"a": NaN}',
    "not json",
    "",
    '{"color": "yellow"} {"size": 3}',
    'first {"size": "big"} then {"size": 3}',
    '{"nested": {"color": "yellow"}}',
    '{"name": "Zoë", "tags": ["a", "b"]}',
    '\ufeff{"color": "yellow"}',
    '{"text": "a } brace"}',
]

_SCHEMA = {
    "type": "object",
    "required": ["color"],
    "properties": {"color": {"type": "string", "enum": ["yellow", "red"]}},
}
_SIZE_SCHEMA = {
    "type": "object",
    "required": ["size"],
    "properties": {"size": {"type": "integer"}},
}

_TEXT_ASSERTS: list[dict[str, Any]] = [
    {"type": "equals", "value": "Paris"},
    {"type": "equals", "value": "42"},
    {"type": "equals", "value": ""},
    {"type": "equals", "value": 42},
    {"type": "equals", "value": 1.0},
    {"type": "equals", "value": True},
    {"type": "contains", "value": 1.5},
    {"type": "not-equals", "value": "Paris"},
    {"type": "contains", "value": "Paris"},
    {"type": "contains", "value": " algorithm"},
    {"type": "contains", "value": "ß"},
    {"type": "contains", "value": "\n"},
    {"type": "contains", "value": 42},
    {"type": "icontains", "value": "paris"},
    {"type": "icontains", "value": "strasse"},
    {"type": "icontains", "value": "STRASSE"},
    {"type": "icontains", "value": "istanbul"},
    {"type": "icontains", "value": "CAFÉ"},
    {"type": "not-contains", "value": "Paris"},
    {"type": "not-icontains", "value": "paris"},
    {"type": "not-icontains", "value": "strasse"},
    {"type": "contains-all", "value": ["line one", "line two"]},
    {"type": "contains-all", "value": "line one, line two"},
    {"type": "icontains-all", "value": ["PARIS", "capital"]},
    {"type": "contains-any", "value": ["Paris", "London"]},
    {"type": "contains-any", "value": 'yes, "No."'},
    {"type": "icontains-any", "value": ["yes", "no"]},
    {"type": "icontains-any", "value": ["strasse", "zzz"]},
    {"type": "not-contains-any", "value": ["Paris", "42"]},
    {"type": "not-icontains-any", "value": ["PARIS", "yes"]},
    {"type": "not-contains-all", "value": ["line one", "line two"]},
    {"type": "not-icontains-all", "value": ["paris", "capital"]},
    {"type": "starts-with", "value": "Paris"},
    {"type": "starts-with", "value": "The"},
    {"type": "starts-with", "value": "line one\n"},
    {"type": "not-starts-with", "value": "Paris"},
    {"type": "regex", "value": "^Paris$"},
    {"type": "regex", "value": "Paris$"},
    {"type": "regex", "value": "^\\s*Paris"},
    {"type": "regex", "value": "\\d+"},
    {"type": "regex", "value": "^\\d+$"},
    {"type": "regex", "value": "\\w+é"},
    {"type": "regex", "value": "\\bParis\\b"},
    {"type": "regex", "value": "end\\$"},
    {"type": "regex", "value": "[$]$"},
    {"type": "regex", "value": "^\\s+\\S"},
    {"type": "regex", "value": "^$"},
    {"type": "regex", "value": "one.line"},
    {"type": "regex", "value": "(?:yes|no)"},
    {"type": "not-regex", "value": "\\d"},
    {"type": "not-regex", "value": "^\\s"},
]
_JSON_ASSERTS: list[dict[str, Any]] = [
    {"type": "is-json"},
    {"type": "is-json", "value": _SCHEMA},
    {"type": "is-json", "value": _SIZE_SCHEMA},
    {"type": "contains-json"},
    {"type": "contains-json", "value": _SCHEMA},
    {"type": "contains-json", "value": _SIZE_SCHEMA},
    {"type": "equals", "value": {"color": "yellow"}},
    {"type": "equals", "value": {"size": 3}},
    {"type": "equals", "value": [1, 2, 3]},
    {"type": "contains", "value": '"color": "yellow"'},
    {"type": "contains", "value": '"color":"yellow"'},
    {"type": "icontains", "value": '"COLOR": "YELLOW"'},
    {"type": "not-contains", "value": "yellow"},
    {"type": "starts-with", "value": "{"},
    {"type": "regex", "value": '"size":\\s*3\\b'},
]

_UNMAPPED_ASSERTS: list[dict[str, Any]] = [
    {"type": "levenshtein", "value": "Paris", "threshold": 2},
    {"type": "javascript", "value": "output.length > 3"},
    {"type": "not-is-json"},
    {"type": "not-equals", "value": {"color": "yellow"}},
]
"""Asserts the importer lists as not mapped: the test counts them with their reasons."""

_RUNNER = """
import { assertions } from 'promptfoo';
import { readFileSync } from 'node:fs';
const cases = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const out = [];
for (const c of cases) {
  const r = await assertions.runAssertion({
    prompt: 'prompt', assertion: c.assert, test: {vars: {}, assert: [c.assert]},
    providerResponse: {output: c.output},
  });
  out.push(r.pass);
}
process.stdout.write(JSON.stringify(out));
"""


def promptfoo_rows(promptfoo_dir: Path) -> list[dict[str, Any]]:
    """Every (assert, output) pair of the text and JSON sets, with promptfoo's decision."""
    cases = [{"assert": a, "output": o} for a in _TEXT_ASSERTS for o in _TEXT_OUTPUTS]
    cases += [{"assert": a, "output": o} for a in _JSON_ASSERTS for o in _JSON_OUTPUTS]
    cases += [{"assert": a, "output": o} for a in _UNMAPPED_ASSERTS for o in _JSON_OUTPUTS[:5]]
    with tempfile.TemporaryDirectory(dir=promptfoo_dir) as tmp:
        runner = Path(tmp) / "run.mjs"
        runner.write_text(_RUNNER, encoding="utf-8")
        data = Path(tmp) / "cases.json"
        data.write_text(json.dumps(cases), encoding="utf-8")
        done = subprocess.run(
            ["node", str(runner), str(data)],
            cwd=promptfoo_dir,
            capture_output=True,
            text=True,
            check=True,
        )
    decisions = json.loads(done.stdout)
    return [case | {"pass": bool(p)} for case, p in zip(cases, decisions, strict=True)]


# ------------------------------------------------------------------ OpenAI evals
_SAMPLES: list[tuple[Any, list[str]]] = [
    ("time", ["time", "time.", " time", "Time", "times", "It is time", ""]),
    (["Season 11", "11"], ["11", "Season 11", "season 11", "Season 1", "11th", " 11"]),
    ("Paris", ["Paris", "paris", "The answer is Paris.", "Paris\n", "PARIS!", "a Paris", "Lyon"]),
    ("The Beatles", ["Beatles", "the beatles", "The Beatles!", "Beatles, The", "Rolling Stones"]),
    ("an apple", ["apple", "An Apple.", "the apple", "a", ""]),
    ("", ["", "anything", " "]),
    ("Straße", ["Straße", "strasse", "STRASSE", "Straße."]),
    ("café", ["café", "cafe", "Café!", "cafe\u0301"]),
    (["B", "(B)"], ["B", "(B)", "B) because", "b", "C", "A or B"]),
    ("42", ["42", "42.0", "Answer: 42", "4 2", "The answer is 42."]),
    ("don't", ["dont", "do not", "Don't!", "don't."]),
]
_JSON_SAMPLES: list[tuple[Any, list[str]]] = [
    ('{"a": 1}', ['{"a": 1}', '{"a":1.0}', ' {"a": 1} ', '{"a": true}', '{"a": 1, "b": null}']),
    (
        '{"a": 1}',
        ['```json\n{"a": 1}\n```', 'Sure: {"a": 1}', '{"a": "1"}', "", '{"a": NaN}', "{'a': 1}"],
    ),
    (['{"a": [1, 2]}', '{"a": [2, 1]}'], ['{"a": [2, 1]}', '{"a": [1, 2, 3]}', '{"a": [1, 2]}']),
    ('{"k": null}', ['{"k": null}', "{}", '{"k": 0}']),
    ('{"x": {"y": "z"}}', ['{"x": {"y": "z"}}', '{"x": {"y": "Z"}}', '{"x": {}}']),
]


def _functions(path: Path, names: set[str], namespace: dict[str, Any]) -> dict[str, Any]:
    """The top-level functions ``names`` of the Python file ``path``, run in ``namespace``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    picked = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in names]
    missing = names - {n.name for n in picked}
    if missing:
        raise SystemExit(f"{path}: no function {', '.join(sorted(missing))}")
    module = ast.Module(body=list(picked), type_ignores=[])
    exec(compile(module, str(path), "exec"), namespace)  # the source tool's own code
    return {name: namespace[name] for name in names}


def openai_evals_rows(checkout: Path) -> list[dict[str, Any]]:
    """Each basic eval class's decision on each (ideal, output) pair, by its own functions."""
    from typing import Optional, Union

    common: dict[str, Any] = {
        "re": re,
        "string": string,
        "json": json,
        "Any": Any,
        "Callable": Callable,
        "Optional": Optional,
        "Union": Union,
        "record_match": lambda *args, **kwargs: None,
    }
    utils = _functions(
        checkout / "evals/elsuite/utils.py", {"get_answer", "normalize", "fuzzy_match"}, common
    )
    api = _functions(checkout / "evals/api.py", {"record_and_check_match"}, dict(common))
    match_json = _functions(
        checkout / "evals/elsuite/basic/json_match.py",
        {"json_match"},
        dict(common) | {"cast": lambda _t, v: v, "Mapping": dict, "List": list},
    )["json_match"]

    def match(ideal: Any, sampled: str) -> bool:  # Match.eval_sample
        picked = api["record_and_check_match"](prompt="", sampled=sampled, expected=ideal)
        return picked is not None

    def includes(ideal: Any, sampled: str) -> bool:  # Includes.eval_sample, ignore_case=False
        ideals = ideal if isinstance(ideal, list) else [ideal]
        return any(utils["get_answer"](sampled, ref, False) is not None for ref in ideals)

    def fuzzy(ideal: Any, sampled: str) -> bool:  # FuzzyMatch.eval_sample
        ideals = ideal if isinstance(ideal, list) else [ideal]
        return True in [utils["fuzzy_match"](sampled, ref) for ref in ideals]

    def json_match(ideal: Any, sampled: str) -> bool:  # JsonMatch.eval_sample
        ideals = ideal if isinstance(ideal, list) else [ideal]
        try:
            sampled_json = json.loads(sampled)
        except ValueError:
            sampled_json = None
        return True in [match_json(sampled_json, json.loads(ref)) for ref in ideals]

    rows: list[dict[str, Any]] = []
    for kind, decide in (("match", match), ("includes", includes), ("fuzzy_match", fuzzy)):
        for ideal, outputs in _SAMPLES:
            for output in outputs:
                rows.append({"eval": kind, "ideal": ideal, "output": output})
                rows[-1]["pass"] = bool(decide(ideal, output))
    for ideal, outputs in _JSON_SAMPLES:
        for output in outputs:
            row = {"eval": "json_match", "ideal": ideal, "output": output}
            rows.append(row | {"pass": bool(json_match(ideal, output))})
    return rows


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    lines = [json.dumps(row, ensure_ascii=False, sort_keys=True) for row in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--promptfoo", type=Path, required=True, help="dir with promptfoo installed"
    )
    parser.add_argument("--openai-evals", type=Path, required=True, help="openai/evals checkout")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    installed = json.loads(
        (args.promptfoo / "node_modules/promptfoo/package.json").read_text(encoding="utf-8")
    )["version"]
    if installed != PROMPTFOO_VERSION:
        print(f"promptfoo {installed} installed; the corpus is of {PROMPTFOO_VERSION}")
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    write_jsonl(args.out / "promptfoo.jsonl", promptfoo_rows(args.promptfoo.resolve()))
    write_jsonl(args.out / "openai_evals.jsonl", openai_evals_rows(args.openai_evals))
    return 0


if __name__ == "__main__":
    sys.exit(main())
