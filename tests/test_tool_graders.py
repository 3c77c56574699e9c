"""Tool-call graders on their edges: no call, the wrong tool, extra calls, numeric
tolerance, arguments that are not JSON, and schema validity of the arguments."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import TypeAdapter

from evalreg.graders import GradingContext, Verdict, build_grader
from evalreg.graders.parsing import parse_output
from evalreg.providers.tools import ToolCall, decoded
from evalreg.registry import schema

GRADER: TypeAdapter[Any] = TypeAdapter(schema.Grader)
TOOLS = (
    schema.Tool(
        name="refund",
        parameters={
            "type": "object",
            "required": ["order", "amount"],
            "properties": {"order": {"type": "string"}, "amount": {"type": "number"}},
            "additionalProperties": False,
        },
    ),
    schema.Tool(name="escalate"),
)
CTX = GradingContext(tools=TOOLS)
REFUND = {"name": "refund", "arguments": {"order": "A-17", "amount": 12.5}}


def grade(config: dict[str, Any], calls: list[ToolCall], expected: Any) -> Verdict:
    fn = build_grader(GRADER.validate_python(config), CTX)
    item = schema.Item(id="i", input={}, expected=expected)
    return fn(parse_output("", schema.Output(), tuple(calls)), item)


def call(name: str, **arguments: Any) -> ToolCall:
    return ToolCall(name, arguments)


CHOICE = {"type": "tool_choice"}


def test_tool_choice_right_wrong_and_none():
    want = {"tool_calls": [REFUND]}
    assert grade(CHOICE, [call("refund")], want).passed
    wrong = grade(CHOICE, [call("escalate"), call("refund")], want)
    assert (wrong.passed, wrong.detail) == (False, "expected 'refund', got escalate, refund")
    assert grade(CHOICE, [], want).detail == "expected 'refund', got no call"
    assert grade(CHOICE, [], {"tool_calls": []}).passed
    extra = grade(CHOICE, [call("escalate")], {"tool_calls": []})
    assert (extra.passed, extra.detail) == (False, "expected no call, got escalate")


def test_expected_calls_that_are_malformed_fail_saying_so():
    verdict = grade(CHOICE, [call("refund")], {"tool_calls": [{"arguments": {}}]})
    assert not verdict.passed and "not a {name, arguments} call" in verdict.detail
    assert grade(CHOICE, [], {"other": 1}).detail == "item has no expected 'tool_calls'"


def test_tool_argument_exact_case_and_tolerance():
    want = {"tool_calls": [REFUND]}
    exact = {"type": "tool_argument", "argument": "order"}
    assert grade(exact, [call("refund", order="A-17", amount=1)], want).passed
    assert not grade(exact, [call("refund", order="a-17")], want).passed
    folded = {**exact, "ignore_case": True}
    assert grade(folded, [call("refund", order="a-17")], want).passed
    near = {"type": "tool_argument", "argument": "amount", "tolerance": 0.5}
    assert grade(near, [call("refund", amount=12.9)], want).passed
    far = grade(near, [call("refund", amount=13.1)], want)
    assert not far.passed and "off by 0.6" in far.detail
    share = {**near, "tolerance": 0.1, "relative": True}
    assert grade(share, [call("refund", amount="13.5")], want).passed  # a number as a string
    assert not grade(near, [call("refund", amount=True)], want).passed  # booleans are no numbers


def test_tool_argument_finds_the_call_to_its_tool():
    want = {"tool_calls": [{"name": "escalate", "arguments": {}}, REFUND]}
    config = {"type": "tool_argument", "tool": "refund", "argument": "order"}
    assert grade(config, [call("escalate"), call("refund", order="A-17")], want).passed
    missing = grade(config, [call("escalate")], want)
    assert missing.detail == "no call to 'refund' (got escalate)"
    absent = grade(config, [call("refund", amount=1)], want)
    assert absent.detail == "the call to 'refund' has no field 'order'"
    unexpected = grade(config, [call("refund")], {"tool_calls": []})
    assert unexpected.detail == "the item expects no call to 'refund'"


def test_arguments_that_are_not_json_fail_every_argument_check():
    broken = decoded("refund", '{"order": "A-17", ', "call_0")
    want = {"tool_calls": [REFUND]}
    verdict = grade({"type": "tool_argument", "argument": "order"}, [broken], want)
    assert not verdict.passed and "arguments are not JSON" in verdict.detail
    assert grade(CHOICE, [broken], want).passed  # the tool chosen is still right
    schema_check = grade({"type": "json_schema", "parse": "tool_arguments"}, [broken], want)
    assert not schema_check.passed and "arguments are not JSON" in schema_check.detail
    f1 = grade({"type": "tool_calls_f1"}, [broken], want)
    assert f1.score == 0.0
    by_name = grade({"type": "tool_calls_f1", "match": "name"}, [broken], want)
    assert by_name.passed


def test_arguments_validate_against_the_declared_parameters():
    config = {"type": "json_schema", "parse": "tool_arguments"}
    want = {"tool_calls": [REFUND]}
    assert grade(config, [call("refund", order="A", amount=1), call("escalate")], want).passed
    wrong_type = grade(config, [call("refund", order="A", amount="lots")], want)
    assert not wrong_type.passed and wrong_type.detail.startswith("refund: $.amount")
    extra = grade(config, [call("refund", order="A", amount=1, note="x")], want)
    assert not extra.passed
    unknown = grade(config, [call("transfer")], want)
    assert unknown.detail == "transfer: not a declared tool"
    assert grade(config, [], want).detail == "no tool call"


def test_tool_arguments_need_declared_tools_and_no_schema():
    config = GRADER.validate_python({"type": "json_schema", "parse": "tool_arguments"})
    with pytest.raises(ValueError, match="declares none"):
        build_grader(config, GradingContext())
    with pytest.raises(ValueError, match="give no 'schema'"):
        GRADER.validate_python(
            {"type": "json_schema", "parse": "tool_arguments", "schema": {"type": "object"}}
        )


@pytest.mark.parametrize(
    ("made", "metric", "score"),
    [
        ([], "f1", 0.0),
        ([], "recall", 0.0),
        ([call("refund", order="A-17", amount=12.5)], "recall", 0.5),
        ([call("refund", order="A-17", amount=12.5)], "precision", 1.0),
        # Order does not count, and 12.5 equals 12.50 as JSON.
        ([call("escalate"), call("refund", amount=12.50, order="A-17")], "f1", 1.0),
        # An extra call costs precision; a duplicate matches one expected call only.
        (
            [call("escalate"), call("escalate"), call("refund", order="A-17", amount=12.5)],
            "precision",
            2 / 3,
        ),
        # Wrong arguments match nothing.
        ([call("refund", order="A-17", amount=99)], "f1", 0.0),
    ],
)
def test_set_level_scores_are_order_insensitive(made, metric, score):
    want = {"tool_calls": [REFUND, {"name": "escalate"}]}
    verdict = grade({"type": "tool_calls_f1", "metric": metric}, made, want)
    assert verdict.score == pytest.approx(score)
    assert verdict.passed == (score >= 1.0)


def test_no_calls_made_and_none_expected_score_one():
    verdict = grade({"type": "tool_calls_f1"}, [], {"tool_calls": []})
    assert (verdict.passed, verdict.score) == (True, 1.0)
    extra = grade(
        {"type": "tool_calls_f1", "metric": "precision"}, [call("escalate")], {"tool_calls": []}
    )
    assert extra.score == 0.0 and 'extra ["escalate"]' in extra.detail


def test_match_by_name_ignores_arguments():
    want = {"tool_calls": [REFUND]}
    config = {"type": "tool_calls_f1", "match": "name"}
    assert grade(config, [call("refund", order="other")], want).passed
    assert not grade({"type": "tool_calls_f1"}, [call("refund", order="other")], want).passed


def test_argument_options_are_checked():
    with pytest.raises(ValueError, match="give one"):
        GRADER.validate_python(
            {"type": "tool_argument", "argument": "a", "tolerance": 1, "ignore_case": True}
        )
    with pytest.raises(ValueError, match="'relative' needs 'tolerance'"):
        GRADER.validate_python({"type": "tool_argument", "argument": "a", "relative": True})
