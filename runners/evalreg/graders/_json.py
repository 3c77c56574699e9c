"""The JSON schema grader: the parsed answer must validate against a schema."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from evalreg.graders.base import GradeFn, GradingContext, Verdict, answer, clip, register
from evalreg.graders.parsing import Parsed, embedded_json, strict_json
from evalreg.registry import schema

_VALID = Verdict(True, 1.0, "valid")
"""The verdict on a valid value: one object for every sample that has one."""


@register("json_schema")
def json_schema(config: schema.JsonSchemaGrader, ctx: GradingContext) -> GradeFn:
    """Pass when the output parsed as JSON and the value validates against the schema.

    The schema's ``$schema`` picks the draft; without one it is Draft 2020-12. Formats are
    not asserted, and no reference is fetched from the network: a ``$ref`` that does not
    resolve within the schema fails every output, saying so.

    Args:
        config: ``schema`` is the JSON schema (absent: the task's output schema); ``parse``
            says what is validated: the task's parsed answer, the raw output as one JSON
            document (``strict``), the first JSON object in the raw output that
            validates (``embedded``), or every tool call's arguments against its tool's
            declared parameters (``tool_arguments``).
        ctx: ``output_schema`` is the task's output schema; ``tools`` its tools.

    Raises:
        ValueError: there is no schema, or it is not a valid JSON schema.
    """
    if config.parse == "tool_arguments":
        return _tool_arguments(ctx.tools)
    document = config.schema_ if config.schema_ is not None else ctx.output_schema
    if document is None:
        raise ValueError(
            "a json_schema grader needs a schema: give it 'schema', or give the task "
            "'output: {parser: json, schema: ...}'"
        )
    validate = schema_check(document, "the json_schema grader's schema")

    parse = config.parse

    def grade(parsed: Parsed, item: schema.Item) -> Verdict:
        if parse == "embedded":
            return _embedded(parsed.text)
        return validate(answer(strict_json(parsed.text) if parse == "strict" else parsed, None))

    def _embedded(text: str) -> Verdict:
        verdict = Verdict(False, 0.0, "no JSON object in the output")
        for value in embedded_json(text):
            verdict = validate(value)
            if verdict.passed:
                return verdict
        return verdict

    return grade


def _tool_arguments(tools: tuple[schema.Tool, ...]) -> GradeFn:
    """Pass when the model made a tool call and every call's arguments are a JSON object
    valid against its tool's declared ``parameters``."""
    if not tools:
        raise ValueError("'parse: tool_arguments' checks the task's tools, and it declares none")
    checks = {t.name: schema_check(t.parameters, f"tool {t.name!r}'s parameters") for t in tools}

    def grade(parsed: Parsed, item: schema.Item) -> Verdict:
        if not parsed.tool_calls:
            return Verdict(False, 0.0, "no tool call")
        for call in parsed.tool_calls:
            if call.error is not None:
                return Verdict(False, 0.0, f"{call.name}: {call.error}")
            if call.name not in checks:
                return Verdict(False, 0.0, f"{call.name}: not a declared tool")
            verdict = checks[call.name](call.arguments)
            if not verdict.passed:
                return Verdict(False, 0.0, clip(f"{call.name}: {verdict.detail}"))
        return _VALID

    return grade


def schema_check(document: dict[str, Any], what: str) -> Callable[[Any], Verdict]:
    """A value's verdict against the JSON schema ``document`` (``what`` names it in the
    ``ValueError`` raised when it is not a valid schema).

    jsonschema costs 0.05 s to import, before a run's first request: a schema that is
    ``plain`` (valid under every draft it may name) needs it only for a value the quick
    check cannot vouch for, so a run whose outputs are valid never imports it."""
    surely_valid = quick_check(document) if plain(document) else None
    if surely_valid is None:
        return _full_check(document, what)
    full: list[Callable[[Any], Verdict]] = []

    def validate(value: Any) -> Verdict:
        if surely_valid(value):
            return _VALID
        if not full:
            full.append(_full_check(document, what))
        return full[0](value)

    return validate


def _full_check(document: dict[str, Any], what: str) -> Callable[[Any], Verdict]:
    """``schema_check`` through jsonschema: the schema checked against its draft's
    metaschema, then each value not surely valid validated, its first error named."""
    from jsonschema import (
        Draft6Validator,
        Draft7Validator,
        Draft201909Validator,
        Draft202012Validator,
        SchemaError,
    )
    from jsonschema.exceptions import best_match
    from jsonschema.validators import validator_for
    from referencing.exceptions import Unresolvable

    cls = validator_for(document, default=Draft202012Validator)
    try:
        cls.check_schema(document)
    except SchemaError as exc:
        raise ValueError(f"{what} is invalid: {exc.message}") from None
    validator = cls(document)
    # In these drafts the keywords quick_check reads mean the same.
    drafts = (Draft6Validator, Draft7Validator, Draft201909Validator, Draft202012Validator)
    surely_valid = quick_check(document) if cls in drafts else None

    def validate(value: Any) -> Verdict:
        if surely_valid is not None and surely_valid(value):
            return _VALID
        try:
            error = best_match(validator.iter_errors(value))
        except Unresolvable as exc:
            return Verdict(
                False, 0.0, clip(f"the schema has a reference that does not resolve: {exc}")
            )
        if error is None:
            return _VALID
        return Verdict(False, 0.0, clip(f"{error.json_path}: {error.message}"))

    return validate


Check = Callable[[Any], bool]

_DRAFTS = frozenset(
    f"{uri}{end}"
    for uri in (
        "http://json-schema.org/draft-06/schema",
        "http://json-schema.org/draft-07/schema",
        "https://json-schema.org/draft/2019-09/schema",
        "https://json-schema.org/draft/2020-12/schema",
    )
    for end in ("", "#")
)
"""The ``$schema`` of the drafts whose metaschemas agree on ``quick_check``'s keywords."""
_TEXT_KEYWORDS = ("title", "description", "$comment", "format")


def plain(document: Any, *, root: bool = True) -> bool:
    """Whether ``document`` is surely a valid schema, without jsonschema: only keywords
    ``quick_check`` reads, each in the shape every metaschema from draft 6 to 2020-12
    requires (simple type names without repeats, required names without repeats, text
    where text is due, subschemas that are plain too), under one of those drafts (no
    ``$schema``: 2020-12). False says nothing: jsonschema decides."""
    if type(document) is not dict:
        return False
    if not (_QUICK_KEYWORDS | ({"$schema"} if root else set())).issuperset(document):
        return False
    draft = document.get("$schema", next(iter(_DRAFTS)))
    if type(draft) is not str or draft not in _DRAFTS:
        return False
    if "type" in document:
        names = document["type"]
        names = [names] if type(names) is str else names
        if type(names) is not list or not names or len(set(map(str, names))) != len(names):
            return False
        if not all(type(n) is str and n in _QUICK_TYPES for n in names):
            return False
    required = document.get("required", [])
    if type(required) is not list or not all(type(k) is str for k in required):
        return False
    if len(set(required)) != len(required):
        return False
    if any(type(document[k]) is not str for k in _TEXT_KEYWORDS if k in document):
        return False
    if type(document.get("examples", [])) is not list:
        return False
    properties = document.get("properties", {})
    if type(properties) is not dict or not all(type(name) is str for name in properties):
        return False
    if not all(plain(sub, root=False) for sub in properties.values()):
        return False
    extra = document.get("additionalProperties", True)
    if type(extra) is not bool and not plain(extra, root=False):
        return False
    return "items" not in document or plain(document["items"], root=False)


_QUICK_TYPES: dict[str, tuple[type, ...]] = {
    # Exact types, so a bool is never a number; a float is never taken for an integer here.
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "boolean": (bool,),
    "null": (type(None),),
    "number": (int, float),
    "integer": (int,),
}

_QUICK_KEYWORDS = {
    "type",
    "required",
    "properties",
    "additionalProperties",
    "items",
    "title",
    "description",
    "$comment",
    "examples",
    "default",
    "format",
}


def quick_check(document: Any, *, root: bool = True) -> Check | None:
    """A fast test that says True only for values the schema surely accepts, or None.

    Grading many outputs against a plain schema (types, required and nested properties,
    items) spends most of its time in jsonschema; this check answers the common case, a
    valid value, in a fraction of it. It is only built from keywords whose meaning is
    simple and the same in drafts 6 to 2020-12, and says False whenever unsure, so a
    False (an invalid value, or a float that may be an integer) goes to jsonschema,
    which finds the error. Any other keyword (``$ref``, ``enum``, bounds, ...) gives None.
    """
    if not isinstance(document, dict):
        return None
    allowed = _QUICK_KEYWORDS | ({"$schema"} if root else set())
    if not allowed.issuperset(document):
        return None
    # One closure a schema node, its checks inline: this runs once for every sample
    # graded, and a call (or a generator) per keyword cost more than the checks.
    kinds: tuple[type, ...] | None = None
    if "type" in document:
        names = document["type"]
        names = [names] if isinstance(names, str) else names
        if not isinstance(names, list) or not names or any(n not in _QUICK_TYPES for n in names):
            return None
        kinds = tuple(t for n in names for t in _QUICK_TYPES[n])
    required = document.get("required", [])
    if not isinstance(required, list) or not all(isinstance(k, str) for k in required):
        return None
    properties = document.get("properties", {})
    if not isinstance(properties, dict):
        return None
    sub_checks = []
    for name, sub in properties.items():
        check = quick_check(sub, root=False)
        if check is None:
            return None
        sub_checks.append((name, check))
    closed = document.get("additionalProperties", True) is False
    extra_check: Check | None = None
    if "additionalProperties" in document and not isinstance(
        document["additionalProperties"], bool
    ):
        extra_check = quick_check(document["additionalProperties"], root=False)
        if extra_check is None:
            return None
    item_check: Check | None = None
    if "items" in document:
        item_check = quick_check(document["items"], root=False)
        if item_check is None:
            return None

    def check_node(v: Any) -> bool:
        if kinds is not None and type(v) not in kinds:
            return False
        if isinstance(v, dict):
            for key in required:
                if key not in v:
                    return False
            for name, sub_check in sub_checks:
                if name in v and not sub_check(v[name]):
                    return False
            if closed or extra_check is not None:
                for key, x in v.items():
                    if key not in properties and (
                        closed or (extra_check is not None and not extra_check(x))
                    ):
                        return False
        elif item_check is not None and isinstance(v, list):
            for x in v:
                if not item_check(x):
                    return False
        return True

    return check_node
