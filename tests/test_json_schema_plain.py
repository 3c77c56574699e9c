"""Schemas the json_schema grader takes for valid without jsonschema (``plain``): every
one is valid under each draft it may name, and jsonschema is imported only for an output
the quick check cannot vouch for."""

from __future__ import annotations

import random
import subprocess
import sys
from typing import Any

import pytest

from evalreg.graders._json import plain, schema_check

DRAFTS = (
    "http://json-schema.org/draft-06/schema#",
    "http://json-schema.org/draft-07/schema#",
    "https://json-schema.org/draft/2019-09/schema",
    "https://json-schema.org/draft/2020-12/schema",
)


KEYWORDS = (
    *("type", "required", "properties", "additionalProperties", "items", "title"),
    *("description", "$comment", "examples", "default", "format", "$schema", "enum"),
)


def random_value(rng: random.Random) -> Any:
    return rng.choice(
        [None, True, 3, 2.5, "text", "", [], ["a", "a"], ["a", "b"], ["object"], {}, {"a": 1}]
    )


def random_schema(rng: random.Random, depth: int = 0) -> Any:
    """A schema document of quick_check's keywords, each well or badly shaped."""
    if rng.random() < 0.08:
        return random_value(rng)
    document: dict[Any, Any] = {}
    for _ in range(rng.randrange(5)):
        key = rng.choice(KEYWORDS)
        if key == "type":
            names = ["object", "array", "string", "number", "integer", "boolean", "null"]
            shapes = [rng.choice(names), rng.sample(names, rng.randrange(1, 3))]
            document[key] = rng.choice([*shapes, ["string", "string"], [], "float", 3])
        elif key == "required":
            document[key] = rng.choice([["a"], ["a", "b"], [], ["a", "a"], [1], "a"])
        elif key in ("properties",) and depth < 3:
            document[key] = {
                rng.choice(["a", "b", 1]): random_schema(rng, depth + 1)
                for _ in range(rng.randrange(3))
            }
        elif key in ("additionalProperties", "items") and depth < 3:
            document[key] = rng.choice([True, False, random_schema(rng, depth + 1)])
        elif key == "$schema":
            document[key] = rng.choice([*DRAFTS, "http://json-schema.org/draft-04/schema#", 3])
        else:
            document[key] = random_value(rng)
    return document


def test_every_plain_schema_is_valid_under_each_draft_it_may_name() -> None:
    from jsonschema.validators import validator_for

    rng = random.Random(7)
    plain_ones = 0
    for _ in range(4000):
        document = random_schema(rng)
        if not plain(document):
            continue
        plain_ones += 1
        named = [document["$schema"]] if "$schema" in document else list(DRAFTS)
        for draft in named:
            validator_for({"$schema": draft}).check_schema(document)
    assert plain_ones > 300


@pytest.mark.parametrize(
    "document",
    [
        {"type": ["string", "string"]},
        {"type": []},
        {"required": ["a", "a"]},
        {"title": 3},
        {"examples": "x"},
        {"properties": {"a": {"type": "float"}}},
        {"$schema": "http://json-schema.org/draft-04/schema#"},
        {"type": "object", "enum": [{}]},
        {"items": [{"type": "string"}]},
    ],
)
def test_a_schema_plain_does_not_vouch_for_goes_to_jsonschema(document: dict[str, Any]) -> None:
    assert not plain(document)


def test_an_invalid_schema_is_still_refused_when_the_grader_is_built() -> None:
    with pytest.raises(ValueError, match="the schema is invalid"):
        schema_check({"type": ["string", "string"]}, "the schema")


def test_jsonschema_is_imported_only_for_an_output_the_quick_check_cannot_vouch_for() -> None:
    probe = """\
import sys
from evalreg.graders._json import schema_check
check = schema_check(
    {"type": "object", "required": ["echo"], "properties": {"echo": {"type": "string"}}}, "s"
)
valid = check({"echo": "hello"})
print(valid.passed, valid.detail, "jsonschema" in sys.modules)
invalid = check({"echo": 3})
print(invalid.passed, invalid.detail, "jsonschema" in sys.modules)
"""
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "True valid False",
        "False $.echo: 3 is not of type 'string' True",
    ]
