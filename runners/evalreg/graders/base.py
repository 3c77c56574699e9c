"""The grader contract: verdicts, graders registered by ``type:``, and reading what they compare."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

from evalreg.graders.parsing import Parsed
from evalreg.registry import schema

GRADER_VERSION = "1"
"""Bump when any grader's behaviour changes: it is part of every cell's fingerprint."""

VALUE_LIMIT = 80
"""Longest value a verdict's detail quotes, in characters."""
DETAIL_LIMIT = 200
"""Longest free-text message (a schema error, an exception) a verdict's detail carries."""


class Verdict(NamedTuple):
    """One criterion's result on one output.

    A named tuple rather than a frozen dataclass: as immutable, and built in a third of
    the time (several are built for every sample graded)."""

    passed: bool
    score: float
    """In 0..1: 1.0 or 0.0 for binary graders; the similarity or F1 for graded ones."""
    detail: str = ""
    """A short reason, the same for the same output and item."""


@dataclass(frozen=True)
class GradingContext:
    """What graders may need beyond their own config."""

    output_schema: dict[str, Any] | None = None
    """The task's output JSON schema: the ``json_schema`` grader's default."""
    root: Path | None = None
    """The repository root, which ``python`` graders are imported from."""
    tools: tuple[schema.Tool, ...] = ()
    """The task's declared tools: what ``json_schema`` checks tool arguments against."""


GradeFn = Callable[[Parsed, schema.Item], Verdict]
Factory = TypeVar("Factory", bound=Callable[..., GradeFn])


@dataclass(frozen=True)
class Needs:
    """What a grader reads from each item's ``expected``: the value at ``key`` (a key or
    dotted path, as ``expected`` reads it), or the whole of it when ``key`` is None."""

    key: str | None


_FACTORIES: dict[str, Callable[..., GradeFn]] = {}
_NEEDS: dict[str, Callable[[Any], Needs | None]] = {}
_GRADED_ELSEWHERE = {
    "llm_judge": "the judge model's stored responses",
    "similar": "the embedding model's stored responses",
    "human": "the imported file of human grades",
}
_MISSING: Any = object()


class Ungradable(Exception):
    """The output or the item lacks what a grader compares: the criterion fails, saying why."""


def register(
    type_name: str, *, needs: Callable[[Any], Needs | None] | None = None
) -> Callable[[Factory], Factory]:
    """Decorator: make a grader factory available under ``type: <type_name>``.

    A factory takes ``(config, ctx)``, checks the config once, and returns the grading
    function. Inside it, ``Ungradable`` turns into a failing verdict with its message.
    ``needs`` says, from the config, what the grader reads from every item's ``expected``
    (None: nothing), so ``check`` finds an item lacking it before any run.
    """

    def decorate(factory: Factory) -> Factory:
        _FACTORIES[type_name] = factory
        if needs is not None:
            _NEEDS[type_name] = needs
        return factory

    return decorate


def expected_needs(config: schema.Grader) -> Needs | None:
    """What the grader of ``config`` reads from every item's ``expected``, or None."""
    needs = _NEEDS.get(config.type)
    return None if needs is None else needs(config)


def lacks(item: schema.Item, needs: Needs) -> bool:
    """Whether ``item`` has no expected value where ``needs`` says the grader reads one."""
    try:
        expected(item, needs.key)
    except Ungradable:
        return True
    return False


def needs_expected_field(config: Any) -> Needs | None:
    """The ``needs`` of a grader that compares with ``value`` when the config gives one,
    else with the item's ``expected[expected_field or field]`` (all of it without either)."""
    if getattr(config, "value", None) is not None:
        return None
    return Needs(config.expected_field or config.field)


def build_grader(config: schema.Grader, ctx: GradingContext) -> GradeFn:
    """The grading function for one criterion's grader config.

    Raises ``ValueError`` when the config cannot be graded here: ``llm_judge`` and ``human``
    graders, a ``json_schema`` grader without a usable schema, a ``python`` grader that
    does not import. Once built, grading is total: every output and item get a verdict.
    """
    if config.type in _GRADED_ELSEWHERE:
        raise ValueError(
            f"grader type {config.type!r} needs a judge or human grades; it is graded from "
            f"{_GRADED_ELSEWHERE[config.type]}, not by a local grader"
        )
    grade = _FACTORIES[config.type](config, ctx)

    def total(parsed: Parsed, item: schema.Item) -> Verdict:
        try:
            return grade(parsed, item)
        except Ungradable as exc:
            return Verdict(False, 0.0, str(exc))

    return total


def answer(parsed: Parsed, field: str | None) -> Any:
    """The graded part of an output: ``field`` of the parsed answer, or all of it.

    ``field`` is a dotted path whose integer parts index lists (``a.b.0.c``). Raises
    ``Ungradable`` when the output did not parse or has no such field.
    """
    if parsed.error is not None:
        raise Ungradable(f"output did not parse: {parsed.error}")
    if field is None:
        return parsed.value
    value = _lookup(parsed.value, field)
    if value is _MISSING:
        raise Ungradable(f"output has no field {field!r}")
    return value


def value_at(data: Any, path: str, what: str) -> Any:
    """The value at dotted ``path`` in ``data``; raises ``Ungradable`` (naming ``what``)
    when there is none."""
    value = _lookup(data, path)
    if value is _MISSING:
        raise Ungradable(f"{what} has no field {path!r}")
    return value


def expected(item: schema.Item, key: str | None) -> Any:
    """The item's expected value: ``expected[key]``, or the whole ``expected`` without a key.

    A key that is not itself a key of ``expected`` is read as a dotted path into it. Raises
    ``Ungradable`` when the item has no such value.
    """
    if key is None:
        if item.expected is None:
            raise Ungradable("item has no expected value")
        return item.expected
    if isinstance(item.expected, dict):
        if key in item.expected:
            return item.expected[key]
        value = _lookup(item.expected, key)
        if value is not _MISSING:
            return value
    raise Ungradable(f"item has no expected {key!r}")


def as_text(value: Any) -> str:
    """A value's string form: a string as it is, anything else as compact, sorted JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def show(value: Any) -> str:
    """A value as a verdict's detail quotes it: strings quoted, cut to ``VALUE_LIMIT``."""
    text = as_text(value)
    if len(text) > VALUE_LIMIT:
        text = text[: VALUE_LIMIT - 3] + "..."
    return repr(text) if isinstance(value, str) else text


def clip(message: str) -> str:
    """A free-text message on one line, cut to ``DETAIL_LIMIT`` characters."""
    line = " ".join(message.split())
    return line if len(line) <= DETAIL_LIMIT else line[: DETAIL_LIMIT - 3] + "..."


def _lookup(data: Any, path: str) -> Any:
    if type(data) is dict and "." not in path:  # a field of an object: most lookups
        return data.get(path, _MISSING)
    for part in path.split("."):
        if isinstance(data, dict) and part in data:
            data = data[part]
        elif isinstance(data, list) and part.isascii() and part.isdigit() and int(part) < len(data):
            data = data[int(part)]
        else:
            return _MISSING
    return data
