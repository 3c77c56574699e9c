"""Output parsing (text, JSON in its wrappings, regex) and level assignment from verdicts."""

from __future__ import annotations

from typing import Any

import pytest

from evalreg.graders import Verdict
from evalreg.graders.levels import applies, assign_level
from evalreg.graders.parsing import Parsed, parse_output
from evalreg.registry import schema

JSON = schema.Output(parser="json")

# ---------------------------------------------------------------- parsing


def test_text_parser_strips_whitespace_and_keeps_raw_text() -> None:
    assert parse_output("  billing\n", schema.Output()) == Parsed("  billing\n", "billing", None)


def test_json_bare_object() -> None:
    assert parse_output(' {"intent": "billing"}\n', JSON).value == {"intent": "billing"}


def test_json_bare_scalar_and_array() -> None:
    assert parse_output('"billing"', JSON).value == "billing"
    assert parse_output("[1, 2]", JSON).value == [1, 2]


def test_json_inside_fenced_block_with_prose() -> None:
    text = 'Here you go:\n```json\n{"intent": "account"}\n```\nAnything else?'
    parsed = parse_output(text, JSON)
    assert parsed == Parsed(text, {"intent": "account"}, None)


def test_json_inside_untagged_fence() -> None:
    assert parse_output('```\n{"a": 1}\n```', JSON).value == {"a": 1}


def test_json_first_object_in_prose() -> None:
    text = 'Sure! {"intent": "billing"} and then {"intent": "other"} for good measure.'
    assert parse_output(text, JSON).value == {"intent": "billing"}


def test_json_braces_inside_strings_do_not_end_the_object() -> None:
    text = 'Result: {"note": "use } and \\" {", "n": 1} done'
    assert parse_output(text, JSON).value == {"note": 'use } and " {', "n": 1}


def test_json_skips_a_non_json_brace_span_before_the_answer() -> None:
    text = 'Format {like this}. Answer: {"intent": "technical"}'
    assert parse_output(text, JSON).value == {"intent": "technical"}


def test_json_nested_object_is_not_taken_from_a_broken_outer_one() -> None:
    parsed = parse_output('Answer: {"a": {"b": 1}, oops}', JSON)
    assert parsed.value is None and parsed.error is not None


def test_json_invalid_reports_why() -> None:
    parsed = parse_output('{"intent": "billing",}', JSON)
    assert parsed.value is None
    assert parsed.error == (
        "no valid JSON found (Expecting property name enclosed in double quotes "
        "at line 1 column 22)"
    )


def test_json_unbalanced_object_in_prose_fails() -> None:
    assert parse_output('Here: {"intent": "billing"', JSON).error is not None


def test_json_empty_output_fails() -> None:
    assert parse_output("  \n", JSON) == Parsed("  \n", None, "empty output")


def test_json_rejects_nan() -> None:
    parsed = parse_output('{"score": NaN}', JSON)
    assert parsed.value is None
    assert parsed.error == "no valid JSON found (NaN is not a JSON value)"


_AS_JSON_READS = [
    '{"a": 1, "b": 2, "a": 3}',
    "1e400",
    "[1e-400, -0, -0.0, 0.1, 1E5, 5e-324, 0.30000000000000004, 1e-7]",
    "123456789012345678901234567890",
    "18446744073709551615",
    "18446744073709551616",
    "1234567890123456789",
    "-9223372036854775809",
    '{"a": [1, {"b": 123456789012345678901234}], "c": 1e19}',
    "[" * 600 + "123456789012345678901234" + "]" * 600,
    '"\\ud800"',
    '"\\ud83d\\ude00 \\u0000 \u00e9"',
    '{"a": NaN}',
    "-Infinity",
    '{"a": "\x01"}',
    '{"a": 1,}',
    "[1, 2",
    "1 2",
    "[" * 600 + "]" * 600,
    ' {"x": [1, 2.50, true, null]}\n',
]


@pytest.mark.parametrize("text", _AS_JSON_READS)
def test_a_json_answer_reads_as_json_reads_it(text: str) -> None:
    """The fast reader is the reference's twin wherever they could differ: the same value
    (an integer beyond 64 bits stays an integer), or the same error."""
    import json

    from evalreg.graders.parsing import _reject_constant, _strict_loads

    def outcome(read: Any) -> tuple[Any, ...]:
        try:
            value = read(text)
        except json.JSONDecodeError as exc:
            return "not JSON", exc.msg, exc.lineno, exc.colno
        except (ValueError, RecursionError) as exc:
            return type(exc).__name__, str(exc)
        return "value", type(value), repr(value)

    reference = json.JSONDecoder(parse_constant=_reject_constant).decode
    assert outcome(_strict_loads) == outcome(reference)


def test_regex_parser_takes_first_group() -> None:
    config = schema.Output(parser="regex", pattern=r"Answer:\s*(\w+)")
    assert parse_output("Thinking... Answer: billing", config).value == "billing"


def test_regex_parser_takes_whole_match_without_groups() -> None:
    config = schema.Output(parser="regex", pattern=r"\d+")
    assert parse_output("total 42 items", config).value == "42"


def test_regex_parser_no_match_is_an_error() -> None:
    config = schema.Output(parser="regex", pattern=r"Answer: (\w+)")
    assert parse_output("no answer", config) == Parsed(
        "no answer", None, "the pattern did not match"
    )


def test_regex_parser_unmatched_first_group_is_an_error() -> None:
    config = schema.Output(parser="regex", pattern=r"(yes)?no")
    assert parse_output("no", config).error == "the pattern matched, but its first group did not"


# ---------------------------------------------------------------- levels


def criterion(cid: str, **extra: Any) -> dict[str, Any]:
    return {"id": cid, "description": cid, "grader": {"type": "exact"}, **extra}


def rubric(*criteria: dict[str, Any], **levels: dict[str, Any]) -> schema.Rubric:
    return schema.Rubric.model_validate(
        {
            "schema_version": 1,
            "description": "test rubric",
            "version": "1",
            "criteria": list(criteria),
            "levels": levels,
        }
    )


PASS = Verdict(True, 1.0)
FAIL = Verdict(False, 0.0)
BASIC = rubric(criterion("format", critical=True), criterion("tone"))


def test_applies_without_slices() -> None:
    assert applies(BASIC.criteria[0], [])


def test_applies_only_to_items_tagged_with_a_slice() -> None:
    scoped = rubric(criterion("injection", slices=["adversarial", "edge"])).criteria[0]
    assert applies(scoped, ["common", "edge"])
    assert not applies(scoped, ["common"])


def test_all_passed_is_correct_with_full_score() -> None:
    assert assign_level(BASIC, {"format": PASS, "tone": PASS}, []) == ("correct", 1.0)


def test_default_levels_non_critical_failure_is_acceptable() -> None:
    assert assign_level(BASIC, {"format": PASS, "tone": FAIL}, []) == ("acceptable", 0.5)


def test_default_levels_critical_failure_is_unacceptable() -> None:
    assert assign_level(BASIC, {"format": FAIL, "tone": PASS}, []) == ("unacceptable", 0.5)


def test_weighted_score_uses_weights_and_graded_scores() -> None:
    weighted = rubric(criterion("a", weight=3.0), criterion("b"))
    _, score = assign_level(weighted, {"a": Verdict(False, 0.5), "b": PASS}, [])
    assert score == pytest.approx((3 * 0.5 + 1) / 4)


def test_require_none_always_holds() -> None:
    lenient = rubric(criterion("a"), correct={"require": "all"}, acceptable={"require": "none"})
    assert assign_level(lenient, {"a": FAIL}, [])[0] == "acceptable"


def test_require_list_needs_only_listed_criteria() -> None:
    listed = rubric(
        criterion("format"),
        criterion("tone"),
        correct={"require": ["format"]},
        acceptable={"require": "none"},
    )
    assert assign_level(listed, {"format": PASS, "tone": FAIL}, [])[0] == "correct"
    assert assign_level(listed, {"format": FAIL, "tone": PASS}, [])[0] == "acceptable"


def test_require_list_counts_inapplicable_criterion_as_passed() -> None:
    listed = rubric(
        criterion("format"),
        criterion("injection", slices=["adversarial"]),
        correct={"require": ["format", "injection"]},
    )
    assert assign_level(listed, {"format": PASS, "injection": None}, ["common"])[0] == "correct"


def test_inapplicable_criterion_is_left_out_of_all_and_score() -> None:
    scoped = rubric(criterion("format"), criterion("injection", slices=["adversarial"]))
    verdicts = {"format": PASS, "injection": None}
    assert assign_level(scoped, verdicts, ["common"]) == ("correct", 1.0)


def test_applicable_sliced_criterion_counts() -> None:
    scoped = rubric(criterion("format"), criterion("injection", slices=["adversarial"]))
    verdicts = {"format": PASS, "injection": FAIL}
    assert assign_level(scoped, verdicts, ["adversarial"]) == ("acceptable", 0.5)


def test_nothing_applicable_is_correct_with_score_one() -> None:
    scoped = rubric(criterion("injection", slices=["adversarial"]))
    assert assign_level(scoped, {"injection": None}, []) == ("correct", 1.0)


def test_min_score_blocks_a_level_whose_requirement_holds() -> None:
    scored = rubric(
        criterion("a", critical=True),
        criterion("b"),
        criterion("c"),
        correct={"require": "critical", "min_score": 0.9},
        acceptable={"require": "critical", "min_score": 0.5},
    )
    assert assign_level(scored, {"a": PASS, "b": PASS, "c": FAIL}, [])[0] == "acceptable"
    assert assign_level(scored, {"a": PASS, "b": FAIL, "c": FAIL}, [])[0] == "unacceptable"


def test_min_score_bound_is_inclusive() -> None:
    scored = rubric(criterion("a"), criterion("b"), correct={"require": "none", "min_score": 0.5})
    assert assign_level(scored, {"a": PASS, "b": FAIL}, [])[0] == "correct"


def test_applicable_criterion_without_verdict_is_an_error() -> None:
    with pytest.raises(ValueError, match="'tone' applies but has no verdict"):
        assign_level(BASIC, {"format": PASS, "tone": None}, [])


def test_rule_naming_an_unknown_criterion_is_an_error() -> None:
    broken = rubric(criterion("a"), correct={"require": ["a", "ghost"]})
    with pytest.raises(ValueError, match="ghost"):
        assign_level(broken, {"a": PASS}, [])
