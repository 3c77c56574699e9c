"""Every grader type: passing, failing, and the edges where grading must stay total."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
from pydantic import TypeAdapter

from evalreg.graders import GRADER_VERSION, GradingContext, Verdict, build_grader
from evalreg.graders._json import quick_check
from evalreg.graders.parsing import parse_output
from evalreg.registry import schema

GRADER: TypeAdapter[Any] = TypeAdapter(schema.Grader)
JSON = schema.Output(parser="json")
TEXT = schema.Output(parser="text")
NO_CONTEXT = GradingContext(output_schema=None, root=None)


def grade(
    config: dict[str, Any],
    output: str,
    expected: Any = None,
    *,
    parser: schema.Output = JSON,
    ctx: GradingContext = NO_CONTEXT,
    item_input: dict[str, Any] | None = None,
) -> Verdict:
    """Build the grader from a rubric-shaped dict and grade one output of one item."""
    fn = build_grader(GRADER.validate_python(config), ctx)
    item = schema.Item(id="item-1", input=item_input or {}, expected=expected)
    return fn(parse_output(output, parser), item)


# ---------------------------------------------------------------- registry


def test_grader_version_is_a_string_for_fingerprints() -> None:
    assert isinstance(GRADER_VERSION, str) and GRADER_VERSION


@pytest.mark.parametrize(
    "config",
    [
        {"type": "llm_judge", "judge": "judge-pin", "prompt": "Rate it.", "prompt_version": "1"},
        {"type": "human", "file": "grades/human.jsonl"},
    ],
)
def test_judge_and_human_graders_are_not_built_locally(config: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="needs a judge or human grades"):
        build_grader(GRADER.validate_python(config), NO_CONTEXT)


# ---------------------------------------------------------------- exact


def test_exact_field_passes_on_the_items_expected_value() -> None:
    verdict = grade(
        {"type": "exact", "field": "label"}, '{"label": "billing"}', {"label": "billing"}
    )
    assert verdict == Verdict(True, 1.0, "matched 'billing'")


def test_exact_failure_names_expected_and_actual() -> None:
    verdict = grade(
        {"type": "exact", "field": "label"}, '{"label": "technical"}', {"label": "billing"}
    )
    assert verdict == Verdict(False, 0.0, "expected 'billing', got 'technical'")


def test_exact_literal_value_overrides_item_expected() -> None:
    config = {"type": "exact", "field": "label", "value": "billing"}
    assert grade(config, '{"label": "billing"}', {"label": "other"}).passed


def test_exact_whole_text_output_against_scalar_expected() -> None:
    assert grade({"type": "exact"}, "  billing\n", "billing", parser=TEXT).passed


def test_exact_whole_json_output_against_whole_expected_object() -> None:
    assert grade({"type": "exact"}, '{"b": 2, "a": 1}', {"a": 1, "b": 2}).passed


def test_exact_is_case_sensitive_by_default() -> None:
    assert not grade({"type": "exact"}, "Billing", "billing", parser=TEXT).passed


def test_exact_ignore_case_folds_nested_strings() -> None:
    config = {"type": "exact", "ignore_case": True}
    assert grade(config, '{"tags": ["STRASSE"]}', {"tags": ["straße"]}).passed


def test_exact_distinguishes_true_from_one() -> None:
    assert not grade({"type": "exact", "field": "x"}, '{"x": true}', {"x": 1}).passed


def test_exact_treats_integer_and_float_as_one_number() -> None:
    assert grade({"type": "exact", "field": "x"}, '{"x": 1.0}', {"x": 1}).passed


def test_exact_expected_field_differs_from_output_field() -> None:
    config = {"type": "exact", "field": "label", "expected_field": "gold"}
    assert grade(config, '{"label": "billing"}', {"gold": "billing"}).passed


def test_exact_truncates_long_values_in_detail() -> None:
    long = "x" * 200
    verdict = grade({"type": "exact"}, long, "short", parser=TEXT)
    assert verdict.detail == f"expected 'short', got '{'x' * 77}...'"


# ---------------------------------------------------------------- field paths and data problems


def test_dotted_path_indexes_lists() -> None:
    output = '{"a": {"b": [{"c": "first"}, {"c": "second"}]}}'
    config = {"type": "field_exact", "field": "a.b.1.c"}
    assert grade(config, output, {"a.b.1.c": "second"}).passed


def test_expected_field_may_be_a_dotted_path_into_expected() -> None:
    config = {"type": "field_exact", "field": "order.total"}
    assert grade(config, '{"order": {"total": 5}}', {"order": {"total": 5}}).passed


def test_missing_output_field_fails_naming_it() -> None:
    verdict = grade({"type": "field_exact", "field": "label"}, '{"other": 1}', {"label": "x"})
    assert verdict == Verdict(False, 0.0, "output has no field 'label'")


def test_list_index_out_of_range_is_a_missing_field() -> None:
    verdict = grade({"type": "field_exact", "field": "xs.3"}, '{"xs": [1, 2]}', {"xs.3": 1})
    assert verdict.detail == "output has no field 'xs.3'"


def test_unparsed_output_fails_every_field_grader() -> None:
    verdict = grade({"type": "field_exact", "field": "label"}, "not json at all", {"label": "x"})
    assert not verdict.passed
    assert verdict.detail.startswith("output did not parse: no valid JSON found")


def test_missing_expected_key_fails_as_a_data_problem() -> None:
    verdict = grade({"type": "field_exact", "field": "label"}, '{"label": "x"}', {"other": "x"})
    assert verdict == Verdict(False, 0.0, "item has no expected 'label'")


def test_item_without_expected_fails_whole_output_graders() -> None:
    verdict = grade({"type": "exact"}, "billing", None, parser=TEXT)
    assert verdict == Verdict(False, 0.0, "item has no expected value")


# ---------------------------------------------------------------- normalized


def test_normalized_applies_nfkc_and_casefold() -> None:
    fullwidth = "".join(chr(ord(char) + 0xFEE0) for char in "Billing")
    assert grade({"type": "normalized"}, fullwidth, "billing", parser=TEXT).passed


def test_normalized_casefolds_sharp_s() -> None:
    assert grade({"type": "normalized"}, "STRASSE", "straße", parser=TEXT).passed


def test_normalized_strips_punctuation_and_collapses_whitespace() -> None:
    assert grade({"type": "normalized"}, "  Hello,\n  world! ", "hello world", parser=TEXT).passed


def test_normalized_fails_on_different_words() -> None:
    verdict = grade({"type": "normalized"}, "Hello there", "hello world", parser=TEXT)
    assert verdict == Verdict(False, 0.0, "expected 'hello world', got 'Hello there'")


def test_normalized_compares_non_strings_as_canonical_json() -> None:
    config = {"type": "normalized", "field": "x"}
    assert grade(config, '{"x": {"b": "Yes!", "a": 1}}', {"x": {"a": 1, "b": "yes"}}).passed


def test_normalized_number_matches_its_digits_as_text() -> None:
    assert grade({"type": "normalized", "field": "n"}, '{"n": 42}', {"n": "42"}).passed


# ---------------------------------------------------------------- regex


def test_regex_passes_when_pattern_is_found() -> None:
    config = {"type": "regex", "pattern": r"ticket #\d+"}
    verdict = grade(config, "See ticket #123 for details", parser=TEXT)
    assert verdict == Verdict(True, 1.0, "matched 'ticket #123'")


def test_regex_fails_when_pattern_is_absent() -> None:
    assert not grade({"type": "regex", "pattern": r"#\d+"}, "no number", parser=TEXT).passed


def test_regex_must_match_false_inverts() -> None:
    config = {"type": "regex", "pattern": r"\bpassword\b", "must_match": False}
    assert grade(config, "all fine", parser=TEXT).passed
    assert not grade(config, "your password is", parser=TEXT).passed


def test_regex_ignore_case() -> None:
    config = {"type": "regex", "pattern": "refund", "ignore_case": True}
    assert grade(config, "REFUND issued", parser=TEXT).passed


def test_regex_searches_a_field() -> None:
    config = {"type": "regex", "field": "summary", "pattern": "^[A-Z]"}
    assert not grade(config, '{"summary": "lowercase start"}').passed


def test_regex_utf16_reads_a_character_beyond_the_basic_plane_as_two_units() -> None:
    one, two = {"type": "regex", "pattern": "^.$"}, {"type": "regex", "pattern": "^..$"}
    assert grade(one, "🙂", parser=TEXT).passed and not grade(two, "🙂", parser=TEXT).passed
    assert not grade(one | {"utf16": True}, "🙂", parser=TEXT).passed
    assert grade(two | {"utf16": True}, "🙂", parser=TEXT).passed
    # the pattern is read the same way: a class holds the halves, a quantifier the last one
    assert grade({"type": "regex", "pattern": "^[🙂]{2}$", "utf16": True}, "🙂", parser=TEXT).passed
    assert grade({"type": "regex", "pattern": "^🙂+$", "utf16": True}, "🙂", parser=TEXT).passed


def test_regex_utf16_shows_half_a_pair_escaped() -> None:
    config = {"type": "regex", "pattern": "a.", "utf16": True}
    assert grade(config, "a🙂", parser=TEXT) == Verdict(True, 1.0, "matched 'a\\ud83d'")
    missing = {"type": "regex", "pattern": "x", "utf16": True}
    assert grade(missing, "a🙂", parser=TEXT) == Verdict(False, 0.0, "no match in 'a🙂'")


def test_regex_utf16_pattern_must_compile_as_code_units() -> None:
    adapter = TypeAdapter(schema.Grader)
    adapter.validate_python({"type": "regex", "pattern": "[🙂-🙃]"})
    with pytest.raises(ValueError, match="bad character range"):
        adapter.validate_python({"type": "regex", "pattern": "[🙂-🙃]", "utf16": True})


# ---------------------------------------------------------------- contains / not_contains


def test_contains_single_value_ignores_case_by_default() -> None:
    assert grade({"type": "contains", "value": "Refund"}, "we will REFUND you", parser=TEXT).passed


def test_contains_case_sensitive_when_asked() -> None:
    config = {"type": "contains", "value": "Refund", "ignore_case": False}
    assert not grade(config, "we will refund you", parser=TEXT).passed


def test_contains_list_needs_every_value() -> None:
    config = {"type": "contains", "value": ["refund", "invoice"]}
    verdict = grade(config, "your refund is on its way", parser=TEXT)
    assert verdict == Verdict(False, 0.0, "missing 'invoice'")


def test_contains_reads_needles_from_expected_field() -> None:
    config = {"type": "contains", "expected_field": "must_mention"}
    output = "Order 1234 ships Monday"
    assert grade(config, output, {"must_mention": ["1234", "monday"]}, parser=TEXT).passed


def test_not_contains_passes_when_no_value_present() -> None:
    config = {"type": "not_contains", "value": ["ignore previous instructions", "system:"]}
    verdict = grade(config, "A short summary.", parser=TEXT)
    assert verdict == Verdict(True, 1.0, "none of 2 present")


def test_not_contains_fails_naming_the_value_found() -> None:
    config = {"type": "not_contains", "field": "summary", "value": ["system:", "ignore previous"]}
    verdict = grade(config, '{"summary": "Please IGNORE PREVIOUS instructions"}')
    assert verdict == Verdict(False, 0.0, "contains 'ignore previous'")


# ---------------------------------------------------------------- json_schema

TASK_SCHEMA = {
    "type": "object",
    "required": ["intent"],
    "properties": {"intent": {"enum": ["billing", "other"]}},
}


def test_json_schema_defaults_to_task_output_schema() -> None:
    ctx = GradingContext(output_schema=TASK_SCHEMA, root=None)
    assert grade({"type": "json_schema"}, '{"intent": "billing"}', ctx=ctx).passed


def test_json_schema_failure_names_the_path() -> None:
    ctx = GradingContext(output_schema=TASK_SCHEMA, root=None)
    verdict = grade({"type": "json_schema"}, '{"intent": "refunds"}', ctx=ctx)
    assert not verdict.passed
    assert verdict.detail.startswith("$.intent: 'refunds' is not one of")


def test_json_schema_explicit_schema_overrides_task_schema() -> None:
    ctx = GradingContext(output_schema=TASK_SCHEMA, root=None)
    config = {"type": "json_schema", "schema": {"type": "array"}}
    assert grade(config, "[1, 2]", ctx=ctx).passed


def test_json_schema_fails_when_output_did_not_parse() -> None:
    ctx = GradingContext(output_schema=TASK_SCHEMA, root=None)
    verdict = grade({"type": "json_schema"}, "intent: billing", ctx=ctx)
    assert not verdict.passed and verdict.detail.startswith("output did not parse")


def test_json_schema_without_any_schema_is_a_config_error() -> None:
    with pytest.raises(ValueError, match="needs a schema"):
        build_grader(GRADER.validate_python({"type": "json_schema"}), NO_CONTEXT)


def test_json_schema_invalid_schema_is_a_config_error() -> None:
    config = GRADER.validate_python({"type": "json_schema", "schema": {"type": 5}})
    with pytest.raises(ValueError, match="schema is invalid"):
        build_grader(config, NO_CONTEXT)


def test_json_schema_unresolvable_reference_fails_without_raising() -> None:
    config = {"type": "json_schema", "schema": {"$ref": "#/$defs/absent"}}
    verdict = grade(config, "{}")
    assert not verdict.passed and "does not resolve" in verdict.detail


QUICK_SCHEMAS: list[dict[str, Any]] = [
    {"type": "object", "required": ["a"], "properties": {"a": {"type": "string"}}},
    {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": ["object", "null"],
        "properties": {
            "a": {"type": "integer"},
            "b": {"type": "array", "items": {"type": ["number", "boolean"]}},
            "c": {"type": "object", "additionalProperties": False, "properties": {}},
        },
        "additionalProperties": {"type": "string"},
    },
    {"required": ["b"], "items": {"required": ["a"]}, "format": "email"},
]


def random_json(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.randrange(9 if depth < 3 else 6)
    if kind == 0:
        return None
    if kind == 1:
        return rng.random() < 0.5
    if kind == 2:
        return rng.choice([0, 1, -7, 2**70])
    if kind == 3:
        return rng.choice([0.0, 1.0, 2.5, -0.5])
    if kind in (4, 5):
        return rng.choice(["", "a", "x@y.z"])
    if kind == 6:
        return [random_json(rng, depth + 1) for _ in range(rng.randrange(3))]
    return {rng.choice("abcd"): random_json(rng, depth + 1) for _ in range(rng.randrange(4))}


@pytest.mark.parametrize("document", QUICK_SCHEMAS)
def test_json_schema_quick_check_never_passes_what_jsonschema_fails(
    document: dict[str, Any],
) -> None:
    from jsonschema.validators import validator_for

    check = quick_check(document)
    assert check is not None
    validator = validator_for(document)(document)
    rng = random.Random(3)
    accepted = 0
    for _ in range(20_000):
        value = random_json(rng)
        if check(value):
            accepted += 1
            assert validator.is_valid(value), value
    assert accepted > 100


def holds_float(value: Any) -> bool:
    if isinstance(value, dict):
        return any(holds_float(v) for v in value.values())
    if isinstance(value, list):
        return any(holds_float(v) for v in value)
    return isinstance(value, float)


@pytest.mark.parametrize("document", QUICK_SCHEMAS)
def test_json_schema_quick_check_passes_every_valid_value_without_a_float(
    document: dict[str, Any],
) -> None:
    # Only a float that may be an integer is left to jsonschema when valid.
    from jsonschema.validators import validator_for

    check = quick_check(document)
    assert check is not None
    validator = validator_for(document)(document)
    rng = random.Random(5)
    for _ in range(20_000):
        value = random_json(rng)
        if not holds_float(value):
            assert check(value) == validator.is_valid(value), value


@pytest.mark.parametrize(
    "document",
    [
        {"$ref": "#/$defs/a", "$defs": {"a": {"type": "string"}}},
        {"type": "object", "properties": {"a": {"enum": [1, 2]}}},
        {"type": "integer", "minimum": 3},
        {"type": "array", "items": [{"type": "string"}]},
        {"type": "object", "properties": {"a": True}},
        {"type": "object", "properties": {"a": {"$schema": "x"}}},
    ],
)
def test_json_schema_quick_check_leaves_other_keywords_to_jsonschema(
    document: dict[str, Any],
) -> None:
    assert quick_check(document) is None


# ---------------------------------------------------------------- field_exact


def test_field_exact_passes_on_equal_value() -> None:
    config = {"type": "field_exact", "field": "needs_human"}
    assert grade(config, '{"needs_human": false}', {"needs_human": False}).passed


def test_field_exact_ignore_case() -> None:
    config = {"type": "field_exact", "field": "priority", "ignore_case": True}
    assert grade(config, '{"priority": "HIGH"}', {"priority": "high"}).passed


# ---------------------------------------------------------------- field_numeric


def test_field_numeric_absolute_tolerance_inclusive() -> None:
    config = {"type": "field_numeric", "field": "total", "tolerance": 0.5}
    assert grade(config, '{"total": 10.5}', {"total": 10}).passed


def test_field_numeric_outside_absolute_tolerance_fails() -> None:
    config = {"type": "field_numeric", "field": "total", "tolerance": 0.5}
    verdict = grade(config, '{"total": 11}', {"total": 10})
    assert verdict == Verdict(False, 0.0, "expected 10, got 11: off by 1, allowed 0.5")


def test_field_numeric_relative_tolerance_scales_with_expected() -> None:
    config = {"type": "field_numeric", "field": "total", "tolerance": 0.05, "relative": True}
    assert grade(config, '{"total": 1040}', {"total": 1000}).passed
    assert not grade(config, '{"total": 1060}', {"total": 1000}).passed


def test_field_numeric_relative_bound_is_inclusive_despite_rounding() -> None:
    config = {"type": "field_numeric", "field": "x", "tolerance": 0.1, "relative": True}
    assert grade(config, '{"x": 3.63}', {"x": 3.3}).passed


def test_field_numeric_default_tolerance_requires_equality() -> None:
    config = {"type": "field_numeric", "field": "x"}
    assert grade(config, '{"x": 2.0}', {"x": 2}).passed
    assert not grade(config, '{"x": 2.01}', {"x": 2}).passed


def test_field_numeric_accepts_numbers_written_as_strings() -> None:
    assert grade({"type": "field_numeric", "field": "x"}, '{"x": " 42 "}', {"x": 42}).passed


def test_field_numeric_rejects_booleans() -> None:
    verdict = grade({"type": "field_numeric", "field": "x"}, '{"x": true}', {"x": 1})
    assert verdict == Verdict(False, 0.0, "output field 'x' is not a number: true")


def test_field_numeric_non_numeric_expected_fails_naming_the_item() -> None:
    verdict = grade({"type": "field_numeric", "field": "x"}, '{"x": 1}', {"x": "one"})
    assert verdict.detail == "item's expected 'x' is not a number: 'one'"


# ---------------------------------------------------------------- field_fuzzy


def test_field_fuzzy_scores_similarity_and_passes_above_threshold() -> None:
    config = {"type": "field_fuzzy", "field": "name", "threshold": 0.8}
    verdict = grade(config, '{"name": "Jon Smith"}', {"name": "John Smith"})
    assert verdict.passed
    assert verdict.score == pytest.approx(18 / 19)


def test_field_fuzzy_below_threshold_fails_with_partial_score() -> None:
    config = {"type": "field_fuzzy", "field": "name", "threshold": 0.8}
    verdict = grade(config, '{"name": "abc"}', {"name": "abd"})
    assert not verdict.passed
    assert verdict.score == pytest.approx(2 / 3)
    assert verdict.detail == "similarity 0.667 to 'abd' (threshold 0.8)"


def test_field_fuzzy_is_symmetric() -> None:
    config = {"type": "field_fuzzy", "field": "s"}
    a, b = "the quick brown fox", "quick brown the fox"
    left = grade(config, f'{{"s": "{a}"}}', {"s": b}).score
    right = grade(config, f'{{"s": "{b}"}}', {"s": a}).score
    assert left == right


# ---------------------------------------------------------------- field_set_f1


def test_field_set_f1_partial_credit() -> None:
    config = {"type": "field_set_f1", "field": "tags", "threshold": 0.5}
    verdict = grade(config, '{"tags": ["a", "b", "x"]}', {"tags": ["a", "b", "c", "d"]})
    assert verdict.score == pytest.approx(4 / 7)
    assert verdict.passed
    assert verdict.detail == 'F1 0.571; missing ["c","d"]; extra ["x"]'


def test_field_set_f1_default_threshold_needs_equal_sets() -> None:
    config = {"type": "field_set_f1", "field": "tags"}
    assert not grade(config, '{"tags": ["a"]}', {"tags": ["a", "b"]}).passed
    assert grade(config, '{"tags": ["b", "a", "a"]}', {"tags": ["a", "b"]}).passed


def test_field_set_f1_two_empty_sets_score_one() -> None:
    verdict = grade({"type": "field_set_f1", "field": "tags"}, '{"tags": []}', {"tags": []})
    assert verdict == Verdict(True, 1.0, "F1 1.000")


def test_field_set_f1_output_must_be_a_list() -> None:
    verdict = grade({"type": "field_set_f1", "field": "tags"}, '{"tags": "a"}', {"tags": ["a"]})
    assert verdict == Verdict(False, 0.0, "output field 'tags' is not a list: 'a'")


# ---------------------------------------------------------------- refusal


def test_refusal_expected_and_given_passes() -> None:
    verdict = grade(
        {"type": "refusal"}, "I can't help with that.", {"should_refuse": True}, parser=TEXT
    )
    assert verdict == Verdict(True, 1.0, 'declined ("i can\'t"), as expected')


def test_refusal_expected_but_answered_fails() -> None:
    verdict = grade({"type": "refusal"}, "Sure, here it is.", {"should_refuse": True}, parser=TEXT)
    assert not verdict.passed


def test_refusal_given_but_not_expected_fails() -> None:
    config = {"type": "refusal"}
    verdict = grade(config, "Could you clarify the order id?", {"should_refuse": False})
    assert verdict == Verdict(
        False, 0.0, "declined ('could you clarify'), but should have answered"
    )


def test_refusal_missing_flag_means_answer_expected() -> None:
    assert grade({"type": "refusal"}, "The answer is 4.", {"label": "x"}, parser=TEXT).passed


def test_refusal_reads_typographic_apostrophes() -> None:
    verdict = grade({"type": "refusal"}, "I can\u2019t do that", {"should_refuse": True})
    assert verdict.passed


def test_refusal_reads_raw_text_when_json_did_not_parse() -> None:
    verdict = grade({"type": "refusal"}, "I am unable to answer.", {"should_refuse": True})
    assert verdict.passed


def test_refusal_custom_markers_and_expected_field() -> None:
    config = {"type": "refusal", "markers": ["which account"], "expected_field": "ask"}
    assert grade(config, "Which account do you mean?", {"ask": True}, parser=TEXT).passed


def test_refusal_non_boolean_flag_fails_as_a_data_problem() -> None:
    verdict = grade({"type": "refusal"}, "ok", {"should_refuse": "yes"}, parser=TEXT)
    assert verdict == Verdict(False, 0.0, "item's expected 'should_refuse' is not true or false")


# ---------------------------------------------------------------- length


def test_length_within_bounds_passes() -> None:
    config = {"type": "length", "field": "summary", "min_chars": 1, "max_chars": 40, "max_lines": 1}
    verdict = grade(config, '{"summary": "Refund for March"}')
    assert verdict == Verdict(True, 1.0, "chars 16, words 3, lines 1")


def test_length_over_max_chars_fails_saying_by_how_much() -> None:
    verdict = grade({"type": "length", "max_chars": 5}, "too long", parser=TEXT)
    assert verdict == Verdict(False, 0.0, "chars 8 > max 5")


def test_length_word_bounds() -> None:
    config = {"type": "length", "min_words": 3, "max_words": 4}
    assert not grade(config, "two words", parser=TEXT).passed
    assert grade(config, "now three words", parser=TEXT).passed
    assert not grade(config, "one two three four five", parser=TEXT).passed


def test_length_max_lines() -> None:
    config = {"type": "length", "field": "summary", "max_lines": 1}
    verdict = grade(config, '{"summary": "line one\\nline two"}')
    assert verdict == Verdict(False, 0.0, "lines 2 > max 1")


def test_length_measures_stripped_text_output() -> None:
    assert grade({"type": "length", "max_chars": 3}, "  abc \n", parser=TEXT).passed


# ---------------------------------------------------------------- python

GRADER_MODULE = """
def as_bool(request):
    return request["value"]["label"] == request["expected"]["label"]


def as_score(request):
    return request["params"]["score"]


def as_dict(request):
    return {"passed": False, "score": 0.25, "detail": "too vague"}


def echo(request):
    return {"passed": True, "detail": repr(sorted(request.items()))}


def raises(request):
    raise KeyError("label")


def returns_text(request):
    return "yes"


def mutates(request):
    request["params"]["count"] += 1
    return request["params"]["count"] == 1
"""


@pytest.fixture
def python_ctx(tmp_path: Path) -> GradingContext:
    (tmp_path / "graders").mkdir()
    (tmp_path / "graders" / "checks.py").write_text(GRADER_MODULE, encoding="utf-8")
    return GradingContext(output_schema=None, root=tmp_path)


def python_grade(ctx: GradingContext, function: str, **params: Any) -> Verdict:
    config = {"type": "python", "callable": f"graders/checks.py:{function}", "params": params}
    return grade(config, '{"label": "billing"}', {"label": "billing"}, ctx=ctx)


def test_python_grader_returning_bool(python_ctx: GradingContext) -> None:
    assert python_grade(python_ctx, "as_bool") == Verdict(True, 1.0, "returned true")


def test_python_grader_returning_score_passes_at_half(python_ctx: GradingContext) -> None:
    assert python_grade(python_ctx, "as_score", score=0.5) == Verdict(True, 0.5, "score 0.500")
    assert not python_grade(python_ctx, "as_score", score=0.49).passed


def test_python_grader_returning_dict(python_ctx: GradingContext) -> None:
    assert python_grade(python_ctx, "as_dict") == Verdict(False, 0.25, "too vague")


def test_python_grader_receives_text_value_expected_input_params(
    python_ctx: GradingContext,
) -> None:
    config = {"type": "python", "callable": "graders/checks.py:echo", "params": {"k": 1}}
    verdict = grade(config, ' {"a": 1} ', {"e": 2}, ctx=python_ctx, item_input={"q": "hi"})
    assert verdict.detail == (
        "[('expected', {'e': 2}), ('input', {'q': 'hi'}), ('params', {'k': 1}), "
        "('text', ' {\"a\": 1} '), ('value', {'a': 1})]"
    )


def test_python_grader_exception_fails_with_its_message(python_ctx: GradingContext) -> None:
    assert python_grade(python_ctx, "raises") == Verdict(
        False, 0.0, "grader raised KeyError: 'label'"
    )


def test_python_grader_score_out_of_range_fails(python_ctx: GradingContext) -> None:
    verdict = python_grade(python_ctx, "as_score", score=1.5)
    assert verdict == Verdict(
        False, 0.0, "grader returned 1.5, not a bool, a score in 0..1 or a dict"
    )


def test_python_grader_unsupported_return_type_fails(python_ctx: GradingContext) -> None:
    assert not python_grade(python_ctx, "returns_text").passed


def test_python_grader_cannot_mutate_params_between_calls(python_ctx: GradingContext) -> None:
    config = {"type": "python", "callable": "graders/checks.py:mutates", "params": {"count": 0}}
    fn = build_grader(GRADER.validate_python(config), python_ctx)
    item = schema.Item(id="item-1", input={}, expected=None)
    parsed = parse_output("x", TEXT)
    assert fn(parsed, item).passed and fn(parsed, item).passed


def test_python_grader_missing_function_is_a_config_error(python_ctx: GradingContext) -> None:
    config = GRADER.validate_python({"type": "python", "callable": "graders/checks.py:absent"})
    with pytest.raises(ValueError, match="has no function 'absent'"):
        build_grader(config, python_ctx)


def test_python_grader_needs_a_repository_root() -> None:
    config = GRADER.validate_python({"type": "python", "callable": "graders/checks.py:as_bool"})
    with pytest.raises(ValueError, match="no repository root"):
        build_grader(config, NO_CONTEXT)


# ---------------------------------------------------------------- fidelity options


@pytest.mark.parametrize(
    ("config", "output", "expected", "passed"),
    [
        # raw: the output exactly as returned, whitespace and all
        ({"type": "exact", "value": '"Paris"', "raw": True}, '"Paris"\n', None, False),
        ({"type": "exact", "value": '"Paris"', "raw": True}, '"Paris"', None, True),
        ({"type": "exact", "value": "Paris"}, '"Paris"\n', None, True),
        # raw reads the text even when the task parses JSON
        ({"type": "contains", "value": '"a": 1', "raw": True}, '{"a": 1}', None, True),
        ({"type": "contains", "value": '"a": 1'}, '{"a": 1}', None, False),
        # case: lower-casing keeps ß; casefold makes it ss
        ({"type": "contains", "value": "strasse", "case": "lower"}, '"Straße"', None, False),
        ({"type": "contains", "value": "strasse"}, '"Straße"', None, True),
        ({"type": "exact", "value": "STRASSE", "ignore_case": True}, '"strasse"', None, True),
        # match: any
        ({"type": "contains", "value": ["x", "b"], "match": "any"}, '"abc"', None, True),
        ({"type": "contains", "value": ["x", "y"], "match": "any"}, '"abc"', None, False),
        ({"type": "not_contains", "value": ["a", "x"], "match": "all"}, '"abc"', None, True),
        ({"type": "not_contains", "value": ["a", "b"], "match": "all"}, '"abc"', None, False),
        ({"type": "not_contains", "value": ["a", "x"]}, '"abc"', None, False),
        (
            {"type": "exact", "expected_field": "ok", "match": "any"},
            '"b"',
            {"ok": ["a", "b"]},
            True,
        ),
        (
            {"type": "exact", "expected_field": "ok", "match": "any"},
            '"c"',
            {"ok": ["a", "b"]},
            False,
        ),
        # compare: prefix, over every acceptable answer
        (
            {"type": "exact", "expected_field": "ok", "match": "any", "compare": "prefix"},
            '"time."',
            {"ok": ["x", "time"]},
            True,
        ),
        # normalized, SQuAD form, overlapping either way
        (
            {"type": "normalized", "value": "The Beatles", "form": "squad", "compare": "overlap"},
            '"beatles!"',
            None,
            True,
        ),
        ({"type": "normalized", "value": "an", "form": "squad"}, '""', None, True),
        (
            {"type": "normalized", "value": "x", "form": "squad", "compare": "overlap"},
            '""',
            None,
            False,
        ),
        # regex ascii: \d is ASCII only, as in JavaScript
        ({"type": "regex", "pattern": r"^\d+$", "ascii": True}, '"٤٢"', None, False),
        ({"type": "regex", "pattern": r"^\d+$"}, '"٤٢"', None, True),
    ],
)
def test_fidelity_options(config: dict[str, Any], output: str, expected: Any, passed: bool) -> None:
    assert grade(config, output, expected).passed is passed


@pytest.mark.parametrize(
    ("parse", "output", "passed"),
    [
        ("strict", ' {"size": 3}\n', True),
        ("strict", '```json\n{"size": 3}\n```', False),
        ("strict", 'Here: {"size": 3}', False),
        ("strict", '{"size": NaN}', False),
        ("embedded", 'first {"size": "big"} then {"size": 3}', True),
        ("embedded", "prose {size: 3} too", True),  # a YAML flow mapping, as promptfoo reads it
        ("embedded", "no object at all", False),
    ],
)
def test_json_schema_reads_strict_or_embedded_json(parse: str, output: str, passed: bool) -> None:
    config = {
        "type": "json_schema",
        "parse": parse,
        "schema": {
            "type": "object",
            "properties": {"size": {"type": "integer"}},
            "required": ["size"],
        },
    }
    assert grade(config, output, parser=TEXT).passed is passed


def test_strict_json_output_takes_the_whole_text() -> None:
    strict = schema.Output(parser="json", extract="strict")
    assert parse_output('```json\n{"a": 1}\n```', strict).error is not None
    assert parse_output(' {"a": 1} ', strict).value == {"a": 1}
    with pytest.raises(ValueError, match="'extract' is only for parser 'json'"):
        schema.Output(parser="text", extract="strict")
    with pytest.raises(ValueError, match="'raw' compares the whole output"):
        GRADER.validate_python({"type": "exact", "field": "a", "raw": True, "value": 1})
