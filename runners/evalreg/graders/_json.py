"""The JSON schema grader: the parsed answer must validate against a schema."""

from __future__ import annotations

from evalreg.graders.base import GradeFn, GradingContext, Verdict, answer, clip, register
from evalreg.parsing import Parsed
from evalreg.registry import schema


@register("json_schema")
def json_schema(config: schema.JsonSchemaGrader, ctx: GradingContext) -> GradeFn:
    """Pass when the output parsed as JSON and the value validates against the schema.

    The schema's ``$schema`` picks the draft; without one it is Draft 2020-12. Formats are
    not asserted, and no reference is fetched from the network: a ``$ref`` that does not
    resolve within the schema fails every output, saying so.

    Args:
        config: ``schema`` is the JSON schema (absent: the task's output schema).
        ctx: ``output_schema`` is the task's output schema.

    Raises:
        ValueError: there is no schema, or it is not a valid JSON schema.
    """
    # jsonschema costs ~0.1 s to import: only commands that grade pay for it.
    from jsonschema import Draft202012Validator, SchemaError
    from jsonschema.exceptions import best_match
    from jsonschema.validators import validator_for
    from referencing.exceptions import Unresolvable

    document = config.schema_ if config.schema_ is not None else ctx.output_schema
    if document is None:
        raise ValueError(
            "a json_schema grader needs a schema: give it 'schema', or give the task "
            "'output: {parser: json, schema: ...}'"
        )
    cls = validator_for(document, default=Draft202012Validator)
    try:
        cls.check_schema(document)
    except SchemaError as exc:
        raise ValueError(f"the json_schema grader's schema is invalid: {exc.message}") from None
    validator = cls(document)

    def grade(parsed: Parsed, item: schema.Item) -> Verdict:
        value = answer(parsed, None)
        try:
            error = best_match(validator.iter_errors(value))
        except Unresolvable as exc:
            return Verdict(
                False, 0.0, clip(f"the schema has a reference that does not resolve: {exc}")
            )
        if error is None:
            return Verdict(True, 1.0, "valid")
        return Verdict(False, 0.0, clip(f"{error.json_path}: {error.message}"))

    return grade
