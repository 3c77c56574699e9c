"""Keeping private text out of eval sets and of what prints items: PII scrubbing of sampled
logs, and redaction of the fields a task or selection names."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from evalreg.redaction import REDACTED
from evalreg.registry.schema import Item

BUILTIN_PII = "builtin:pii"
"""The ``scrub`` name of :func:`scrub_pii`."""

_EMAIL = re.compile(
    r"(?<![A-Za-z0-9._%+-])[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}"
)
_IBAN = re.compile(r"\b[A-Z]{2}[0-9]{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?\b")
_CARD = re.compile(r"(?<![\w+])(?:\d[ -]?){12,18}\d(?!\w)")
_PHONE = re.compile(r"(?<![\w+])(\+?)(\(?\d[\d(). -]{6,22}\d)(?!\w)")


def _luhn(digits: str) -> bool:
    total = 0
    for index, char in enumerate(reversed(digits)):
        value = int(char) * (2 if index % 2 else 1)
        total += value - 9 if value > 9 else value
    return total % 10 == 0


def _card(match: re.Match[str]) -> str:
    digits = re.sub(r"\D", "", match.group())
    return "<CARD>" if _luhn(digits) else match.group()


def _phone(match: re.Match[str]) -> str:
    plus, body = match.groups()
    digits = sum(c.isdigit() for c in body)
    separated = any(c in " .-()" for c in body)
    return "<PHONE>" if 9 <= digits <= 15 and (plus or separated) else match.group()


def _scrub_text(text: str) -> str:
    text = _EMAIL.sub("<EMAIL>", text)
    text = _IBAN.sub("<IBAN>", text)
    text = _CARD.sub(_card, text)
    return _PHONE.sub(_phone, text)


def scrub_pii(value: Any) -> Any:
    """``value`` with e-mail addresses, IBANs, card and phone numbers in its strings masked.

    Every string inside ``value`` (dicts and lists are walked; keys are kept) is rewritten:
    e-mail addresses become ``<EMAIL>``; IBANs (two letters, two check digits, groups of
    four) ``<IBAN>``; 13 to 19 digits, optionally grouped by spaces or dashes, that pass the
    Luhn check ``<CARD>``; and 9 to 15 digits that start with ``+`` or are grouped by spaces,
    dots, dashes or parentheses ``<PHONE>``. Plain digit runs (order numbers, ids) and
    dates are left alone, so a bare ``5551234567`` is not masked. This is a baseline: a
    team with stricter rules names its own scrubber (``path/to/file.py:function``).
    """
    if isinstance(value, str):
        return _scrub_text(value)
    if isinstance(value, dict):
        return {key: scrub_pii(inner) for key, inner in value.items()}
    if isinstance(value, list):
        return [scrub_pii(inner) for inner in value]
    return value


def redact_fields(value: Any, fields: Sequence[str]) -> Any:
    """A copy of ``value`` with the values at each dotted path in ``fields`` as ``[redacted]``.

    ``value`` is an item (dumped to JSON data first, as pydantic writes its line) or any
    JSON data.
    A path walks dict keys; on a list, a number picks one element and any other part
    applies to every element, so ``messages.content`` redacts every turn and
    ``messages.0.content`` the first. Paths that lead nowhere change nothing. ``value``
    itself is never modified.

    A task or a selection declares its paths as ``redact: [input.body, messages.content]``;
    whatever prints item text (diffs, comments, reports) passes the union of the two.
    """
    out = (
        value.as_line().model_dump(mode="json", exclude_none=True)
        if isinstance(value, Item)
        else value
    )
    for path in fields:
        out = _redact_at(out, path.split("."))
    return out


def _redact_at(node: Any, parts: list[str]) -> Any:
    if not parts:
        return REDACTED
    head, rest = parts[0], parts[1:]
    if isinstance(node, dict):
        return {**node, head: _redact_at(node[head], rest)} if head in node else node
    if isinstance(node, list):
        if head.isdigit():
            index = int(head)
            if index >= len(node):
                return node
            return [*node[:index], _redact_at(node[index], rest), *node[index + 1 :]]
        return [_redact_at(inner, parts) for inner in node]
    return node


def redact_output(text: str, fields: Sequence[str]) -> str:
    """A stored output with the ``output.*`` paths of ``fields`` (a task's ``redact``)
    redacted: all of it for ``output``, and all of it when it is not JSON (the fields
    cannot be found in unparsed text, so none of it is shown)."""
    paths = [p.partition(".")[2] for p in fields if p.split(".")[0] == "output"]
    if not paths:
        return text
    if "" in paths:
        return REDACTED
    try:
        value = json.loads(text)
    except ValueError:
        return REDACTED
    return json.dumps(redact_fields(value, paths), ensure_ascii=False, sort_keys=True)


def redacts_output(fields: Sequence[str]) -> bool:
    """Whether ``fields`` (a task's ``redact``) names any part of the output."""
    return any(p.split(".")[0] == "output" for p in fields)
