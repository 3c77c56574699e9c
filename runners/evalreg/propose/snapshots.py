"""What a provider's model list says about a pinned model: a newer snapshot of it, or that it
is gone. Pure, and conservative: a model is proposed only when its id proves it is a later
snapshot of the same model; anything less certain is listed with the reason.

A snapshot id is a *stem* and a *version* at its end, in one of these shapes:

- a date: ``gpt-4o-mini-2024-07-18`` (``-YYYY-MM-DD``), ``claude-3-5-sonnet-20241022``
  (``-YYYYMMDD``), optionally followed by a Bedrock version (``-v2:0``);
- a Bedrock version alone: ``amazon.nova-pro-v1:0`` (``-vN`` or ``-vN:M``);
- a three-digit number: ``gemini-1.5-pro-002``.

A listed id is a newer snapshot of the pinned one when its stem is the same, its version has
the same shape, and it is greater. Never proposed, and said why:

- an id without a version (``gpt-4o``, ``claude-3-5-sonnet-latest``): an alias, which the
  provider moves on its own; there is no later snapshot of it to pin;
- a four-digit ending (``gpt-4-0613``, ``mistral-large-2411``): month and day, or year and
  month, which an id does not tell apart, so two such ids have no known order;
- a month and day without a year (``gemini-2.5-flash-preview-05-20``): the same;
- a listed id with the same stem whose version has another shape, or none it can order.

An alias beside a pinned snapshot (``gemini-1.5-pro`` beside ``gemini-1.5-pro-001``) is not
a snapshot at all, and is not listed.

A stem is compared whole: ``gpt-4o-mini-audio-preview-2024-12-17`` is not a snapshot of
``gpt-4o-mini-2024-07-18``, nor ``claude-opus-4-1-20250805`` of ``claude-opus-4-20250514``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

Shape = Literal["date", "bedrock", "number"]

_DATE_DASHED = re.compile(
    r"^(?P<stem>.+?)-(?P<y>\d{4})-(?P<m>\d{2})-(?P<d>\d{2})(?P<v>-v\d+(?::\d+)?)?\Z", re.ASCII
)
_DATE_PLAIN = re.compile(
    r"^(?P<stem>.+?)-(?P<y>\d{4})(?P<m>\d{2})(?P<d>\d{2})(?P<v>-v\d+(?::\d+)?)?\Z", re.ASCII
)
_BEDROCK = re.compile(r"^(?P<stem>.+?)-v(?P<major>\d+)(?::(?P<minor>\d+))?\Z", re.ASCII)
_NUMBER = re.compile(r"^(?P<stem>.+?)-(?P<n>\d{3})\Z", re.ASCII)
_FOUR_DIGITS = re.compile(r"^(?P<stem>.+?)-\d{4}\Z", re.ASCII)
_MONTH_DAY = re.compile(r"^(?P<stem>.+?)-\d{2}-\d{2}\Z", re.ASCII)


@dataclass(frozen=True, order=True)
class Version:
    """A snapshot's version: comparable with another of the same ``shape`` only."""

    shape: Shape
    key: tuple[int, ...]


@dataclass(frozen=True)
class Snapshot:
    """A model id read as a stem and a version (``version`` None: no version it can order;
    ``why`` says which kind of id it is then)."""

    id: str
    stem: str
    version: Version | None
    why: str = ""


def _bedrock_key(suffix: str | None) -> tuple[int, ...]:
    if not suffix:
        return (0, 0)
    major, _, minor = suffix.removeprefix("-v").partition(":")
    return (int(major), int(minor or 0))


def _date(y: str, m: str, d: str) -> tuple[int, int, int] | None:
    year, month, day = int(y), int(m), int(d)
    if 2000 <= year <= 2099 and 1 <= month <= 12 and 1 <= day <= 31:
        return (year, month, day)
    return None


def read(model_id: str) -> Snapshot:
    """``model_id`` as a stem and a version, or why it has no version to order by."""
    for pattern in (_DATE_DASHED, _DATE_PLAIN):
        found = pattern.match(model_id)
        if found is not None:
            date = _date(found["y"], found["m"], found["d"])
            if date is not None:
                key = (*date, *_bedrock_key(found["v"]))
                return Snapshot(model_id, found["stem"], Version("date", key))
    found = _BEDROCK.match(model_id)
    if found is not None:
        key = (int(found["major"]), int(found["minor"] or 0))
        return Snapshot(model_id, found["stem"], Version("bedrock", key))
    found = _NUMBER.match(model_id)
    if found is not None:
        return Snapshot(model_id, found["stem"], Version("number", (int(found["n"]),)))
    found = _FOUR_DIGITS.match(model_id)
    if found is not None:
        return Snapshot(
            model_id,
            found["stem"],
            None,
            "its four-digit ending may be a month and day or a year and month, so it has "
            "no known order",
        )
    found = _MONTH_DAY.match(model_id)
    if found is not None:
        return Snapshot(
            model_id, found["stem"], None, "its date has no year, so it has no known order"
        )
    return Snapshot(
        model_id,
        model_id,
        None,
        "it names no snapshot (an alias the provider moves on its own)",
    )


@dataclass(frozen=True)
class Finding:
    """What one model list says about one pinned model id."""

    pinned: str
    listed: bool
    """Whether the pinned id is in the list (False: the provider no longer offers it)."""
    newer: str | None = None
    """The newest later snapshot of the same model: the one to propose."""
    also_newer: tuple[str, ...] = ()
    """Later snapshots older than ``newer`` (superseded: not proposed)."""
    unclear: tuple[str, ...] = ()
    """Listed ids that may be later snapshots but cannot be shown to be (``why``)."""
    why: str = ""
    """Why nothing is proposed, or what makes the ``unclear`` ids unclear."""

    @property
    def retired(self) -> bool:
        return not self.listed


def examine(pinned: str, listed: Iterable[str]) -> Finding:
    """What ``listed`` (a provider's model ids) says about the ``pinned`` id."""
    ids = sorted(set(listed))
    present = pinned in ids
    mine = read(pinned)
    if mine.version is None:
        # An alias or an unordered id: listed ids of the same stem are shown, not proposed.
        same = tuple(i for i in ids if i != pinned and read(i).stem == mine.stem)
        return Finding(pinned, present, unclear=same, why=f"{pinned} is not proposed: {mine.why}")
    later: list[Snapshot] = []
    unclear: list[str] = []
    for other in map(read, ids):
        if other.id == pinned or other.stem != mine.stem or other.stem == other.id:
            continue  # itself, another model, or an alias (the stem alone): no snapshot
        if other.version is None or other.version.shape != mine.version.shape:
            unclear.append(other.id)
        elif other.version > mine.version:
            later.append(other)
    why = ""
    if unclear:
        why = (
            f"{', '.join(unclear)} {'has' if len(unclear) == 1 else 'have'} the stem of "
            f"{pinned} but no version comparable with its own"
        )
    if not later:
        return Finding(pinned, present, unclear=tuple(unclear), why=why)
    later.sort(key=lambda s: (s.version, s.id))
    return Finding(
        pinned,
        present,
        newer=later[-1].id,
        also_newer=tuple(s.id for s in later[:-1]),
        unclear=tuple(unclear),
        why=why,
    )
