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

Without ``--openai-evals`` only ``promptfoo.jsonl`` is written. The output is deterministic:
the same tool versions give the same bytes.

A promptfoo row holds the decision (``pass``) or, for an assert promptfoo refuses by
throwing, the first line of its error (``error``). The regular expression rows cross
JavaScript patterns with outputs that tell JavaScript's semantics from Python's (the
``regex`` assert is ``new RegExp(value).test(output)``, no flags; an invalid pattern fails
every output, ``not-regex`` included). A ``rouge-n`` or ``bleu`` row also holds promptfoo's
score (``score``): evalreg grades them with other implementations of the metrics, so the
test measures how far apart they are rather than requiring agreement.
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

_JSON_LEVENSHTEIN: dict[str, Any] = {"type": "levenshtein", "value": "Paris", "threshold": 2}
"""An edit distance from JSON outputs, its rows before those of ``_UNMAPPED_ASSERTS``."""
_UNMAPPED_ASSERTS: list[dict[str, Any]] = [
    {"type": "javascript", "value": "output.length > 3"},
    {"type": "not-is-json"},
    {"type": "not-equals", "value": {"color": "yellow"}},
]
"""Asserts the importer lists as not mapped: the test counts them with their reasons."""

_REGEX_OUTPUTS = [
    "",
    "abc",
    "abc\n",
    "abc\r\n",
    "\nabc",
    "ABC",
    "a\nb",
    "a\rb",
    "a\u2028b",
    "a\u0085b",
    "Z",
    "a{,3}",
    "aaa",
    "aa\n",
    "uuu",
    "p{L}",
    "{foo}",
    "a]",
    "k<n>",
    "٣",
    "42",
    "é",
    "É",
    "\u00a0",
    " \t",
    "\u000b\u000c",
    "\ufeff",
    "\u180e",
    "\x00",
    "\x08",
    "\x1f",
    "\\c1",
    "\\",
    "foo_bar baz",
    "Hello, World!",
    "2024-01-31",
    "/Paris/i",
    "abab",
    "ac",
    "🙂",
    "a🙂b",
]
"""Outputs that tell JavaScript's regular expressions from Python's: line terminators and
a final newline, Unicode digits, letters and spaces, the literal text of JavaScript's
literal braces and identity escapes, control characters, characters beyond U+FFFF."""
_REGEX_PATTERNS = [
    # braces that quantify nothing are literal text; a quantifier needs digits
    "a{,3}", "^a{,3}$", "a{2}", "a{2,}", "^a{1,2}$", "^a{0}$", "a{02}", "a{", "a{1", "a{1,",
    "{foo}", "a{ 2}", "{,}", "}", "]", "a]", "\\u{3}", "^\\u{3}$", "\\u{61}", "\\x{41}",
    "\\p{L}", "\\P{L}", "[\\p{L}]",
    # anchors: the start and the very end only
    "^abc$", "abc$", "^abc", "c$", "^$", "$", "^", "c\\n$", "^abc\\n$", "^.*$", "^.+$",
    "^[\\s\\S]*$", "c$|^a", "(?:^|b)c", "a^", "$a", "^^a", "c$$", "(?:c$)+",
    # identity escapes that Python reads as something else
    "\\Z", "c\\Z", "\\A", "\\z", "\\e", "\\a", "\\g", "\\N", "\\U", "\\L", "\\E", "\\G",
    "\\h", "\\R", "\\X", "\\K", "\\Q", "\\y", "\\i", "\\l", "\\m", "\\o", "\\q", "\\/",
    "\\-", "\\ ", "\\%", "\\_", "\\.", "\\$", "\\[", "\\]", "\\{", "\\}", "\\|", "\\\\",
    "\\é", "\\\u00a0",
    # control, null, octal and back references
    "\\cJ", "\\cj", "\\ca", "\\c1", "\\c", "\\c_", "\\c[", "a\\c", "[\\c1]", "[\\c_]",
    "[\\c]", "[\\cA]", "\\0", "\\00", "\\01", "\\08", "\\1", "\\2", "\\10", "\\12",
    "\\101", "\\141", "\\400", "\\777", "\\8", "\\9", "\\18", "(a)\\1", "(a)\\2",
    "(a)\\12", "(a)\\18", "(a)(b)\\2", "(a)\\01", "(a)\\8", "[\\0]", "[\\1]", "[\\8]",
    "[\\101]", "(a)(b)(c)(d)(e)(f)(g)(h)(i)\\10", "(a)(b)(c)(d)(e)(f)(g)(h)(i)(j)\\10",
    # hexadecimal and Unicode escapes
    "\\x41", "\\x4", "\\x", "\\xg1", "\\u0041", "\\u004", "\\u", "\\u00e9", "\\u00C9",
    "\\u0663", "\\u2028", "\\uFEFF", "[\\u0041-\\u005A]", "\\u00a0", "\\x00", "\\x1F",
    # \d, \w and \b are ASCII; \s is JavaScript's own set of spaces
    "\\d", "^\\d$", "\\D", "^\\D$", "\\w", "^\\w+$", "\\W", "^\\W$", "\\bab", "\\Bb",
    "\\B", "^\\B$", "\\b", "é\\b", "\\bé", "\\b\\w+\\b", "\\s", "^\\s$", "\\S", "^\\S+$",
    "^\\s+$", "[\\s]", "[\\S]", "[^\\s]", "[\\d\\s]", "[^\\d]", "[\\w-]", "[\\d-z]",
    "[a-\\d]", "[\\s-\\d]", "[\\b]", "[\\B]", "[\\-]", "[a\\-z]", "[a-]", "[-a]",
    "[--0]", "[a-c-e]", "[^\\W]", "[\\W\\w]", "[\\t\\v\\f]", "\\v", "\\f", "\\t",
    "\\u180e", "\\u3000",
    # ., line terminators and the empty classes
    ".", "^.$", "a.b", "a.*b", "^.{3}$", "[^]", "^[^]$", "a[^]b", "[]", "a[]", "[]*a",
    "[^]*", "[\\s\\S]", "a[^\\n]b", "[\\n]", "\\r\\n", "\\n", "\\r", "\\u0085",
    "[\\u2028\\u2029]", "a\\nb", "a.?b", "^.?$",
    # character classes
    "[\\u0000-\\uFFFF]", "^[\\x00-\\x7F]+$", "[^\\x00-\\x7F]", "[A-z]", "[à-ÿ]",
    "[\\u0600-\\u06FF]", "[٠-٩]", "^[0-9]+$", "[$]", "[.]", "[\\^]", "[^^]", "[]a]",
    "[^]a]", "[[]", "[a[]", "[\\]]", "[&&]", "[~~]", "[||]", "[a-a]", "[\\\\]",
    # groups, named groups and back references
    "(?<n>a)\\k<n>", "(?<n>a)|\\k<n>", "\\k<n>(?<n>a)", "\\k<n>", "^\\k<n>$", "\\k",
    "(?<n>a)\\k", "(?<n>a)\\k<m>", "(?<$x>a)\\k<$x>", "(?<a1>a)\\1", "(?<1a>a)",
    "(?<é>a)\\k<é>", "(?<\\u0061>a)\\k<a>", "(?<n>a)[\\k]", "[\\k]", "(a)|\\1b", "\\1(a)",
    "(a\\1)", "(a)?\\1b", "(?:(a)|b)\\1", "(?:(a)|b)+\\1", "(a|b)+\\1", "(a?)+\\1",
    "(a*)\\1", "([\"'])\\w+\\1", "(\\w)\\1", "(?=(a))\\1", "(?!(a)b)\\1", "(?=(a))*\\1",
    "(?=(a))?\\1", "(?:a|(b))\\1c", "(?:)", "()", "(?:)+", "a||b", "|", "(|a)",
    # lookarounds, and the lookaheads Annex B lets a quantifier repeat
    "a(?=b)", "a(?!b)", "(?<=a)b", "(?<!a)b", "(?<=a+)b", "(?<=a|bc)d", "(?<=ab|cd)e",
    "(?<=^)a", "(?<=\\d{2})4", "(?<=(a))b\\1", "(?<=\\1(a))b", "(?=a)*", "(?=a)?b",
    "(?=a){2}", "(?=a)+", "(?!a)*b", "(?<=a)c", "(?<![\\s\\S])a", "a(?![^])",
    # quantifiers
    "a*?", "a+?", "a??", "a{2}?", "a{,3}?", "^a{2,3}$", "a{2,3}?c", "(?:ab)+", "(?:ab){2}",
    # invalid patterns: promptfoo fails every output
    "(", ")", "[", "a[b", "\\", "(?", "(?P<n>a)", "(?#c)", "(?i)a", "a)", "[b-a]",
    "(?<n>a)(?<n>b)", "(?<>a)", "x{2,1}", "{1}", "a{1}{2}", "(?<=a)?", "^*", "$+", "\\b*",
    "\\B{2}", "a**", "*a", "+", "?", "a|*", "a???", "[a--b]",
    # ECMAScript 2025 syntax that Node 20 rejects
    "(?i:a)", "(?-i:a)", "(?im-s:a)", "(?<a>x)|(?<a>y)",
    # characters beyond U+FFFF, which JavaScript reads as two UTF-16 code units
    "🙂", "^🙂$", "a🙂b", "\\uD83D\\uDE42", "🙂+", "[🙂]", "[^🙂]", "\\uD83D", "\\uDE42",
    "[\\uD800-\\uDFFF]",
    # promptfoo neither reads /slashes/ nor flags: the text is the pattern
    "/Paris/i", "/abc/", "^/",
    # Nunjucks renders a value first: a comment disappears
    "a{#b#}c",
    # patterns as configurations write them
    "^\\d{4}-\\d{2}-\\d{2}$", "^[A-Z][a-z]+", "\\b(yes|no)\\b", "^(?:yes|no)$", "^\\s*$",
    "\\S+@\\S+\\.\\S+", "^\\{.*\\}$", "^(?!.*error).*$", "^(?=.*\\d)(?=.*[a-z]).+$",
    "colou?r", "\\$\\d+", "^-?\\d+$", "^Hello, \\w+!$", "(\\d{4})-(\\d{2})-\\2",
    "^(\\w+)\\s\\1$", "[,!]",
]  # fmt: skip
"""JavaScript patterns, each crossed with every output of ``_REGEX_OUTPUTS``."""
_NOT_REGEX_PATTERNS = [
    "a{,3}", "\\Z", "$", "c$", "\\d", "\\s", ".", "[^]", "[]", "(?<n>a)\\k<n>", "\\k<n>",
    "\\cJ", "\\8", "(?<=a+)b", "x{2,1}", "(?i:a)", "^.$", "\\B",
]  # fmt: skip
"""Patterns also asserted absent (``not-regex``), crossed with every output."""
_ERROR_ASSERTS: list[dict[str, Any]] = [
    {"type": "regex", "value": ""},
    {"type": "not-regex", "value": ""},
    {"type": "regex", "value": 5},
    {"type": "starts-with", "value": ""},
    {"type": "not-starts-with", "value": ""},
    {"type": "starts-with", "value": 5},
    {"type": "regex", "value": "a{#b"},
]
"""Asserts promptfoo refuses (it throws): the importer must refuse them too."""

_SENTENCES = [
    "The cat sat on the mat.",
    "The cat sat on the mat",
    "the cat sat on the mat.",
    "THE CAT SAT ON THE MAT.",
    "The cat\nsat on the mat.",
    "The dog sat on the mat.",
    "The cat was sitting on the mat.",
    "On the mat the cat sat.",
    "The cat sat on mat.",
    "The cat sat.",
    "The small cat sat.",
    "cat",
    "Dogs run in the park.",
    "The the the the the the.",
    "The cat sat on the mat. The cat sat on the mat.",
    "🙂 The cat sat on the mat.",
    '{"answer": "The cat sat on the mat."}',
    "Paris is the capital of France.",
    "The capital of France is Paris.",
    "paris is the capital of france",
    "It's Paris, the capital of France!",
    "Paris.",
    "The quick brown fox jumps over the lazy dog.",
    "The quick brown dog jumps on the log.",
    "Refunds take 5 to 7 business days.",
    "Refunds take 5-7 business days.",
    "Refunds take five to seven business days.",
    "Your refund will arrive in 5 to 7 business days.",
    "We cannot process your refund until the item is returned.",
    "We can't process your refund until the item's returned.",
    "Das Paket kommt am Montag an.",
    "Das Paket kommt Montag.",
    "Le café est fermé le dimanche.",
    "Le cafe est ferme le dimanche.",
    "",
    "   ",
]
"""Outputs the similarity asserts meet: the sentences of promptfoo's own BLEU tests and
rouge-score's README, their near misses (case, punctuation, order, contractions, words
repeated, other scripts, accents), and the empty output."""
_REFERENCES = [
    "The cat sat on the mat.",
    "Paris is the capital of France.",
    "The quick brown fox jumps over the lazy dog",
    "Refunds take 5 to 7 business days.",
    "We can't process your refund until the item is returned.",
    "Das Paket kommt am Montag an.",
    "Le café est fermé le dimanche.",
]
_CATS = "The cat sat on the mat."
_SIMILARITY_ASSERTS: list[dict[str, Any]] = [
    *({"type": "rouge-n", "value": r} for r in _REFERENCES),
    {"type": "rouge-n", "value": _CATS, "threshold": 0.5},
    {"type": "rouge-n", "value": "Paris is the capital of France.", "threshold": 0.9},
    {"type": "rouge-n", "value": _REFERENCES[2], "threshold": 0.6},
    *({"type": "bleu", "value": r} for r in _REFERENCES),
    {
        "type": "bleu",
        "value": [_CATS, "There is a cat on the mat.", "A cat is sitting on the mat."],
    },
    {"type": "bleu", "value": ["The cat sat on mat.", "Cat mat.", "A cat is sitting on a mat."]},
    {
        "type": "bleu",
        "value": ["The small cat sat.", "A cat was sitting.", "The cat is on the mat."],
    },
    {"type": "bleu", "value": _CATS, "threshold": 0.8},
    {"type": "bleu", "value": "Paris is the capital of France.", "threshold": 0.3},
]
"""``rouge-n`` and ``bleu`` asserts (promptfoo's defaults: 0.75 and 0.5), each crossed with
every sentence; their rows keep promptfoo's score too, as the metrics are not the same."""
_LEVENSHTEIN_ASSERTS: list[dict[str, Any]] = [
    {"type": "levenshtein", "value": "Paris"},
    {"type": "levenshtein", "value": "Paris", "threshold": 0},
    {"type": "levenshtein", "value": "Paris", "threshold": 1},
    {"type": "levenshtein", "value": "paris", "threshold": 2.5},
    {"type": "levenshtein", "value": "The capital is Paris.", "threshold": 3},
    {"type": "levenshtein", "value": "", "threshold": 3},
    {"type": "levenshtein", "value": "Straße", "threshold": 1},
    {"type": "levenshtein", "value": "café", "threshold": 1},
    {"type": "levenshtein", "value": "emoji 🙂 ok", "threshold": 1},
    {"type": "levenshtein", "value": "🙂", "threshold": 1},
    {"type": "levenshtein", "value": "line one\nline two", "threshold": 2},
    {"type": "levenshtein", "value": _CATS, "threshold": 10},
]
"""Edit distances, crossed with the text outputs and the sentences: JavaScript counts a
character beyond U+FFFF as two, and a threshold that is not whole bounds the distance."""
_SIMILARITY_REFUSED: list[dict[str, Any]] = [
    {"type": "levenshtein", "value": 5},
    {"type": "rouge-n", "value": ["Paris"]},
    {"type": "bleu", "value": []},
    {"type": "bleu", "value": 5},
    {"type": "levenshtein", "value": "Paris", "threshold": -1},
    {"type": "rouge-n", "value": "Paris", "threshold": 1.5},
    {"type": "bleu", "value": "Paris", "threshold": -0.5},
    {"type": "not-levenshtein", "value": "Paris"},
    {"type": "not-rouge-n", "value": "Paris"},
    {"type": "not-bleu", "value": "Paris"},
]
"""Similarity asserts promptfoo refuses (a value of the wrong type) or that decide nothing
(a threshold no score reaches, or every score does), and the negated forms: the importer
maps none of them."""

_RUNNER = """
import { assertions } from 'promptfoo';
import { readFileSync } from 'node:fs';
const cases = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const scored = new Set(['rouge-n', 'bleu']);
const out = [];
for (const c of cases) {
  try {
    const r = await assertions.runAssertion({
      prompt: 'prompt', assertion: c.assert, test: {vars: {}, assert: [c.assert]},
      providerResponse: {output: c.output},
    });
    out.push(scored.has(c.assert.type) ? {pass: r.pass, score: r.score} : {pass: r.pass});
  } catch (e) {
    out.push({error: String(e.message).split('\\n')[0]});
  }
}
process.stdout.write(JSON.stringify(out));
"""
"""Runs each case's assert on its output (read from a JSON file, so every output reaches
promptfoo exactly as written: no argument quoting, no provider trimming it). An assert
promptfoo refuses throws; the first line of its message is kept. ``rouge-n`` and ``bleu``
rows keep promptfoo's score beside its decision."""


def promptfoo_cases() -> list[dict[str, Any]]:
    """Every (assert, output) pair: the text, JSON, regular expression and refused sets, then
    the similarity sets (edit distance, ROUGE, BLEU)."""
    cases = [{"assert": a, "output": o} for a in _TEXT_ASSERTS for o in _TEXT_OUTPUTS]
    cases += [{"assert": a, "output": o} for a in _JSON_ASSERTS for o in _JSON_OUTPUTS]
    unmapped = [_JSON_LEVENSHTEIN, *_UNMAPPED_ASSERTS]
    cases += [{"assert": a, "output": o} for a in unmapped for o in _JSON_OUTPUTS[:5]]
    for kind, patterns in (("regex", _REGEX_PATTERNS), ("not-regex", _NOT_REGEX_PATTERNS)):
        asserts = [{"type": kind, "value": p} for p in patterns]
        cases += [{"assert": a, "output": o} for a in asserts for o in _REGEX_OUTPUTS]
    cases += [{"assert": a, "output": o} for a in _ERROR_ASSERTS for o in _REGEX_OUTPUTS[:3]]
    texts = _TEXT_OUTPUTS + _SENTENCES
    cases += [{"assert": a, "output": o} for a in _LEVENSHTEIN_ASSERTS for o in texts]
    cases += [{"assert": a, "output": o} for a in _SIMILARITY_ASSERTS for o in _SENTENCES]
    cases += [{"assert": a, "output": o} for a in _SIMILARITY_REFUSED for o in _SENTENCES[:3]]
    return cases


def promptfoo_rows(promptfoo_dir: Path) -> list[dict[str, Any]]:
    """Every case with promptfoo's decision (``pass``), or the error it throws (``error``)."""
    cases = promptfoo_cases()
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
    results = json.loads(done.stdout)
    return [case | result for case, result in zip(cases, results, strict=True)]


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
    parser.add_argument(
        "--openai-evals", type=Path, help="openai/evals checkout (absent: keep its corpus)"
    )
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
    if args.openai_evals is not None:
        write_jsonl(args.out / "openai_evals.jsonl", openai_evals_rows(args.openai_evals))
    return 0


if __name__ == "__main__":
    sys.exit(main())
