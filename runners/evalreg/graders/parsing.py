"""Task output parsing: turn a model's raw text into the answer its rubric grades."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import orjson

from evalreg.providers.tools import ToolCall
from evalreg.registry import schema

_FENCE = re.compile(r"```[ \t]*(?:[Jj][Ss][Oo][Nn])?[ \t]*\r?\n(.*?)```", re.DOTALL)


class Parsed(NamedTuple):
    """One output, parsed: the raw text, the answer taken from it, and why parsing failed.

    A named tuple, as ``Verdict`` is: one is built for every sample graded."""

    text: str
    """The output exactly as the model returned it."""
    value: Any
    """The answer: stripped text, a JSON value, or the regex capture (``None`` on failure)."""
    error: str | None = None
    """Why the parser found no answer; ``None`` when it did."""
    tool_calls: tuple[ToolCall, ...] = ()
    """The tool calls the model made with the output, in its order."""


def parse_output(text: str, config: schema.Output, tool_calls: tuple[ToolCall, ...] = ()) -> Parsed:
    """Parse ``text`` with the task's output parser; failures are values, never exceptions."""
    parsed = _PARSERS[config.parser](text, config)
    return parsed._replace(tool_calls=tool_calls) if tool_calls else parsed


def _text(text: str, config: schema.Output) -> Parsed:
    return Parsed(text, text.strip())


def _json(text: str, config: schema.Output) -> Parsed:
    stripped = text.strip()
    if not stripped:
        return Parsed(text, None, "empty output")
    if config.extract == "strict":
        return strict_json(text)
    problem = ""
    for candidate in _json_candidates(stripped):
        try:
            return Parsed(text, _strict_loads(candidate))
        except json.JSONDecodeError as exc:
            problem = f"{exc.msg} at line {exc.lineno} column {exc.colno}"
        except (ValueError, RecursionError) as exc:
            problem = str(exc) or type(exc).__name__
    return Parsed(text, None, f"no valid JSON found ({problem})")


def strict_json(text: str) -> Parsed:
    """``text`` parsed as one JSON document, as JavaScript's ``JSON.parse`` reads it: JSON
    whitespace around it is allowed, anything else (a fence, prose, ``NaN``) is an error."""
    try:
        return Parsed(text, _STRICT_DECODE(text))
    except json.JSONDecodeError as exc:
        return Parsed(text, None, f"not JSON ({exc.msg} at line {exc.lineno} column {exc.colno})")
    except (ValueError, RecursionError) as exc:
        return Parsed(text, None, f"not JSON ({exc or 'nested too deep'})")


def embedded_json(text: str) -> Iterator[Any]:
    """The JSON objects in ``text``, left to right, found as promptfoo's ``contains-json``
    finds them: from each ``{``, the shortest brace-balanced span (braces in strings count
    too) that parses; a span that parses is skipped past."""
    i = 0
    while i < len(text):
        if text[i] != "{":
            i += 1
            continue
        depth, j, found = 1, i + 1, False
        while j < len(text) and depth > 0:
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            j += 1
            if depth == 0 or j == len(text):
                span = text[i:j] + "}" * depth
                value = _json_or_yaml_flow(span)
                if isinstance(value, (dict, list)):
                    yield value
                    i, found = j, True
                    break
                if depth == 0:
                    break
        if not found:
            i += 1


def _json_or_yaml_flow(span: str) -> Any:
    """``span`` as JSON, else as a YAML flow mapping (``{name: Bob}``, a trailing comma),
    as promptfoo reads it; None when it is neither."""
    parsed = strict_json(span)
    if parsed.error is None:
        return parsed.value
    # ruamel.yaml is imported only by graders that look for JSON in prose.
    from ruamel.yaml import YAML
    from ruamel.yaml.error import YAMLError

    try:
        return YAML(typ="safe", pure=True).load(span)
    except (YAMLError, ValueError, RecursionError):
        return None


def _regex(text: str, config: schema.Output) -> Parsed:
    pattern = re.compile(str(config.pattern))
    match = pattern.search(text)
    if match is None:
        return Parsed(text, None, "the pattern did not match")
    value = match.group(1) if pattern.groups else match.group(0)
    if value is None:
        return Parsed(text, None, "the pattern matched, but its first group did not")
    return Parsed(text, value)


_PARSERS: dict[str, Callable[[str, schema.Output], Parsed]] = {
    "text": _text,
    "json": _json,
    "regex": _regex,
}


def _json_candidates(text: str) -> Iterator[str]:
    """Where a JSON answer may be, in order: the whole text, fenced blocks, ``{...}`` objects."""
    yield text
    for match in _FENCE.finditer(text):
        yield match.group(1).strip()
    yield from _top_level_objects(text)


def _top_level_objects(text: str) -> Iterator[str]:
    """Balanced top-level ``{...}`` spans, left to right; braces inside JSON strings don't count."""
    depth, start, in_string, escaped = 0, 0, False, False
    for i, char in enumerate(text):
        if depth == 0:
            if char == "{":
                depth, start = 1, i
        elif in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                yield text[start : i + 1]


def _strict_loads(text: str) -> Any:
    """``json.loads`` that rejects ``NaN`` and ``Infinity``, which are not JSON.

    orjson reads the text first, several times faster: whatever it accepts, ``json``
    reads as the same value, except an integer beyond 64 bits, which orjson gives as a
    float, so a value holding a float that large is read again by ``json``. What orjson
    refuses (``NaN``, a number beyond a double, a lone surrogate escape) is read, or
    refused in its own words, by ``json``.
    """
    if text.startswith("\ufeff"):
        return json.loads(text, parse_constant=_reject_constant)  # its own BOM error
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return _STRICT_DECODE(text)
    return _STRICT_DECODE(text) if _holds_huge_float(value) else value


def _holds_huge_float(value: Any) -> bool:
    """Whether ``value`` holds a float of magnitude 2**63 or more: what orjson reads an
    integer beyond 64 bits as. Looking through the value read costs less than searching
    the text for a run of 19 digits, which took longer than the reading itself.

    A loop over a stack rather than recursion: a value nested deeper than Python
    recurses is looked through too."""
    stack = [value]
    while stack:
        v = stack.pop()
        kind = type(v)
        if kind is float:
            if abs(v) >= _HUGE:
                return True
        elif kind is dict:
            stack.extend(v.values())
        elif kind is list:
            stack.extend(v)
    return False


_HUGE = 2.0**63
"""The smallest magnitude of an integer orjson does not read as one (below -2**63, or
above 2**64 - 1, each rounds to at least this)."""


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


# What json.loads(text, parse_constant=...) builds on every call, built once.
_STRICT_DECODE = json.JSONDecoder(parse_constant=_reject_constant).decode
