"""The diff document's contract: its models, the JSON Schema committed from them, and the
words they share with the producer, agreeing with each other (no repository needed; the
documents of real diffs are checked where they are made, in test_diff_comment.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import get_args

import jsonschema
import pytest
from test_diff_comment import _diff_data
from test_trusted_comment import MINIMAL

from evalreg.compare import diff_document
from evalreg.compare.diff import _check_entry
from evalreg.compare.statuses import REPRODUCTION_STATUSES, UNEXPLAINED
from evalreg.compare.summaries import UNTESTED
from evalreg.errors import UsageError
from evalreg.families import TOO_SMALL_TO_TEST
from evalreg.report.reference import DIFF_SCHEMA_PATH

ROOT = Path(__file__).resolve().parents[1]


def _validator() -> jsonschema.Draft202012Validator:
    schema = json.loads((ROOT / DIFF_SCHEMA_PATH).read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def test_the_enumerations_are_the_producers_words():
    assert set(get_args(diff_document.ReproductionStatus)) == set(REPRODUCTION_STATUSES)
    assert UNEXPLAINED in get_args(diff_document.CellStatus)
    assert {TOO_SMALL_TO_TEST, UNTESTED} <= set(get_args(diff_document.Verdict))


@pytest.mark.parametrize("data", [MINIMAL, _diff_data()], ids=["minimal", "full"])
def test_the_schema_and_the_models_accept_the_same_documents(data: dict):
    assert list(_validator().iter_errors(data)) == []
    diff_document.diff_document(json.dumps(data))


@pytest.mark.parametrize(
    ("change", "where"),
    [
        ({"snippets": "yes"}, "snippets"),
        ({"base": {"label": "main", "commit": None}}, "base.commit"),
        ({"reproduction": {"status": "skipped", "reason": ""}}, "reproduction.status"),
        ({"cells": [{"id": "t/c", "status": "compared"}]}, "cells.0.overall"),
    ],
)
def test_the_schema_and_the_models_refuse_the_same_documents(change: dict, where: str):
    data = {**MINIMAL, **change}
    assert any(_validator().iter_errors(data))
    with pytest.raises(diff_document.InvalidDiff, match=rf"^{where}: "):
        diff_document.diff_document(json.dumps(data))


def test_a_field_the_producer_may_leave_out_is_absent_or_a_value():
    """``merge_base`` is written only on the base, ``mde_note`` is null when there is an
    MDE and absent from a diff of summaries: the schema says which may be null."""
    schema = json.loads((ROOT / DIFF_SCHEMA_PATH).read_text(encoding="utf-8"))
    side, row = schema["$defs"]["DiffSide"], schema["$defs"]["SliceRow"]
    assert side["required"] == ["label"] and side["properties"]["merge_base"] == {
        "description": side["properties"]["merge_base"]["description"],
        "title": "Merge Base",
        "type": "boolean",
    }
    assert {"type": "null"} in row["properties"]["mde_note"]["anyOf"]
    assert "mde_note" not in row["required"] and "p_adjusted" in row["required"]


def test_check_output_of_the_wrong_types_is_refused_where_it_is_named():
    check = {
        "exit_code": 1,
        "findings": [{"path": "p", "line": "2", "col": 1, "message": "m", "severity": "finding"}],
    }
    with pytest.raises(UsageError) as caught:
        _check_entry(check)
    assert str(caught.value) == (
        "--check: not the output of `evalreg check --json` "
        "(findings.0.line: Input should be a valid integer)"
    )
    check["findings"][0]["line"] = 2
    assert _check_entry(check)["findings"][0]["line"] == 2
