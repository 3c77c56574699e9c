"""Tool-call graders: the tool the model chose, one argument of its call, and the set of
calls it made, against the item's expected calls (``expected.tool_calls``: a list of
``{name, arguments}``; an empty list expects no call)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from evalreg.graders._fields import f1_score, within
from evalreg.graders._match import match_verdict, same
from evalreg.graders.base import (
    GradeFn,
    GradingContext,
    Needs,
    Ungradable,
    Verdict,
    expected,
    register,
    show,
    value_at,
)
from evalreg.graders.parsing import Parsed
from evalreg.providers.tools import ToolCall
from evalreg.registry import schema


@dataclass(frozen=True)
class Expected:
    """One call an item expects."""

    name: str
    arguments: dict[str, Any]


def _needs(config: Any) -> Needs:
    return Needs(config.expected_field)


def expected_calls(item: schema.Item, key: str) -> list[Expected]:
    """The calls ``item`` expects at ``expected[key]``; ``Ungradable`` when malformed."""
    value = expected(item, key)
    if not isinstance(value, list):
        raise Ungradable(f"item's expected {key!r} is not a list of calls: {show(value)}")
    calls = []
    for entry in value:
        name = entry.get("name") if isinstance(entry, dict) else None
        arguments = entry.get("arguments", {}) if isinstance(entry, dict) else None
        if not isinstance(name, str) or not isinstance(arguments, dict):
            raise Ungradable(
                f"item's expected {key!r} holds {show(entry)}, not a {{name, arguments}} call"
            )
        calls.append(Expected(name, arguments))
    return calls


def _names(calls: tuple[ToolCall, ...]) -> str:
    return ", ".join(call.name for call in calls) or "no call"


@register("tool_choice", needs=_needs)
def tool_choice(config: schema.ToolChoiceGrader, ctx: GradingContext) -> GradeFn:
    """Pass when the model's first call is to the tool the item expects first; an item
    expecting no call (``[]``) passes only when the model called none.

    Args:
        config: ``expected_field`` is the key of the expected calls (``tool_calls``).
        ctx: not used.
    """

    def grade(parsed: Parsed, item: schema.Item) -> Verdict:
        want = expected_calls(item, config.expected_field)
        made = parsed.tool_calls
        if not want:
            if made:
                return Verdict(False, 0.0, f"expected no call, got {_names(made)}")
            return Verdict(True, 1.0, "no call, as expected")
        if made and made[0].name == want[0].name:
            return Verdict(True, 1.0, f"called {want[0].name!r}")
        return Verdict(False, 0.0, f"expected {want[0].name!r}, got {_names(made)}")

    return grade


@register("tool_argument", needs=_needs)
def tool_argument(config: schema.ToolArgumentGrader, ctx: GradingContext) -> GradeFn:
    """Pass when one argument of the model's call to a tool equals the expected call's
    (as JSON, as ``field_exact`` compares) or, with ``tolerance``, is a number within it
    (as ``field_numeric`` compares).

    The call checked is the model's first to ``tool`` (absent: the first expected call's
    tool); the expected value is the same argument of the item's first expected call to it.

    Args:
        config: ``argument`` the dotted path into the arguments; ``tool``; ``tolerance``
            and ``relative`` for numbers; ``ignore_case`` for text.
        ctx: not used.
    """
    fold = str.casefold if config.ignore_case else None

    def grade(parsed: Parsed, item: schema.Item) -> Verdict:
        want_calls = expected_calls(item, config.expected_field)
        name = config.tool or (want_calls[0].name if want_calls else None)
        if name is None:
            raise Ungradable("the item expects no call, and the grader names no 'tool'")
        wanted = next((c for c in want_calls if c.name == name), None)
        if wanted is None:
            raise Ungradable(f"the item expects no call to {name!r}")
        call = next((c for c in parsed.tool_calls if c.name == name), None)
        if call is None:
            return Verdict(False, 0.0, f"no call to {name!r} (got {_names(parsed.tool_calls)})")
        if call.error is not None:
            return Verdict(False, 0.0, f"{name}: {call.error}")
        want = value_at(wanted.arguments, config.argument, f"the expected call to {name!r}")
        got = value_at(call.arguments, config.argument, f"the call to {name!r}")
        if config.tolerance is not None:
            return within(
                got,
                want,
                config.tolerance,
                relative=config.relative,
                what=(f"argument {config.argument!r}", f"expected {config.argument!r}"),
            )
        return match_verdict(got, want, same(got, want, fold=fold))

    return grade


@register("tool_calls_f1", needs=_needs)
def tool_calls_f1(config: schema.ToolCallsF1Grader, ctx: GradingContext) -> GradeFn:
    """Score the calls made against the calls expected, as multisets, order ignored:
    precision (matched made calls over made), recall (matched expected over expected) or
    their F1; pass at or above ``threshold``. No call made and none expected scores 1.

    A made call matches an unmatched expected call of the same name (``match: name``) or
    of the same name and JSON-equal arguments (``match: arguments``: ``1`` equals ``1.0``,
    key order is ignored); a call whose arguments are not JSON matches only by name.

    Args:
        config: ``match``, ``metric`` and ``threshold``; ``expected_field`` as for
            ``tool_choice``.
        ctx: not used.
    """

    def matches(call: ToolCall, want: Expected) -> bool:
        if call.name != want.name:
            return False
        return config.match == "name" or (
            call.error is None and same(call.arguments, want.arguments)
        )

    def grade(parsed: Parsed, item: schema.Item) -> Verdict:
        want = expected_calls(item, config.expected_field)
        made = parsed.tool_calls
        # JSON equality is an equivalence: matching greedily finds the most pairs.
        open_calls = list(want)
        unmatched: list[ToolCall] = []
        for call in made:
            found = next((w for w in open_calls if matches(call, w)), None)
            if found is None:
                unmatched.append(call)
            else:
                open_calls.remove(found)
        hits = len(want) - len(open_calls)
        precision = hits / len(made) if made else float(not want)
        recall = hits / len(want) if want else float(not made)
        scores = {
            "precision": precision,
            "recall": recall,
            "f1": f1_score(hits, len(made), len(want)),
        }
        score = scores[config.metric]
        detail = f"precision {precision:.3f}, recall {recall:.3f}, F1 {scores['f1']:.3f}"
        if open_calls:
            detail += f"; missing {show([w.name for w in open_calls])}"
        if unmatched:
            detail += f"; extra {show([c.name for c in unmatched])}"
        return Verdict(score >= config.threshold, score, detail)

    return grade
